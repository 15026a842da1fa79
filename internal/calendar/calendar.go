// Package calendar composes the three tiers into one calendar queue.
//
// With current height H, epoch length L, ring size R and k = R/L - 1, the
// window is w = H/L and:
//
//   - the ring holds the heights of epochs w .. w+k (at most R heights, so
//     no two resident heights share a bucket);
//   - the epoch tier holds epochs w+k+1 .. w+k+C;
//   - the overflow tree holds everything later.
//
// Where a timer lives is a function of its height and the window alone, so a
// timer is in exactly one tier by construction. When the window moves (a new
// epoch begins), whole epochs move down a tier, and they move while their
// destination holds nothing of their heights: per height, the order of a
// bucket is therefore always insertion order, across every promotion. All
// epoch arithmetic saturates at the last epoch, so heights near 2^64 never
// wrap.
package calendar

import (
	"fmt"
	"math"

	"github.com/timerlane/timerlane/epoch"
	"github.com/timerlane/timerlane/overflow"
	"github.com/timerlane/timerlane/ring"
)

// Layout is the shape of the tiers. It changes speed and memory only.
type Layout struct {
	RingSize    uint64 // buckets in the ring, a power of two >= 2
	EpochLength uint64 // heights per epoch, 1 .. RingSize
	EpochCount  uint64 // epochs in the epoch tier, >= 1
}

// DefaultLayout suits a node: 4096 blocks in the ring, 64 epochs of 1024.
var DefaultLayout = Layout{RingSize: 4096, EpochLength: 1024, EpochCount: 512}

// Validate reports a layout outside the bounds the tiers accept.
func (l Layout) Validate() error {
	switch {
	case l.RingSize < 2 || l.RingSize&(l.RingSize-1) != 0 || l.RingSize > ring.MaxSize:
		return fmt.Errorf("ring_size %d: must be a power of two in [2, 2^24]", l.RingSize)
	case l.EpochLength < 1 || l.EpochLength > l.RingSize:
		return fmt.Errorf("epoch_length %d: must be in [1, ring_size %d]", l.EpochLength, l.RingSize)
	case l.EpochCount < 1 || l.EpochCount > epoch.MaxCount:
		return fmt.Errorf("epoch_count %d: must be in [1, 2^20]", l.EpochCount)
	}
	return nil
}

// Tier names where a timer lives.
type Tier uint8

// The tiers, nearest first.
const (
	TierRing Tier = iota + 1
	TierEpoch
	TierOverflow
)

// Queue is the three-tier calendar queue over one arena of chunks.
type Queue struct {
	C        *ring.Chunks
	ring     *ring.Ring
	epochs   *epoch.Slabs
	overflow *overflow.Tree
	moved    func(val uint64, p ring.Pos) // told each new position; may be nil
	length   uint64                       // L
	k        uint64                       // whole epochs after the current one that the ring holds
	maxEpoch uint64                       // epoch of height 2^64-1
	cur      uint64                       // current height H
	w        uint64                       // current epoch H/L
	ringEnd  uint64                       // last height the ring holds in window w
	epochEnd uint64                       // last height the epoch tier holds in window w
}

// New returns an empty queue at height 0. When a timer moves down a tier
// its new position is reported to moved (if not nil), so that its owner
// can still Remove it.
func New(l Layout, moved func(val uint64, p ring.Pos)) (*Queue, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	r, err := ring.New(l.RingSize)
	if err != nil {
		return nil, err
	}
	e, err := epoch.New(l.EpochLength, l.EpochCount)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		C: ring.NewChunks(), ring: r, epochs: e, overflow: overflow.New(), moved: moved,
		length: l.EpochLength, k: l.RingSize/l.EpochLength - 1,
		maxEpoch: math.MaxUint64 / l.EpochLength,
	}
	q.setWindow(0)
	return q, nil
}

// setWindow moves the window to epoch w and caches its tier bounds, so
// that TierOf, on every insert and cancel, is two comparisons.
func (q *Queue) setWindow(w uint64) {
	q.w = w
	q.ringEnd, q.epochEnd = q.lastHeight(q.ringLast(w)), q.lastHeight(q.epochLast(w))
}

// Height is the current height.
func (q *Queue) Height() uint64 { return q.cur }

// Len is the number of timers in the three tiers.
func (q *Queue) Len() int { return q.ring.Len() + q.epochs.Len() + q.overflow.Len() }

// TierLens reports how many timers each tier holds.
func (q *Queue) TierLens() (ringLen, epochLen, overflowLen int) {
	return q.ring.Len(), q.epochs.Len(), q.overflow.Len()
}

func (q *Queue) addEpochs(e, n uint64) uint64 {
	if e > q.maxEpoch-n {
		return q.maxEpoch
	}
	return e + n
}

// lastHeight is the last height of epoch e, saturating at 2^64-1.
func (q *Queue) lastHeight(e uint64) uint64 {
	if e == q.maxEpoch {
		return math.MaxUint64
	}
	return e*q.length + q.length - 1
}

func (q *Queue) ringLast(w uint64) uint64  { return q.addEpochs(w, q.k) }
func (q *Queue) epochLast(w uint64) uint64 { return q.addEpochs(q.ringLast(w), q.epochs.Count()) }

// TierOf is the tier a timer at height h belongs in now.
func (q *Queue) TierOf(h uint64) Tier {
	switch {
	case h <= q.ringEnd:
		return TierRing
	case h <= q.epochEnd:
		return TierEpoch
	}
	return TierOverflow
}

// Insert enqueues timer e, due at e.Height > Height(), with e.Seq > 0 and
// greater than the Seq of every resident timer of the same height. It
// returns the timer's position, which Remove needs (meaningless while the
// timer is in the overflow tier, which finds it by height and seq).
func (q *Queue) Insert(e ring.Entry) ring.Pos {
	switch q.TierOf(e.Height) {
	case TierRing:
		return q.ring.Push(q.C, e)
	case TierEpoch:
		return q.epochs.Push(q.C, e)
	}
	q.overflow.Insert(e)
	return 0
}

// place inserts a timer that moves down a tier and reports its position.
func (q *Queue) place(e ring.Entry) { q.report(e, q.Insert(e)) }

// Remove takes the resident timer (height, seq), last reported at p, out
// of its tier.
func (q *Queue) Remove(height, seq uint64, p ring.Pos) {
	t := q.TierOf(height)
	if t != TierOverflow {
		if e := q.C.At(p); e.Height != height || e.Seq != seq {
			panic(fmt.Sprintf("calendar: remove (%d, %d) at %d finds (%d, %d)", height, seq, p, e.Height, e.Seq))
		}
	}
	switch t {
	case TierRing:
		q.ring.Kill(q.C, height, p, q.report)
	case TierEpoch:
		q.epochs.Kill(q.C, height, p, q.report)
	default:
		if !q.overflow.Delete(height, seq) {
			panic(fmt.Sprintf("calendar: (%d, %d) not in overflow", height, seq))
		}
	}
}

// report tells the owner a timer's new position.
func (q *Queue) report(e ring.Entry, p ring.Pos) {
	if q.moved != nil {
		q.moved(e.Val, p)
	}
}

// Advance moves the current height to h >= Height(). No resident timer may
// be due strictly between the old height and h (NextAfter tells how far that
// holds). Whole epochs that come into range move down a tier.
func (q *Queue) Advance(h uint64) {
	if h < q.cur {
		panic(fmt.Sprintf("calendar: advance from %d back to %d", q.cur, h))
	}
	q.cur = h
	w := h / q.length
	if w == q.w {
		return
	}
	oldRing, oldEpoch := q.ringLast(q.w), q.epochLast(q.w)
	q.setWindow(w)
	newRing, newEpoch := q.ringLast(w), q.epochLast(w)
	// Epochs that leave the epoch tier for the ring, in epoch order (a jump
	// over an empty tier costs nothing, however many epochs it spans).
	for e := oldRing; e < newRing && e < oldEpoch && q.epochs.Len() > 0; {
		e++ // never past newRing <= maxEpoch, so it cannot wrap
		it := q.epochs.Take(e)
		for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
			q.place(x)
		}
	}
	if newEpoch == oldEpoch {
		return
	}
	// Overflow timers that come into range, in (height, seq) order.
	for {
		x, ok := q.overflow.Min()
		if !ok || x.Height/q.length > newEpoch {
			return
		}
		q.overflow.PopMin()
		q.place(x)
	}
}

// Take detaches the ring bucket of the current height: every timer due now,
// in insertion order. Drain the iterator fully: it gives the bucket's
// chunks back to the arena as it goes.
func (q *Queue) Take() ring.Iter { return q.ring.Take(q.cur) }

// NextAfter returns the height of the next due timer after Height(), the
// same under every layout; ok is false when nothing is due after it.
func (q *Queue) NextAfter() (h uint64, ok bool) {
	rl, el := q.ringLast(q.w), q.epochLast(q.w)
	if end := q.lastHeight(rl); q.cur < end {
		if h, ok := q.ring.NextOccupied(q.cur+1, end); ok {
			return h, true
		}
	}
	if rl < el {
		if e, ok := q.epochs.NextOccupied(rl+1, el); ok {
			return q.epochs.MinHeight(q.C, e), true
		}
	}
	if x, ok := q.overflow.Min(); ok {
		return x.Height, true
	}
	return 0, false
}

// Walk calls f for every resident timer, tier by tier, each in its order.
// It is for tests and diagnostics, not the hot path.
func (q *Queue) Walk(f func(e ring.Entry, t Tier)) {
	ringEnd := q.lastHeight(q.ringLast(q.w))
	start := q.w * q.length
	for x := start; ; x++ {
		q.ring.Bucket(x).Walk(q.C, func(e ring.Entry) { f(e, TierRing) })
		if x == ringEnd || x-start+1 == q.ring.Size() {
			break
		}
	}
	last := q.epochLast(q.w)
	for e := q.ringLast(q.w); e < last; {
		e++
		q.epochs.Bucket(e).Walk(q.C, func(x ring.Entry) { f(x, TierEpoch) })
	}
	q.overflow.Ascend(func(x ring.Entry) bool { f(x, TierOverflow); return true })
}
