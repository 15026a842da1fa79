package calendar_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/calendar/calendartest"
	"github.com/timerlane/timerlane/ring"
)

// TestKillLeavesTombstones: Kill of a timer in the tree leaves a tombstone,
// which nothing observable shows (Walk, TierLens, NextAfter, delivery);
// tombstones go when their epoch comes into range, at the front of the
// tree when NextAfter passes them, and all at once in a purge once they
// outnumber the tree's timers twice over (plus a floor), so that the tree
// never holds more than about three times its timers.
func TestKillLeavesTombstones(t *testing.T) {
	for _, l := range stageLayouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			far := 10 * calendartest.Horizon(l)
			rng := rand.New(rand.NewPCG(l.RingSize, l.EpochCount))
			// 600 timers in the tree; the harness kills even seqs, removes odd.
			for range 600 {
				must(t, h.Insert(far+rng.Uint64N(far)))
			}
			// Remove takes odd seqs out at once: most of them go first, so
			// that the tombstones come to outnumber the timers.
			for _, s := range h.Resident() {
				if s%2 != 0 && rng.IntN(10) != 0 {
					h.Remove(s)
				}
			}
			killed, purges := 0, 0
			for _, s := range h.Resident() {
				if s%2 != 0 || rng.IntN(10) == 0 {
					continue
				}
				before, _, _ := h.Q.TreeState()
				h.Remove(s)
				killed++
				dead, named, inTree := h.Q.TreeState()
				switch {
				case dead == 0 && before > 0:
					purges++
				case dead != before+1:
					t.Fatalf("kill %d: tombstones %d -> %d", s, before, dead)
				}
				if live := inTree - dead; named > 2*live+64 || inTree > 3*live+65 {
					t.Fatalf("after kill %d: %d entries in the tree for %d timers, %d keys noted", s, inTree, live, named)
				}
				must(t, h.Check())
			}
			if killed < 200 || purges == 0 {
				t.Fatalf("%d kills made %d purges: the test misses its point", killed, purges)
			}
			// Some tombstones are left: NextAfter and the window's moves drop
			// them, and delivery matches the model throughout.
			if dead, _, _ := h.Q.TreeState(); dead == 0 {
				must(t, h.Insert(far))
				s := h.Seq
				if s%2 != 0 {
					must(t, h.Insert(far))
					s = h.Seq
				}
				h.Remove(s)
			}
			drain(t, h)
			if dead, _, inTree := h.Q.TreeState(); dead != 0 || inTree != 0 {
				t.Fatalf("drained: %d tombstones, %d entries left in the tree", dead, inTree)
			}
		})
	}
}

// TestKillWithoutResident: without SetResident, Kill removes at once.
func TestKillWithoutResident(t *testing.T) {
	l := stageLayouts[0]
	q, err := calendar.New(l, nil)
	must(t, err)
	far := 10 * calendartest.Horizon(l)
	q.Insert(ring.Entry{Height: far, Seq: 1, Val: 1})
	q.Insert(ring.Entry{Height: far, Seq: 2, Val: 2})
	q.Kill(far, 1, 0)
	if dead, _, inTree := q.TreeState(); dead != 0 || inTree != 1 {
		t.Fatalf("tombstones %d, tree %d; want 0, 1", dead, inTree)
	}
	must(t, q.Verify(nil))
}

// TestKillDeletesInABigTree: while the tree holds more than 2^14 timers,
// Kill deletes at once (a purge of a bigger tree would pause its block for
// too long); at 2^14 it leaves a tombstone again.
func TestKillDeletesInABigTree(t *testing.T) {
	l := stageLayouts[0]
	q, err := calendar.New(l, nil)
	must(t, err)
	alive := map[uint64]bool{}
	q.SetResident(func(_ uint32, seq uint64) bool { return alive[seq] })
	far := 10 * calendartest.Horizon(l)
	const n = 1<<14 + 1
	for s := uint64(1); s <= n; s++ {
		alive[s] = true
		q.Insert(ring.Entry{Height: far + s%1000, Seq: s, Val: uint32(s)})
	}
	kill := func(s uint64) {
		delete(alive, s)
		q.Kill(far+s%1000, s, 0)
	}
	kill(1) // 2^14 + 1 timers: deleted
	if dead, _, inTree := q.TreeState(); dead != 0 || inTree != n-1 {
		t.Fatalf("above the bound: tombstones %d, tree %d; want 0, %d", dead, inTree, n-1)
	}
	kill(2) // 2^14 timers: a tombstone
	if dead, _, inTree := q.TreeState(); dead != 1 || inTree != n-1 {
		t.Fatalf("at the bound: tombstones %d, tree %d; want 1, %d", dead, inTree, n-1)
	}
	must(t, q.Verify(nil))
}

// BenchmarkPurge: one op is the Kill that makes the tree purge its
// tombstones, with about n timers in it and the tombstones at their limit
// (about 2n + 64, each killed and replaced by a new timer, as a node's
// cancels and schedules do): the pause of the block that makes it. It is
// the queue's first purge, which also grows its buffers.
func BenchmarkPurge(b *testing.B) {
	for _, n := range []int{10_000, 1 << 14} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) {
			l := calendar.DefaultLayout
			far := 10 * calendartest.Horizon(l)
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				b.StopTimer()
				q, err := calendar.New(l, nil)
				if err != nil {
					b.Fatal(err)
				}
				var heights []uint64 // by seq - 1
				alive := map[uint64]bool{}
				q.SetResident(func(_ uint32, seq uint64) bool { return alive[seq] })
				insert := func() {
					heights = append(heights, far+rng.Uint64N(1<<24))
					seq := uint64(len(heights))
					alive[seq] = true
					q.Insert(ring.Entry{Height: heights[seq-1], Seq: seq, Val: uint32(seq)})
				}
				kill := func(seq uint64) {
					delete(alive, seq)
					q.Kill(heights[seq-1], seq, 0)
				}
				for range n {
					insert()
				}
				// The next kill leaves n-1 timers and 2(n-1) + 65 tombstones.
				for s := range uint64(2*n + 62) {
					kill(s + 1)
					insert()
				}
				dead, _, _ := q.TreeState()
				b.StartTimer()
				kill(uint64(2*n + 63))
				b.StopTimer()
				if d, _, _ := q.TreeState(); dead != 2*n+62 || d != 0 {
					b.Fatalf("tombstones %d before the kill, %d after: no purge", dead, d)
				}
				b.StartTimer()
			}
		})
	}
}

// TestInOrder: the order purge and Flush use is (height, seq), whatever the
// order of the input, with runs of one height in and out of seq order.
func TestInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name    string
		heights uint64 // heights drawn from [0, heights)
		n       int
	}{{"empty", 1, 0}, {"one height", 1, 300}, {"few heights", 7, 500}, {"spread", 1 << 40, 500}, {"top heights", 0, 200}} {
		t.Run(tc.name, func(t *testing.T) {
			es := make([]ring.Entry, tc.n)
			for i := range es {
				h := uint64(math.MaxUint64) - rng.Uint64N(3) // "top heights"
				if tc.heights > 0 {
					h = rng.Uint64N(tc.heights)
				}
				es[i] = ring.Entry{Height: h, Seq: rng.Uint64N(1 << 50)}
			}
			order, _ := calendar.InOrder(es, nil, nil)
			if len(order) != len(es) {
				t.Fatalf("%d positions for %d entries", len(order), len(es))
			}
			got := make([]ring.Entry, len(order))
			for k, it := range order {
				got[k] = es[it.Pos]
			}
			want := slices.Clone(es)
			slices.SortFunc(want, func(a, b ring.Entry) int {
				return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.Seq, b.Seq))
			})
			if !slices.Equal(got, want) {
				t.Fatal("not in (height, seq) order")
			}
		})
	}
}

// TestSortKeys: a purge's keys come out in (height, seq) order, packed into
// words when their spans fit 55 bits (heights near 2^64 too), sorted as
// items when they do not.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name       string
		hlo, hspan uint64 // heights in [hlo, hlo+hspan)
		sspan      uint64 // seqs in [1, 1+sspan), distinct
		n          int
		packed     bool
	}{
		{"empty", 0, 1, 1, 0, true},
		{"one", 7, 1, 1, 1, true},
		{"one height", 1 << 30, 1, 1 << 20, 400, true},
		{"far and spread", 1 << 40, 1 << 24, 1 << 20, 2000, true},
		{"top heights", math.MaxUint64 - 2, 3, 1 << 50, 300, true},
		{"exactly 55 bits", 0, 1 << 5, 1 << 50, 300, true},
		{"56 bits", 0, 1 << 6, 1 << 50, 300, false},
		{"whole range", 0, math.MaxUint64, 1 << 40, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := make([]ring.Entry, tc.n)
			seen := map[uint64]bool{}
			for i := range es {
				s := 1 + rng.Uint64N(tc.sspan)
				for seen[s] {
					s = 1 + rng.Uint64N(tc.sspan)
				}
				seen[s] = true
				es[i] = ring.Entry{Height: tc.hlo + rng.Uint64N(tc.hspan), Seq: s}
			}
			if tc.n > 2 { // the spans' ends, so that the widths are exact
				es[0].Height, es[1].Height = tc.hlo, tc.hlo+tc.hspan-1
				es[0].Seq, es[1].Seq = 1, tc.sspan
			}
			want := slices.Clone(es)
			slices.SortFunc(want, func(a, b ring.Entry) int {
				return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.Seq, b.Seq))
			})
			if packed := calendar.SortKeys(es); packed != tc.packed {
				t.Errorf("packed %v, want %v", packed, tc.packed)
			}
			if !slices.Equal(es, want) {
				t.Fatal("not in (height, seq) order")
			}
		})
	}
}
