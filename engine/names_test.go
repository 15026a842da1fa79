package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// TestCallErrorNames: every call error carries the name FORMAT.md gives
// it, through Name and ErrorName, also when wrapped; errors.Is finds it
// through the wrap; other errors have no name.
func TestCallErrorNames(t *testing.T) {
	for _, tc := range []struct {
		err  *engine.CallError
		name string
	}{
		{engine.ErrHeightNotInFuture, "HeightNotInFuture"},
		{engine.ErrPayloadTooLarge, "PayloadTooLarge"},
		{engine.ErrInvalidHandler, "InvalidHandler"},
		{engine.ErrTooManyTimers, "TooManyTimers"},
		{engine.ErrDuplicateTimer, "DuplicateTimer"},
		{engine.ErrUnknownTimer, "UnknownTimer"},
		{engine.ErrNotOwner, "NotOwner"},
		{engine.ErrTimerRejectedBelowBasefee, "TimerRejectedBelowBasefee"},
		{engine.ErrTimerArgDeprecated, "TimerArgDeprecated"},
		{engine.ErrGasLimitTooHigh, "GasLimitTooHigh"},
		{engine.ErrInvalidExpiry, "InvalidExpiry"},
		{engine.ErrInsufficientFunds, "InsufficientFunds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.err.Name())
			require.Equal(t, tc.name, engine.ErrorName(tc.err))
			require.True(t, strings.HasPrefix(tc.err.Error(), tc.name+": "), "Error() = %q", tc.err.Error())
			wrapped := fmt.Errorf("calls[3]: %w", tc.err)
			require.Equal(t, tc.name, engine.ErrorName(wrapped))
			require.ErrorIs(t, wrapped, tc.err)
		})
	}
	for _, err := range []error{nil, engine.ErrNoBlock, engine.ErrInvalidConfig, errors.New("HeightNotInFuture")} {
		require.Empty(t, engine.ErrorName(err), "ErrorName(%v)", err)
	}
}

// TestPriorityTierNames: each tier's name parses back to it, and nothing
// else parses; a value outside the four still prints.
func TestPriorityTierNames(t *testing.T) {
	for _, tc := range []struct {
		tier engine.PriorityTier
		name string
	}{
		{engine.Standard, "standard"},
		{engine.Economy, "economy"},
		{engine.Fast, "fast"},
		{engine.Urgent, "urgent"},
	} {
		require.Equal(t, tc.name, tc.tier.String())
		got, ok := engine.ParsePriorityTier(tc.name)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.tier, got)
	}
	for _, s := range []string{"", "Fast", "URGENT", "medium", " fast", "standard "} {
		_, ok := engine.ParsePriorityTier(s)
		require.False(t, ok, "ParsePriorityTier(%q)", s)
	}
	require.Equal(t, "PriorityTier(9)", engine.PriorityTier(9).String())
}
