package calendar_test

import (
	"math/rand/v2"
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
				before, _, _ := h.Q.Tombstones()
				h.Remove(s)
				killed++
				dead, named, inTree := h.Q.Tombstones()
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
			if dead, _, _ := h.Q.Tombstones(); dead == 0 {
				must(t, h.Insert(far))
				s := h.Seq
				if s%2 != 0 {
					must(t, h.Insert(far))
					s = h.Seq
				}
				h.Remove(s)
			}
			drain(t, h)
			if dead, _, inTree := h.Q.Tombstones(); dead != 0 || inTree != 0 {
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
	if dead, _, inTree := q.Tombstones(); dead != 0 || inTree != 1 {
		t.Fatalf("tombstones %d, tree %d; want 0, 1", dead, inTree)
	}
	must(t, q.Verify(nil))
}
