package calendar

import (
	"fmt"
	"math"

	"github.com/timerlane/timerlane/ring"
)

// place is where, inside its tier, a resident timer is.
type place uint8

const (
	inRing   place = iota + 1
	inStage        // the stage of the staged epoch w+1
	inOlder        // the older bucket of an epoch of the ring's range
	inEpoch        // an epoch bucket (tier: epoch)
	inOstage       // the overflow stage (tier: overflow)
	inTree         // the overflow tree (tier: overflow)
)

// walk calls f for every resident timer with its tier, its position (0 in
// the tree) and its place, in Walk's order: per height, the stage before
// the older buckets before the ring, and every stage before the rest of
// its source.
func (q *Queue) walk(f func(e ring.Entry, t Tier, p ring.Pos, pl place)) {
	rl := q.ringLast(q.w)
	byTier := func(pl place) func(ring.Entry, ring.Pos) {
		return func(e ring.Entry, p ring.Pos) { f(e, q.TierOf(e.Height), p, pl) }
	}
	for i := range q.length {
		q.stage.At(i).WalkPos(q.C, byTier(inStage))
	}
	if q.k > 0 {
		for e := q.w + 1; e <= rl && e > q.w; e++ { // e > q.w: no wrap at the top
			q.older.At(e%q.k).WalkPos(q.C, byTier(inOlder))
		}
	}
	ringEnd := q.lastHeight(rl)
	start := q.w * q.length
	for x := start; ; x++ {
		q.ring.Bucket(x).WalkPos(q.C, func(e ring.Entry, p ring.Pos) { f(e, TierRing, p, inRing) })
		if x == ringEnd || x-start+1 == q.ring.Size() {
			break
		}
	}
	last := q.epochLast(q.w)
	for e := rl; e < last; {
		e++
		q.epochs.Bucket(e).WalkPos(q.C, func(x ring.Entry, p ring.Pos) { f(x, TierEpoch, p, inEpoch) })
	}
	q.ostage.At(0).WalkPos(q.C, func(x ring.Entry, p ring.Pos) { f(x, TierOverflow, p, inOstage) })
	q.overflow.Ascend(func(x ring.Entry) bool {
		if !q.isTombstone(x) {
			f(x, TierOverflow, 0, inTree)
		}
		return true
	})
}

// Verify checks the queue's internal invariants, for tests: every timer in
// a bucket is at the position its owner was last told (pos returns it, by
// the timer's Val; nil skips this), in the bucket of its height or epoch,
// and in the place Remove will look for it; the stages hold what they
// should and their counts agree. It walks everything: O(n + R + L + C).
func (q *Queue) Verify(pos func(val uint32) (ring.Pos, bool)) error {
	var err error
	fail := func(format string, a ...any) {
		if err == nil {
			err = fmt.Errorf("calendar at %d: "+format, append([]any{q.cur}, a...)...)
		}
	}
	srcEmpty := q.srcEmpty()
	rl := q.ringLast(q.w)
	var nStage, nOlder, nOstage, nTreeNext int
	first := q.w * q.length
	q.walk(func(e ring.Entry, t Tier, p ring.Pos, pl place) {
		if pl != inTree && pos != nil {
			if want, ok := pos(e.Val); !ok || want != p {
				fail("(%d, %d) is at %d, its owner was told %d (known: %v)", e.Height, e.Seq, p, want, ok)
			}
		}
		if t != q.TierOf(e.Height) {
			fail("(%d, %d) is in tier %d, TierOf says %d", e.Height, e.Seq, t, q.TierOf(e.Height))
		}
		ep := q.epochs.Of(e.Height)
		stagedEpoch := q.staging() && ep == q.w+1
		older := pl == inStage || pl == inOlder
		if e.Height <= q.ringEnd && ep > q.w && older == q.inRing(e.Height, e.Seq) {
			fail("(%d, %d) in place %d, where Remove would look in the ring: %v", e.Height, e.Seq, pl, !older)
		}
		switch pl {
		case inRing:
			if e.Height < first {
				fail("(%d, %d) in the ring is below the window", e.Height, e.Seq)
			}
		case inStage:
			nStage++
			switch {
			case !stagedEpoch:
				fail("(%d, %d) is staged outside the staged epoch %d", e.Height, e.Seq, q.w+1)
			case !srcEmpty && e.Seq > q.stageSeq[e.Height-q.stageLo]:
				fail("staged (%d, %d) is above its bound %d: Remove would not find it", e.Height, e.Seq, q.stageSeq[e.Height-q.stageLo])
			}
		case inOlder:
			nOlder++
			switch {
			case q.k == 0 || ep <= q.w || ep > rl:
				fail("(%d, %d) is kept as older outside epochs %d to %d", e.Height, e.Seq, q.w+1, rl)
			case stagedEpoch && e.Seq <= q.stageSeq[e.Height-q.stageLo]:
				fail("unstaged (%d, %d) is within its bound %d: Remove would not find it", e.Height, e.Seq, q.stageSeq[e.Height-q.stageLo])
			}
		case inEpoch:
			if stagedEpoch && e.Seq <= q.stageSeq[e.Height-q.stageLo] {
				fail("unstaged (%d, %d) is within its bound %d: Remove would not find it", e.Height, e.Seq, q.stageSeq[e.Height-q.stageLo])
			}
		case inOstage:
			nOstage++
			if e.Height > q.ostEnd || !q.inOstage(e.Height, e.Seq) {
				fail("(%d, %d) in the overflow stage, past its epoch (%d) or its bound (%d, %d)", e.Height, e.Seq, q.ostEnd, q.ostH, q.ostSeq)
			}
		case inTree:
			if q.inOstage(e.Height, e.Seq) {
				fail("(%d, %d) in the tree is within the overflow stage's bound (%d, %d)", e.Height, e.Seq, q.ostH, q.ostSeq)
			}
			if e.Height <= q.ostEnd {
				nTreeNext++
			}
		}
	})
	if err != nil {
		return err
	}
	// The tree's tombstones: counted, and in the next epoch's count.
	var nDead, nDeadNext int
	q.overflow.Ascend(func(x ring.Entry) bool {
		if q.resident != nil && !q.resident(x.Val, x.Seq) {
			nDead++
			if x.Height <= q.ostEnd {
				nDeadNext++
			}
		}
		return true
	})
	if nDead != q.dead || len(q.deadKeys) < nDead {
		fail("the tree holds %d tombstones, counted %d, named %d", nDead, q.dead, len(q.deadKeys))
	}
	nTreeNext += nDeadNext
	// Every bucket holds one height (the ring, the stage), one epoch
	// (the older buckets, the epoch tier): a walk in bucket order from
	// the right bucket. A ring bucket, one height, is in seq order: its
	// delivery order.
	for x := range q.ring.Size() {
		h, last := first+x, uint64(0)
		q.ring.Bucket(h).Walk(q.C, func(e ring.Entry) {
			if e.Height != h {
				fail("ring bucket of %d holds height %d", h, e.Height)
			}
			if e.Seq <= last {
				fail("ring bucket of %d holds seq %d after %d", h, e.Seq, last)
			}
			last = e.Seq
		})
	}
	for i := range q.length {
		q.stage.At(i).Walk(q.C, func(e ring.Entry) {
			if e.Height != q.stageLo+i {
				fail("stage bucket %d (height %d) holds height %d", i, q.stageLo+i, e.Height)
			}
		})
	}
	for j := range max(q.k, 1) {
		q.older.At(j).Walk(q.C, func(x ring.Entry) {
			if q.k == 0 || q.epochs.Of(x.Height)%q.k != j {
				fail("older bucket %d holds height %d", j, x.Height)
			}
		})
	}
	for e := range q.epochs.Count() {
		b := q.epochs.At(e)
		b.Walk(q.C, func(x ring.Entry) {
			if q.epochs.Index(q.epochs.Of(x.Height)) != e {
				fail("epoch bucket %d holds height %d", e, x.Height)
			}
		})
	}
	switch {
	case nStage != q.stage.Len() || nOlder != q.older.Len() || nOstage != q.ostage.Len():
		fail("stages hold %d, %d and %d, count %d, %d and %d", nStage, nOlder, nOstage, q.stage.Len(), q.older.Len(), q.ostage.Len())
	case !q.staging() && nStage > 0:
		fail("the stage holds timers without a staged epoch")
	case q.epochEnd == math.MaxUint64 && (nOstage > 0 || q.ostLeft != 0):
		fail("an overflow stage (%d, counted %d) without an overflow tier", nOstage, q.ostLeft)
	case q.epochEnd < math.MaxUint64 && nTreeNext != q.ostLeft:
		fail("the tree holds %d of the next epoch, counted %d", nTreeNext, q.ostLeft)
	}
	if !q.stageUsed {
		for i, s := range q.stageSeq {
			if s != 0 {
				fail("stage bound %d is %d, not marked used", i, s)
				break
			}
		}
	}
	return err
}
