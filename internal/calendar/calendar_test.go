package calendar_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
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
				t.Errorf("%s at %d: TierOf(%d) = %d, want %d", layoutName(tc.l), tc.height, h, got, want)
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
		t.Run(layoutName(l), func(t *testing.T) {
			for s := range seeds {
				p := program{seed: uint64(s), ops: ops, scale: horizon(l), limit: math.MaxUint64 - 1<<20}
				if s%3 == 2 {
					p.base = 1<<33 + uint64(s) // somewhere in the middle of the range
				}
				if _, err := p.run(l); err != nil {
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
		p := program{seed: 1000 + uint64(s), ops: 1500, scale: []uint64{8, 40, 300, 5000}[s%4], limit: math.MaxUint64 - 1<<20}
		var ref []string
		for k, l := range layouts {
			log, err := p.run(l)
			if err != nil {
				t.Fatalf("seed %d, %s: %v", p.seed, layoutName(l), err)
			}
			if k == 0 {
				ref = log
				if len(ref) < 50 {
					t.Fatalf("seed %d: only %d deliveries: the program tests little", p.seed, len(ref))
				}
				continue
			}
			if d := diffLogs(ref, log); d != "" {
				t.Fatalf("seed %d: %s and %s differ at %s", p.seed, layoutName(layouts[0]), layoutName(l), d)
			}
		}
	}
}

// TestTopOfRange runs random programs that end at 2^64-1: no height wraps,
// every timer up to 2^64-1 is delivered, in order.
func TestTopOfRange(t *testing.T) {
	for _, l := range layouts {
		t.Run(layoutName(l), func(t *testing.T) {
			for s := range 6 {
				scale := horizon(l)
				p := program{seed: 77 + uint64(s), ops: 3000, scale: scale, base: math.MaxUint64 - 4*scale - 20, limit: math.MaxUint64}
				if _, err := p.run(l); err != nil {
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
		for _, from := range []uint64{0, math.MaxUint64 - 1<<20, math.MaxUint64 - horizon(l) - 7, math.MaxUint64 - 6} {
			t.Run(fmt.Sprintf("%s/from_max-%d", layoutName(l), math.MaxUint64-from), func(t *testing.T) {
				h, err := newHarness(l)
				if err != nil {
					t.Fatal(err)
				}
				if from > 0 {
					if err := h.advance(from); err != nil {
						t.Fatal(err)
					}
				}
				for round := 0; round < 3; round++ {
					for x := uint64(0); x <= 5; x++ {
						if err := h.insert(math.MaxUint64 - x); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := h.check(); err != nil {
					t.Fatal(err)
				}
				// Step the last 8 heights one by one; jump before that.
				if h.cur() < math.MaxUint64-8 {
					if err := h.advance(math.MaxUint64 - 8); err != nil {
						t.Fatal(err)
					}
				}
				for h.cur() < math.MaxUint64 {
					if err := h.advance(h.cur() + 1); err != nil {
						t.Fatal(err)
					}
					if err := h.check(); err != nil {
						t.Fatal(err)
					}
				}
				if len(h.pos) != 0 || len(h.log) != 6 {
					t.Fatalf("%d timers left, %d heights delivered: %v", len(h.pos), len(h.log), h.log)
				}
				if _, ok := h.q.NextAfter(); ok {
					t.Fatal("NextAfter at 2^64-1 found something")
				}
			})
		}
	}
}

// TestNextAfterJumps reaches sparse timers (some far beyond every horizon)
// only through NextAfter: jump to NextAfter()-1, then step.
func TestNextAfterJumps(t *testing.T) {
	for _, l := range layouts {
		t.Run(layoutName(l), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			h, err := newHarness(l)
			if err != nil {
				t.Fatal(err)
			}
			for range 300 {
				var ht uint64
				switch rng.IntN(4) {
				case 0:
					ht = 1 + rng.Uint64N(horizon(l))
				case 1:
					ht = 1 + rng.Uint64N(10*horizon(l))
				case 2:
					ht = 1 + rng.Uint64N(1<<20)
				default:
					ht = 1 + rng.Uint64N(1<<50)
				}
				if err := h.insert(ht); err != nil {
					t.Fatal(err)
				}
			}
			want := len(h.pos)
			heights := len(h.model)
			for rounds := 0; len(h.model) > 0; rounds++ {
				if rounds > 3*heights+10 {
					t.Fatalf("%d rounds for %d heights", rounds, heights)
				}
				nxt, ok, err := h.nextAfter()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					t.Fatal("NextAfter found nothing with timers resident")
				}
				if nxt-1 > h.cur() {
					if err := h.advance(nxt - 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := h.advance(nxt); err != nil {
					t.Fatal(err)
				}
				if err := h.check(); err != nil {
					t.Fatal(err)
				}
			}
			if h.q.Len() != 0 || h.q.C.Live() != 0 || len(h.log) != heights {
				t.Fatalf("delivered %d heights of %d (%d timers), %d left", len(h.log), heights, want, h.q.Len())
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
		t.Run(layoutName(l), func(t *testing.T) {
			h, err := newHarness(l)
			if err != nil {
				t.Fatal(err)
			}
			// The last height of an epoch: with k = 0 the ring holds only the
			// current epoch, so it is in the ring before it is due.
			target := 5*horizon(l) + l.EpochLength - 1
			last := target - target%l.EpochLength + l.EpochLength - 1 // of target's epoch
			neighbours := []uint64{target, last, target + 1, target + l.EpochLength}
			tiersSeen := map[calendar.Tier]bool{}
			for h.cur() < target-1 {
				tiersSeen[h.q.TierOf(target)] = true
				for _, n := range neighbours {
					if n > h.cur() {
						if err := h.insert(n); err != nil {
							t.Fatal(err)
						}
					}
				}
				step := max(1, (target-h.cur())/3)
				if step > 1 {
					step = min(step, l.EpochLength)
				}
				if err := h.advance(min(h.cur()+step, target-1)); err != nil {
					t.Fatal(err)
				}
				if err := h.check(); err != nil {
					t.Fatal(err)
				}
			}
			tiersSeen[h.q.TierOf(target)] = true
			if !tiersSeen[calendar.TierOverflow] || !tiersSeen[calendar.TierEpoch] || !tiersSeen[calendar.TierRing] {
				t.Fatalf("target height visited tiers %v only", tiersSeen)
			}
			n := len(h.model[target])
			for len(h.model) > 0 {
				if err := h.jump(); err != nil {
					t.Fatal(err)
				}
			}
			if n < 10 {
				t.Fatalf("only %d timers at the target height", n)
			}
		})
	}
}
