package fairness

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
)

// fire is one log entry.
type fire struct {
	height uint64
	actor  uint32
	n      uint64
}

// model is a deliberately simple fairness window: the coalesced log in a
// slice, with recent counts recomputed by summing and the median by sorting.
type model struct {
	blocks uint64
	log    []fire
}

func (m *model) clone() *model { return &model{blocks: m.blocks, log: slices.Clone(m.log)} }

func (m *model) add(height uint64, actor uint32, n uint64) {
	if n == 0 {
		return
	}
	for i := len(m.log) - 1; i >= 0 && m.log[i].height == height; i-- {
		if m.log[i].actor == actor {
			m.log[i].n += n
			return
		}
	}
	m.log = append(m.log, fire{height, actor, n})
}

// expire drops the fires below height−blocks and returns the actors left
// with no fire, in the order their count reaches 0.
func (m *model) expire(height uint64) []uint32 {
	if height < m.blocks {
		return nil
	}
	cutoff := height - m.blocks
	k := 0
	for k < len(m.log) && m.log[k].height < cutoff {
		k++
	}
	left := m.recents(0)
	var pruned []uint32
	for _, f := range m.log[:k] {
		if left[f.actor] -= f.n; left[f.actor] == 0 {
			pruned = append(pruned, f.actor)
		}
	}
	m.log = m.log[k:]
	return pruned
}

// recents returns the recent count of every actor, indexed by handle, for
// at least size handles.
func (m *model) recents(size int) []uint64 {
	for _, f := range m.log {
		size = max(size, int(f.actor)+1)
	}
	r := make([]uint64, size)
	for _, f := range m.log {
		r[f.actor] += f.n
	}
	return r
}

func median2(recents []uint64) uint64 {
	var c []uint64
	for _, r := range recents {
		if r > 0 {
			c = append(c, r)
		}
	}
	slices.Sort(c)
	switch n := len(c); {
	case n == 0:
		return 0
	case n%2 == 1:
		return 2 * c[(n+1)/2-1]
	default:
		return c[n/2-1] + c[n/2]
	}
}

// modelW is clip(2 − recent/max(1, median), 1, 2) in exact rationals.
func modelW(recent, m2 uint64) *big.Rat {
	med := new(big.Rat).SetFrac(new(big.Int).SetUint64(m2), big.NewInt(2))
	if med.Cmp(big.NewRat(1, 1)) < 0 {
		med.SetInt64(1)
	}
	ratio := new(big.Rat).Quo(new(big.Rat).SetInt(new(big.Int).SetUint64(recent)), med)
	if ratio.Cmp(big.NewRat(1, 1)) > 0 {
		ratio.SetInt64(1)
	}
	return new(big.Rat).Sub(big.NewRat(2, 1), ratio)
}

// modelFactor is modelW × max(2, m2), an integer, saturated at 2^64 − 1.
func modelFactor(recent, m2 uint64) uint64 {
	f := new(big.Rat).Mul(modelW(recent, m2), new(big.Rat).SetUint64(max(2, m2)))
	if !f.IsInt() {
		panic("W × max(2, m2) is not an integer")
	}
	if !f.Num().IsUint64() {
		return math.MaxUint64
	}
	return f.Num().Uint64()
}

// modelWeight is modelW rounded up to the next ppm.
func modelWeight(recent, m2 uint64) uint32 {
	w := modelW(recent, m2)
	ppm := new(big.Int).Mul(w.Num(), big.NewInt(1_000_000))
	q, r := new(big.Int).QuoRem(ppm, w.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return uint32(q.Uint64())
}

// checker drives a Window and the model with the same operations and
// compares them after every step.
type checker struct {
	t      testing.TB
	w      *Window
	m      *model
	height uint64 // current block: Adds go there
	actors int    // handles compared: 0..actors-1

	snapW      *Window
	snapM      *model
	snapHeight uint64
	snaps      int

	pruned []uint32
	walk   []fire

	journal []undoBlock // how to take back each block since the last checkpoint op
}

// undoBlock is what a rollback of one block needs: the state before it
// (for the model) and what its Expires dropped (for the window).
type undoBlock struct {
	prev    uint64 // the height before the block
	blocks  uint64 // F before the block
	before  *model
	expired []fire
}

func newChecker(t testing.TB, blocks uint64, actors int) *checker {
	return &checker{t: t, w: New(blocks), m: &model{blocks: blocks}, actors: actors}
}

func (c *checker) add(actor uint32, n uint64) {
	c.actors = max(c.actors, int(actor)+2)
	c.w.Add(c.height, actor, n)
	c.m.add(c.height, actor, n)
	c.check("Add(%d, %d, %d)", c.height, actor, n)
}

// endBlock moves to the next block after gap empty ones and expires.
func (c *checker) endBlock(gap uint64) {
	c.journal = append(c.journal, undoBlock{prev: c.height, blocks: c.m.blocks, before: c.m.clone()})
	c.height += 1 + gap
	c.expire()
}

func (c *checker) expire() {
	c.pruned = c.pruned[:0]
	var j *undoBlock
	if len(c.journal) > 0 {
		j = &c.journal[len(c.journal)-1]
	}
	c.w.ExpireEach(c.height, func(h uint64, a uint32, n uint64) {
		if j != nil {
			j.expired = append(j.expired, fire{h, a, n})
		}
	}, func(a uint32) { c.pruned = append(c.pruned, a) })
	want := c.m.expire(c.height)
	if !slices.Equal(c.pruned, want) {
		c.t.Fatalf("Expire(%d) F=%d: pruned %v, want %v", c.height, c.m.blocks, c.pruned, want)
	}
	c.check("Expire(%d)", c.height)
}

func (c *checker) setBlocks(f uint64) {
	c.w.SetBlocks(f)
	c.m.blocks = f
	c.check("SetBlocks(%d)", f)
}

// rollback takes back the last k blocks with DropAfter and Unexpire.
func (c *checker) rollback(k int) {
	for ; k > 0 && len(c.journal) > 0; k-- {
		j := c.journal[len(c.journal)-1]
		c.journal = c.journal[:len(c.journal)-1]
		c.w.DropAfter(j.prev, nil, nil)
		for i := len(j.expired) - 1; i >= 0; i-- {
			f := j.expired[i]
			c.w.Unexpire(f.height, f.actor, f.n)
		}
		c.w.SetBlocks(j.blocks)
		c.m, c.height = j.before, j.prev
		c.check("rollback to %d", j.prev)
	}
	// Adds at the height rolled back to are over: the next block follows.
	c.endBlock(0)
}

func (c *checker) reset() {
	c.journal = c.journal[:0]
	c.w.Reset()
	c.m = &model{blocks: c.m.blocks}
	c.check("Reset")
}

// snapshot takes a checkpoint, alternately with Clone and CopyFrom.
func (c *checker) snapshot() {
	c.snaps++
	if c.snapW == nil || c.snaps%2 == 0 {
		c.snapW = c.w.Clone()
	} else {
		c.snapW.CopyFrom(c.w)
	}
	c.snapM, c.snapHeight = c.m.clone(), c.height
}

// restore rolls back to the checkpoint, alternately with CopyFrom and Clone.
func (c *checker) restore() {
	if c.snapW == nil {
		return
	}
	c.journal = c.journal[:0]
	c.snaps++
	if c.snaps%2 == 0 {
		c.w.CopyFrom(c.snapW)
	} else {
		c.w = c.snapW.Clone()
	}
	c.m, c.height = c.snapM.clone(), c.snapHeight
	c.check("restore")
}

func (c *checker) check(format string, args ...any) {
	c.t.Helper()
	compare(c.t, c.w, c.m, c.actors, &c.walk, func() string { return fmt.Sprintf(format, args...) })
}

func compare(t testing.TB, w *Window, m *model, actors int, walk *[]fire, step func() string) {
	t.Helper()
	recents := m.recents(actors)
	m2 := median2(recents)
	present := 0
	for _, r := range recents {
		if r > 0 {
			present++
		}
	}
	if got := w.Blocks(); got != m.blocks {
		t.Fatalf("after %s: Blocks = %d, want %d", step(), got, m.blocks)
	}
	if got := w.Median2(); got != m2 {
		t.Fatalf("after %s: Median2 = %d, want %d (recents %v)", step(), got, m2, recents)
	}
	if got := w.Actors(); got != present {
		t.Fatalf("after %s: Actors = %d, want %d", step(), got, present)
	}
	for a, r := range recents {
		if got := w.Recent(uint32(a)); got != r {
			t.Fatalf("after %s: Recent(%d) = %d, want %d", step(), a, got, r)
		}
		want := uint32(MaxWeight)
		if r > 0 {
			want = modelWeight(r, m2)
		}
		if got := w.Weight(uint32(a)); got != want {
			t.Fatalf("after %s: Weight(%d) = %d, want %d (recent %d, m2 %d)", step(), a, got, want, r, m2)
		}
		if got, want := w.Factor(uint32(a)), modelFactor(r, m2); got != want {
			t.Fatalf("after %s: Factor(%d) = %d, want %d (recent %d, m2 %d)", step(), a, got, want, r, m2)
		}
	}
	*walk = (*walk)[:0]
	w.Walk(func(h uint64, a uint32, n uint64) { *walk = append(*walk, fire{h, a, n}) })
	if !slices.Equal(*walk, m.log) {
		t.Fatalf("after %s: Walk = %v, want %v", step(), *walk, m.log)
	}
}
