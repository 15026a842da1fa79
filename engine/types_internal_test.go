package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSameBytes: sameAddr and sameID tell equal arrays from arrays that
// differ in any one byte.
func TestSameBytes(t *testing.T) {
	var a Address
	for i := range a {
		a[i] = byte(i + 1)
	}
	require.True(t, sameAddr(&a, &a))
	for i := range a {
		b := a
		b[i] ^= 0x80
		require.False(t, sameAddr(&a, &b), "address byte %d", i)
	}
	var id TimerID
	for i := range id {
		id[i] = byte(i + 1)
	}
	require.True(t, sameID(&id, &id))
	for i := range id {
		other := id
		other[i] ^= 0x80
		require.False(t, sameID(&id, &other), "id byte %d", i)
	}
}
