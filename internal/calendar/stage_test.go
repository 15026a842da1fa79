package calendar_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/calendar/calendartest"
	"github.com/timerlane/timerlane/ring"
)

// stageLayouts are the layouts the staging tests run under.
var stageLayouts = []calendar.Layout{
	{RingSize: 16, EpochLength: 4, EpochCount: 3},
	{RingSize: 8, EpochLength: 3, EpochCount: 2},   // L does not divide R
	{RingSize: 64, EpochLength: 64, EpochCount: 2}, // k = 0: L = R
	{RingSize: 32, EpochLength: 8, EpochCount: 1},  // C = 1: the overflow stage feeds the next staged epoch
	{RingSize: 2, EpochLength: 1, EpochCount: 1},   // L = 1: every block begins an epoch
	{RingSize: 8, EpochLength: 1, EpochCount: 3},
	{RingSize: 256, EpochLength: 64, EpochCount: 4},
}

// stageEpochs returns the first heights of the staged epoch (w+1) and of
// the overflow stage's epoch (w+k+C+1) of the window of height cur, far
// from the top of the range.
func stageEpochs(l calendar.Layout, cur uint64) (staged, ostaged uint64) {
	w, k := cur/l.EpochLength, l.RingSize/l.EpochLength-1
	return (w + 1) * l.EpochLength, (w + k + l.EpochCount + 1) * l.EpochLength
}

// stageWindow is the first window whose staged epoch lay beyond the ring's
// range in window 0, so that the timers inserted for it there are older
// than any the ring takes for its heights, and staged in that window: k,
// or 1 when k = 0.
func stageWindow(l calendar.Layout) uint64 { return max(l.RingSize/l.EpochLength-1, 1) }

func newHarness(t *testing.T, l calendar.Layout) *calendartest.Harness {
	t.Helper()
	h, err := calendartest.NewHarness(l)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// step advances one block and checks every invariant.
func step(t *testing.T, h *calendartest.Harness) {
	t.Helper()
	must(t, h.Advance(h.Cur()+1))
	must(t, h.Check())
}

// drain delivers everything through NextAfter jumps, checking each step.
func drain(t *testing.T, h *calendartest.Harness) {
	t.Helper()
	for len(h.Model) > 0 {
		must(t, h.Jump())
		must(t, h.Check())
	}
	if h.Q.Len() != 0 || h.Q.C.Live() != 0 {
		t.Fatalf("%d timers and %d chunks left", h.Q.Len(), h.Q.C.Live())
	}
}

func stageLens(h *calendartest.Harness) [4]int {
	a, b, c, d := h.Q.StageLens()
	return [4]int{a, b, c, d}
}

// TestStagesSpreadPromotion: with every block run, no Advance moves more
// than its share, ceil(epoch size / blocks of the window), for each of the
// two epochs being staged, not even the one that begins an epoch, which
// used to move whole epochs. One height holding a whole epoch's worth of
// timers makes no difference: the share is counted in timers.
func TestStagesSpreadPromotion(t *testing.T) {
	for _, l := range stageLayouts {
		L := l.EpochLength
		if L < 2 {
			continue // an epoch is one block: nothing to spread it over
		}
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			rng := rand.New(rand.NewPCG(1, L))
			n := int(20 * L)
			s0, o0 := stageEpochs(l, 0)
			s1, o1 := stageEpochs(l, L)
			for _, lo := range []uint64{s0, s1, o0, o1} {
				for range n {
					must(t, h.Insert(lo+rng.Uint64N(L)))
				}
			}
			for range n {
				must(t, h.Insert(s1+L-1)) // an epoch's worth at one height
			}
			inEpoch := func(lo uint64) int {
				c := 0
				for _, ht := range h.Height {
					if ht >= lo && ht < lo+L {
						c++
					}
				}
				return c
			}
			var bound int
			for h.Cur() < 2*L {
				if x := h.Cur() + 1; x == 1 || x%L == 0 { // the window's first Advance
					s, o := stageEpochs(l, x)
					left := int(L - x%L)
					bound = (inEpoch(s)+left-1)/left + (inEpoch(o)+left-1)/left
				}
				before := h.Moves
				step(t, h)
				if moved := h.Moves - before; moved > bound {
					t.Fatalf("Advance to %d moved %d timers, share %d", h.Cur(), moved, bound)
				}
			}
			drain(t, h)
		})
	}
}

// TestInsertIntoStagedEpoch inserts at two heights of an epoch before the
// ring's range reaches it (into its epoch bucket), while it is being staged
// and once all of it is staged. Those go to the ring when the ring holds
// the staged epoch (k >= 1); when it does not (k = 0), behind the timers
// not staged yet, then straight into staging. Per height they are
// delivered in insertion order (the harness compares with its model).
func TestInsertIntoStagedEpoch(t *testing.T) {
	for _, l := range stageLayouts {
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			L, W := l.EpochLength, stageWindow(l)
			behind := l.RingSize == L   // k = 0: the staged epoch lies beyond the ring
			s, _ := stageEpochs(l, W*L) // the staged epoch of window W
			heights := []uint64{s + L/2, s + L - 1}
			insert := func(n int) {
				for range n {
					for _, ht := range heights {
						must(t, h.Insert(ht))
					}
				}
				must(t, h.Check())
			}
			insert(int(3 * L))
			if got := stageLens(h); got[0] != 0 || got[1] != 0 {
				t.Fatalf("in window 0: StageLens %v, want nothing staged", got)
			}
			for h.Cur() < W*L { // to window W: its first share
				step(t, h)
			}
			got := stageLens(h)
			if L > 1 {
				if got[0] == 0 || got[1] == 0 {
					t.Fatalf("at the start of window %d: StageLens %v, want a partial distribution", W, got)
				}
				insert(2)
				if now := stageLens(h); now[0] != got[0] || now[1] != got[1]+4*btoi(behind) {
					t.Fatalf("inserts during the distribution: StageLens %v -> %v, want %d more unstaged", got, now, 4*btoi(behind))
				}
				for h.Cur() < (W+1)*L-1 {
					step(t, h)
				}
				got = stageLens(h)
			}
			if got[1] != 0 || got[0] != 6*int(L)+4*btoi(L > 1 && behind) {
				t.Fatalf("at the window's last block: StageLens %v, want everything staged", got)
			}
			insert(2)
			if now := stageLens(h); now[1] != 0 || now[0] != got[0]+4*btoi(behind) {
				t.Fatalf("inserts after the distribution: StageLens %v -> %v, want %d more staged", got, now, 4*btoi(behind))
			}
			drain(t, h)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRemoveStagedAndUnstaged removes, mid-distribution, timers from
// staging and from the rest of the epoch bucket, one by one and in bulk
// (so that both compact: the epoch bucket after its front was taken).
func TestRemoveStagedAndUnstaged(t *testing.T) {
	for _, l := range stageLayouts {
		L := l.EpochLength
		if L < 3 {
			continue // no block ends mid-distribution
		}
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			W := stageWindow(l)
			s, _ := stageEpochs(l, W*L) // the staged epoch of window W
			target := s + 1
			// The first share, ceil(n/L), must be a few chunks.
			n := int(L)*4*ring.ChunkLen + 1
			var seqs []uint64
			for range n {
				must(t, h.Insert(target))
				seqs = append(seqs, h.Seq)
			}
			for h.Cur() < W*L { // to window W: its first share
				step(t, h)
			}
			got := stageLens(h)
			share := got[0]
			if share < 4*ring.ChunkLen || got[1] != n-share {
				t.Fatalf("StageLens %v after one block of %d timers", got, n)
			}
			// The first seqs are staged, the last are not.
			h.Remove(seqs[1])
			must(t, h.Check())
			h.Remove(seqs[n-1]) // the last written: taken back
			must(t, h.Check())
			h.Remove(seqs[n-3])
			must(t, h.Check())
			if now := stageLens(h); now[0] != share-1 || now[1] != n-share-2 {
				t.Fatalf("StageLens %v, want %d staged and %d unstaged", now, share-1, n-share-2)
			}
			// Bulk: most of the staged ones and a run of the unstaged ones
			// right after the staged front, compacting both buckets.
			for _, sq := range seqs[2 : share-3] {
				h.Remove(sq)
			}
			must(t, h.Check())
			for _, sq := range seqs[share : share+3*ring.ChunkLen] {
				h.Remove(sq)
			}
			must(t, h.Check())
			for h.Cur() < (W+1)*L {
				step(t, h)
			}
			drain(t, h)
		})
	}
}

// TestJumpMidStaging: Advance jumps over several epochs while both stages
// are part-filled, as SkipEmpty does: first just short of the staged
// epoch's timers, then (with the staged epoch emptied) past the overflow
// stage's epoch, which then goes to the ring, not to its epoch bucket.
func TestJumpMidStaging(t *testing.T) {
	for _, l := range stageLayouts {
		L := l.EpochLength
		for _, far := range []bool{false, true} {
			t.Run(calendartest.LayoutName(l), func(t *testing.T) {
				h := newHarness(t, l)
				W := stageWindow(l)
				s, o := stageEpochs(l, W*L) // window W's
				var staged []uint64
				for range 8 * L {
					must(t, h.Insert(s+L-1))
					staged = append(staged, h.Seq)
					must(t, h.Insert(o+L-1))
					must(t, h.Insert(o+L-1+3*L)) // later epochs of the tree
				}
				for h.Cur() < W*L {
					step(t, h)
				}
				if got := stageLens(h); L > 1 && (got[0] == 0 || got[1] == 0 || got[2] == 0 || got[3] == 0) {
					t.Fatalf("StageLens %v: the stages are not part-filled", got)
				}
				to := s + L - 2
				if far {
					for _, sq := range staged {
						h.Remove(sq)
					}
					to = o + L - 2
				}
				must(t, h.Advance(to))
				must(t, h.Check())
				drain(t, h)
			})
		}
	}
}

// TestStagesNearTop steps through the last heights below 2^64 with timers
// at every height, so that the staged and overflow-stage epochs reach the
// last epoch, which L = 3 leaves partial, and saturate.
func TestStagesNearTop(t *testing.T) {
	for _, l := range stageLayouts {
		if l.RingSize > 64 {
			continue // a step is O(R) in Check
		}
		span := calendartest.Horizon(l) + 3*l.EpochLength
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			must(t, h.Advance(math.MaxUint64-span))
			for x := h.Cur() + 1; ; x++ {
				for range 1 + x%3 {
					must(t, h.Insert(x))
				}
				if x == math.MaxUint64 {
					break
				}
			}
			for h.Cur() < math.MaxUint64 {
				step(t, h)
				if h.Cur()%5 == 0 && h.Cur() < math.MaxUint64-2 {
					must(t, h.Insert(h.Cur()+2)) // into whichever place height cur+2 is
				}
			}
			if len(h.Model) != 0 || h.Q.Len() != 0 {
				t.Fatalf("%d heights undelivered at 2^64-1", len(h.Model))
			}
		})
	}
}

// TestInsertIntoOverflowStage: once the overflow stage has taken a prefix
// of its epoch from the tree, an insert below the last height it took goes
// to the stage, at that height or above to the tree, and per height the
// order is insertion order.
func TestInsertIntoOverflowStage(t *testing.T) {
	for _, l := range stageLayouts {
		L := l.EpochLength
		if L < 3 {
			continue
		}
		t.Run(calendartest.LayoutName(l), func(t *testing.T) {
			h := newHarness(t, l)
			_, o := stageEpochs(l, 0)
			for x := o; x < o+L; x++ {
				for range 4 {
					must(t, h.Insert(x))
				}
			}
			step(t, h) // takes ceil(4L/(L-1)) = 5 or more: heights o and o+1 at least
			got := stageLens(h)
			if got[2] < 5 || got[2] >= 4*int(L) {
				t.Fatalf("StageLens %v: want a part of the epoch staged", got)
			}
			must(t, h.Insert(o)) // below the bound
			if now := stageLens(h); now[2] != got[2]+1 || now[3] != got[3] {
				t.Fatalf("insert below the bound: StageLens %v -> %v", got, now)
			}
			must(t, h.Insert(o+L-1)) // above: the tree
			if now := stageLens(h); now[2] != got[2]+1 || now[3] != got[3]+1 {
				t.Fatalf("insert above the bound: StageLens %v -> %v", got, now)
			}
			must(t, h.Check())
			for h.Cur() < 2*L {
				step(t, h)
				must(t, h.Insert(o+h.Cur()%L))
			}
			drain(t, h)
		})
	}
}

// TestSeqReusedBelowBound: the queue asks only that a new timer's seq
// exceed those of the resident timers of its height, so after the staged
// timer with the highest seq is removed, a lower seq may come. It must
// go behind what is not staged yet and Remove must still find it, in both
// stages.
func TestSeqReusedBelowBound(t *testing.T) {
	// In window 4 (16..19): staged epoch 5 (20..23), beyond the ring's range
	// in window 0; overflow stage epoch 11 (44..47).
	l := calendar.Layout{RingSize: 16, EpochLength: 4, EpochCount: 3}
	pos := map[uint32]ring.Pos{}
	q, err := calendar.New(l, func(val uint32, p ring.Pos) { pos[val] = p })
	if err != nil {
		t.Fatal(err)
	}
	type timer struct{ h, seq uint64 }
	val := func(x timer) uint32 { return uint32(x.h<<16 | x.seq) } // seqs repeat across heights
	insert := func(x timer) {
		pos[val(x)] = q.Insert(ring.Entry{Height: x.h, Seq: x.seq, Val: val(x)})
	}
	remove := func(x timer) {
		q.Remove(x.h, x.seq, pos[val(x)])
		delete(pos, val(x))
	}
	verify := func() {
		t.Helper()
		if err := q.Verify(func(v uint32) (ring.Pos, bool) { p, ok := pos[v]; return p, ok }); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []timer{{21, 10}, {21, 20}, {22, 30}, {22, 40}, {23, 50}, {23, 60}, {45, 100}, {46, 50}, {47, 1}} {
		insert(x)
	}
	q.Advance(16) // 4 blocks in the window: stages (21, 10), (21, 20) and (45, 100)
	if a, b, c, d := q.StageLens(); a != 2 || b != 4 || c != 1 || d != 2 {
		t.Fatalf("StageLens %d %d %d %d", a, b, c, d)
	}
	verify()
	remove(timer{21, 20}) // staged, the highest seq of 21
	insert(timer{21, 15}) // above 10, the only resident of 21: valid
	verify()
	remove(timer{21, 15})
	verify()
	insert(timer{21, 16})
	remove(timer{45, 100}) // in the overflow stage
	insert(timer{45, 7})
	verify()
	remove(timer{45, 7})
	insert(timer{45, 8})
	verify()
	var got []timer
	for q.Len() > 0 {
		nxt, ok := q.NextAfter()
		if !ok {
			t.Fatal("NextAfter found nothing")
		}
		q.Advance(nxt)
		it := q.Take()
		for e, ok := it.Next(q.C); ok; e, ok = it.Next(q.C) {
			got = append(got, timer{e.Height, e.Seq})
			delete(pos, e.Val)
		}
		verify()
	}
	want := []timer{{21, 10}, {21, 16}, {22, 30}, {22, 40}, {23, 50}, {23, 60}, {45, 8}, {46, 50}, {47, 1}}
	if len(got) != len(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("delivered %v, want %v", got, want)
		}
	}
}

// TestAdvanceAllocs: in steady state, Advance allocates nothing, across
// epoch boundaries too, with both stages busy: timers are re-inserted into
// the ring and the epoch tier as they fall due, and a tree of far timers
// feeds the overflow stage (inserting into the tree may allocate nodes, so
// nothing is inserted there while measuring).
func TestAdvanceAllocs(t *testing.T) {
	l := calendar.Layout{RingSize: 64, EpochLength: 16, EpochCount: 4} // horizon 128 blocks
	const n = 20_000
	pos := make([]ring.Pos, 2*n)
	q, err := calendar.New(l, func(val uint32, p ring.Pos) { pos[val] = p })
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	insert := func(h uint64) {
		seq++
		v := uint32(seq % uint64(len(pos)))
		pos[v] = q.Insert(ring.Entry{Height: h, Seq: seq, Val: v})
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for range n {
		insert(1 + rng.Uint64N(120))
		insert(200 + rng.Uint64N(4000)) // the tree, for 250 epochs
	}
	block := func() {
		q.Advance(q.Height() + 1)
		it := q.Take()
		for e, ok := it.Next(q.C); ok; e, ok = it.Next(q.C) {
			if e.Height < 190 { // keep the first ones circulating
				insert(q.Height() + 1 + e.Seq%119)
			}
		}
	}
	for range 3 * l.EpochLength { // grow the arena to the steady state
		block()
	}
	if _, _, o := q.TierLens(); o == 0 {
		t.Fatal("the tree is empty")
	}
	if a := testing.AllocsPerRun(int(5*l.EpochLength), block); a != 0 {
		t.Fatalf("%v allocations per block", a)
	}
	if _, _, c, _ := q.StageLens(); c == 0 {
		t.Fatal("the overflow stage was not used")
	}
}
