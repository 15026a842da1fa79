package hugepage

import (
	"testing"
	"unsafe"
)

// TestAdviseLeavesDataAlone: the hint changes no byte of the array it is
// given, whatever its size and alignment, and accepts empty and small
// arrays.
func TestAdviseLeavesDataAlone(t *testing.T) {
	for _, n := range []int{0, 1, 4095, Size / 8, Size/8 + 1, 3 * Size / 8, 5 * Size / 8} {
		s := make([]uint64, n)
		for i := range s {
			s[i] = uint64(i) * 0x9e3779b97f4a7c15
		}
		Advise(s)
		for i := range s {
			if s[i] != uint64(i)*0x9e3779b97f4a7c15 {
				t.Fatalf("n=%d: element %d changed", n, i)
			}
		}
		// Writable after the hint, to its last byte.
		if n > 0 {
			s[n-1] = 1
		}
	}
}

// TestAdviseRange: the advised range is the aligned 2 MiB pages inside
// the array, and none when it holds no whole page.
func TestAdviseRange(t *testing.T) {
	buf := make([]byte, 3*Size)
	base := uintptr(unsafe.Pointer(&buf[0]))
	// The first aligned page after buf's first byte, so that a byte
	// before it is inside buf too, however buf itself is aligned (the
	// heap hands out 2 MiB-aligned spans for arrays this big on some
	// machines, and an aligned buf broke an earlier form of this test).
	first := (base + Size) &^ (Size - 1)
	off := int(first - base)
	tests := []struct {
		name     string
		from, to int // the slice of buf given
		want     int // bytes advised
	}{
		{"one whole page", off, off + Size, Size},
		{"a page and a byte either side", off - 1, off + Size + 1, Size},
		{"a byte short of a page", off, off + Size - 1, 0},
		{"unaligned, under two pages", off + 1, off + 2*Size - 1, 0},
	}
	for _, tc := range tests {
		if tc.from < 0 || tc.to > len(buf) {
			t.Fatalf("%s: test buffer too small", tc.name)
		}
		if got := len(pages(buf[tc.from:tc.to])); got != tc.want {
			t.Errorf("%s: %d bytes advised, want %d", tc.name, got, tc.want)
		}
	}
}

// TestSetEnabled: with the hint off, Advise asks nothing of the kernel;
// on again, it asks for the array's whole pages.
func TestSetEnabled(t *testing.T) {
	var asked []int
	hint = func(p []byte) { asked = append(asked, len(p)) }
	defer func() { hint = advise; SetEnabled(true) }()
	buf := make([]byte, 3*Size)
	for _, on := range []bool{false, true, false} {
		asked = asked[:0]
		SetEnabled(on)
		if off.Load() == on {
			t.Fatalf("SetEnabled(%v): the hint is off: %v", on, off.Load())
		}
		Advise(buf)
		switch {
		case !on && len(asked) != 0:
			t.Fatalf("off: asked for %v bytes", asked)
		case on && (len(asked) != 1 || asked[0] < Size):
			t.Fatalf("on: asked for %v bytes, want one range of at least %d", asked, Size)
		}
	}
}

// TestTouchLeavesDataAlone: Touch changes no byte, whatever the size and
// alignment of the array, empty and tiny ones included.
func TestTouchLeavesDataAlone(t *testing.T) {
	buf := make([]byte, 5*pageSize+64)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for _, off := range []int{0, 1, 3, 4, 4093} {
		for _, n := range []int{0, 1, 3, 4, 5, pageSize - 1, pageSize, 2*pageSize + 3, 4 * pageSize} {
			Touch(buf[off : off+n])
		}
	}
	for i := range buf {
		if buf[i] != byte(i*7+1) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

// TestMakeAhead: the array made on another goroutine arrives whole and
// zeroed, for sizes below, at and above a huge page.
func TestMakeAhead(t *testing.T) {
	for _, n := range []int{0, 1, Size / 8, 3 * Size / 8} {
		s := <-MakeAhead[uint64](n)
		if len(s) != n {
			t.Fatalf("MakeAhead(%d): %d elements", n, len(s))
		}
		for i, v := range s {
			if v != 0 {
				t.Fatalf("MakeAhead(%d): element %d is %d", n, i, v)
			}
		}
	}
}
