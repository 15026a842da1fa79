package engine

import (
	"fmt"

	"github.com/timerlane/timerlane/internal/bytepool"
	"github.com/timerlane/timerlane/internal/calendar"
)

// Config is the engine's configuration. Start from DefaultConfig; zero
// values are not defaults.
type Config struct {
	// Tier layout: speed and memory only, never behaviour.
	RingSize    uint64 // buckets of the block ring, a power of two >= 2
	EpochLength uint64 // blocks per epoch, 1 .. RingSize
	EpochCount  uint64 // epochs held by the epoch tier, >= 1

	MaxTimersPerActor uint32 // CIP-5 §8: 1024
	MaxPayloadBytes   uint32 // CIP-5 §4.2: 1 MiB
	MaxHandlerBytes   uint32 // CIP-5 §4.2: 256

	CyclesPerFire  uint64 // CIP-5 §5.2: cycles limit of a fire, 550,000
	CellsPerFire   uint64 // CIP-5 §5.2: cells limit of a fire, 550,000
	ScheduleCycles uint64 // CIP-5 §6.1: 1,000 (plus one cell per payload byte)
	CancelCycles   uint64 // CIP-5 §6.1: 500
}

// DefaultConfig returns CIP-5's values and the default tier layout.
func DefaultConfig() Config {
	l := calendar.DefaultLayout
	return Config{
		RingSize: l.RingSize, EpochLength: l.EpochLength, EpochCount: l.EpochCount,
		MaxTimersPerActor: 1024,
		MaxPayloadBytes:   1 << 20,
		MaxHandlerBytes:   256,
		CyclesPerFire:     550_000,
		CellsPerFire:      550_000,
		ScheduleCycles:    1_000,
		CancelCycles:      500,
	}
}

func (c Config) layout() calendar.Layout {
	return calendar.Layout{RingSize: c.RingSize, EpochLength: c.EpochLength, EpochCount: c.EpochCount}
}

// Validate reports the first field out of bounds, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.layout().Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	bad := func(field string, v uint64, rule string) error {
		return fmt.Errorf("%w: %s %d: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case c.MaxTimersPerActor < 1:
		return bad("max_timers_per_actor", uint64(c.MaxTimersPerActor), "must be >= 1")
	case c.MaxPayloadBytes > bytepool.MaxLen:
		return bad("max_payload_bytes", uint64(c.MaxPayloadBytes), fmt.Sprintf("must be <= %d", bytepool.MaxLen))
	case c.MaxHandlerBytes < 1 || c.MaxHandlerBytes > 1<<16:
		return bad("max_handler_bytes", uint64(c.MaxHandlerBytes), "must be in [1, 65536]")
	case c.CyclesPerFire < 1:
		return bad("cycles_per_fire", c.CyclesPerFire, "must be >= 1")
	case c.CellsPerFire < 1:
		return bad("cells_per_fire", c.CellsPerFire, "must be >= 1")
	}
	return nil
}
