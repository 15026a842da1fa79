package fuzz

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/timerlane/timerlane/internal/calendar"
)

// This file is a copy of internal/calendar/program_test.go for
// FuzzTierMigration: keep the two in step.

// program is a random interleaving of inserts (near, within the ring and
// epoch horizons, beyond them, far, at the top of the range and at heights
// already in use), removes of random residents, single steps, jumps through
// NextAfter and big direct advances, checked against the model at every step.
type program struct {
	seed  uint64
	ops   int
	scale uint64 // heights are drawn relative to this (a layout's horizon)
	base  uint64 // the queue starts here
	limit uint64 // the current height never goes beyond this
}

func (p program) run(l calendar.Layout) ([]string, error) {
	return p.runWith(l, rand.New(rand.NewPCG(p.seed, 0x7131)))
}

// runWith runs the program with its choices drawn from rng.
func (p program) runWith(l calendar.Layout, rng *rand.Rand) ([]string, error) {
	h, err := newHarness(l)
	if err != nil {
		return nil, err
	}
	if p.base > 0 {
		if err := h.advance(p.base); err != nil {
			return nil, err
		}
	}
	add := func(a, b uint64) uint64 {
		if a > math.MaxUint64-b {
			return math.MaxUint64
		}
		return a + b
	}
	for step := 0; step < p.ops; step++ {
		cur := h.cur()
		if cur == math.MaxUint64 {
			break
		}
		var err error
		switch r := rng.IntN(100); {
		case r < 45:
			var ht uint64
			switch c := rng.IntN(100); {
			case c < 25:
				ht = add(cur, 1+rng.Uint64N(4))
			case c < 45:
				ht = add(cur, 1+rng.Uint64N(p.scale/2+1))
			case c < 65:
				ht = add(cur, 1+rng.Uint64N(p.scale))
			case c < 80:
				ht = add(cur, 1+rng.Uint64N(3*p.scale))
			case c < 88:
				if res := h.resident(); len(res) > 0 {
					ht = h.height[res[rng.IntN(len(res))]]
				} else {
					ht = add(cur, 1)
				}
			case c < 94:
				ht = add(cur, 1+rng.Uint64N(1<<40))
			default:
				ht = math.MaxUint64 - rng.Uint64N(8)
			}
			if ht > cur {
				err = h.insert(ht)
			}
		case r < 55:
			if res := h.resident(); len(res) > 0 {
				h.remove(res[rng.IntN(len(res))])
			}
		case r < 75:
			if cur < p.limit {
				err = h.advance(cur + 1)
			}
		case r < 90:
			if m, ok := h.minHeight(); ok && m <= p.limit {
				err = h.jump()
			} else if cur < p.limit {
				err = h.advance(cur + 1)
			}
		default:
			to := min(add(cur, 1+rng.Uint64N(3*p.scale)), p.limit)
			if m, ok := h.minHeight(); ok {
				to = min(to, m)
			}
			if to > cur {
				err = h.advance(to)
			}
		}
		if err == nil {
			err = h.check()
		}
		if err != nil {
			return h.log, fmt.Errorf("step %d: %v", step, err)
		}
	}
	return h.log, nil
}
