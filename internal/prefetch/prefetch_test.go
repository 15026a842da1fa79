package prefetch

import (
	"testing"
	"unsafe"
)

// TestHintsChangeNothing: Line and Lines accept any mix of pointers and
// nils (Lines skips the nils) and leave the memory as it was.
func TestHintsChangeNothing(t *testing.T) {
	buf := make([]uint64, 64)
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	p := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i]) }
	Line(p(0))
	Lines(nil, nil, nil, nil)
	Lines(p(1), nil, p(17), nil)
	Lines(nil, p(33), nil, p(63))
	Lines(p(0), p(8), p(16), p(24))
	for i := range buf {
		if buf[i] != uint64(i)*0x9e3779b97f4a7c15 {
			t.Fatalf("element %d changed", i)
		}
	}
}
