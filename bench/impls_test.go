package bench

import (
	"container/heap"

	"github.com/tidwall/btree"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/ring"
)

// Each implementation's step moves one timer: it pops the first timer due
// at the current height, moving the height on block by block while nothing
// is due, as a chain does, and re-inserts the timer gap blocks later.

// calendarHold is ours: the item is the entry itself (height, seq, val),
// stored inline in the bucket chunks, as the engine stores its timers with
// the record index in val. Like the peers, nothing here cancels, so no
// position is kept.
type calendarHold struct {
	clock
	q   *calendar.Queue
	due ring.Iter // the rest of the bucket taken at the current height
}

func newCalendarHold(w *workload) *calendarHold {
	q, err := calendar.New(calendar.DefaultLayout, nil)
	if err != nil {
		panic(err)
	}
	c := &calendarHold{clock: newClock(w), q: q}
	for k := range w.heights {
		it := initial(w, k)
		q.Insert(ring.Entry{Height: it.height, Seq: it.seq, Val: uint32(it.val)})
	}
	return c
}

func (c *calendarHold) step() {
	e, ok := c.due.Next(c.q.C)
	for !ok {
		c.cur++
		c.q.Advance(c.cur)
		c.due = c.q.Take()
		e, ok = c.due.Next(c.q.C)
	}
	it := c.again(item{height: e.Height, seq: e.Seq, val: uint64(e.Val)})
	c.q.Insert(ring.Entry{Height: it.height, Seq: it.seq, Val: uint32(it.val)})
}

// binHeap is a hand-written binary min-heap ordered by less.
type binHeap []item

func (h *binHeap) push(it item) {
	a := append(*h, it)
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(it, a[p]) {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = it
	*h = a
}

func (h *binHeap) pop() item {
	a := *h
	top := a[0]
	last := a[len(a)-1]
	a = a[:len(a)-1]
	i := 0
	for {
		c := 2*i + 1
		if c >= len(a) {
			break
		}
		if c+1 < len(a) && less(a[c+1], a[c]) {
			c++
		}
		if !less(a[c], last) {
			break
		}
		a[i] = a[c]
		i = c
	}
	if len(a) > 0 {
		a[i] = last
	}
	*h = a
	return top
}

// heapHold pops and pushes separately, as the engine would (pops at end of
// block, pushes in Schedule); it does not use the hold-only replace-top.
type heapHold struct {
	clock
	h binHeap
}

func newHeapHold(w *workload) *heapHold {
	c := &heapHold{clock: newClock(w), h: make(binHeap, 0, len(w.heights)+1)}
	for k := range w.heights {
		c.h.push(initial(w, k))
	}
	return c
}

func (c *heapHold) step() {
	for c.h[0].height > c.cur {
		c.cur++
	}
	c.h.push(c.again(c.h.pop()))
}

// stdHeap is container/heap's interface on the same ordering.
type stdHeap []item

func (h stdHeap) Len() int           { return len(h) }
func (h stdHeap) Less(i, j int) bool { return less(h[i], h[j]) }
func (h stdHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stdHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *stdHeap) Pop() any {
	a := *h
	it := a[len(a)-1]
	*h = a[:len(a)-1]
	return it
}

type stdHeapHold struct {
	clock
	h stdHeap
}

func newStdHeapHold(w *workload) *stdHeapHold {
	c := &stdHeapHold{clock: newClock(w), h: make(stdHeap, 0, len(w.heights)+1)}
	for k := range w.heights {
		heap.Push(&c.h, initial(w, k))
	}
	return c
}

func (c *stdHeapHold) step() {
	for c.h[0].height > c.cur {
		c.cur++
	}
	heap.Push(&c.h, c.again(heap.Pop(&c.h).(item)))
}

// btreeHold is an ordered map keyed (height, seq), as Aptos' BigOrderedMap:
// pop the minimum while it is due. NoLocks, as the overflow tier uses it.
type btreeHold struct {
	clock
	t *btree.BTreeG[item]
}

func newBtreeHold(w *workload) *btreeHold {
	c := &btreeHold{clock: newClock(w), t: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})}
	for k := range w.heights {
		c.t.Set(initial(w, k))
	}
	return c
}

func (c *btreeHold) step() {
	m, _ := c.t.Min()
	for m.height > c.cur {
		c.cur++
	}
	it, _ := c.t.PopMin()
	c.t.Set(c.again(it))
}

// mapHold is CIP-5's node layout: height -> the slice of its timers in
// insertion order; a block takes and deletes the slice of its height.
type mapHold struct {
	clock
	m     map[uint64][]item
	batch []item // the slice taken at the current height
	k     int    // next in batch
}

func newMapHold(w *workload) *mapHold {
	c := &mapHold{clock: newClock(w), m: map[uint64][]item{}}
	for k := range w.heights {
		it := initial(w, k)
		c.m[it.height] = append(c.m[it.height], it)
	}
	return c
}

func (c *mapHold) step() {
	for c.k == len(c.batch) {
		c.cur++
		c.batch, c.k = c.m[c.cur], 0
		if c.batch != nil {
			delete(c.m, c.cur)
		}
	}
	it := c.again(c.batch[c.k])
	c.k++
	c.m[it.height] = append(c.m[it.height], it)
}

// holder is for the equivalence test only; the benchmarks call each step
// directly so that no interface call is measured.
type holder interface {
	step()
	state() *clock
}

func (c *clock) state() *clock { return c }

var impls = []struct {
	name string
	make func(*workload) holder
}{
	{"calendar", func(w *workload) holder { return newCalendarHold(w) }},
	{"heap", func(w *workload) holder { return newHeapHold(w) }},
	{"container_heap", func(w *workload) holder { return newStdHeapHold(w) }},
	{"btree", func(w *workload) holder { return newBtreeHold(w) }},
	{"map_slices", func(w *workload) holder { return newMapHold(w) }},
}
