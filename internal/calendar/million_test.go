package calendar_test

import (
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/ring"
)

// TestMillionAtOneHeight puts a million timers on one height, a third while
// the height is in the overflow tree, a third while it is in the epoch tier
// and a third while it is in the ring, and checks that all are delivered,
// in insertion order, at that height and no other.
func TestMillionAtOneHeight(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	l := calendar.Layout{RingSize: 16, EpochLength: 4, EpochCount: 3}
	q, err := calendar.New(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	const target = 1003 // epoch 250, the last height of it
	seq := uint64(0)
	var neighbours []uint64
	insert := func(count int, tier calendar.Tier) {
		t.Helper()
		if got := q.TierOf(target); got != tier {
			t.Fatalf("at %d the target is in tier %d, want %d", q.Height(), got, tier)
		}
		for range count {
			seq++
			q.Insert(ring.Entry{Height: target, Seq: seq})
		}
		// A neighbour on each side, so the bucket is not alone in its tier.
		seq++
		q.Insert(ring.Entry{Height: target + 1, Seq: seq})
		neighbours = append(neighbours, seq)
	}
	insert(n/3, calendar.TierOverflow)
	q.Advance(target - 20) // ring to 995, epoch tier to 1007
	if it := q.Take(); func() bool { _, ok := it.Next(q.C); return ok }() {
		t.Fatal("something due at", q.Height())
	}
	insert(n/3, calendar.TierEpoch)
	q.Advance(target - 3) // ring: epochs 250..253
	if it := q.Take(); func() bool { _, ok := it.Next(q.C); return ok }() {
		t.Fatal("something due at", q.Height())
	}
	insert(n-2*(n/3), calendar.TierRing)
	if r, e, o := q.TierLens(); r != n+3 || e != 0 || o != 0 {
		t.Fatalf("TierLens = %d, %d, %d", r, e, o)
	}
	for q.Height() < target {
		nxt, ok := q.NextAfter()
		if !ok || nxt != target {
			t.Fatalf("NextAfter at %d = %d, %v", q.Height(), nxt, ok)
		}
		q.Advance(nxt)
	}
	it := q.Take()
	want, took := uint64(1), 0
	for nd, ok := it.Next(q.C); ok; nd, ok = it.Next(q.C) {
		took++
		if nd.Height != target {
			t.Fatalf("timer of height %d delivered at %d", nd.Height, target)
		}
		if len(neighbours) > 0 && want == neighbours[0] {
			want++ // the neighbour inserted after each batch is not due
			neighbours = neighbours[1:]
		}
		if nd.Seq != want {
			t.Fatalf("seq %d delivered where %d was due", nd.Seq, want)
		}
		want++
	}
	if took != n || want != seq {
		t.Fatalf("took %d timers (want %d), ending before seq %d, last inserted %d", took, n, want, seq)
	}
	if q.Len() != 3 {
		t.Fatalf("%d timers left, want the 3 neighbours", q.Len())
	}
}
