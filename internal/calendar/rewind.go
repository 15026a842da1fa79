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
//   - a timer of back is due at h or before, or may belong among the older
//     timers of its height (see Queue.inRing) or in a stage (the staged
//     epoch, or the overflow stage's part of the tree), whose sources are
//     taken in order a prefix at a time; when a window is left, the
//     current epoch's timers go back to its stage or its ring buckets.
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
		case leave && x.Height-q.stageLo < q.length: // the staged epoch again: one height
			for n < len(back) && back[n].Height == x.Height {
				n++
			}
			// Below the ring bucket's first seq, the stage's (see leave).
			k := 0
			for k < n && (q.k == 0 || back[k].Seq < q.ring.First(x.Height)) {
				k++
			}
			if k > 0 {
				i := x.Height - q.stageLo
				q.rebuildWith(&q.stage, i, back[:k])
				q.stageMax[i] = max(q.stageMax[i], back[k-1].Seq)
			}
			if k < n {
				q.rebuildWith(&q.ring.Buckets, q.ring.Index(x.Height), back[k:n])
			}
		case x.Height <= q.ringEnd: // one height a bucket
			for n < len(back) && back[n].Height == x.Height {
				n++
			}
			q.rebuildWith(&q.ring.Buckets, q.ring.Index(x.Height), back[:n])
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

// staged reports whether timer e of back may not go back to the ring
// bucket or the epoch bucket of its height: it belongs in a stage (the
// staged epoch beyond the ring when k = 0, or the overflow stage's
// bound), or it is of the ring's range and not known to be of the ring.
// It was if its seq is not below the first of its ring bucket; a ring
// bucket emptied by this window's deliveries (e.Height <= Height()) had no
// older timers left of its height, which went in front of it at the
// window's entry. When leaving the window, the epoch tier's last epoch
// goes to the overflow stage, and the current epoch's timers go back
// (Rewind) to its stage or its ring buckets.
func (q *Queue) staged(e ring.Entry, leaving bool) bool {
	if leaving {
		switch ep := q.epochs.Of(e.Height); ep {
		case q.epochLast(q.w):
			return true
		case q.w:
			return false
		}
	}
	switch {
	case e.Height <= q.ringEnd:
		return e.Height > q.cur && !q.inRing(e.Height, e.Seq)
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
// and every Advance of window w-1 had been made. Every timer window w's
// blocks inserted is gone already (Rewind's caller removed them), so:
//
//   - the stage of epoch w+1 goes back in front of the rest of its source;
//   - the overflow stage's epoch goes back to the tree, and the epoch
//     tier's last epoch, w+k+C, to the overflow stage, whole;
//   - epoch w+k goes back from its older bucket to the epoch tier, whole,
//     and what the ring holds of it follows;
//   - epoch w is the staged epoch again, all of it staged: each of its
//     ring buckets gives its older timers, those below its first seq (set
//     so at the window's entry), back to the stage; with k = 0 the ring
//     does not reach epoch w in window w-1, and its buckets go whole.
//
// Per height the order stays sequence order, and every timer is where
// Remove will look for it.
func (q *Queue) leave() {
	w := q.w
	b, si := q.src()
	es := q.leaving[:0]
	for i := range q.length {
		es = drain(q.stage.Take(i), q.C, es)
	}
	es = drain(b.Take(si), q.C, es)
	for _, x := range es {
		q.report(x, b.Push(q.C, si, x))
	}
	clear(es)
	q.leaving = es[:0]
	q.forgetStage()
	q.ostH, q.ostSeq = 0, 0 // so that Insert puts them in the tree
	q.placeAll(q.ostage.Take(0))

	epochLast := q.epochLast(w)
	q.setWindow(w - 1)
	if e := q.epochs.Index(epochLast); q.epochs.At(e).Live > 0 {
		q.epochs.Buckets.MoveTo(e, &q.ostage, 0)
	}
	q.ostH, q.ostSeq, q.ostLeft = q.ostEnd, math.MaxUint64, 0
	if q.k > 0 {
		e := w + q.k
		if q.older.At(e%q.k).Live > 0 {
			q.older.MoveTo(e%q.k, &q.epochs.Buckets, q.epochs.Index(e))
		}
		// What the ring holds of it (a queue built anew in window w put
		// all its timers there) follows, per height after the older ones.
		for i := range q.length {
			if h := e*q.length + i; !q.ring.Bucket(h).Empty() {
				q.placeAll(q.ring.Take(h))
			}
		}
	}
	for i := range q.length {
		h := q.stageLo + i // of epoch w
		j := q.ring.Index(h)
		if q.ring.At(j).Empty() {
			continue
		}
		if q.k == 0 {
			q.ring.Buckets.MoveTo(j, &q.stage, i)
			continue
		}
		for bound := q.ring.First(h); ; {
			n := q.ring.Buckets.ShiftBelow(q.C, j, bound, q.shifted[:])
			for _, x := range q.shifted[:n] {
				q.report(x, q.stagePush(i, x))
			}
			if n < len(q.shifted) {
				break
			}
		}
	}
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
