package tracemodel

import (
	"maps"
	"math/big"
	"slices"
	"strings"
)

// NextBasefee is SPEC §12.7's basefee update (CIP-1 §5): with utilisation
// used/laneCycles against a target of one half, the basefee moves by at
// most an eighth, the change rounded down, a rise being at least 1; then
// it is raised to the next block's floor and saturates at 2^128-1.
func NextBasefee(basefee *big.Int, used, laneCycles uint64, floor *big.Int) *big.Int {
	b := basefee
	u2 := new(big.Int).Lsh(new(big.Int).SetUint64(used), 1)
	l := new(big.Int).SetUint64(laneCycles)
	eightL := new(big.Int).Lsh(l, 3)
	var next *big.Int
	switch u2.Cmp(l) {
	case 1: // next = b + max(1, b × min(8(2u − L), L) / 8L)
		over := new(big.Int).Lsh(new(big.Int).Sub(u2, l), 3)
		rise := new(big.Int).Quo(new(big.Int).Mul(b, minBig(over, l)), eightL)
		if rise.Sign() == 0 {
			rise.SetInt64(1)
		}
		next = new(big.Int).Add(b, rise)
	case -1: // next = b − b × min(8(L − 2u), L) / 8L
		under := new(big.Int).Lsh(new(big.Int).Sub(l, u2), 3)
		fall := new(big.Int).Quo(new(big.Int).Mul(b, minBig(under, l)), eightL)
		next = new(big.Int).Sub(b, fall)
	default:
		next = b
	}
	if next.Cmp(floor) < 0 {
		next = floor
	}
	return minBig(next, u128Max())
}

// weights is W(actor) of SPEC §12.6 at one block: the exact factor f/d
// (d is the same for every actor of the block, so f orders them) and the
// printed figure in parts per million.
type weights struct {
	recent map[string]uint64
	d      uint64 // max(2, m2), m2 twice the median of recent over actors with a fire
}

func newWeights(fires []fire, from, to uint64) weights {
	recent := map[string]uint64{}
	for _, f := range fires {
		if f.height >= from && f.height <= to {
			recent[f.actor]++
		}
	}
	counts := slices.Sorted(maps.Values(recent))
	var m2 uint64
	switch n := len(counts); {
	case n == 0:
	case n%2 == 1:
		m2 = 2 * counts[n/2]
	default:
		m2 = counts[n/2-1] + counts[n/2]
	}
	return weights{recent: recent, d: max(2, m2)}
}

// factor is f in W = f/d: 2d − min(d, 2 × recent).
func (w weights) factor(actor string) uint64 {
	return 2*w.d - min(w.d, 2*w.recent[actor])
}

// ppm is the printed weight: 2,000,000 − min(1,000,000, floor(recent ×
// 2,000,000 / d)), W rounded up (SPEC §12.6).
func (w weights) ppm(actor string) uint64 {
	return 2000000 - min(1000000, w.recent[actor]*2000000/w.d)
}

// candidate is a due timer the lane may fire this block.
type candidate struct {
	t       timer
	fee     *big.Int // priority fee per cycle, after the clamp against the basefee
	key     *big.Int // fee × f: the order, exactly (SPEC §12.6)
	weight  uint64   // ppm, printed
	gas     uint64
	maxCost *big.Int
	payer   string
}

type collection struct{ id, reason string }

// bid is the timer's (max fee, tip) at block h (SPEC §12.3); a tier was
// applied at the schedule.
func (m *model) bid(t timer, h uint64) (*big.Int, *big.Int) {
	s := &m.s
	if t.maxFee != nil || t.tip != nil {
		maxFee, tip := t.maxFee, t.tip
		if maxFee == nil {
			maxFee = defaultMaxFee(s.basefee)
		}
		if tip == nil {
			tip = s.p50
		}
		return maxFee, tip
	}
	if a, ok := s.agents[t.actor]; ok {
		late := new(big.Int).Mul(a.late, new(big.Int).SetUint64(h-t.height))
		return a.maxFee, new(big.Int).Add(a.tip, late)
	}
	return defaultMaxFee(s.basefee), s.p50
}

// endLane is the lane's end of block (SPEC §12.5, CIP-1 §3 steps 4-10).
func (m *model) endLane() error {
	s := &m.s
	h := s.height
	p := s.params
	b := s.basefee
	zero := new(big.Int)

	// The fairness window's decay (CIP-1 §3 step 10, at the start of this
	// end of block): fires of blocks below h − F leave it. SPEC §12.6: what
	// left never comes back, so a window raised since keeps only what the
	// shorter one still held, and its start never moves back.
	if h > p.window && h-p.window > s.windowFrom {
		s.windowFrom = h - p.window
	}
	s.fires = slices.DeleteFunc(s.fires, func(f fire) bool { return f.height < s.windowFrom })
	w := newWeights(s.fires, s.windowFrom, h-1)

	// 1. Classify the due set: every timer due at h or before.
	var gcCandidates []collection
	deferred := map[string]string{}
	var cands []candidate
	for _, t := range s.pending {
		if t.height > h {
			continue
		}
		if h > m.expiry(t) {
			gcCandidates = append(gcCandidates, collection{t.id, "expired"})
			continue
		}
		maxFee, tip := m.bid(t, h)
		gas := p.fireCap
		if t.hasGas {
			gas = t.gas
		}
		payer := t.payer
		if payer == "" {
			payer = t.actor
		}
		if maxFee.Cmp(b) < 0 {
			// Over the cap and below the basefee is over_cap (SPEC §12.5).
			if gas > p.fireCap {
				deferred[t.id] = "over_cap"
			} else {
				deferred[t.id] = "below_basefee" // max_cost undefined: no funds check
			}
			continue
		}
		fee := minBig(tip, new(big.Int).Sub(maxFee, b))
		maxCost := new(big.Int).Mul(new(big.Int).SetUint64(gas), new(big.Int).Add(b, fee))
		// CIP-1 §3 step 4's funds check comes before step 7's cap. A max_cost
		// past 2^128-1 is not covered by any balance.
		if s.balance(payer).Cmp(maxCost) < 0 {
			gcCandidates = append(gcCandidates, collection{t.id, "insufficient_funds"})
			continue
		}
		if gas > p.fireCap {
			deferred[t.id] = "over_cap"
			continue
		}
		f := w.factor(t.actor)
		cands = append(cands, candidate{
			t: t, fee: fee, key: new(big.Int).Mul(fee, new(big.Int).SetUint64(f)), weight: w.ppm(t.actor),
			gas: gas, maxCost: maxCost, payer: payer,
		})
	}

	// 2. GC lane: candidates by ascending id, within the budget.
	slices.SortFunc(gcCandidates, func(a, b collection) int { return strings.Compare(a.id, b.id) })
	var collected []collection
	var gcUsed uint64
	collect := func(c collection) {
		if gcUsed+p.gcCost > p.gcBudget {
			deferred[c.id] = "gc_budget" // retried next block
			return
		}
		gcUsed += p.gcCost
		collected = append(collected, c)
		delete(s.pending, c.id)
	}
	for _, c := range gcCandidates {
		collect(c)
	}

	// 3. Sort by effective priority, descending; ties by id.
	slices.SortFunc(cands, func(x, y candidate) int {
		if c := y.key.Cmp(x.key); c != 0 {
			return c
		}
		return strings.Compare(x.t.id, y.t.id)
	})

	// The gc section is printed before the fires, whenever its collections
	// were made (FORMAT.md), also when a script error stops the block
	// (SPEC §11): it is inserted here when the walk is done.
	fireStart := len(m.out)
	printGC := func() int {
		all := slices.Clone(collected)
		for _, id := range s.sysCancels {
			all = append(all, collection{id, "system_cancel"})
		}
		slices.SortFunc(all, func(a, b collection) int { return strings.Compare(a.id, b.id) })
		evs := make([]ordered, len(all))
		for i, c := range all {
			evs[i] = ordered{{"ev", "gc"}, {"height", h}, {"timer_id", c.id}, {"reason", c.reason}}
		}
		m.out = slices.Insert(m.out, fireStart, evs...)
		s.blockEvents += len(evs)
		return len(all)
	}

	// 4. Walk, firing as it goes. The due set is in flight: handlers cannot
	// cancel or extend any of it (SPEC §12.5).
	m.inflight = map[string]bool{}
	for _, t := range s.pending {
		if t.height <= h {
			m.inflight[t.id] = true
		}
	}
	defer func() { m.inflight = nil }()
	var used uint64
	tips, burnedTotal := new(big.Int), new(big.Int)
	var fees []*big.Int
	for _, c := range cands {
		t := c.t
		if _, ok := s.pending[t.id]; !ok {
			continue
		}
		if used+c.gas > p.laneCycles {
			deferred[t.id] = "lane_full" // a smaller timer further down may fit
			continue
		}
		// The fires before it may have spent what covered it in step 1.
		if s.balance(c.payer).Cmp(c.maxCost) < 0 {
			collect(collection{t.id, "insufficient_funds"})
			continue
		}
		delete(s.pending, t.id)
		s.ledger[c.payer] = new(big.Int).Sub(s.balance(c.payer), c.maxCost)
		ev := m.fireEvent(t, c.gas)
		m.emit(ev)
		at := len(m.out) - 1
		reverted, cycles, err := m.runHandler(t, c.gas)
		billed := cycles
		if reverted {
			billed = c.gas // a revert uses its whole limit, and gets no refund
		}
		used += billed
		tip := new(big.Int).Mul(new(big.Int).SetUint64(billed), c.fee)
		burned := new(big.Int).Mul(new(big.Int).SetUint64(billed), b)
		refund := new(big.Int).Sub(new(big.Int).Sub(c.maxCost, tip), burned)
		if new(big.Int).Add(s.balance(c.payer), refund).Cmp(u128Max()) > 0 {
			burned = new(big.Int).Add(burned, refund) // the payer cannot hold it
			refund = zero
		}
		s.ledger[c.payer] = new(big.Int).Add(s.balance(c.payer), refund)
		m.out[at] = append(ev, field{"fee_payer", c.payer}, field{"gas_limit", c.gas},
			field{"priority_fee", c.fee.String()}, field{"weight", c.weight}, field{"charged", c.maxCost.String()},
			field{"refund", refund.String()}, field{"tip", tip.String()}, field{"burned", burned.String()})
		if err != nil {
			// A script's call stopped the replay (SPEC §11): the fire line
			// still carries the lane's figures (FORMAT.md), from what the
			// script states it uses; the block goes no further.
			printGC()
			return err
		}
		tips.Add(tips, tip)
		burnedTotal.Add(burnedTotal, burned)
		fees = append(fees, c.fee)
		s.fires = append(s.fires, fire{h, t.actor})
	}
	nGC := printGC()

	// Tips go to the proposer at the block's end, all or nothing.
	proposer := s.proposer
	if proposer == "" {
		proposer = zeroAddress
	}
	paid := tips
	if new(big.Int).Add(s.balance(proposer), tips).Cmp(u128Max()) > 0 {
		burnedTotal.Add(burnedTotal, tips)
		paid = zero
	} else {
		s.ledger[proposer] = new(big.Int).Add(s.balance(proposer), tips)
	}

	// 6. Defer: every due timer still pending, by ascending id.
	nDeferred := 0
	for _, id := range slices.Sorted(maps.Keys(deferred)) {
		if _, ok := s.pending[id]; ok {
			m.emit(ordered{{"ev", "defer"}, {"height", h}, {"timer_id", id}, {"reason", deferred[id]}})
			nDeferred++
		}
	}

	// 7. Next block: p50 of the fires' priority fees, the basefee under the
	// next block's floor.
	slices.SortFunc(fees, func(x, y *big.Int) int { return x.Cmp(y) })
	p50 := new(big.Int)
	switch n := len(fees); {
	case n == 0:
	case n%2 == 1:
		p50 = fees[n/2]
	default:
		p50 = new(big.Int).Rsh(new(big.Int).Add(fees[n/2-1], fees[n/2]), 1)
	}
	next := NextBasefee(b, used, p.laneCycles, s.nextParams().minBasefee)
	m.emit(ordered{{"ev", "block"}, {"height", h}, {"fired", len(fees)}, {"deferred", nDeferred},
		{"gc", nGC}, {"pending", len(s.pending)}, {"basefee", b.String()}, {"next_basefee", next.String()},
		{"lane_cycles", used}, {"gc_cycles", gcUsed}, {"burned", minBig(burnedTotal, u128Max()).String()},
		{"tips", paid.String()}, {"p50_tip", p50.String()}})
	s.basefee = next
	s.p50 = p50
	return nil
}
