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

// TestBlocks: a slab past bigFrom takes its chunks out of blocks, the
// later ones made ready in the background; they are as stable, distinct
// and zeroed as the others, and the memory it holds beyond its chunks is
// bounded by the block rule.
func TestBlocks(t *testing.T) {
	type elem [64]byte
	var s Slab[elem]
	var first []*elem
	asked := 0 // chunks taken while a next block was on its way
	for k := uint32(0); k < 600; k++ {
		i := k * chunk
		s.Ensure(i + chunk - 1)
		if s.At(i)[0] != 0 || s.At(i + chunk - 1)[63] != 0 {
			t.Fatalf("chunk %d is not zero", k)
		}
		s.At(i)[0], s.At(i + chunk - 1)[63] = byte(k), byte(k+1)
		first = append(first, s.At(i))
		if got := s.Cap(); got != int(k+1)*chunk {
			t.Fatalf("after chunk %d: Cap %d", k, got)
		}
		if s.next != nil {
			asked++
		}
		ahead := (len(s.spare) + s.nextLen) * 64
		if s.Bytes() != s.Cap()*64+ahead {
			t.Fatalf("after chunk %d: Bytes %d, Cap %d, %d ahead", k, s.Bytes(), s.Cap(), ahead)
		}
		// An eighth of the current block and the next.
		if limit := 9 * max(blockMin, min(s.Cap()*64/8, blockMax)) / 8; ahead > limit {
			t.Fatalf("after chunk %d: %d bytes taken ahead, limit %d", k, ahead, limit)
		}
		if have := s.Cap() * 64; have < bigFrom && ahead != 0 {
			t.Fatalf("after chunk %d: a slab of %d bytes took %d ahead", k, have, ahead)
		}
	}
	if asked == 0 {
		t.Fatal("no block was made ready ahead")
	}
	// Chunks that shared memory would have overwritten each other's marks.
	for k, p := range first {
		i := uint32(k) * chunk
		if s.At(i) != p || p[0] != byte(k) || s.At(i + chunk - 1)[63] != byte(k+1) {
			t.Fatalf("chunk %d moved or lost its values", k)
		}
	}
}

// TestStackAcrossChunks pushes and pops more values than a slab chunk
// holds: last in, first out, across the chunk boundary and back.
func TestStackAcrossChunks(t *testing.T) {
	var f Stack
	const n = 3*4096 + 5
	if f.Cap() != 0 {
		t.Fatalf("a zero stack has room for %d", f.Cap())
	}
	f.Reserve(n)
	if f.Cap() != 4*4096 { // whole chunks
		t.Fatalf("room for %d after Reserve(%d)", f.Cap(), n)
	}
	if _, ok := f.Pop(); ok {
		t.Fatal("pop of an empty list gave a value")
	}
	for i := uint32(1); i <= n; i++ {
		f.Push(i * 7)
		if top, ok := f.Top(); !ok || top != i*7 {
			t.Fatalf("after pushing %d: top %d, %v", i*7, top, ok)
		}
	}
	for _, d := range []uint32{0, 1, 4095, 4096, n - 1} { // Below(d) is the (d+1)-th pop
		if got, ok := f.Below(d); !ok || got != (n-d)*7 {
			t.Fatalf("Below(%d): got %d, %v, want %d", d, got, ok, (n-d)*7)
		}
	}
	if got, ok := f.Below(n); ok {
		t.Fatalf("Below(%d) of %d values gave %d", n, n, got)
	}
	for i := uint32(n); i >= 1; i-- {
		if got, ok := f.Pop(); !ok || got != i*7 {
			t.Fatalf("pop %d: got %d, %v", n-i, got, ok)
		}
	}
	if _, ok := f.Top(); ok || f.n != 0 {
		t.Fatalf("%d left after popping all", f.n)
	}
}

// TestGrow: Grow gives room for n elements, keeps what the slab holds and
// never shrinks it.
func TestGrow(t *testing.T) {
	var s Slab[uint64]
	s.Ensure(5)
	*s.At(5) = 42
	for _, tc := range []struct{ n, cap int }{{0, chunk}, {chunk, chunk}, {chunk + 1, 2 * chunk}, {5*chunk - 3, 5 * chunk}, {7, 5 * chunk}} {
		s.Grow(tc.n)
		if s.Cap() != tc.cap {
			t.Fatalf("Grow(%d): Cap %d, want %d", tc.n, s.Cap(), tc.cap)
		}
		if *s.At(5) != 42 {
			t.Fatalf("Grow(%d) changed an element", tc.n)
		}
	}
	var f Stack
	f.Grow(3 * chunk)
	for v := range uint32(3 * chunk) {
		f.Push(v) // in room Grow made: Push would panic past it
	}
	if top, _ := f.Top(); top != 3*chunk-1 || f.Len() != 3*chunk {
		t.Fatalf("stack top %d, len %d", top, f.Len())
	}
	f.Clear()
	if _, ok := f.Pop(); ok || f.Len() != 0 || f.Bytes() == 0 {
		t.Fatalf("after Clear: len %d, %d bytes kept", f.Len(), f.Bytes())
	}
}
