package fuzz

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/ring"
)

// This file is a copy of internal/calendar/harness_test.go for
// FuzzTierMigration: keep the two in step.

// harness drives a Queue alongside a deliberately simple model: for every
// height, the seqs of its resident timers in insertion order.
type harness struct {
	q      *calendar.Queue
	l      calendar.Layout
	model  map[uint64][]uint64 // height -> seqs, insertion order
	pos    map[uint64]ring.Pos // seq -> position of a resident timer (its Val is its seq)
	height map[uint64]uint64   // seq -> height of a resident timer
	seq    uint64
	log    []string // what was delivered, step by step: layout-independent
}

func newHarness(l calendar.Layout) (*harness, error) {
	h := &harness{l: l, model: map[uint64][]uint64{}, pos: map[uint64]ring.Pos{}, height: map[uint64]uint64{}}
	q, err := calendar.New(l, func(val uint64, p ring.Pos) {
		if _, ok := h.pos[val]; !ok {
			panic(fmt.Sprintf("moved reports seq %d, which is not resident", val))
		}
		h.pos[val] = p
	})
	if err != nil {
		return nil, err
	}
	h.q = q
	return h, nil
}

func (h *harness) cur() uint64 { return h.q.Height() }

func (h *harness) insert(height uint64) error {
	if height <= h.cur() {
		return fmt.Errorf("harness: insert at %d <= current %d", height, h.cur())
	}
	h.seq++
	p := h.q.Insert(ring.Entry{Height: height, Seq: h.seq, Val: h.seq})
	if h.q.TierOf(height) != calendar.TierOverflow {
		if e := h.q.C.At(p); e.Height != height || e.Seq != h.seq {
			return fmt.Errorf("Insert(%d, %d): position %d holds (%d, %d)", height, h.seq, p, e.Height, e.Seq)
		}
	}
	h.model[height] = append(h.model[height], h.seq)
	h.pos[h.seq] = p
	h.height[h.seq] = height
	return nil
}

// resident returns the seqs of the resident timers in ascending order.
func (h *harness) resident() []uint64 {
	out := make([]uint64, 0, len(h.pos))
	for s := range h.pos {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (h *harness) remove(seq uint64) {
	ht := h.height[seq]
	h.q.Remove(ht, seq, h.pos[seq])
	delete(h.pos, seq)
	delete(h.height, seq)
	s := h.model[ht]
	k := slices.Index(s, seq)
	s = slices.Delete(s, k, k+1)
	if len(s) == 0 {
		delete(h.model, ht)
	} else {
		h.model[ht] = s
	}
	h.log = append(h.log, fmt.Sprintf("remove %d", seq))
}

// minHeight is the model's earliest resident height.
func (h *harness) minHeight() (uint64, bool) {
	first, ok := uint64(math.MaxUint64), false
	for ht := range h.model {
		if ht <= first {
			first, ok = ht, true
		}
	}
	return first, ok
}

// advance moves to height to (no resident timer may be due before it) and
// takes the bucket of to, comparing it with the model.
func (h *harness) advance(to uint64) error {
	if m, ok := h.minHeight(); ok && m < to {
		return fmt.Errorf("harness: advance to %d would pass the timer at %d", to, m)
	}
	h.q.Advance(to)
	if h.cur() != to {
		return fmt.Errorf("Advance(%d): Height %d", to, h.cur())
	}
	return h.take()
}

func (h *harness) take() error {
	cur := h.cur()
	it := h.q.Take()
	var got []uint64
	for e, ok := it.Next(h.q.C); ok; e, ok = it.Next(h.q.C) {
		if e.Height != cur {
			return fmt.Errorf("at height %d: delivered seq %d of height %d", cur, e.Seq, e.Height)
		}
		if _, ok := h.pos[e.Seq]; !ok || e.Val != e.Seq {
			return fmt.Errorf("at height %d: delivered seq %d (val %d) that is not resident", cur, e.Seq, e.Val)
		}
		got = append(got, e.Seq)
	}
	want := h.model[cur]
	if !slices.Equal(got, want) {
		return fmt.Errorf("at height %d: delivered %v, want %v", cur, short(got), short(want))
	}
	for _, s := range got {
		delete(h.pos, s)
		delete(h.height, s)
	}
	delete(h.model, cur)
	if len(got) > 0 {
		h.log = append(h.log, fmt.Sprintf("%d: %v", cur, got))
	}
	return nil
}

// nextAfter checks NextAfter against the model: it is exactly the next due
// height, under every layout.
func (h *harness) nextAfter() (uint64, bool, error) {
	nxt, ok := h.q.NextAfter()
	m, mok := h.minHeight()
	switch {
	case ok != mok:
		return 0, false, fmt.Errorf("at %d: NextAfter ok=%v, model has timers: %v", h.cur(), ok, mok)
	case !ok:
		return 0, false, nil
	case nxt <= h.cur():
		return 0, false, fmt.Errorf("at %d: NextAfter = %d, not after the current height", h.cur(), nxt)
	case nxt != m:
		return 0, false, fmt.Errorf("at %d: NextAfter = %d, next timer at %d (tier %d)", h.cur(), nxt, m, h.q.TierOf(m))
	}
	return nxt, true, nil
}

// jump goes to the next due height the way a node skips empty blocks: to
// NextAfter()-1, then one block, again until something is delivered. The
// result does not depend on the layout.
func (h *harness) jump() error {
	for steps := 0; ; steps++ {
		nxt, ok, err := h.nextAfter()
		if err != nil || !ok {
			return err
		}
		if steps > 1 {
			return fmt.Errorf("at %d: %d NextAfter rounds without reaching a timer", h.cur(), steps)
		}
		if nxt-1 > h.cur() {
			if err := h.advance(nxt - 1); err != nil {
				return err
			}
		}
		before := len(h.model)
		if err := h.advance(nxt); err != nil {
			return err
		}
		if len(h.model) < before {
			return nil
		}
	}
}

// check verifies the structural invariants: every resident timer is in
// exactly one tier, the one TierOf names; the counts agree; per height the
// seqs are in insertion order across the whole walk.
func (h *harness) check() error {
	seen := make(map[uint64]bool, len(h.pos))
	lastSeq := map[uint64]uint64{}
	var perTier [4]int
	var err error
	h.q.Walk(func(e ring.Entry, t calendar.Tier) {
		if err != nil {
			return
		}
		p, resident := h.pos[e.Seq]
		switch {
		case seen[e.Seq]:
			err = fmt.Errorf("seq %d (height %d) walked twice", e.Seq, e.Height)
		case !resident || e.Val != e.Seq || h.height[e.Seq] != e.Height:
			err = fmt.Errorf("walked (height %d seq %d val %d) is not a resident timer", e.Height, e.Seq, e.Val)
		case t != h.q.TierOf(e.Height):
			err = fmt.Errorf("height %d seq %d in tier %d, TierOf says %d (current %d)", e.Height, e.Seq, t, h.q.TierOf(e.Height), h.cur())
		case t != calendar.TierOverflow && *h.q.C.At(p) != e:
			err = fmt.Errorf("height %d seq %d: its last reported position %d holds %+v", e.Height, e.Seq, p, *h.q.C.At(p))
		case e.Height <= h.cur():
			err = fmt.Errorf("resident timer at %d, not after the current height %d", e.Height, h.cur())
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
	if len(seen) != len(h.pos) {
		return fmt.Errorf("walk found %d timers, %d resident", len(seen), len(h.pos))
	}
	r, e, o := h.q.TierLens()
	if r != perTier[calendar.TierRing] || e != perTier[calendar.TierEpoch] || o != perTier[calendar.TierOverflow] {
		return fmt.Errorf("TierLens (%d, %d, %d), walk (%d, %d, %d)", r, e, o, perTier[1], perTier[2], perTier[3])
	}
	if h.q.Len() != len(h.pos) {
		return fmt.Errorf("Len %d, resident %d", h.q.Len(), len(h.pos))
	}
	return nil
}

func short(s []uint64) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... (%d)", s[:12], len(s))
}

func layoutName(l calendar.Layout) string {
	return fmt.Sprintf("R%d_L%d_C%d", l.RingSize, l.EpochLength, l.EpochCount)
}

// horizon is the number of heights from the current epoch's start that the
// ring and epoch tiers cover.
func horizon(l calendar.Layout) uint64 {
	return (l.RingSize/l.EpochLength + l.EpochCount) * l.EpochLength
}

func diffLogs(a, b []string) string {
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
