package engine

import (
	"math/rand/v2"
	"testing"
)

// len and at are fifoBuf's, for the tests that read the history's lists.
func (f *chunkFIFO[T]) len() int    { return int(f.n - f.head) }
func (f *chunkFIFO[T]) at(k int) *T { return f.pos(f.head + uint64(k)) }

// TestChunkFIFOAgainstSlice drives a chunkFIFO and a plain slice with the
// same random pushes (one and many, across chunk boundaries), trims and
// cuts, and checks every live position, len, end and the seg walk.
func TestChunkFIFOAgainstSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var f chunkFIFO[uint64]
	var model []uint64 // model[p] is position p's item
	head := uint64(0)
	next := uint64(1)
	for step := range 3000 {
		switch k := r.IntN(10); {
		case k < 5:
			n := r.IntN(3 * chunkItems)
			vs := make([]uint64, n)
			for i := range vs {
				vs[i] = next
				next++
			}
			if n == 1 {
				f.push1(vs[0])
			} else {
				f.push(vs...)
			}
			model = append(model, vs...)
		case k < 8 && uint64(len(model)) > head:
			head += r.Uint64N(uint64(len(model))-head) + 1
			f.trim(head)
		case uint64(len(model)) > head:
			a := head + r.Uint64N(uint64(len(model))-head+1)
			f.cut(a)
			model = model[:a]
		}
		if f.end() != uint64(len(model)) || f.len() != len(model)-int(head) {
			t.Fatalf("step %d: end %d len %d; want %d, %d", step, f.end(), f.len(), len(model), len(model)-int(head))
		}
		if step%7 != 0 {
			continue
		}
		for k := range f.len() {
			if got := *f.at(k); got != model[head+uint64(k)] {
				t.Fatalf("step %d: item %d is %d, want %d", step, k, got, model[head+uint64(k)])
			}
		}
		for a := head; a < f.end(); {
			s := f.seg(a, f.end())
			if len(s) == 0 || s[0] != model[a] || s[len(s)-1] != model[a+uint64(len(s))-1] {
				t.Fatalf("step %d: seg(%d) of %d items is wrong", step, a, len(s))
			}
			a += uint64(len(s))
		}
		if live := (f.end() - f.base + chunkItems - 1) >> chunkShift; uint64(len(f.chunks)) != live {
			t.Fatalf("step %d: %d chunks for positions %d..%d from base %d", step, len(f.chunks), head, f.end(), f.base)
		}
	}
}

// TestChunkFIFOSteadyStateAllocates: once a history's lists have grown to
// their depth, a block's worth of pushes and the trim of the oldest
// block's take back trimmed chunks and allocate nothing.
func TestChunkFIFOSteadyStateAllocates(t *testing.T) {
	var f chunkFIFO[undo]
	const perBlock, depth = 3000, 20
	var starts []uint64
	block := func() {
		starts = append(starts, f.end())
		for range perBlock {
			f.push1(undo{rec: 1})
		}
		if len(starts) > depth {
			f.trim(starts[1])
			starts = append(starts[:0], starts[1:]...)
		}
	}
	for range 3 * depth {
		block()
	}
	if n := testing.AllocsPerRun(100, block); n != 0 {
		t.Fatalf("%v allocations per block in the steady state", n)
	}
}
