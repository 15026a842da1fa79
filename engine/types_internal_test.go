package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSameBytes: sameAddr and sameID tell equal arrays from arrays that
// differ in any one byte.
func TestSameBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		len  int
		same func(a, b []byte) bool
	}{
		{"address", len(Address{}), func(a, b []byte) bool { return sameAddr((*Address)(a), (*Address)(b)) }},
		{"id", len(TimerID{}), func(a, b []byte) bool { return sameID((*TimerID)(a), (*TimerID)(b)) }},
	} {
		a := make([]byte, tc.len)
		for i := range a {
			a[i] = byte(i + 1)
		}
		require.True(t, tc.same(a, a), tc.name)
		for i := range a {
			b := append([]byte(nil), a...)
			b[i] ^= 0x80
			require.False(t, tc.same(a, b), "%s byte %d", tc.name, i)
		}
	}
}
