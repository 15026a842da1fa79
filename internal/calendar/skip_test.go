package calendar_test

import (
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
)

// TestNextAfterReadsLittle: a quiet chain skips to its one busy epoch
// height by height, asking NextAfter each time, while that epoch is in the
// tree, in the overflow stage, in the epoch tier, then staged. NextAfter
// reads none of its timers (it walked all of them per call in the last
// three places: at 1M timers, 3.6 ms a skip), except once after the timers
// of the epoch's lowest height are all cancelled, and then at most the
// epoch.
func TestNextAfterReadsLittle(t *testing.T) {
	// With k = 3 and C = 8, epoch 20 (heights 20480..21503) is in the tree
	// until window 8, in the overflow stage in window 8, in the epoch tier
	// in windows 9 to 15, staged in window 16 and in the ring from window
	// 17.
	l := calendar.Layout{RingSize: 4096, EpochLength: 1024, EpochCount: 8}
	h := newHarness(t, l)
	const n = 8 * 1024
	for i := range n {
		must(t, h.Insert(20480+uint64(i%1024)))
	}
	// Where every timer of the lowest height is cancelled: in the tree,
	// the overflow stage (half of the epoch staged), the epoch tier,
	// staging (half of it staged).
	kills := map[uint64]bool{1000: true, 8700: true, 12000: true, 16900: true}
	want := uint64(20480)
	for h.Cur() < 20479 {
		mayWalk := false
		if kills[h.Cur()] {
			for _, seq := range append([]uint64(nil), h.Model[want]...) {
				h.Remove(seq)
			}
			want++
			mayWalk = true
		}
		before := h.Q.Walked()
		if next, ok := h.Q.NextAfter(); !ok || next != want {
			t.Fatalf("at %d: NextAfter = %d %v, want %d", h.Cur(), next, ok, want)
		}
		if d := h.Q.Walked() - before; d > 0 && (!mayWalk || d > uint64(len(h.Pos))) {
			t.Fatalf("at %d: NextAfter read %d entries (%d timers resident, a cancel before: %v)", h.Cur(), d, len(h.Pos), mayWalk)
		}
		h.Q.Advance(h.Cur() + 1) // the model's check of the height is NextAfter's above
		must(t, h.Take())
	}
	if w := h.Q.Walked(); w > 3*n {
		t.Fatalf("%d entries read in all", w)
	}
	drain(t, h)
}
