package calendar

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/timerlane/timerlane/ring"
)

// Rewind takes the queue back to height h <= Height() for a rollback that
// undid the blocks after h, and puts back timers back: those that the
// undone blocks took out (fired or cancelled) and that were resident at h.
// The caller has already removed the timers the undone blocks inserted;
// next is the sequence the next insert will take (every resident timer's
// is below it). It reports false, changing nothing, where the queue cannot
// run backwards in place and the caller must build it anew:
//
//   - more than one window began after h, or one did near 2^64 (where the
//     windows saturate); one window is left as leave says;
//   - a timer of back is due at h or before, or belongs in a stage (the
//     staged epoch, or the overflow stage's part of the tree), whose
//     sources are taken in order a prefix at a time;
//   - the tree names a tombstone with a sequence of next or above (that
//     sequence will be given again, and the resident check of SetResident
//     or a purge would take the new timer for the killed one), or with the
//     height and sequence of a timer of back (which it would hold twice).
//
// Otherwise nothing else depends on the height: the stages may hold more
// than an Advance to h would have moved, which is still a prefix of their
// sources (see the package documentation), and the shares that follow
// count what is left. A timer goes back into the ring bucket of its
// height, the epoch bucket of its epoch or the tree, in sequence order
// among those of its height there: each bucket that gets timers back is
// rebuilt in sequence order. back is sorted in place.
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
	for _, k := range q.deadKeys {
		if k.Seq >= next {
			return false
		}
	}
	for _, e := range back {
		if e.Height > q.epochEnd && slices.ContainsFunc(q.deadKeys, func(k ring.Entry) bool { return k.Height == e.Height && k.Seq == e.Seq }) {
			return false
		}
	}
	if leave {
		q.leave()
	}
	q.cur = h
	slices.SortFunc(back, func(a, b ring.Entry) int {
		return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.Seq, b.Seq))
	})
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

// rebuildWith rebuilds bucket i of s with back among its timers, all in
// sequence order (per height, the order of delivery; a stage later takes
// an epoch bucket's timers as a prefix of that order, which any order that
// keeps each height's is), reporting every position.
func (q *Queue) rebuildWith(s *ring.Buckets, i uint64, back []ring.Entry) {
	es := q.rebuild[:0]
	it := s.Take(i) // detached: the pushes below fill it anew
	for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
		es = append(es, x)
	}
	es = append(es, back...)
	slices.SortFunc(es, func(a, b ring.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	for k, x := range es {
		if k > 0 && es[k-1].Seq == x.Seq {
			panic(fmt.Sprintf("calendar: (%d, %d) put back while resident", x.Height, x.Seq))
		}
		q.report(x, s.Push(q.C, i, x))
	}
	clear(es)
	q.rebuild = es[:0]
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
	es := q.rebuild[:0]
	for i := range q.length {
		es = drain(q.stage.Take(i), q.C, es)
	}
	es = drain(q.epochs.Buckets.Take(q.stageSrc), q.C, es)
	for _, x := range es {
		q.report(x, q.epochs.Buckets.Push(q.C, q.stageSrc, x))
	}
	clear(es)
	q.rebuild = es[:0]
	if q.stageUsed {
		clear(q.stageSeq)
		q.stageUsed = false
	}
	it := q.ostage.Take(0)
	for x, ok := it.Next(q.C); ok; x, ok = it.Next(q.C) {
		if q.overflow.Insert(x) {
			panic(fmt.Sprintf("calendar: (%d, %d) of the overflow stage is in the tree too", x.Height, x.Seq))
		}
		q.report(x, 0)
	}

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
