package fairness

import (
	"fmt"
	"math"
	"math/bits"
)

const (
	// DefaultBlocks is the genesis fairness_window_blocks.
	DefaultBlocks = 1000
	// MaxWeight is W = 2 (no recent fires) in parts per million.
	MaxWeight = 2_000_000
	// MinWeight is W = 1 (at or above the network median) in parts per
	// million.
	MinWeight = 1_000_000
	// MaxRecent bounds an actor's recent count, so that m2 (at most twice a
	// count) cannot overflow. Fires are paid and bounded by the lane budget
	// of each block, so a real window stays many orders of magnitude below
	// it; Add panics beyond it.
	MaxRecent = 1 << 62

	minRing = 64 // smallest ring
)

// Window is the fairness window: the fires of the last F blocks, per actor,
// with the network median. Create it with [New]; it is not safe for
// concurrent use.
type Window struct {
	length  uint64 // F
	lastAdd uint64 // highest height passed to Add

	// The log, oldest first: log holds the entries, heights one record per
	// height with fires, giving the sequence number of its first entry.
	heights ring[block]
	log     ring[entry]

	actors []actor // indexed by handle; absent actors are zero
	lo, hi heap    // lower half (max-heap, ⌈n/2⌉ actors), upper half (min-heap)
}

// block starts the entries of one height.
type block struct {
	height uint64
	start  uint64 // sequence number of its first entry in log
}

// entry is n fires of an actor, 12 bytes: n is split in two words so that
// the entry needs no 8-byte alignment.
type entry struct {
	actor, nlo, nhi uint32
}

func (e *entry) n() uint64     { return uint64(e.nhi)<<32 | uint64(e.nlo) }
func (e *entry) setN(n uint64) { e.nlo, e.nhi = uint32(n), uint32(n>>32) }
func newEntry(id uint32, n uint64) entry {
	return entry{actor: id, nlo: uint32(n), nhi: uint32(n >> 32)}
}

type actor struct {
	recent uint64
	last   uint64 // sequence number of the newest log entry; valid while recent > 0
	pos    int32  // 0: absent; i+1: lo.items[i]; -(i+1): hi.items[i]
}

// New returns an empty window of the given length in blocks. It panics if
// blocks is 0.
func New(blocks uint64) *Window {
	w := &Window{lo: heap{flip: ^uint64(0), side: 1}, hi: heap{side: -1}}
	w.SetBlocks(blocks)
	return w
}

// SetBlocks changes the window length F (a governance config update); the
// next Expire uses it. Fires already dropped stay dropped when the window
// grows. It panics if blocks is 0.
func (w *Window) SetBlocks(blocks uint64) {
	if blocks == 0 {
		panic("fairness: window of 0 blocks")
	}
	w.length = blocks
}

// Blocks returns the window length F.
func (w *Window) Blocks() uint64 { return w.length }

// Expire drops every fire recorded at a height below height−F (nothing when
// height < F): called at the end of block height before the weights are
// read, it leaves the fires of blocks [height−F, height−1]. Each actor whose
// recent count drops to 0 leaves the window and is reported once to pruned
// (which may be nil), in the order its newest entry leaves the log. pruned
// must not modify the window.
func (w *Window) Expire(height uint64, pruned func(actor uint32)) {
	w.ExpireEach(height, nil, pruned)
}

// ExpireEach is Expire that also reports each log entry it drops, oldest
// first, to entry (which may be nil), before any pruning its drop causes.
// entry must not modify the window.
func (w *Window) ExpireEach(height uint64, entry func(height uint64, actor uint32, n uint64), pruned func(actor uint32)) {
	if height < w.length {
		return
	}
	cutoff := height - w.length
	for w.heights.len() != 0 && w.heights.at(w.heights.head).height < cutoff {
		h := w.heights.at(w.heights.head).height
		w.heights.head++
		end := w.end(w.heights.head)
		for ; w.log.head != end; w.log.head++ {
			e := w.log.at(w.log.head)
			id, a := e.actor, &w.actors[e.actor]
			if entry != nil {
				entry(h, id, e.n())
			}
			a.recent -= e.n()
			if a.recent != 0 {
				w.changed(id)
				continue
			}
			w.remove(id)
			if pruned != nil {
				pruned(id)
			}
		}
	}
	w.heights.shrink()
	w.log.shrink()
}

// end returns the sequence number after the last entry of the block before
// heights record i: the start of record i, or the end of the log.
func (w *Window) end(i uint64) uint64 {
	if i == w.heights.tail {
		return w.log.tail
	}
	return w.heights.at(i).start
}

// Add records n fires of actor at height. Repeated Adds of one actor at one
// height coalesce into one log entry; n = 0 records nothing. It panics if
// height is below the height of an earlier Add, or if the actor's recent
// count would exceed MaxRecent.
func (w *Window) Add(height uint64, id uint32, n uint64) {
	if height < w.lastAdd {
		panic(fmt.Sprintf("fairness: Add at height %d after height %d", height, w.lastAdd))
	}
	w.lastAdd = height
	if n == 0 {
		return
	}
	if uint64(id) >= uint64(len(w.actors)) {
		w.growActors(id)
	}
	a := &w.actors[id]
	old := a.recent
	if n > MaxRecent-old {
		panic(fmt.Sprintf("fairness: actor %d: %d recent fires plus %d exceed MaxRecent", id, old, n))
	}
	a.recent = old + n
	// The record of height, the newest one (heights only grow).
	var start uint64
	if w.heights.len() != 0 && w.heights.at(w.heights.tail-1).height == height {
		start = w.heights.at(w.heights.tail - 1).start
	} else {
		start = w.log.tail
		w.heights.push(block{height: height, start: start})
	}
	switch {
	case old == 0:
		a.last = w.log.push(newEntry(id, n))
		w.insert(id)
	case a.last >= start:
		// The actor's entries leave the log oldest first, so while recent >
		// 0 its newest entry is still there: here, at this height.
		e := w.log.at(a.last)
		e.setN(e.n() + n)
		w.changed(id)
	default:
		a.last = w.log.push(newEntry(id, n))
		w.changed(id)
	}
}

// DropAfter takes back every fire recorded at a height above height, as
// if those Adds had not happened (a rollback of the blocks above height):
// entry (which may be nil) hears each dropped log entry, newest first, and
// pruned (which may be nil) each actor whose recent count drops to 0.
// After it, Add takes heights above height only. Neither callback may
// modify the window.
func (w *Window) DropAfter(height uint64, entry func(height uint64, actor uint32, n uint64), pruned func(actor uint32)) {
	for w.heights.len() != 0 && w.heights.at(w.heights.tail-1).height > height {
		w.heights.tail--
		b := w.heights.at(w.heights.tail)
		for w.log.tail != b.start {
			w.log.tail--
			e := w.log.at(w.log.tail)
			id, a := e.actor, &w.actors[e.actor]
			if entry != nil {
				entry(b.height, id, e.n())
			}
			a.recent -= e.n()
			if a.recent != 0 {
				// Its newest entry is now an older one. last only needs to
				// stay below the start of every later height (Add never
				// comes back to a height at or below this one), and 0
				// does: a later height starts at the tail, which is above
				// 0 while the actor has an entry.
				a.last = 0
				w.changed(id)
				continue
			}
			w.remove(id)
			if pruned != nil {
				pruned(id)
			}
		}
	}
	if w.lastAdd > height {
		w.lastAdd = height + 1
	}
	w.heights.shrink()
	w.log.shrink()
}

// Unexpire puts back, as the oldest entry of the window, n fires of actor
// at height, which Expire dropped: a rollback calls it with the entries an
// Expire reported, newest first, after DropAfter. height must be at or
// below the oldest height in the window.
func (w *Window) Unexpire(height uint64, id uint32, n uint64) {
	if n == 0 {
		return
	}
	if w.heights.len() != 0 && w.heights.at(w.heights.head).height < height {
		panic(fmt.Sprintf("fairness: Unexpire at height %d above the oldest height %d", height, w.heights.at(w.heights.head).height))
	}
	if uint64(id) >= uint64(len(w.actors)) {
		w.growActors(id)
	}
	a := &w.actors[id]
	if n > MaxRecent-a.recent {
		panic(fmt.Sprintf("fairness: actor %d: %d recent fires plus %d exceed MaxRecent", id, a.recent, n))
	}
	s := w.log.pushFront(newEntry(id, n))
	if w.heights.len() != 0 && w.heights.at(w.heights.head).height == height {
		w.heights.at(w.heights.head).start = s
	} else {
		w.heights.pushFront(block{height: height, start: s})
	}
	old := a.recent
	a.recent += n
	if old == 0 {
		a.last = s
		w.insert(id)
		return
	}
	w.changed(id)
}

// Recent returns the actor's number of fires in the window.
func (w *Window) Recent(id uint32) uint64 {
	if uint64(id) >= uint64(len(w.actors)) {
		return 0
	}
	return w.actors[id].recent
}

// Median2 returns twice the network median of the recent counts of the
// actors present (0 when there is none).
func (w *Window) Median2() uint64 {
	switch {
	case len(w.lo.items) == 0:
		return 0
	case len(w.lo.items) > len(w.hi.items):
		return 2 * w.lo.top()
	default:
		return w.lo.top() + w.hi.top()
	}
}

// Weight returns W(actor) in parts per million, in [MinWeight, MaxWeight].
func (w *Window) Weight(id uint32) uint32 {
	r := w.Recent(id)
	if r == 0 {
		return MaxWeight
	}
	return weight(r, w.Median2())
}

// Factor returns W(actor) × d exactly, for d = max(2, Median2()), the
// same for every actor in a block: 2d − min(d, 2·recent). The lane orders
// its timers by priority fee × Factor, which is CIP-1's priority fee × W
// with no rounding (Weight's parts per million round W up, and a product
// with them could put a timer before one whose exact effective priority
// is higher). Under MaxRecent, d is at most 2^63 and only W = 2 at that d
// overflows: saturated to 2^64 − 1, it still sorts above every other
// factor (at most 2^64 − 2).
func (w *Window) Factor(id uint32) uint64 { return factor(w.Recent(id), w.Median2()) }

func factor(recent, m2 uint64) uint64 {
	d := max(2, m2)
	below := d // min(d, 2·recent), without overflowing 2·recent
	if recent <= d/2 {
		below = 2 * recent
	}
	f, carry := bits.Add64(d, d-below, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return f
}

// weight is 2_000_000 − min(1_000_000, ⌊recent·2_000_000 / max(2, m2)⌋).
func weight(recent, m2 uint64) uint32 {
	d := max(2, m2)
	hi, lo := bits.Mul64(recent, 2_000_000)
	if hi >= d { // the quotient does not fit 64 bits: far above 1_000_000
		return MinWeight
	}
	q, _ := bits.Div64(hi, lo, d)
	return uint32(MaxWeight - min(MaxWeight-MinWeight, q))
}

// Entries returns the number of log entries: one per (height, actor) with
// fires in the window.
func (w *Window) Entries() int { return int(w.log.len()) }

// Actors returns the number of actors with at least one fire in the window.
func (w *Window) Actors() int { return len(w.lo.items) + len(w.hi.items) }

// Walk calls f for every log entry, oldest first: by height, and within a
// height in the order of the first Add of each actor, one entry per
// (height, actor). It is the window's state for the state root and
// snapshots: Adding the entries in this order to a new Window of the same
// length rebuilds it. f must not modify the window.
func (w *Window) Walk(f func(height uint64, actor uint32, n uint64)) {
	for i := w.heights.head; i != w.heights.tail; i++ {
		b := w.heights.at(i)
		for s, end := b.start, w.end(i+1); s != end; s++ {
			e := w.log.at(s)
			f(b.height, e.actor, e.n())
		}
	}
}

// Reset empties the window, keeping its length and its memory.
func (w *Window) Reset() {
	w.lastAdd = 0
	w.heights.head, w.heights.tail = 0, 0
	w.log.head, w.log.tail = 0, 0
	clear(w.actors)
	w.lo.items = w.lo.items[:0]
	w.hi.items = w.hi.items[:0]
}

// Clone returns an independent copy of the window.
func (w *Window) Clone() *Window {
	c := new(Window)
	c.CopyFrom(w)
	return c
}

// CopyFrom makes w an exact copy of src (for a rollback to a checkpoint),
// reusing w's memory: it does not allocate when w is already large enough.
func (w *Window) CopyFrom(src *Window) {
	w.length, w.lastAdd = src.length, src.lastAdd
	w.heights.copyFrom(&src.heights)
	w.log.copyFrom(&src.log)
	if len(w.actors) < len(src.actors) {
		w.actors = make([]actor, len(src.actors))
	}
	clear(w.actors[copy(w.actors, src.actors):])
	w.lo.flip, w.lo.side = src.lo.flip, src.lo.side
	w.hi.flip, w.hi.side = src.hi.flip, src.hi.side
	w.lo.items = append(w.lo.items[:0], src.lo.items...)
	w.hi.items = append(w.hi.items[:0], src.hi.items...)
}

// ring is a FIFO addressed by sequence numbers: item s, head <= s < tail,
// is at buf[s&(len(buf)-1)]; len(buf) is 0 or a power of two. Resizing
// keeps the sequence numbers, which the actors and the heights refer to.
type ring[T any] struct {
	buf        []T
	head, tail uint64
}

func (r *ring[T]) len() uint64 { return r.tail - r.head }

func (r *ring[T]) at(s uint64) *T { return &r.buf[s&uint64(len(r.buf)-1)] }

// push appends v and returns its sequence number.
func (r *ring[T]) push(v T) uint64 {
	if r.tail-r.head == uint64(len(r.buf)) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	s := r.tail
	r.buf[s&uint64(len(r.buf)-1)] = v
	r.tail++
	return s
}

// pushFront puts v before the head and returns its sequence number, head-1
// (a rollback only puts back what was there, so head never wraps).
func (r *ring[T]) pushFront(v T) uint64 {
	if r.tail-r.head == uint64(len(r.buf)) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.head--
	r.buf[r.head&uint64(len(r.buf)-1)] = v
	return r.head
}

// shrink gives back memory when the ring is less than 1/8 full, leaving it
// at most 1/2 full.
func (r *ring[T]) shrink() {
	if len(r.buf) > minRing && r.len() < uint64(len(r.buf)/8) {
		r.resize(max(minRing, len(r.buf)/4))
	}
}

func (r *ring[T]) resize(size int) {
	buf := make([]T, size)
	copyRing(buf, r.buf, r.head, r.tail)
	r.buf = buf
}

func (r *ring[T]) copyFrom(src *ring[T]) {
	if uint64(len(r.buf)) < src.len() {
		r.buf = make([]T, len(src.buf))
	}
	r.head, r.tail = src.head, src.tail
	copyRing(r.buf, src.buf, src.head, src.tail)
}

// copyRing copies the items head..tail of the ring src to the ring dst
// (both powers of two, dst large enough), each at its sequence number.
func copyRing[T any](dst, src []T, head, tail uint64) {
	dmask, smask := uint64(len(dst)-1), uint64(len(src)-1)
	for head != tail {
		// The longest run contiguous in both rings.
		d, s := head&dmask, head&smask
		k := min(tail-head, uint64(len(dst))-d, uint64(len(src))-s)
		copy(dst[d:d+k], src[s:s+k])
		head += k
	}
}

func (w *Window) growActors(id uint32) {
	actors := make([]actor, max(uint64(id)+1, 2*uint64(len(w.actors)), 16))
	copy(actors, w.actors)
	w.actors = actors
}

// insert adds the actor (recent > 0, absent) to the median heaps.
func (w *Window) insert(id uint32) {
	if r := w.actors[id].recent; len(w.lo.items) == 0 || r <= w.lo.top() {
		w.lo.push(w.actors, id)
	} else {
		w.hi.push(w.actors, id)
	}
	w.rebalance()
}

// remove takes the actor (recent = 0, present) out of the median heaps.
func (w *Window) remove(id uint32) {
	if p := w.actors[id].pos; p > 0 {
		w.lo.remove(w.actors, int(p-1))
	} else {
		w.hi.remove(w.actors, int(-p-1))
	}
	w.actors[id].pos = 0
	w.rebalance()
}

// rebalance restores the sizes ⌈n/2⌉ and ⌊n/2⌋ after one insert or remove,
// moving a top across: it is next to the other half's top, so the order
// between the halves holds.
func (w *Window) rebalance() {
	if len(w.lo.items) > len(w.hi.items)+1 {
		w.hi.push(w.actors, w.lo.pop(w.actors))
	} else if len(w.hi.items) > len(w.lo.items) {
		w.lo.push(w.actors, w.hi.pop(w.actors))
	}
}

// changed restores the heaps after the recent count of a present actor
// changed (and stayed > 0).
func (w *Window) changed(id uint32) {
	a := &w.actors[id]
	if a.pos > 0 {
		w.lo.update(w.actors, int(a.pos-1), a.recent)
	} else {
		w.hi.update(w.actors, int(-a.pos-1), a.recent)
	}
	// Only the changed actor can be on the wrong side; if so it is the top
	// of its half, and swapping the two tops restores the order: the other
	// top is next to the remaining actors of the half it joins.
	if len(w.hi.items) == 0 || w.lo.top() <= w.hi.top() {
		return
	}
	x, y := w.lo.items[0], w.hi.items[0]
	w.lo.set(w.actors, 0, item{key: y.key ^ w.lo.flip ^ w.hi.flip, id: y.id})
	w.hi.set(w.actors, 0, item{key: x.key ^ w.lo.flip ^ w.hi.flip, id: x.id})
	w.lo.down(w.actors, 0)
	w.hi.down(w.actors, 0)
}

// heap is an indexed binary min-heap of actors by key = recent^flip (flip =
// ^0 makes it a max-heap by recent); each actor's pos is its index + 1,
// times side. The items carry their key so that sifting stays in the heap's
// own memory.
type heap struct {
	items []item
	flip  uint64
	side  int32
}

type item struct {
	key uint64
	id  uint32
}

// top returns the recent count at the top; the heap must not be empty.
func (h *heap) top() uint64 { return h.items[0].key ^ h.flip }

func (h *heap) set(actors []actor, i int, it item) {
	h.items[i] = it
	actors[it.id].pos = h.side * int32(i+1)
}

func (h *heap) push(actors []actor, id uint32) {
	h.items = append(h.items, item{})
	h.set(actors, len(h.items)-1, item{key: actors[id].recent ^ h.flip, id: id})
	h.up(actors, len(h.items)-1)
}

func (h *heap) pop(actors []actor) uint32 {
	id := h.items[0].id
	h.remove(actors, 0)
	return id
}

// remove takes out the item at i; the caller resets its pos when it leaves
// the heaps for good.
func (h *heap) remove(actors []actor, i int) {
	last := len(h.items) - 1
	it := h.items[last]
	h.items = h.items[:last]
	if i != last {
		h.set(actors, i, it)
		if !h.up(actors, i) {
			h.down(actors, i)
		}
	}
}

// update sets the recent count of the item at i and restores the heap.
func (h *heap) update(actors []actor, i int, recent uint64) {
	old := h.items[i].key
	h.items[i].key = recent ^ h.flip
	if h.items[i].key < old {
		h.up(actors, i)
	} else {
		h.down(actors, i)
	}
}

// up moves the item at i towards the root; it reports whether it moved.
func (h *heap) up(actors []actor, i int) bool {
	it := h.items[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if h.items[p].key <= it.key {
			break
		}
		h.set(actors, i, h.items[p])
		i = p
	}
	if i != start {
		h.set(actors, i, it)
	}
	return i != start
}

func (h *heap) down(actors []actor, i int) {
	it := h.items[i]
	start := i
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.items[c+1].key < h.items[c].key {
			c++
		}
		if h.items[c].key >= it.key {
			break
		}
		h.set(actors, i, h.items[c])
		i = c
	}
	if i != start {
		h.set(actors, i, it)
	}
}
