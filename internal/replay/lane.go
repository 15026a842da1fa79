package replay

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/trace"
	"github.com/timerlane/timerlane/internal/u128"
)

// laneConfig applies a config's (or an update_config's) lane keys to p.
func laneConfig(c *trace.Config, p *engine.LaneParams) error {
	for _, f := range []struct {
		key string
		v   *uint64
	}{
		{"lane_timer_cycles", &p.LaneTimerCycles},
		{"timer_gc_cycles", &p.GCCycles},
		{"gc_cost_per_timer", &p.GCCostPerTimer},
		{"max_cycles_per_fire_auction_phase", &p.MaxCyclesPerFireAuction},
		{"fairness_window_blocks", &p.FairnessWindowBlocks},
		{"max_ttl_blocks", &p.MaxTTLBlocks},
		{"bid_deprecation_blocks", &p.BidDeprecationBlocks},
	} {
		if v, ok := c.Ints[f.key]; ok {
			*f.v = v
		}
	}
	if v, ok := c.Amounts["min_lane_basefee"]; ok {
		a, err := engine.ParseAmount(v)
		if err != nil {
			return fmt.Errorf("min_lane_basefee: %v", err)
		}
		p.MinBasefee = a
	}
	for name, m := range c.TierMultipliers {
		t, _ := engine.ParsePriorityTier(name) // the parser checked the name
		p.TierMultipliers[t] = m
	}
	return nil
}

func (rn *runner) fund(op *trace.Op) error {
	e, err := rn.engine()
	if err != nil {
		return err
	}
	a, err := engine.ParseAmount(op.Amount)
	if err != nil {
		return rn.fail("fund: %v", err)
	}
	if !rn.lane { // no effect under fifo (FORMAT.md): no ledger, no sum to overflow
		return nil
	}
	if err := e.Ledger().Credit(op.Account, a); err != nil {
		return rn.fail("fund: %v", err)
	}
	return nil
}

// agent is a gba op's custom Gas Bidding Agent: fixed fees, the tip raised
// for every block the timer is late.
type agent struct {
	maxFee, tip, perBlock engine.Amount
}

func newAgent(g *trace.GBA) (*agent, error) {
	var a agent
	var err error
	for _, f := range []struct {
		name, s string
		v       *engine.Amount
	}{{"max_fee_per_cycle", g.MaxFee, &a.maxFee}, {"max_priority_fee_per_cycle", g.MaxPriorityFee, &a.tip}, {"tip_per_block_late", g.TipPerBlock, &a.perBlock}} {
		if f.s == "" {
			continue
		}
		if *f.v, err = engine.ParseAmount(f.s); err != nil {
			return nil, fmt.Errorf("%s: %v", f.name, err)
		}
	}
	return &a, nil
}

// Bid implements engine.GasBidder; the sum saturates at 2^128-1.
func (a *agent) Bid(c *engine.BidContext) (engine.Bid, error) {
	late := c.CurrentHeight - c.TriggerHeight
	tip := u128.SatAdd(a.tip, u128.SatMul64(a.perBlock, late))
	return engine.Bid{MaxFee: a.maxFee, MaxPriorityFee: tip}, nil
}

// system runs a system op. A system instruction that fails (an unknown
// timer, an invalid expiry) changes nothing and prints nothing: it is not
// an actor's call, and FORMAT.md gives it no event.
func (rn *runner) system(s *trace.SystemCall) error {
	if !rn.inBlock {
		return rn.fail("system %s outside a block", s.Call)
	}
	e := rn.eng
	var id engine.TimerID
	if s.Call != "update_config" && len(s.TimerID) != len(id) {
		return nil // names no timer
	}
	copy(id[:], s.TimerID)
	switch s.Call {
	case "cancel":
		e.SystemCancel(system, id)
	case "extend":
		e.SystemExtend(system, id, s.Expires)
	case "update_config":
		p := e.NextLaneParams() // an earlier update of this block still counts
		if err := laneConfig(s.Config, &p); err != nil {
			return rn.fail("update_config: %v", err)
		}
		if err := e.SystemUpdateConfig(system, p); err != nil {
			return rn.fail("update_config: %v", err)
		}
	}
	return nil
}

// fees converts a schedule call's lane fields.
func fees(f *trace.Fee) (*engine.Fees, error) {
	var out engine.Fees
	if f.FeePayer != nil {
		out.Set |= engine.HasFeePayer
		out.FeePayer = *f.FeePayer
	}
	if f.GasLimit != nil {
		out.Set |= engine.HasGasLimit
		out.GasLimit = *f.GasLimit
	}
	if f.ExpiresAt != nil {
		out.Set |= engine.HasExpiresAt
		out.ExpiresAt = *f.ExpiresAt
	}
	for _, a := range []struct {
		name string
		s    *string
		bit  engine.FeeField
		v    *engine.Amount
	}{
		{"max_fee_per_cycle", f.MaxFee, engine.HasMaxFee, &out.MaxFee},
		{"max_priority_fee_per_cycle", f.MaxPriorityFee, engine.HasMaxPriorityFee, &out.MaxPriorityFee},
		{"bid", f.Bid, engine.HasBid, nil},
	} {
		if a.s == nil {
			continue
		}
		v, err := engine.ParseAmount(*a.s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", a.name, err)
		}
		out.Set |= a.bit
		if a.v != nil {
			*a.v = v
		}
	}
	if f.PriorityTier != "" {
		out.Set |= engine.HasTier
		out.Tier, _ = engine.ParsePriorityTier(f.PriorityTier)
	}
	return &out, nil
}

// Collected notes a gc event (engine.LaneObserver), printed with the
// block's gc section: FORMAT.md puts a lane block's gc events first in its
// end, in ascending timer_id order. A system cancel's waits for the end
// of its block, as a system op has no event of its own to print it at; so
// does a collection made after fires (a payer that the fires before it
// spent), which the held fires follow (flushEnd). A block below the
// activation height runs fifo, which has no gc section: there the order
// of events is the order things happened (FORMAT.md), and a system
// cancel's event is printed as it happens.
func (rn *runner) Collected(id engine.TimerID, why engine.GCReason) {
	rn.events++
	g := gcEvent{id, why}
	if rn.eng.Height() < rn.cfg.ActivationHeight {
		rn.printGC(g)
		return
	}
	i, _ := slices.BinarySearchFunc(rn.sysGC, g, cmpGC)
	rn.sysGC = slices.Insert(rn.sysGC, i, g)
}

// gcEvent is a collection to print.
type gcEvent struct {
	id  engine.TimerID
	why engine.GCReason
}

func cmpGC(a, b gcEvent) int { return bytes.Compare(a.id[:], b.id[:]) }

// printSysGC prints the block's collections not yet printed, in
// ascending timer_id order.
func (rn *runner) printSysGC() {
	for _, x := range rn.sysGC {
		rn.printGC(x)
	}
	rn.sysGC = rn.sysGC[:0]
}

// flushEnd prints the block's gc section, then the lane fires held behind
// it.
func (rn *runner) flushEnd() {
	rn.printSysGC()
	if rn.laneFiresW != nil {
		rn.laneFiresW.Flush()
		rn.out.Write(rn.laneFires.Bytes())
		rn.laneFires.Reset()
	}
}

func (rn *runner) printGC(g gcEvent) {
	rn.ev.begin("gc", rn.eng.Height()).hex("timer_id", g.id[:]).str("reason", g.why.String()).end()
}

// Deferred prints a defer event (engine.LaneObserver).
func (rn *runner) Deferred(id engine.TimerID, why engine.DeferReason) {
	rn.flushEnd()
	rn.ev.begin("defer", rn.eng.Height()).hex("timer_id", id[:]).str("reason", why.String()).end()
	rn.events++
}

// Clamped is printed with the call event, from the schedule's result
// (engine.LaneObserver).
func (rn *runner) Clamped(engine.TimerID, engine.Amount, engine.Amount) {}

// laneFire adds the lane's fields to a fire event.
func laneFire(ev *event, f *engine.FireFee) {
	ev.raw("fee_payer", f.FeePayer.String()).uint("gas_limit", f.GasLimit).amount("priority_fee", f.PriorityFee).
		uint("weight", uint64(f.Weight)).amount("charged", f.Charged).amount("refund", f.Refund).
		amount("tip", f.Tip).amount("burned", f.Burned)
}

// laneBlock adds the lane's fields to a block event.
func laneBlock(ev *event, l *engine.LaneFigures) {
	ev.amount("basefee", l.Basefee).amount("next_basefee", l.NextBasefee).uint("lane_cycles", l.LaneCycles).
		uint("gc_cycles", l.GCCycles).amount("burned", l.Burned).amount("tips", l.Tips).amount("p50_tip", l.P50Tip)
}
