package calendar

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/timerlane/timerlane/ring"
)

// Rewind takes the queue back to height h <= Height() for a rollback that
// undid the blocks after h, and puts back the timers of back: those that
// the undone blocks took out (fired or cancelled) and that were resident
// at h. The caller has already removed the timers the undone blocks
// inserted; next is the sequence the next insert will take (every
// resident timer's is below it). It reports false, changing nothing,
// where the queue cannot run backwards in place and the caller must
// build it anew:
//
//   - more than one window began after h, or one did near 2^64 (where the
//     windows saturate); one window is left as leave says;
//   - a timer of back is due at h or before, or belongs in a stage (the
//     staged epoch, or the overflow stage's part of the tree), whose
//     sources are taken in order a prefix at a time.
//
// The tree's tombstones of timers no longer killed go (forget).
// Otherwise nothing else depends on the height: the stages may hold more
// than an Advance to h would have moved, which is still a prefix of their
// sources (see the package documentation), and the shares that follow
// count what is left. A timer goes back into the ring bucket of its
// height, the epoch bucket of its epoch or the tree, in sequence order
// among those of its height there: each bucket that gets timers back is
// rebuilt, so the cost is that of back and of the buckets it goes to.
// back is sorted in place.
func (q *Queue) Rewind(h, next uint64, back []ring.Entry) bool {
	q.noBulk()
	if h > q.cur {
		panic(fmt.Sprintf("calendar: rewind from %d forward to %d", q.cur, h))
	}
	leave := false
	switch {
	case h/q.length == q.w:
	case h/q.length+1 == q.w && q.epochLast(q.w) < q.maxEpoch:
		leave = true
	default:
		return false
	}
	for _, e := range back {
		if e.Height <= h || q.staged(e, leave) {
			return false
		}
	}
	slices.SortFunc(back, byKey)
	q.forget(next, back)
	if leave {
		q.leave()
	}
	q.cur = h
	for len(back) > 0 {
		x, n := back[0], 1
		switch {
		case x.Height <= q.ringEnd: // one height a bucket
			for n < len(back) && back[n].Height == x.Height {
				n++
			}
			q.rebuildWith(&q.ring.Buckets, x.Height&(q.ring.Size()-1), back[:n])
		case x.Height <= q.epochEnd: // one epoch a bucket
			e := q.epochs.Of(x.Height)
			for n < len(back) && q.epochs.Of(back[n].Height) == e {
				n++
			}
			q.rebuildWith(&q.epochs.Buckets, q.epochs.Index(e), back[:n])
		default:
			q.place(x)
		}
		back = back[n:]
	}
	return true
}

// staged reports whether timer e, of the epoch tier or beyond, belongs in
// a stage: the staged epoch's heights, or the overflow stage's bound; in
// the window before when leaving this one, where the epochs that entered
// the ring and the epoch tier in this one are the stages'.
func (q *Queue) staged(e ring.Entry, leaving bool) bool {
	if leaving {
		ep := e.Height / q.length
		return ep == q.ringLast(q.w) || ep == q.epochLast(q.w)
	}
	switch {
	case e.Height <= q.ringEnd:
		return false
	case e.Height <= q.epochEnd:
		return e.Height-q.stageLo < q.length
	}
	return q.inOstage(e.Height, e.Seq)
}

// byKey orders timers by (height, seq).
func byKey(a, b ring.Entry) int {
	return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.Seq, b.Seq))
}

// rebuildWith rebuilds bucket i of s with back, in (height, seq) order,
// among its timers: each goes in front of the first of its height with a
// greater sequence (per height the order is sequence order, the order of
// delivery; the bucket's order across heights is kept, which a stage
// taking a prefix of it does not mind). Every position is reported.
func (q *Queue) rebuildWith(s *ring.Buckets, i uint64, back []ring.Entry) {
	// next[g], for g the first of back of its height, is the next of that
	// height to push.
	next := q.next[:0]
	for k := range back {
		next = append(next, k)
	}
	push := func(x ring.Entry) { q.report(x, s.Push(q.C, i, x)) }
	it := s.Take(i) // detached: the pushes below fill it anew
	for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
		g, _ := slices.BinarySearchFunc(back, x.Height, func(e ring.Entry, h uint64) int { return cmp.Compare(e.Height, h) })
		if g < len(back) {
			for k := next[g]; k < len(back) && back[k].Height == x.Height && back[k].Seq <= x.Seq; k++ {
				if back[k].Seq == x.Seq {
					panic(fmt.Sprintf("calendar: (%d, %d) put back while resident", x.Height, x.Seq))
				}
				push(back[k])
				next[g] = k + 1
			}
		}
		push(x)
	}
	for g := 0; g < len(back); {
		end := g + 1
		for end < len(back) && back[end].Height == back[g].Height {
			end++
		}
		for _, x := range back[next[g]:end] {
			push(x)
		}
		g = end
	}
	q.next = next[:0]
}

// leave moves the window back from w to w-1, as if window w had not begun
// and every Advance of window w-1 had been made: window w's stages go back
// to their sources (the staged timers in front of the rest of their epoch
// bucket, the overflow stage's into the tree); then what enter(w) moved
// down a tier goes back whole, as the stages of window w-1 with nothing
// left to stage: the ring's epoch ringLast(w) to staging, the epoch tier's
// epoch epochLast(w) to the overflow stage. Per height the order stays
// sequence order, and every timer is where Remove will look for it.
func (q *Queue) leave() {
	w := q.w
	epochLast := q.epochLast(w)
	es := q.leaving[:0]
	for i := range q.length {
		es = drain(q.stage.Take(i), q.C, es)
	}
	es = drain(q.epochs.Buckets.Take(q.stageSrc), q.C, es)
	for _, x := range es {
		q.report(x, q.epochs.Buckets.Push(q.C, q.stageSrc, x))
	}
	clear(es)
	q.leaving = es[:0]
	if q.stageUsed {
		clear(q.stageSeq)
		q.stageUsed = false
	}
	q.ostH, q.ostSeq = 0, 0 // so that Insert puts them in the tree
	q.placeAll(q.ostage.Take(0))

	q.setWindow(w - 1)
	for i := range q.length {
		h := q.stageLo + i // of epoch ringLast
		if q.ring.Bucket(h).Live > 0 {
			q.ring.Buckets.MoveTo(h&(q.ring.Size()-1), &q.stage, i)
		}
	}
	if e := q.epochs.Index(epochLast); q.epochs.At(e).Live > 0 {
		q.epochs.Buckets.MoveTo(e, &q.ostage, 0)
	}
	q.ostH, q.ostSeq, q.ostLeft = q.ostEnd, math.MaxUint64, 0
}

// drain appends every timer of it to es, in order.
func drain(it ring.Iter, c *ring.Chunks, es []ring.Entry) []ring.Entry {
	for x, ok := it.Next(c); ok; x, ok = it.Next(c) {
		es = append(es, x)
	}
	return es
}

// forget drops the tree's tombstones (those it holds, and the names of
// those it dropped) of timers that are no more killed at h: those
// scheduled after h (seq >= next), which never were, and whose sequences
// will be given again, so that the resident check of SetResident or a
// purge would take a new timer for the killed one; and those of back,
// which go back to the tree as timers.
func (q *Queue) forget(next uint64, back []ring.Entry) {
	kept := q.deadKeys[:0]
	for _, k := range q.deadKeys {
		if _, found := slices.BinarySearchFunc(back, k, byKey); !found && k.Seq < next {
			kept = append(kept, k)
			continue
		}
		if q.overflow.Delete(k.Height, k.Seq) {
			q.dead--
			q.leftTree(k.Height)
		}
	}
	clear(q.deadKeys[len(kept):])
	q.deadKeys = kept
}
