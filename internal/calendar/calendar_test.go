package calendar_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/calendar/calendartest"
	"github.com/timerlane/timerlane/ring"
)

var long = flag.Bool("calendar.long", false, "run the randomized calendar tests with many more seeds")

// layouts are the fixed tier layouts every calendar test runs under.
var layouts = []calendar.Layout{
	{RingSize: 2, EpochLength: 1, EpochCount: 1},
	{RingSize: 2, EpochLength: 2, EpochCount: 1},
	{RingSize: 4, EpochLength: 2, EpochCount: 2},
	{RingSize: 8, EpochLength: 3, EpochCount: 2},
	{RingSize: 16, EpochLength: 8, EpochCount: 3},
	{RingSize: 64, EpochLength: 64, EpochCount: 1},
	{RingSize: 4096, EpochLength: 1024, EpochCount: 64},
}

func randomLayout(rng *rand.Rand) calendar.Layout {
	r := uint64(2) << rng.IntN(9) // 2 .. 512
	return calendar.Layout{RingSize: r, EpochLength: 1 + rng.Uint64N(r), EpochCount: 1 + rng.Uint64N(9)}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		l  calendar.Layout
		ok bool
	}{
		{calendar.DefaultLayout, true},
		{calendar.Layout{RingSize: 2, EpochLength: 1, EpochCount: 1}, true},
		{calendar.Layout{RingSize: 2, EpochLength: 2, EpochCount: 1}, true},
		{calendar.Layout{RingSize: 8, EpochLength: 3, EpochCount: 2}, true},
		{calendar.Layout{RingSize: 1 << 24, EpochLength: 1, EpochCount: 1 << 20}, true},
		{calendar.Layout{RingSize: 0, EpochLength: 1, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 1, EpochLength: 1, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 3, EpochLength: 1, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 1 << 31, EpochLength: 1, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 4, EpochLength: 0, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 4, EpochLength: 5, EpochCount: 1}, false},
		{calendar.Layout{RingSize: 4, EpochLength: 4, EpochCount: 0}, false},
		{calendar.Layout{RingSize: 4, EpochLength: 4, EpochCount: 1<<20 + 1}, false},
	}
	for _, tc := range tests {
		err := tc.l.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.l, err, tc.ok)
		}
		if !tc.ok {
			if _, err := calendar.New(tc.l, nil); err == nil {
				t.Errorf("%+v: New accepted an invalid layout", tc.l)
			}
		}
	}
}

// TestTierOf pins the window arithmetic of the package comment.
func TestTierOf(t *testing.T) {
	R, E, O := calendar.TierRing, calendar.TierEpoch, calendar.TierOverflow
	tests := []struct {
		l      calendar.Layout
		height uint64 // the queue advances here first
		tiers  map[uint64]calendar.Tier
	}{
		// k = 3: ring = epochs 0..3 (heights 0..7), epoch tier = 4..6 (8..13).
		{calendar.Layout{RingSize: 8, EpochLength: 2, EpochCount: 3}, 0, map[uint64]calendar.Tier{1: R, 7: R, 8: E, 13: E, 14: O, 1 << 40: O}},
		// At 5, w = 2: ring = epochs 2..5 (4..11), epoch tier = 6..8 (12..17).
		{calendar.Layout{RingSize: 8, EpochLength: 2, EpochCount: 3}, 5, map[uint64]calendar.Tier{6: R, 11: R, 12: E, 17: E, 18: O}},
		// L does not divide R: k = 8/3-1 = 1: ring = epochs 3..4 (9..14), epoch tier = 5..6 (15..20).
		{calendar.Layout{RingSize: 8, EpochLength: 3, EpochCount: 2}, 10, map[uint64]calendar.Tier{11: R, 14: R, 15: E, 20: E, 21: O}},
		// k = 0: the ring holds the current epoch only.
		{calendar.Layout{RingSize: 64, EpochLength: 64, EpochCount: 1}, 70, map[uint64]calendar.Tier{71: R, 127: R, 128: E, 191: E, 192: O}},
		// Near the top (max = 2^64-1, epoch 2^63-1 = {max-1, max}): at max-10,
		// w holds {max-11, max-10}; ring = max-11..max-8, epoch tier = max-7..max-4.
		// Then saturation at the last epoch: nothing wraps into the ring.
		{calendar.Layout{RingSize: 4, EpochLength: 2, EpochCount: 2}, math.MaxUint64 - 10, map[uint64]calendar.Tier{
			math.MaxUint64 - 9: R, math.MaxUint64 - 8: R, math.MaxUint64 - 7: E, math.MaxUint64 - 4: E, math.MaxUint64 - 3: O, math.MaxUint64: O}},
		{calendar.Layout{RingSize: 4, EpochLength: 2, EpochCount: 2}, math.MaxUint64 - 3, map[uint64]calendar.Tier{
			math.MaxUint64 - 2: R, math.MaxUint64: R}},
	}
	for _, tc := range tests {
		q, err := calendar.New(tc.l, nil)
		if err != nil {
			t.Fatal(err)
		}
		q.Advance(tc.height)
		for h, want := range tc.tiers {
			if got := q.TierOf(h); got != want {
				t.Errorf("%s at %d: TierOf(%d) = %d, want %d", calendartest.LayoutName(tc.l), tc.height, h, got, want)
			}
		}
	}
}

// TestRandomDifferential runs random programs under every fixed layout and
// random valid ones, comparing each step with the model.
func TestRandomDifferential(t *testing.T) {
	seeds, randomLayouts, ops := 8, 24, 1500
	if testing.Short() {
		seeds, randomLayouts, ops = 3, 8, 800
	}
	if *long {
		seeds, randomLayouts, ops = 30, 100, 3000
	}
	all := append([]calendar.Layout{}, layouts...)
	rng := rand.New(rand.NewPCG(42, 42))
	for range randomLayouts {
		all = append(all, randomLayout(rng))
	}
	for _, l := range all {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			for s := range seeds {
				p := calendartest.Program{Seed: uint64(s), Ops: ops, Scale: calendartest.Horizon(l), Limit: math.MaxUint64 - 1<<20}
				if s%3 == 2 {
					p.Base = 1<<33 + uint64(s) // somewhere in the middle of the range
				}
				if _, err := p.Run(l); err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
			}
		})
	}
}

// TestBulkLoad: a queue loaded in bulk (a restore, a rollback's rebuild),
// whose far timers enter the tree in one sorted pass at Flush, then runs
// random programs against the model like one filled insert by insert.
func TestBulkLoad(t *testing.T) {
	for _, l := range layouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			for s := range 6 {
				p := calendartest.Program{Seed: uint64(s), Ops: 600, Bulk: 2000, Scale: calendartest.Horizon(l), Limit: math.MaxUint64 - 1<<20}
				if s%2 == 1 {
					p.Base = 1<<33 + uint64(s)
				}
				if _, err := p.Run(l); err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
			}
		})
	}
}

// TestLayoutsAgree runs the same programs under every layout: the tier
// layout must change nothing that is delivered, nor when.
func TestLayoutsAgree(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for s := range seeds {
		p := calendartest.Program{Seed: 1000 + uint64(s), Ops: 1500, Scale: []uint64{8, 40, 300, 5000}[s%4], Limit: math.MaxUint64 - 1<<20}
		var ref []string
		for k, l := range layouts {
			log, err := p.Run(l)
			if err != nil {
				t.Fatalf("seed %d, %s: %v", p.Seed, calendartest.LayoutName(l), err)
			}
			if k == 0 {
				ref = log
				if len(ref) < 50 {
					t.Fatalf("seed %d: only %d deliveries: the calendartest.Program tests little", p.Seed, len(ref))
				}
				continue
			}
			if d := calendartest.DiffLogs(ref, log); d != "" {
				t.Fatalf("seed %d: %s and %s differ at %s", p.Seed, calendartest.LayoutName(layouts[0]), calendartest.LayoutName(l), d)
			}
		}
	}
}

// TestTopOfRange runs random programs that end at 2^64-1: no height wraps,
// every timer up to 2^64-1 is delivered, in order.
func TestTopOfRange(t *testing.T) {
	for _, l := range layouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			for s := range 6 {
				scale := calendartest.Horizon(l)
				p := calendartest.Program{Seed: 77 + uint64(s), Ops: 3000, Scale: scale, Base: math.MaxUint64 - 4*scale - 20, Limit: math.MaxUint64}
				if _, err := p.Run(l); err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
			}
		})
	}
}

// TestTopHeights inserts at MaxUint64-5 .. MaxUint64 from several distances
// and steps there one height at a time.
func TestTopHeights(t *testing.T) {
	for _, l := range layouts {
		for _, from := range []uint64{0, math.MaxUint64 - 1<<20, math.MaxUint64 - calendartest.Horizon(l) - 7, math.MaxUint64 - 6} {
			t.Run(fmt.Sprintf("%s/from_max-%d", calendartest.LayoutName(l), math.MaxUint64-from), func(t *testing.T) {
				h, err := calendartest.NewHarness(l)
				if err != nil {
					t.Fatal(err)
				}
				if from > 0 {
					if err := h.Advance(from); err != nil {
						t.Fatal(err)
					}
				}
				for round := 0; round < 3; round++ {
					for x := uint64(0); x <= 5; x++ {
						if err := h.Insert(math.MaxUint64 - x); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
				// Step the last 8 heights one by one; jump before that.
				if h.Cur() < math.MaxUint64-8 {
					if err := h.Advance(math.MaxUint64 - 8); err != nil {
						t.Fatal(err)
					}
				}
				for h.Cur() < math.MaxUint64 {
					if err := h.Advance(h.Cur() + 1); err != nil {
						t.Fatal(err)
					}
					if err := h.Check(); err != nil {
						t.Fatal(err)
					}
				}
				if len(h.Pos) != 0 || len(h.Log) != 6 {
					t.Fatalf("%d timers left, %d heights delivered: %v", len(h.Pos), len(h.Log), h.Log)
				}
				if _, ok := h.Q.NextAfter(); ok {
					t.Fatal("NextAfter at 2^64-1 found something")
				}
			})
		}
	}
}

// TestNextAfterJumps reaches sparse timers (some far beyond every calendartest.Horizon)
// only through NextAfter: jump to NextAfter()-1, then step.
func TestNextAfterJumps(t *testing.T) {
	for _, l := range layouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			h, err := calendartest.NewHarness(l)
			if err != nil {
				t.Fatal(err)
			}
			for range 300 {
				var ht uint64
				switch rng.IntN(4) {
				case 0:
					ht = 1 + rng.Uint64N(calendartest.Horizon(l))
				case 1:
					ht = 1 + rng.Uint64N(10*calendartest.Horizon(l))
				case 2:
					ht = 1 + rng.Uint64N(1<<20)
				default:
					ht = 1 + rng.Uint64N(1<<50)
				}
				if err := h.Insert(ht); err != nil {
					t.Fatal(err)
				}
			}
			want := len(h.Pos)
			heights := len(h.Model)
			for rounds := 0; len(h.Model) > 0; rounds++ {
				if rounds > 3*heights+10 {
					t.Fatalf("%d rounds for %d heights", rounds, heights)
				}
				nxt, ok, err := h.NextAfter()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					t.Fatal("NextAfter found nothing with timers resident")
				}
				if nxt-1 > h.Cur() {
					if err := h.Advance(nxt - 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := h.Advance(nxt); err != nil {
					t.Fatal(err)
				}
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
			}
			if h.Q.Len() != 0 || h.Q.C.Live() != 0 || len(h.Log) != heights {
				t.Fatalf("delivered %d heights of %d (%d timers), %d left", len(h.Log), heights, want, h.Q.Len())
			}
		})
	}
}

// TestMigrationKeepsFIFO schedules one height from every tier in turn (while
// it is in the overflow tree, then in the epoch tier, then in the ring) and
// with other heights of its epoch interleaved; per height, delivery is in
// insertion order.
func TestMigrationKeepsFIFO(t *testing.T) {
	for _, l := range layouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h, err := calendartest.NewHarness(l)
			if err != nil {
				t.Fatal(err)
			}
			// The last height of an epoch: with k = 0 the ring holds only the
			// current epoch, so it is in the ring before it is due.
			target := 5*calendartest.Horizon(l) + l.EpochLength - 1
			last := target - target%l.EpochLength + l.EpochLength - 1 // of target's epoch
			neighbours := []uint64{target, last, target + 1, target + l.EpochLength}
			tiersSeen := map[calendar.Tier]bool{}
			for h.Cur() < target-1 {
				tiersSeen[h.Q.TierOf(target)] = true
				for _, n := range neighbours {
					if n > h.Cur() {
						if err := h.Insert(n); err != nil {
							t.Fatal(err)
						}
					}
				}
				step := max(1, (target-h.Cur())/3)
				if step > 1 {
					step = min(step, l.EpochLength)
				}
				if err := h.Advance(min(h.Cur()+step, target-1)); err != nil {
					t.Fatal(err)
				}
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
			}
			tiersSeen[h.Q.TierOf(target)] = true
			if !tiersSeen[calendar.TierOverflow] || !tiersSeen[calendar.TierEpoch] || !tiersSeen[calendar.TierRing] {
				t.Fatalf("target height visited tiers %v only", tiersSeen)
			}
			n := len(h.Model[target])
			for len(h.Model) > 0 {
				if err := h.Jump(); err != nil {
					t.Fatal(err)
				}
			}
			if n < 10 {
				t.Fatalf("only %d timers at the target height", n)
			}
		})
	}
}

// TestChurnStaysBounded: schedule-and-cancel churn into a bucket that keeps
// live timers must not pile up tombstones: memory follows the live timers,
// and compaction keeps FIFO order and every position right.
func TestChurnStaysBounded(t *testing.T) {
	for _, l := range []calendar.Layout{{RingSize: 4096, EpochLength: 1024, EpochCount: 512}, {RingSize: 4, EpochLength: 2, EpochCount: 2}} {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h, err := calendartest.NewHarness(l)
			if err != nil {
				t.Fatal(err)
			}
			// One height in the ring and one in the epoch tier, each with
			// keepers; between them, churn that cancels out of order.
			for _, target := range []uint64{5, 3000} {
				if l.RingSize == 4 {
					target = map[uint64]uint64{5: 3, 3000: 7}[target]
				}
				for range 3 {
					if err := h.Insert(target); err != nil {
						t.Fatal(err)
					}
				}
				var churn []uint64
				for round := range 2000 {
					if err := h.Insert(target); err != nil {
						t.Fatal(err)
					}
					churn = append(churn, h.Seq)
					if round%3 == 2 { // cancel an older one, not the last written
						h.Remove(churn[0])
						churn = churn[1:]
					}
					if len(churn) > 8 {
						h.Remove(churn[len(churn)-1]) // the last written
						churn = churn[:len(churn)-1]
						h.Remove(churn[0])
						churn = churn[1:]
					}
				}
				if err := h.Check(); err != nil {
					t.Fatal(err)
				}
				if live := h.Q.C.Live(); live > 8 {
					t.Fatalf("%d chunks in use for %d pending timers", live, h.Q.Len())
				}
			}
			for len(h.Model) > 0 {
				if err := h.Jump(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestNewInTakesAFreeArena: a queue starts on an arena whose chunks are
// all free, a new one or one Reset, and refuses one in use.
func TestNewInTakesAFreeArena(t *testing.T) {
	q, err := calendar.New(calendar.DefaultLayout, nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Insert(ring.Entry{Height: 5, Seq: 1, Val: 1})
	if _, err := calendar.NewIn(calendar.DefaultLayout, q.C, nil); err == nil {
		t.Fatal("NewIn took an arena with a chunk in use")
	}
	q.C.Reset()
	q2, err := calendar.NewIn(calendar.DefaultLayout, q.C, nil)
	if err != nil {
		t.Fatal(err)
	}
	q2.Insert(ring.Entry{Height: 5, Seq: 1, Val: 7})
	q2.Advance(5)
	due := q2.Take()
	if e, ok := due.Next(q2.C); !ok || e.Val != 7 {
		t.Fatalf("the new queue took %v, %v", e, ok)
	}
}
