package calendar_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/permtest"
	"github.com/timerlane/timerlane/ring"
)

// TestCancelMovesABoundedShare: n timers at one height, in a ring bucket,
// in an epoch bucket, or in the epoch being staged while blocks run (so
// shifted into staging meanwhile), all cancelled in insertion order,
// reverse, at random or every other one first: no cancel moves more than
// ring.CompactWhole timers (a compaction in one go moved half of them in
// one call: 45 ms at a million), delivery and every invariant stay right,
// and the chunks in use stay within a constant factor of the timers.
func TestCancelMovesABoundedShare(t *testing.T) {
	l := calendar.Layout{RingSize: 256, EpochLength: 64, EpochCount: 4}
	const n = 3000
	for _, where := range []string{"ring", "epoch", "staged"} {
		for _, o := range permtest.Orders {
			t.Run(fmt.Sprintf("%s, %s", where, o.Name), func(t *testing.T) {
				h := newHarness(t, l)
				// The staged epoch of window W lies beyond the ring's range
				// in window 0: its epoch bucket fills first, goes to the
				// older buckets whole, then is shifted from in window W.
				W := stageWindow(l)
				next, _ := stageEpochs(l, W*l.EpochLength)
				height := map[string]uint64{"ring": 100, "epoch": next + 7, "staged": next + 9}[where]
				want := map[string]calendar.Tier{"ring": calendar.TierRing, "epoch": calendar.TierEpoch, "staged": calendar.TierEpoch}[where]
				if h.Q.TierOf(height) != want {
					t.Fatalf("height %d is in tier %d", height, h.Q.TierOf(height))
				}
				for range n {
					must(t, h.Insert(height))
				}
				if where == "staged" {
					must(t, h.Advance(W*l.EpochLength))
					if staged, unstaged, _, _ := h.Q.StageLens(); staged == 0 || unstaged == 0 {
						t.Fatalf("%d staged, %d to stage", staged, unstaged)
					}
				}
				seqs := h.Resident()
				peak, worst := 0, 0
				for k, i := range o.Perm(n) {
					// A share of the epoch goes to staging every few cancels,
					// and at every cancel for a while (staging then catches
					// up with a compaction in progress).
					if where == "staged" && (k%40 == 39 || k >= n/2 && k < n/2+20) && h.Cur()+1 < height {
						step(t, h)
					}
					before := h.Moves
					h.Remove(seqs[i])
					peak = max(peak, h.Moves-before)
					worst = max(worst, h.Q.C.Live()-(3*h.Q.Len()+ring.ChunkLen)/ring.ChunkLen-3)
					if k%50 == 0 {
						must(t, h.Check())
					}
				}
				if peak > ring.CompactWhole || worst > 0 {
					t.Fatalf("a cancel moved up to %d timers (bound %d); chunks in use exceeded the bound by %d", peak, ring.CompactWhole, worst)
				}
				if where == "staged" && h.Cur() < l.EpochLength+20 {
					t.Fatalf("only %d blocks ran", h.Cur())
				}
				drain(t, h)
			})
		}
	}
}

// TestChurnAtOneHeight: a schedule and a cancel at one far height, over
// and over, with a few hundred timers pending there: the chunks in use
// stay within a constant factor of the timers, and no cancel moves more
// than ring.CompactWhole of them.
func TestChurnAtOneHeight(t *testing.T) {
	l := calendar.Layout{RingSize: 256, EpochLength: 64, EpochCount: 4}
	h := newHarness(t, l)
	staged, _ := stageEpochs(l, 0)
	far := staged + 2*l.EpochLength + 5
	rng := rand.New(rand.NewPCG(4, 4))
	for range 300 {
		must(t, h.Insert(far))
	}
	peak, most := 0, 0
	for k := range 30_000 {
		must(t, h.Insert(far))
		var victim uint64
		if k%2 == 0 {
			victim = h.Model[far][0] // the oldest
		} else {
			victim = h.Model[far][rng.IntN(len(h.Model[far]))]
		}
		before := h.Moves
		h.Remove(victim)
		peak = max(peak, h.Moves-before)
		most = max(most, h.Q.C.Live())
		if k%1000 == 0 {
			must(t, h.Check())
		}
	}
	if bound := (3*300+ring.ChunkLen)/ring.ChunkLen + 3; most > bound || peak > ring.CompactWhole {
		t.Fatalf("up to %d chunks for 300 timers (bound %d); a cancel moved up to %d (bound %d)", most, bound, peak, ring.CompactWhole)
	}
	drain(t, h)
}
