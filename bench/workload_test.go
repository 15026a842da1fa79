package bench

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
)

// item is what every hold-model implementation stores and returns: the due
// height, the insertion sequence (FIFO among equal heights) and a value.
type item struct {
	height, seq, val uint64
}

// less orders items by (height, seq): due order, FIFO within a height.
func less(a, b item) bool {
	return a.height < b.height || a.height == b.height && a.seq < b.seq
}

// gapCount gaps are drawn once per distribution and used in turn, so that
// no implementation pays for the PRNG and all of them see the same gaps.
const (
	gapCount = 1 << 20
	gapMask  = gapCount - 1
)

// dist is a gap distribution of the hold model.
type dist struct {
	name string
	gap  func(r *rand.Rand) uint64
}

var dists = []dist{
	{"exp", expGap},
	{"uniform", func(r *rand.Rand) uint64 { return 1 + r.Uint64N(2000) }},
	{"bimodal", bimodalGap},
	{"far", farGap},
	{"beyond", beyondGap},
	{"near", nearGap},
}

// survival[g] is P(X >= g) in 0.64 fixed point for X geometric with success
// probability 2^-10, the discrete exponential: sampling by inverse transform
// needs no floating point.
var survival = func() []uint64 {
	const q = 1<<64 - 1<<54 // 1 - 2^-10
	s := []uint64{math.MaxUint64}
	for s[len(s)-1] != 0 {
		hi, _ := bits.Mul64(s[len(s)-1], q)
		s = append(s, hi)
	}
	return s
}()

// expGap is 1 + X for X geometric as above: mean 1024 blocks.
func expGap(r *rand.Rand) uint64 {
	u := r.Uint64()
	// X is the largest g with u < survival[g]; the search finds g+1.
	return uint64(max(1, sort.Search(len(survival), func(g int) bool { return survival[g] <= u })))
}

// bimodalGap is near 90% of the time (1..64, the ring) and far otherwise
// (50,000..500,000, through the epoch tier).
func bimodalGap(r *rand.Rand) uint64 {
	if r.Uint64N(10) != 0 {
		return nearGap(r)
	}
	return 50_000 + r.Uint64N(450_001)
}

// nearGap is bimodal's near mode alone (1..64): every timer stays in the
// ring, so the calendar's time here is its floor under bimodal, whose far
// timers add to it.
func nearGap(r *rand.Rand) uint64 { return 1 + r.Uint64N(64) }

// farGap is bimodal with the far gaps ten times longer (500,000..5,000,000):
// under the default layout the epoch tier ends 8,392,704 blocks ahead, so
// these far timers too pass through the epoch tier.
func farGap(r *rand.Rand) uint64 {
	if r.Uint64N(10) != 0 {
		return nearGap(r)
	}
	return 500_000 + r.Uint64N(4_500_001)
}

// beyondGap is bimodal with the far gaps beyond the default epoch tier
// (10,000,000..100,000,000 blocks): these start in the overflow B-tree, the
// slow path.
func beyondGap(r *rand.Rand) uint64 {
	if r.Uint64N(10) != 0 {
		return nearGap(r)
	}
	return 10_000_000 + r.Uint64N(90_000_001)
}

// workload is one distribution's gaps and the heights of the resident timers
// at the start.
type workload struct {
	gaps    []uint32
	heights []uint64
}

var gapCache = map[string][]uint32{}

// distNamed is the distribution of that name.
func distNamed(name string) dist {
	for _, d := range dists {
		if d.name == name {
			return d
		}
	}
	panic("bench: no distribution " + name)
}

// meanGap is the mean of d's drawn gaps.
func meanGap(d dist) float64 {
	var sum uint64
	for _, g := range gapsOf(d) {
		sum += uint64(g)
	}
	return float64(sum) / gapCount
}

func gapsOf(d dist) []uint32 {
	if g, ok := gapCache[d.name]; ok {
		return g
	}
	r := rand.New(rand.NewPCG(1, 2))
	g := make([]uint32, gapCount)
	for k := range g {
		g[k] = uint32(d.gap(r))
	}
	gapCache[d.name] = g
	return g
}

// lastWork keeps the last workload: the implementations of one
// (distribution, size) run one after the other and share it.
var lastWork struct {
	name string
	n    int
	w    *workload
}

// newWorkload returns n resident heights drawn from the hold model's
// equilibrium, as seen from height 0: a resident timer's gap is drawn with
// probability proportional to its length (long gaps hold their timer
// longer) and the timer is uniformly far along it. Starting there, rather
// than with n fresh gaps, means no warm-up is needed before measuring; the
// far gaps of the bimodal distribution would take millions of ops to settle.
func newWorkload(d dist, n int) *workload {
	if lastWork.w != nil && lastWork.name == d.name && lastWork.n == n {
		return lastWork.w
	}
	gaps := gapsOf(d)
	var longest uint64
	for _, g := range gaps {
		longest = max(longest, uint64(g))
	}
	r := rand.New(rand.NewPCG(3, 4))
	hs := make([]uint64, n)
	for k := range hs {
		g := uint64(gaps[r.IntN(gapCount)])
		for r.Uint64N(longest) >= g { // keep g with probability g/longest
			g = uint64(gaps[r.IntN(gapCount)])
		}
		hs[k] = 1 + r.Uint64N(g)
	}
	w := &workload{gaps: gaps, heights: hs}
	lastWork.name, lastWork.n, lastWork.w = d.name, n, w
	return w
}

// clock is the part of the hold model every implementation shares: the
// current height, the next gap and sequence, and a checksum of what was
// popped, in order, which the equivalence test compares.
type clock struct {
	gaps []uint32
	op   int
	cur  uint64
	seq  uint64
	sum  uint64
}

func newClock(w *workload) clock {
	return clock{gaps: w.gaps, seq: uint64(len(w.heights))}
}

// again returns the item that replaces the popped it: due gap blocks after
// it, with the next sequence and the same value. It also folds it into the
// checksum, so that every implementation must hand back all three fields.
func (c *clock) again(it item) item {
	c.sum = bits.RotateLeft64(c.sum, 9) ^ it.height ^ it.seq<<21 ^ it.val<<42
	g := c.gaps[c.op&gapMask]
	c.op++
	c.seq++
	return item{height: it.height + uint64(g), seq: c.seq, val: it.val}
}

// Residents start with seq k+1 and val k, in the order of w.heights.
func initial(w *workload, k int) item {
	return item{height: w.heights[k], seq: uint64(k) + 1, val: uint64(k)}
}
