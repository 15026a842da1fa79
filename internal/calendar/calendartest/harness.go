// Package calendartest is test support for the calendar queue: a Harness
// that drives a Queue beside a deliberately simple model and checks every
// invariant of the tiers, and random Programs of inserts, removes and
// advances. The calendar's tests and the fuzz targets share it.
package calendartest

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/ring"
)

// Harness drives a Queue alongside a deliberately simple model: for every
// height, the seqs of its resident timers in insertion order.
type Harness struct {
	Q      *calendar.Queue
	L      calendar.Layout
	Model  map[uint64][]uint64 // height -> seqs, insertion order
	Pos    map[uint64]ring.Pos // seq -> position of a resident timer (its Val is its seq)
	Height map[uint64]uint64   // seq -> height of a resident timer
	Seq    uint64
	Log    []string // what was delivered, step by step: layout-independent
	Moves  int      // positions reported by the queue: timers it moved
}

func NewHarness(l calendar.Layout) (*Harness, error) {
	h := &Harness{L: l, Model: map[uint64][]uint64{}, Pos: map[uint64]ring.Pos{}, Height: map[uint64]uint64{}}
	q, err := calendar.New(l, func(val uint32, p ring.Pos) {
		seq := uint64(val) // the harness's val is its seq
		if _, ok := h.Pos[seq]; !ok {
			panic(fmt.Sprintf("moved reports seq %d, which is not resident", seq))
		}
		h.Pos[seq] = p
		h.Moves++
	})
	if err != nil {
		return nil, err
	}
	q.SetResident(func(val uint32, seq uint64) bool {
		_, ok := h.Pos[seq]
		return ok && uint64(val) == seq
	})
	h.Q = q
	return h, nil
}

func (h *Harness) Cur() uint64 { return h.Q.Height() }

func (h *Harness) Insert(height uint64) error {
	if height <= h.Cur() {
		return fmt.Errorf("harness: insert at %d <= current %d", height, h.Cur())
	}
	h.Seq++
	// The address to prefetch must be where the insert writes: else the
	// hint loads the wrong line. When there is none, a ring insert takes
	// a new chunk.
	addr := h.Q.InsertAddr(height)
	p := h.Q.Insert(ring.Entry{Height: height, Seq: h.Seq, Val: uint32(h.Seq)})
	tier := h.Q.TierOf(height)
	switch {
	case addr != nil && (tier == calendar.TierOverflow || addr != h.Q.C.Addr(p)):
		return fmt.Errorf("Insert(%d, %d): InsertAddr %p, but it wrote at position %d (%p), tier %d", height, h.Seq, addr, p, h.Q.C.Addr(p), tier)
	case addr == nil && tier == calendar.TierRing && p%ring.ChunkLen != 0:
		return fmt.Errorf("Insert(%d, %d): no InsertAddr, but it wrote at position %d of a chunk it had", height, h.Seq, p)
	}
	if tier != calendar.TierOverflow {
		if seq, val := h.Q.C.At(p); seq != h.Seq || uint64(val) != h.Seq {
			return fmt.Errorf("Insert(%d, %d): position %d holds seq %d val %d", height, h.Seq, p, seq, val)
		}
	}
	h.Model[height] = append(h.Model[height], h.Seq)
	h.Pos[h.Seq] = p
	h.Height[h.Seq] = height
	return nil
}

// resident returns the seqs of the resident timers in ascending order.
func (h *Harness) Resident() []uint64 {
	out := make([]uint64, 0, len(h.Pos))
	for s := range h.Pos {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Remove removes a resident timer: by Kill, which may leave a tombstone in
// the tree, when its seq is even (the harness never inserts a seq again),
// by Remove when it is odd, so that both paths run in every program.
func (h *Harness) Remove(seq uint64) {
	ht := h.Height[seq]
	h.Q.PrefetchAt(ht, h.Pos[seq]) // as Cancel does: a hint that changes nothing
	if seq%2 == 0 {
		h.Q.Kill(ht, seq, h.Pos[seq])
	} else {
		h.Q.Remove(ht, seq, h.Pos[seq])
	}
	delete(h.Pos, seq)
	delete(h.Height, seq)
	s := h.Model[ht]
	k := slices.Index(s, seq)
	s = slices.Delete(s, k, k+1)
	if len(s) == 0 {
		delete(h.Model, ht)
	} else {
		h.Model[ht] = s
	}
	h.Log = append(h.Log, fmt.Sprintf("remove %d", seq))
}

// minHeight is the model's earliest resident height.
func (h *Harness) MinHeight() (uint64, bool) {
	first, ok := uint64(math.MaxUint64), false
	for ht := range h.Model {
		if ht <= first {
			first, ok = ht, true
		}
	}
	return first, ok
}

// advance moves to height to (no resident timer may be due before it) and
// takes the bucket of to, comparing it with the model.
func (h *Harness) Advance(to uint64) error {
	if m, ok := h.MinHeight(); ok && m < to {
		return fmt.Errorf("harness: advance to %d would pass the timer at %d", to, m)
	}
	h.Q.Advance(to)
	if h.Cur() != to {
		return fmt.Errorf("Advance(%d): Height %d", to, h.Cur())
	}
	return h.Take()
}

func (h *Harness) Take() error {
	cur := h.Cur()
	it := h.Q.Take()
	var got []uint64
	for e, ok := it.Next(h.Q.C); ok; e, ok = it.Next(h.Q.C) {
		if e.Height != cur {
			return fmt.Errorf("at height %d: delivered seq %d of height %d", cur, e.Seq, e.Height)
		}
		if _, ok := h.Pos[e.Seq]; !ok || uint64(e.Val) != e.Seq {
			return fmt.Errorf("at height %d: delivered seq %d (val %d) that is not resident", cur, e.Seq, e.Val)
		}
		got = append(got, e.Seq)
	}
	want := h.Model[cur]
	if !slices.Equal(got, want) {
		return fmt.Errorf("at height %d: delivered %v, want %v", cur, Short(got), Short(want))
	}
	for _, s := range got {
		delete(h.Pos, s)
		delete(h.Height, s)
	}
	delete(h.Model, cur)
	if len(got) > 0 {
		h.Log = append(h.Log, fmt.Sprintf("%d: %v", cur, got))
	}
	return nil
}

// nextAfter checks NextAfter against the model: it is exactly the next due
// height, under every layout.
func (h *Harness) NextAfter() (uint64, bool, error) {
	nxt, ok := h.Q.NextAfter()
	m, mok := h.MinHeight()
	switch {
	case ok != mok:
		return 0, false, fmt.Errorf("at %d: NextAfter ok=%v, model has timers: %v", h.Cur(), ok, mok)
	case !ok:
		return 0, false, nil
	case nxt <= h.Cur():
		return 0, false, fmt.Errorf("at %d: NextAfter = %d, not after the current height", h.Cur(), nxt)
	case nxt != m:
		return 0, false, fmt.Errorf("at %d: NextAfter = %d, next timer at %d (tier %d)", h.Cur(), nxt, m, h.Q.TierOf(m))
	}
	return nxt, true, nil
}

// jump goes to the next due height the way a node skips empty blocks: to
// NextAfter()-1, then one block, again until something is delivered. The
// result does not depend on the layout.
func (h *Harness) Jump() error {
	for steps := 0; ; steps++ {
		nxt, ok, err := h.NextAfter()
		if err != nil || !ok {
			return err
		}
		if steps > 1 {
			return fmt.Errorf("at %d: %d NextAfter rounds without reaching a timer", h.Cur(), steps)
		}
		if nxt-1 > h.Cur() {
			if err := h.Advance(nxt - 1); err != nil {
				return err
			}
		}
		before := len(h.Model)
		if err := h.Advance(nxt); err != nil {
			return err
		}
		if len(h.Model) < before {
			return nil
		}
	}
}

// check verifies the structural invariants: every resident timer is in
// exactly one tier, the one TierOf names; the counts agree; per height the
// seqs are in insertion order across the whole walk (ring, staging, epoch
// buckets, overflow stage, tree); and the queue's own invariants (Verify):
// every timer in a bucket is at its last reported position, in the bucket
// of its height or epoch, and where Remove will look for it.
func (h *Harness) Check() error {
	if err := h.Q.Verify(func(val uint32) (ring.Pos, bool) { p, ok := h.Pos[uint64(val)]; return p, ok }); err != nil {
		return err
	}
	seen := make(map[uint64]bool, len(h.Pos))
	lastSeq := map[uint64]uint64{}
	var perTier [4]int
	var err error
	h.Q.Walk(func(e ring.Entry, t calendar.Tier) {
		if err != nil {
			return
		}
		p, resident := h.Pos[e.Seq]
		switch {
		case seen[e.Seq]:
			err = fmt.Errorf("seq %d (height %d) walked twice", e.Seq, e.Height)
		case !resident || uint64(e.Val) != e.Seq || h.Height[e.Seq] != e.Height:
			err = fmt.Errorf("walked (height %d seq %d val %d) is not a resident timer", e.Height, e.Seq, e.Val)
		case t != h.Q.TierOf(e.Height):
			err = fmt.Errorf("height %d seq %d in tier %d, TierOf says %d (current %d)", e.Height, e.Seq, t, h.Q.TierOf(e.Height), h.Cur())
		case t != calendar.TierOverflow && !h.holds(p, e):
			seq, val := h.Q.C.At(p)
			err = fmt.Errorf("height %d seq %d: its last reported position %d holds seq %d val %d", e.Height, e.Seq, p, seq, val)
		case e.Height <= h.Cur():
			err = fmt.Errorf("resident timer at %d, not after the current height %d", e.Height, h.Cur())
		case lastSeq[e.Height] >= e.Seq:
			err = fmt.Errorf("height %d: seq %d after seq %d", e.Height, e.Seq, lastSeq[e.Height])
		}
		seen[e.Seq] = true
		lastSeq[e.Height] = e.Seq
		perTier[t]++
	})
	if err != nil {
		return err
	}
	if len(seen) != len(h.Pos) {
		return fmt.Errorf("walk found %d timers, %d resident", len(seen), len(h.Pos))
	}
	r, e, o := h.Q.TierLens()
	if r != perTier[calendar.TierRing] || e != perTier[calendar.TierEpoch] || o != perTier[calendar.TierOverflow] {
		return fmt.Errorf("TierLens (%d, %d, %d), walk (%d, %d, %d)", r, e, o, perTier[1], perTier[2], perTier[3])
	}
	if h.Q.Len() != len(h.Pos) {
		return fmt.Errorf("Len %d, resident %d", h.Q.Len(), len(h.Pos))
	}
	return nil
}

func Short(s []uint64) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... (%d)", s[:12], len(s))
}

func LayoutName(l calendar.Layout) string {
	return fmt.Sprintf("R%d_L%d_C%d", l.RingSize, l.EpochLength, l.EpochCount)
}

// Horizon is the number of heights from the current epoch's start that the
// ring and epoch tiers cover.
func Horizon(l calendar.Layout) uint64 {
	return (l.RingSize/l.EpochLength + l.EpochCount) * l.EpochLength
}

func DiffLogs(a, b []string) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("entry %d:\n  %s\n  %s\n(context: %s)", i, x, y, strings.Join(a[max(0, i-3):i], " | "))
		}
	}
	return ""
}

// holds reports whether position p holds e's seq and val (a chunk stores
// no height: its bucket's is implied, which Verify checks).
func (h *Harness) holds(p ring.Pos, e ring.Entry) bool {
	seq, val := h.Q.C.At(p)
	return seq == e.Seq && val == e.Val
}
