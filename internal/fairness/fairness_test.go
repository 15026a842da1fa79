package fairness

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// build returns a window of blocks with the fires added in order.
func build(blocks uint64, fires ...fire) *Window {
	w := New(blocks)
	for _, f := range fires {
		w.Add(f.height, f.actor, f.n)
	}
	return w
}

func walk(w *Window) []fire {
	var log []fire
	w.Walk(func(h uint64, a uint32, n uint64) { log = append(log, fire{h, a, n}) })
	return log
}

func TestWeights(t *testing.T) {
	type want struct {
		actor  uint32
		recent uint64
		weight uint32
	}
	for _, tc := range []struct {
		name    string
		fires   []fire
		m2      uint64
		actors  int
		weights []want
	}{
		{"empty", nil, 0, 0, []want{{0, 0, 2_000_000}, {7, 0, 2_000_000}, {1 << 31, 0, 2_000_000}}},
		{"one actor", []fire{{0, 7, 5}}, 10, 1, []want{{7, 5, 1_000_000}, {6, 0, 2_000_000}}},
		{"one fire", []fire{{3, 0, 1}}, 2, 1, []want{{0, 1, 1_000_000}}},
		// median 4: 1 → 2 − 1/4; 4 is the median (ratio 1); 10 is above.
		{"odd", []fire{{1, 0, 1}, {1, 1, 4}, {1, 2, 10}}, 8, 3,
			[]want{{0, 1, 1_750_000}, {1, 4, 1_000_000}, {2, 10, 1_000_000}, {3, 0, 2_000_000}}},
		// median 2.5: 1 → 2 − 0.4; 2 → 2 − 0.8; 3 and 6 → 1.
		{"even x.5", []fire{{1, 3, 6}, {1, 0, 1}, {1, 2, 3}, {1, 1, 2}}, 5, 4,
			[]want{{0, 1, 1_600_000}, {1, 2, 1_200_000}, {2, 3, 1_000_000}, {3, 6, 1_000_000}}},
		// median 3: 2 − 1/3 = 1.666666.67 rounds up to 1_666_667.
		{"round up", []fire{{1, 0, 1}, {1, 1, 3}, {1, 2, 3}}, 6, 3,
			[]want{{0, 1, 1_666_667}, {1, 3, 1_000_000}, {2, 3, 1_000_000}}},
		// median 1.5: 2 − 1/1.5 = 1.333333.33 rounds up to 1_333_334.
		{"even round up", []fire{{1, 0, 1}, {1, 1, 2}}, 3, 2,
			[]want{{0, 1, 1_333_334}, {1, 2, 1_000_000}}},
		// median 7: 2 − 2/7 = 1.714285.71 rounds up to 1_714_286.
		{"round up 2/7", []fire{{1, 0, 2}, {1, 1, 7}, {2, 2, 7}}, 14, 3,
			[]want{{0, 2, 1_714_286}}},
		// median (4+4)/2: even count with an integer median.
		{"even integer", []fire{{1, 0, 1}, {1, 1, 4}, {1, 2, 4}, {1, 3, 9}}, 8, 4,
			[]want{{0, 1, 1_750_000}, {1, 4, 1_000_000}, {3, 9, 1_000_000}}},
		// counts summed over several heights.
		{"summed", []fire{{1, 0, 1}, {2, 1, 1}, {3, 0, 2}, {4, 2, 9}, {5, 1, 2}}, 6, 3,
			[]want{{0, 3, 1_000_000}, {1, 3, 1_000_000}, {2, 9, 1_000_000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := build(DefaultBlocks, tc.fires...)
			if got := w.Median2(); got != tc.m2 {
				t.Errorf("Median2 = %d, want %d", got, tc.m2)
			}
			if got := w.Actors(); got != tc.actors {
				t.Errorf("Actors = %d, want %d", got, tc.actors)
			}
			for _, x := range tc.weights {
				if got := w.Recent(x.actor); got != x.recent {
					t.Errorf("Recent(%d) = %d, want %d", x.actor, got, x.recent)
				}
				if got := w.Weight(x.actor); got != x.weight {
					t.Errorf("Weight(%d) = %d, want %d", x.actor, got, x.weight)
				}
				if x.recent > 0 {
					if got := modelWeight(x.recent, tc.m2); got != x.weight {
						t.Errorf("modelWeight(%d, %d) = %d, want %d", x.recent, tc.m2, got, x.weight)
					}
				}
			}
		})
	}
}

func TestWeightFormula(t *testing.T) {
	for _, tc := range []struct {
		recent, m2 uint64
		want       uint32
	}{
		{1, 2, 1_000_000},
		{1, 3, 1_333_334},
		{1, 4, 1_500_000},
		{1, 2_000_000, 1_999_999},
		{1, 2_000_001, 2_000_000}, // ratio 0.99999950 ppm rounds down to 0
		{1, 4_000_001, 2_000_000}, // a fire too small to move the ppm
		{1, 1 << 63, 2_000_000},
		{MaxRecent, 2, 1_000_000}, // recent × 2_000_000 needs 128 bits
		{MaxRecent, 1 << 63, 1_000_000},
		{MaxRecent - 1, 2 * MaxRecent, 1_000_001}, // just below the median
		{1 << 40, 1<<42 + 6, 1_500_001},
	} {
		if got := weight(tc.recent, tc.m2); got != tc.want {
			t.Errorf("weight(%d, %d) = %d, want %d", tc.recent, tc.m2, got, tc.want)
		}
		if got := modelWeight(tc.recent, tc.m2); got != tc.want {
			t.Errorf("modelWeight(%d, %d) = %d, want %d", tc.recent, tc.m2, got, tc.want)
		}
	}
}

// TestFactor: W × max(2, m2), exact, and ordered as W is (the lane's
// order multiplies priority fees by it); the ppm weights of the first two
// rows are equal, their factors are not.
func TestFactor(t *testing.T) {
	for _, tc := range []struct {
		recent, m2, want uint64
	}{
		{0, 0, 4},                 // no fire anywhere: W = 2, d = 2
		{0, 6, 12},                // W = 2
		{1, 6, 10},                // W = 2 − 1/3 = 5/3, d = 6
		{3, 6, 6},                 // at the median: W = 1
		{7, 6, 6},                 // above it: W = 1
		{1, 4_000_001, 8_000_000}, // the ppm weight of these two is
		{0, 4_000_001, 8_000_002}, // 2,000,000 for both
		{0, 1 << 63, 1<<64 - 1},   // 2^64, saturated
		{1, 1 << 63, 1<<64 - 2},   // still below it
		{MaxRecent, 1 << 63, 1 << 63},
		{MaxRecent - 1, 1 << 63, 1<<63 + 2},
	} {
		if got := factor(tc.recent, tc.m2); got != tc.want {
			t.Errorf("factor(%d, %d) = %d, want %d", tc.recent, tc.m2, got, tc.want)
		}
		if got := modelFactor(tc.recent, tc.m2); got != tc.want {
			t.Errorf("modelFactor(%d, %d) = %d, want %d", tc.recent, tc.m2, got, tc.want)
		}
	}
}

func TestExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks uint64
		fires  []fire
		expire uint64
		want   []fire // the log after Expire
	}{
		{"H-F kept", 10, []fire{{5, 1, 1}}, 15, []fire{{5, 1, 1}}},
		{"H-F-1 dropped", 10, []fire{{5, 1, 1}}, 16, nil},
		{"H-F+1 kept", 10, []fire{{5, 1, 1}}, 14, []fire{{5, 1, 1}}},
		{"F=1 keeps the last block", 1, []fire{{7, 1, 1}, {8, 2, 1}}, 9, []fire{{8, 2, 1}}},
		{"saturating H<F", 10, []fire{{0, 1, 1}, {3, 2, 1}}, 5, []fire{{0, 1, 1}, {3, 2, 1}}},
		{"saturating H=F", 10, []fire{{0, 1, 1}}, 10, []fire{{0, 1, 1}}},
		{"saturating H=F+1", 10, []fire{{0, 1, 1}, {1, 2, 1}}, 11, []fire{{1, 2, 1}}},
		{"gaps", 10, []fire{{1, 1, 1}, {2, 2, 1}, {50, 1, 1}, {51, 3, 1}}, 55, []fire{{50, 1, 1}, {51, 3, 1}}},
		{"gaps all", 10, []fire{{1, 1, 1}, {2, 2, 1}, {50, 1, 1}, {51, 3, 1}}, 62, nil},
		{"gaps one", 10, []fire{{1, 1, 1}, {2, 2, 1}, {50, 1, 1}, {51, 3, 1}}, 61, []fire{{51, 3, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := build(tc.blocks, tc.fires...)
			w.Expire(tc.expire, nil)
			if got := walk(w); !slices.Equal(got, tc.want) {
				t.Errorf("log after Expire(%d) = %v, want %v", tc.expire, got, tc.want)
			}
		})
	}
}

func TestPruning(t *testing.T) {
	w := New(10)
	var pruned []uint32
	expire := func(h uint64) []uint32 {
		pruned = pruned[:0]
		w.Expire(h, func(a uint32) {
			if w.Recent(a) != 0 {
				t.Errorf("actor %d pruned with %d recent fires", a, w.Recent(a))
			}
			pruned = append(pruned, a)
		})
		return pruned
	}
	w.Add(1, 5, 2)
	w.Add(1, 6, 1)
	w.Add(2, 7, 1)
	w.Add(3, 5, 1) // 5 stays after its first entry leaves
	w.Add(3, 6, 1)
	w.Add(3, 8, 1)
	if got := expire(11); len(got) != 0 {
		t.Fatalf("Expire(11) pruned %v", got)
	}
	if got := expire(12); len(got) != 0 { // drops height 1: 5 and 6 keep a fire
		t.Fatalf("Expire(12) pruned %v, want none", got)
	}
	if w.Recent(5) != 1 || w.Recent(6) != 1 || w.Actors() != 4 {
		t.Fatalf("after Expire(12): Recent(5)=%d Recent(6)=%d Actors=%d", w.Recent(5), w.Recent(6), w.Actors())
	}
	if got := expire(12); len(got) != 0 {
		t.Fatalf("Expire(12) again pruned %v", got)
	}
	if got := expire(13); !slices.Equal(got, []uint32{7}) {
		t.Fatalf("Expire(13) pruned %v, want [7]", got)
	}
	w.Add(13, 7, 1) // 7 comes back with a fresh entry
	if got := expire(14); !slices.Equal(got, []uint32{5, 6, 8}) {
		t.Fatalf("Expire(14) pruned %v, want [5 6 8] in log order", got)
	}
	if got := expire(100); !slices.Equal(got, []uint32{7}) {
		t.Fatalf("Expire(100) pruned %v, want [7] (once more, after it came back)", got)
	}
	if w.Actors() != 0 || w.Median2() != 0 || len(walk(w)) != 0 {
		t.Fatalf("window not empty: Actors=%d Median2=%d log=%v", w.Actors(), w.Median2(), walk(w))
	}
	if got := expire(200); len(got) != 0 {
		t.Fatalf("Expire on an empty window pruned %v", got)
	}
}

func TestSetBlocks(t *testing.T) {
	w := New(100)
	for h := uint64(10); h <= 50; h++ {
		w.Add(h, uint32(h%3), 1)
	}
	w.Expire(51, nil) // cutoff −49: nothing
	if got := w.Recent(0) + w.Recent(1) + w.Recent(2); got != 41 {
		t.Fatalf("fires = %d, want 41", got)
	}
	w.SetBlocks(5) // shrink: the window at 51 is [46, 50]
	if w.Blocks() != 5 {
		t.Fatalf("Blocks = %d", w.Blocks())
	}
	w.Expire(51, nil)
	if got := walk(w); len(got) != 5 || got[0].height != 46 {
		t.Fatalf("after shrinking to 5: log %v, want heights 46..50", got)
	}
	w.SetBlocks(1000) // grow: what was dropped stays dropped, the rest stays longer
	w.Expire(60, nil)
	w.Expire(1045, nil)
	if got := walk(w); len(got) != 5 || got[0].height != 46 {
		t.Fatalf("after growing to 1000: log %v, want heights 46..50", got)
	}
	w.Expire(1047, nil) // cutoff 47
	if got := walk(w); len(got) != 4 || got[0].height != 47 {
		t.Fatalf("after Expire(1047): log %v, want heights 47..50", got)
	}
}

func TestCoalescing(t *testing.T) {
	w := New(DefaultBlocks)
	w.Add(5, 1, 1)
	w.Add(5, 2, 2)
	w.Add(5, 1, 3)
	w.Add(5, 3, 0) // nothing
	w.Add(5, 2, 1)
	w.Add(6, 1, 1)
	w.Add(6, 1, 1)
	w.Add(9, 3, 4)
	want := []fire{{5, 1, 4}, {5, 2, 3}, {6, 1, 2}, {9, 3, 4}}
	if got := walk(w); !slices.Equal(got, want) {
		t.Fatalf("log = %v, want %v", got, want)
	}
	if w.Recent(1) != 6 || w.Recent(2) != 3 || w.Recent(3) != 4 || w.Actors() != 3 {
		t.Fatalf("Recent = %d %d %d, Actors = %d", w.Recent(1), w.Recent(2), w.Recent(3), w.Actors())
	}
	// Replaying the log rebuilds the window.
	r := New(DefaultBlocks)
	w.Walk(r.Add)
	if got := walk(r); !slices.Equal(got, want) {
		t.Fatalf("rebuilt log = %v, want %v", got, want)
	}
}

func TestPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"New(0)", func() { New(0) }},
		{"SetBlocks(0)", func() { New(1).SetBlocks(0) }},
		{"Add below an earlier Add", func() { w := New(1); w.Add(5, 0, 1); w.Add(4, 1, 1) }},
		{"Add below an earlier Add of 0", func() { w := New(1); w.Add(5, 0, 0); w.Add(4, 1, 1) }},
		{"MaxRecent", func() { w := New(1); w.Add(5, 0, MaxRecent); w.Add(5, 0, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.f()
		})
	}
	w := New(1)
	w.Add(5, 0, MaxRecent) // at the bound: fine
	w.Add(5, 1, MaxRecent)
	if w.Median2() != 2*MaxRecent || w.Weight(0) != MinWeight {
		t.Fatalf("Median2 = %d, Weight = %d", w.Median2(), w.Weight(0))
	}
}

func TestCloneResetCopyFrom(t *testing.T) {
	w := New(10)
	for h := range uint64(300) { // enough for the log ring to grow
		w.Add(h, uint32(h%7), h%3)
	}
	c := w.Clone()
	before := walk(w)
	c.Add(300, 1, 5)
	c.Expire(305, nil)
	c.SetBlocks(3)
	if got := walk(w); !slices.Equal(got, before) || w.Blocks() != 10 {
		t.Fatalf("changing the clone changed the original")
	}
	// CopyFrom into a larger window and into a fresh one.
	big := New(1)
	for h := range uint64(5000) {
		big.Add(h, uint32(h), 1)
	}
	big.CopyFrom(w)
	small := New(1)
	small.CopyFrom(w)
	for _, x := range []*Window{big, small, c} {
		if x != c {
			if got := walk(x); !slices.Equal(got, before) {
				t.Fatalf("CopyFrom: log %v, want %v", got, before)
			}
		}
		// Both go on like the original.
		x.CopyFrom(w)
		x.Add(300, 2, 1)
		x.Expire(301, nil)
	}
	w.Add(300, 2, 1)
	w.Expire(301, nil)
	for _, x := range []*Window{big, small, c} {
		if !slices.Equal(walk(x), walk(w)) || x.Median2() != w.Median2() || x.Actors() != w.Actors() {
			t.Fatalf("copy diverged: %v vs %v", walk(x), walk(w))
		}
		for a := range uint32(5001) {
			if x.Recent(a) != w.Recent(a) {
				t.Fatalf("copy: Recent(%d) = %d, want %d", a, x.Recent(a), w.Recent(a))
			}
		}
	}
	w.Reset()
	if w.Actors() != 0 || w.Median2() != 0 || len(walk(w)) != 0 || w.Recent(1) != 0 || w.Blocks() != 10 {
		t.Fatalf("Reset left Actors=%d Median2=%d log=%v Blocks=%d", w.Actors(), w.Median2(), walk(w), w.Blocks())
	}
	w.Add(0, 3, 2) // heights start over
	if w.Weight(3) != MinWeight || w.Weight(1) != MaxWeight {
		t.Fatalf("after Reset: Weight(3) = %d, Weight(1) = %d", w.Weight(3), w.Weight(1))
	}
}

// TestDifferential compares the window with the model after every step of
// random blocks: an actor fires in bursts and goes quiet, so actors leave
// and come back; the window length changes, the window is rolled back to
// checkpoints and reset.
func TestDifferential(t *testing.T) {
	for _, blocks := range []uint64{1, 2, 3, 7, 32, 200} {
		t.Run(fmt.Sprint("F=", blocks), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(blocks, 0x5eed))
			c := newChecker(t, blocks, 40)
			steps := 0
			for steps < 6000 {
				c.endBlock(gap(rng, blocks))
				steps++
				for range rng.IntN(6) {
					// Actors 0..7 fire often, 8..39 rarely.
					a := rng.Uint32N(8)
					if rng.IntN(3) == 0 {
						a = 8 + rng.Uint32N(32)
					}
					n := uint64(1 + rng.IntN(3))
					switch rng.IntN(20) {
					case 0:
						n = 0
					case 1:
						n = rng.Uint64N(1 << 40)
					case 2:
						n = 100 + rng.Uint64N(100)
					}
					c.add(a, n)
					steps++
				}
				switch rng.IntN(200) {
				case 0:
					c.setBlocks(1 + rng.Uint64N(2*blocks))
				case 1:
					c.setBlocks(blocks)
				case 2, 3:
					c.snapshot()
				case 4, 5:
					c.restore()
				case 6:
					if rng.IntN(5) == 0 {
						c.reset()
					}
				case 7:
					c.expire() // again at the same height
				case 10, 11, 12:
					c.rollback(1 + rng.IntN(2*int(blocks)+2))
				case 8, 9:
					r := New(c.w.Blocks())
					c.w.Walk(r.Add)
					compare(t, r, c.m, c.actors, &c.walk, func() string { return "rebuild from Walk" })
				}
			}
		})
	}
}

// gap is the number of empty blocks skipped: mostly none, sometimes about
// a window.
func gap(rng *rand.Rand, blocks uint64) uint64 {
	switch rng.IntN(20) {
	case 0:
		return rng.Uint64N(blocks + 2)
	case 1:
		return rng.Uint64N(3)
	}
	return 0
}

// FuzzWindow runs the differential check on operations decoded from the
// input, three bytes each.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 2, 3, 5, 0, 0, 0, 1, 2, 5, 1, 0, 5, 0, 0})
	f.Add([]byte{7, 2, 0, 0, 1, 1, 1, 2, 1, 5, 0, 0, 0, 1, 4, 5, 0, 0, 5, 1, 0, 5, 0, 0})
	f.Add([]byte{4, 200, 255, 0, 3, 1, 8, 0, 0, 5, 0, 0, 1, 3, 3, 8, 1, 0, 5, 2, 0, 9, 0, 0, 0, 3, 3})
	f.Add([]byte{0, 1, 1, 0, 2, 2, 0, 3, 3, 0, 4, 4, 7, 3, 0, 5, 0, 0, 0, 1, 1, 5, 0, 0, 0, 4, 1, 5, 3, 0, 5, 0, 0})
	f.Add([]byte{5, 0, 0, 0, 1, 1, 5, 1, 0, 0, 2, 2, 5, 0, 0, 0, 1, 3, 9, 200, 1, 0, 3, 1, 5, 0, 0, 9, 255, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newChecker(t, 1+uint64(len(data)%5), 16)
		for ; len(data) >= 3; data = data[3:] {
			op, x, y := data[0], data[1], data[2]
			switch op % 10 {
			case 0, 1, 2, 3:
				c.add(uint32(x%12), uint64(y%8))
			case 4: // a handle up to 255, up to 2^38 fires
				c.add(uint32(x), uint64(y)<<(y%31))
			case 5, 6:
				c.endBlock(uint64(x % 4))
			case 7:
				c.setBlocks(1 + uint64(x%16))
			case 8:
				if x&1 == 0 {
					c.snapshot()
				} else {
					c.restore()
				}
			case 9:
				switch {
				case x == 0:
					c.reset()
				case x < 128:
					c.expire()
				default:
					c.rollback(1 + int(y%6))
				}
			}
		}
	})
}

// workload is a steady stream of blocks, precomputed for a cycle of blocks:
// fires per block, each from a pseudo-random actor among actors. With churn,
// 1/64 of the fires of one block in 16 come from a second set of actors,
// which fire less than once a window and so leave and come back. With
// perActor, each block adds the fires of an actor at once.
type workload struct {
	w      *Window
	blocks [][]fire // per block of the cycle; height unused
	height uint64
	pruned func(uint32)
	sink   uint64
}

func newWorkload(length uint64, actors, fires, cycle int, churn, perActor bool) *workload {
	rng := rand.New(rand.NewPCG(uint64(actors), uint64(fires)))
	l := &workload{w: New(length), pruned: func(uint32) {}}
	for b := range cycle {
		var adds []fire
		index := map[uint32]int{}
		for i := range fires {
			a := rng.Uint32N(uint32(actors))
			if churn && b%16 == 0 && i%64 == 0 {
				a = uint32(actors) + rng.Uint32N(uint32(actors))
			}
			if j, ok := index[a]; ok && perActor {
				adds[j].n++
				continue
			}
			index[a] = len(adds)
			adds = append(adds, fire{actor: a, n: 1})
		}
		l.blocks = append(l.blocks, adds)
	}
	return l
}

// block runs one end of block: Expire, Weight of every Add, the Adds.
func (l *workload) block() {
	l.height++
	w, adds := l.w, l.blocks[l.height%uint64(len(l.blocks))]
	w.Expire(l.height, l.pruned)
	for _, f := range adds {
		l.sink += uint64(w.Weight(f.actor))
	}
	for _, f := range adds {
		w.Add(l.height, f.actor, f.n)
	}
}

func TestZeroAllocs(t *testing.T) {
	for _, perActor := range []bool{false, true} {
		l := newWorkload(64, 200, 2000, 200, true, perActor)
		for range 1000 {
			l.block()
		}
		if got := testing.AllocsPerRun(200, l.block); got != 0 {
			t.Errorf("steady-state block (perActor %v): %v allocations, want 0", perActor, got)
		}
		checkpoint := l.w.Clone()
		if got := testing.AllocsPerRun(50, func() { l.block(); checkpoint.CopyFrom(l.w) }); got != 0 {
			t.Errorf("CopyFrom into a checkpoint: %v allocations, want 0", got)
		}
	}
}

// BenchmarkBlock is the end-of-block cost in a full window: Expire, then
// Weight and Add for every fire (Add n = 1) or for every firing actor (Add
// of its fires in the block). One op is one block.
func BenchmarkBlock(b *testing.B) {
	for _, bc := range []struct {
		actors, fires int
		length        uint64
		churn         bool
		perActor      bool
	}{
		{1000, 10_000, 1000, false, false},
		{1000, 10_000, 1000, false, true},
		{1000, 10_000, 1000, true, false},
		{10_000, 10_000, 1000, false, false},
		{10_000, 10_000, 1000, false, true},
	} {
		name := fmt.Sprintf("actors=%d/fires=%d/F=%d/add=", bc.actors, bc.fires, bc.length)
		if bc.perActor {
			name += "actor"
		} else {
			name += "fire"
		}
		if bc.churn {
			name += "/churn"
		}
		b.Run(name, func(b *testing.B) {
			l := newWorkload(bc.length, bc.actors, bc.fires, 64, bc.churn, bc.perActor)
			for range bc.length + 64 {
				l.block()
			}
			adds := 0
			for _, a := range l.blocks {
				adds += len(a)
			}
			b.ReportAllocs()
			for b.Loop() {
				l.block()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bc.fires), "ns/fire")
			b.ReportMetric(float64(adds)/float64(len(l.blocks)), "adds/block")
			b.ReportMetric(float64(l.w.Actors()), "actors")
		})
	}
}

// TestExpireEach: the entries ExpireEach reports are exactly those that
// leave the log, oldest first, and each is reported before its actor's
// pruning.
func TestExpireEach(t *testing.T) {
	type ent struct{ h, a, n uint64 }
	w := New(3)
	for h := uint64(1); h <= 12; h++ {
		for a := uint32(0); a < 4; a++ {
			if (h+uint64(a))%3 != 0 {
				w.Add(h, a, h*10+uint64(a))
			}
		}
	}
	var before []ent
	w.Walk(func(h uint64, a uint32, n uint64) { before = append(before, ent{h, uint64(a), n}) })
	var got []ent
	var events []string
	w.ExpireEach(13, func(h uint64, a uint32, n uint64) {
		got = append(got, ent{h, uint64(a), n})
		events = append(events, fmt.Sprintf("e%d", a))
	}, func(a uint32) { events = append(events, fmt.Sprintf("p%d", a)) })
	var after []ent
	w.Walk(func(h uint64, a uint32, n uint64) { after = append(after, ent{h, uint64(a), n}) })
	if !reflect.DeepEqual(append(slices.Clone(got), after...), before) {
		t.Fatalf("reported %v and kept %v, had %v", got, after, before)
	}
	for _, e := range got {
		if e.h >= 10 {
			t.Fatalf("reported %v, which is in the window [10, 12]", e)
		}
	}
	for k, ev := range events {
		if ev[0] == 'p' && !slices.Contains(events[:k], "e"+ev[1:]) {
			t.Fatalf("pruned %s before any of its entries was reported: %v", ev[1:], events)
		}
	}
}
