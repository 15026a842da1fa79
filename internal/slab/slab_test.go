package slab

import "testing"

func TestEnsureAndCap(t *testing.T) {
	tests := []struct {
		ensure []uint32
		cap    int
	}{
		{nil, 0},
		{[]uint32{0}, chunk},
		{[]uint32{chunk - 1}, chunk},
		{[]uint32{chunk}, 2 * chunk},
		{[]uint32{3*chunk + 5}, 4 * chunk},
		{[]uint32{3 * chunk, 0, chunk}, 4 * chunk}, // never shrinks
	}
	for _, tc := range tests {
		var s Slab[uint64]
		for _, i := range tc.ensure {
			s.Ensure(i)
			_ = s.At(i) // in range after Ensure
		}
		if s.Cap() != tc.cap {
			t.Errorf("Ensure(%v): Cap %d, want %d", tc.ensure, s.Cap(), tc.cap)
		}
	}
}

func TestPointersStable(t *testing.T) {
	var s Slab[[3]uint64]
	s.Ensure(0)
	p0 := s.At(0)
	p0[1] = 42
	pLast := s.At(chunk - 1)
	pLast[2] = 7
	for i := uint32(0); i < 5*chunk; i += 97 {
		s.Ensure(i)
		s.At(i)[0] = uint64(i) + 1
	}
	if s.At(0) != p0 || s.At(chunk-1) != pLast {
		t.Fatal("growing moved an element")
	}
	if p0[1] != 42 || pLast[2] != 7 {
		t.Fatal("growing lost a value")
	}
	for i := uint32(0); i < 5*chunk; i += 97 {
		if s.At(i)[0] != uint64(i)+1 {
			t.Fatalf("element %d = %d", i, s.At(i)[0])
		}
	}
	// Distinct indices are distinct elements, across chunk borders too.
	for _, i := range []uint32{chunk - 1, chunk, 2*chunk - 1, 2 * chunk} {
		if s.At(i) == s.At(i+1) {
			t.Fatalf("At(%d) and At(%d) alias", i, i+1)
		}
	}
}
