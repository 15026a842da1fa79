package calendartest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/timerlane/timerlane/internal/calendar"
)

// Program is a random interleaving of inserts (near, within the ring and
// epoch horizons, beyond them, far, at the top of the range and at heights
// already in use), removes of random residents, single steps, jumps through
// NextAfter and big direct advances, checked against the model at every step
// (NextAfter every other step).
type Program struct {
	Seed  uint64
	Ops   int
	Scale uint64 // heights are drawn relative to this (a layout's Horizon)
	Base  uint64 // the queue starts here
	Limit uint64 // the current height never goes beyond this
	Bulk  int    // inserts made first, in one bulk load (Queue.Bulk, Flush)
}

func (p Program) Run(l calendar.Layout) ([]string, error) {
	return p.RunWith(l, rand.New(rand.NewPCG(p.Seed, 0x7131)))
}

// runWith runs the Program with its choices drawn from rng.
func (p Program) RunWith(l calendar.Layout, rng *rand.Rand) ([]string, error) {
	h, err := NewHarness(l)
	if err != nil {
		return nil, err
	}
	if p.Base > 0 {
		if err := h.Advance(p.Base); err != nil {
			return nil, err
		}
	}
	add := func(a, b uint64) uint64 {
		if a > math.MaxUint64-b {
			return math.MaxUint64
		}
		return a + b
	}
	height := func(cur uint64) uint64 {
		switch c := rng.IntN(100); {
		case c < 25:
			return add(cur, 1+rng.Uint64N(4))
		case c < 45:
			return add(cur, 1+rng.Uint64N(p.Scale/2+1))
		case c < 65:
			return add(cur, 1+rng.Uint64N(p.Scale))
		case c < 80:
			return add(cur, 1+rng.Uint64N(3*p.Scale))
		case c < 88:
			if res := h.Resident(); len(res) > 0 {
				return h.Height[res[rng.IntN(len(res))]]
			}
			return add(cur, 1)
		case c < 94:
			return add(cur, 1+rng.Uint64N(1<<40))
		default:
			return math.MaxUint64 - rng.Uint64N(8)
		}
	}
	if p.Bulk > 0 {
		h.Q.Bulk()
		for range p.Bulk {
			if ht := height(h.Cur()); ht > h.Cur() {
				if err := h.Insert(ht); err != nil {
					return h.Log, fmt.Errorf("bulk: %v", err)
				}
			}
		}
		h.Q.Flush()
		if err := h.Check(); err != nil {
			return h.Log, fmt.Errorf("after the bulk load: %v", err)
		}
	}
	for step := 0; step < p.Ops; step++ {
		cur := h.Cur()
		if cur == math.MaxUint64 {
			break
		}
		var err error
		switch r := rng.IntN(100); {
		case r < 45:
			if ht := height(cur); ht > cur {
				err = h.Insert(ht)
			}
		case r < 55:
			if res := h.Resident(); len(res) > 0 {
				h.Remove(res[rng.IntN(len(res))])
			}
		case r < 75:
			if cur < p.Limit {
				err = h.Advance(cur + 1)
			}
		case r < 90:
			if m, ok := h.MinHeight(); ok && m <= p.Limit {
				err = h.Jump()
			} else if cur < p.Limit {
				err = h.Advance(cur + 1)
			}
		default:
			to := min(add(cur, 1+rng.Uint64N(3*p.Scale)), p.Limit)
			if m, ok := h.MinHeight(); ok {
				to = min(to, m)
			}
			if to > cur {
				err = h.Advance(to)
			}
		}
		if err == nil {
			err = h.Check()
		}
		if err == nil && step%2 == 0 {
			// Every other step, so that some changes to the queue
			// accumulate between two (its bounds of the lowest heights).
			_, _, err = h.NextAfter()
		}
		if err != nil {
			return h.Log, fmt.Errorf("step %d: %v", step, err)
		}
	}
	return h.Log, nil
}
