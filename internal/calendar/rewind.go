package calendar

import (
	"cmp"
	"fmt"
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
//   - a window began after h: the ring and the stages moved on;
//   - a timer of back is not due in the ring after h: only a ring bucket
//     holds a single height, where a timer can be put back among the
//     others in sequence order by rebuilding it;
//   - the tree names a tombstone with a sequence of next or above: that
//     sequence will be given again, and the resident check (SetResident)
//     or a purge would take the new timer for the killed one.
//
// Otherwise nothing else depends on the height: the stages may hold more
// than an Advance to h would have moved, which is still a prefix of their
// sources (see the package documentation), and the shares that follow
// count what is left. back is sorted in place.
func (q *Queue) Rewind(h, next uint64, back []ring.Entry) bool {
	q.noBulk()
	if h > q.cur {
		panic(fmt.Sprintf("calendar: rewind from %d forward to %d", q.cur, h))
	}
	if h/q.length != q.w {
		return false
	}
	for _, e := range back {
		if e.Height <= h || e.Height > q.ringEnd {
			return false
		}
	}
	for _, k := range q.deadKeys {
		if k.Seq >= next {
			return false
		}
	}
	q.cur = h
	slices.SortFunc(back, func(a, b ring.Entry) int {
		return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.Seq, b.Seq))
	})
	for len(back) > 0 {
		n := 1
		for n < len(back) && back[n].Height == back[0].Height {
			n++
		}
		q.mergeBack(back[:n])
		back = back[n:]
	}
	return true
}

// mergeBack rebuilds the ring bucket of back's height, all in seq order,
// with back among its timers in seq order, reporting every position.
func (q *Queue) mergeBack(back []ring.Entry) {
	h := back[0].Height
	it := q.ring.Take(h) // detached: the pushes below fill a new bucket
	x, ok := it.Next(q.C)
	for _, b := range back {
		for ; ok && x.Seq < b.Seq; x, ok = it.Next(q.C) {
			q.report(x, q.ring.Push(q.C, x))
		}
		if ok && x.Seq == b.Seq {
			panic(fmt.Sprintf("calendar: (%d, %d) put back while resident", h, b.Seq))
		}
		q.report(b, q.ring.Push(q.C, b))
	}
	for ; ok; x, ok = it.Next(q.C) {
		q.report(x, q.ring.Push(q.C, x))
	}
}
