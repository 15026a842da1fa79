package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/timerlane/timerlane/engine"
)

// FuzzLaneOps: fuzz bytes drive blocks of the lane: schedules with random
// fee fields and payers, cancels and extends (from transactions and from
// handlers), handler usage and reverts, custom agents that bid, fail or
// panic, system instructions, funds, SkipEmpty. The same program runs
// under two layouts and must print the same events; after every block
// the ledger must hold exactly what was funded, every fire's charge must
// split exactly, and Pending must match the live timers.
func FuzzLaneOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add(bytes.Repeat([]byte{7, 200, 13, 90, 255, 0}, 20))
	f.Add([]byte{9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add(bytes.Repeat([]byte{0x80, 0x11, 0xf3}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		a := runLane(t, data, [3]uint64{2, 1, 1})
		b := runLane(t, data, [3]uint64{4096, 1024, 64})
		if a != b {
			t.Fatalf("layouts disagree:\n%s\n---\n%s", a, b)
		}
	})
}

var (
	laneActors = []engine.Address{{0xa1}, {0xa2}, {0xa3}}
	laneSys    = engine.Address{0x5e}
	laneProp   = engine.Address{0x99}
)

// laneAgent bids from a fixed script: a bid, an error or a panic.
type laneAgent struct {
	mode int
	bid  engine.Bid
}

func (a *laneAgent) Bid(c *engine.BidContext) (engine.Bid, error) {
	switch a.mode {
	case 1:
		return engine.Bid{}, errors.New("no bid")
	case 2:
		panic("agent bug")
	}
	return a.bid, nil
}

// laneRecorder logs events and checks each fire's split.
type laneRecorder struct {
	t   *testing.T
	log strings.Builder
}

func (r *laneRecorder) Fired(d *engine.Delivery, res engine.FireResult) {
	fmt.Fprintf(&r.log, "fire %x rev=%v", d.TimerID[:4], res.Reverted)
	if f := res.Fee; f != nil {
		if f.Charged != f.Refund.Add(f.Tip).Add(f.Burned) {
			r.t.Fatalf("fire %x: charged %s != refund %s + tip %s + burned %s", d.TimerID[:4], f.Charged, f.Refund, f.Tip, f.Burned)
		}
		fmt.Fprintf(&r.log, " %d %s %d %s %s %s", f.GasLimit, f.PriorityFee, f.Weight, f.Charged, f.Tip, f.Burned)
	}
	r.log.WriteByte('\n')
}

func (r *laneRecorder) Collected(id engine.TimerID, why engine.GCReason) {
	fmt.Fprintf(&r.log, "gc %x %s\n", id[:4], why)
}

func (r *laneRecorder) Deferred(id engine.TimerID, why engine.DeferReason) {
	fmt.Fprintf(&r.log, "defer %x %s\n", id[:4], why)
}

func (r *laneRecorder) Clamped(id engine.TimerID, stated, clamped engine.Amount) {
	fmt.Fprintf(&r.log, "clamped %x %s %s\n", id[:4], stated, clamped)
}

type laneExec struct {
	r    *rand.Rand
	live *[]engine.TimerID
}

func (x laneExec) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	r := x.r
	if n := len(*x.live); n > 0 && r.IntN(3) == 0 {
		tx.Cancel((*x.live)[r.IntN(n)])
	}
	if n := len(*x.live); n > 0 && r.IntN(4) == 0 {
		tx.Extend((*x.live)[r.IntN(n)], d.Block+r.Uint64N(20))
	}
	if r.IntN(2) == 0 {
		if s, err := tx.ScheduleFees(d.Block+1+r.Uint64N(3), []byte{byte(r.IntN(256))}, randFees(r, d.Block)); err == nil {
			*x.live = append(*x.live, s.ID)
		}
	}
	u := engine.Usage{Cycles: r.Uint64N(d.CyclesLimit + 10)}
	if r.IntN(6) == 0 {
		return u, errors.New("revert")
	}
	return u, nil
}

func randFees(r *rand.Rand, h uint64) *engine.Fees {
	f := &engine.Fees{}
	if r.IntN(2) == 0 {
		f.Set |= engine.HasFeePayer
		f.FeePayer = laneActors[r.IntN(len(laneActors))]
	}
	if r.IntN(2) == 0 {
		f.Set |= engine.HasGasLimit
		f.GasLimit = r.Uint64N(120_000)
	}
	if r.IntN(3) == 0 {
		f.Set |= engine.HasMaxFee
		f.MaxFee = engine.Amount{Lo: r.Uint64N(60)}
	}
	if r.IntN(3) == 0 {
		f.Set |= engine.HasMaxPriorityFee
		f.MaxPriorityFee = engine.Amount{Lo: r.Uint64N(30)}
	}
	if r.IntN(4) == 0 {
		f.Set |= engine.HasExpiresAt
		f.ExpiresAt = h + r.Uint64N(12)
	}
	if r.IntN(4) == 0 {
		f.Set |= engine.HasTier
		f.Tier = engine.PriorityTier(r.IntN(4))
	}
	if r.IntN(10) == 0 {
		f.Set |= engine.HasBid
	}
	return f
}

func runLane(t *testing.T, data []byte, layout [3]uint64) string {
	r := newSource(data)
	cfg := engine.DefaultConfig()
	cfg.RingSize, cfg.EpochLength, cfg.EpochCount = layout[0], layout[1], layout[2]
	cfg.Policy = engine.PolicyLane
	cfg.ActivationHeight = r.Uint64N(4)
	cfg.SystemDeployers = []engine.Address{laneSys}
	cfg.MaxTimersPerActor = uint32(1 + r.IntN(8))
	cfg.InitialBasefee = engine.Amount{Lo: 1 + r.Uint64N(20)}
	cfg.Lane.MinBasefee = engine.Amount{Lo: r.Uint64N(2)}
	cfg.Lane.LaneTimerCycles = 100_000 + r.Uint64N(300_000)
	cfg.Lane.MaxCyclesPerFireAuction = 50_000 + r.Uint64N(50_000)
	cfg.Lane.GCCycles = r.Uint64N(30_000)
	cfg.Lane.FairnessWindowBlocks = 1 + r.Uint64N(5)
	cfg.Lane.MaxTTLBlocks = r.Uint64N(30)
	cfg.StateRoot = true
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &laneRecorder{t: t}
	e.SetObserver(rec)
	var live []engine.TimerID
	x := laneExec{r: r, live: &live}
	funded := engine.Amount{}
	fund := func(a engine.Address, v uint64) {
		if err := e.Ledger().Credit(a, engine.Amount{Lo: v}); err != nil {
			t.Fatal(err)
		}
		funded = funded.Add64(v)
	}
	for _, a := range laneActors {
		fund(a, r.Uint64N(20_000_000))
	}
	blocks := 5 + len(data)/3
	for h := uint64(1); h <= uint64(blocks); h++ {
		if r.IntN(10) == 0 {
			got, err := e.SkipEmpty(h + r.Uint64N(5))
			if err != nil {
				t.Fatal(err)
			}
			h = got + 1
		}
		if err := e.BeginBlock(h); err != nil {
			t.Fatal(err)
		}
		e.SetProposer(laneProp)
		fmt.Fprintf(&rec.log, "block %d basefee %s\n", h, e.Basefee())
		for range r.IntN(3) {
			actor := laneActors[r.IntN(len(laneActors))]
			tx, err := e.Begin(actor, r.Uint64())
			if err != nil {
				t.Fatal(err)
			}
			for range r.IntN(4) {
				switch k := r.IntN(6); {
				case k < 3:
					s, err := tx.ScheduleFees(h+r.Uint64N(6), []byte{byte(r.IntN(256))}, randFees(r, h))
					if err == nil {
						live = append(live, s.ID)
					}
					fmt.Fprintf(&rec.log, "schedule %s\n", engine.ErrorName(err))
				case k == 3 && len(live) > 0:
					_, err := tx.Cancel(live[r.IntN(len(live))])
					fmt.Fprintf(&rec.log, "cancel %s\n", engine.ErrorName(err))
				case k == 4 && len(live) > 0:
					_, err := tx.Extend(live[r.IntN(len(live))], h+r.Uint64N(30))
					fmt.Fprintf(&rec.log, "extend %s\n", engine.ErrorName(err))
				default:
					fund(actor, r.Uint64N(1_000_000))
				}
			}
			if r.IntN(5) == 0 {
				tx.Revert()
			} else if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		switch r.IntN(12) {
		case 0:
			if len(live) > 0 {
				err := e.SystemCancel(laneSys, live[r.IntN(len(live))])
				fmt.Fprintf(&rec.log, "syscancel %v\n", err != nil)
			}
		case 1:
			p := e.LaneParams()
			p.MaxCyclesPerFireAuction = 10_000 + r.Uint64N(100_000)
			p.MinBasefee = engine.Amount{Lo: r.Uint64N(30)}
			p.LaneTimerCycles = max(p.MaxCyclesPerFireAuction, p.LaneTimerCycles)
			if err := e.SystemUpdateConfig(laneSys, p); err != nil {
				t.Fatal(err)
			}
		case 2:
			a := laneActors[r.IntN(len(laneActors))]
			if r.IntN(3) == 0 {
				e.SetAgent(a, nil)
			} else {
				e.SetAgent(a, &laneAgent{mode: r.IntN(3), bid: engine.Bid{MaxFee: engine.Amount{Lo: r.Uint64N(80)}, MaxPriorityFee: engine.Amount{Lo: r.Uint64N(40)}}})
			}
		}
		res, err := e.EndBlock(x)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Commit(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rec.log, "end fired=%d deferred=%d gc=%d pending=%d root=%x\n", res.Fired, res.Deferred, res.GC, res.Pending, e.Root())
		// Conservation: funds in = balances + burned.
		total := e.Ledger().(*engine.MemLedger).Burned().Add(e.Ledger().Balance(laneProp))
		for _, a := range laneActors {
			total = total.Add(e.Ledger().Balance(a))
		}
		if total != funded {
			t.Fatalf("block %d: the ledger holds %s, %s was funded", h, total, funded)
		}
		// An id can be scheduled again once its timer is gone (a handler's
		// schedules use nonce 0), so live may name it twice: count it once.
		n := 0
		kept := live[:0]
		seen := map[engine.TimerID]bool{}
		for _, id := range live {
			if _, ok := e.Lookup(id); ok && !seen[id] {
				seen[id] = true
				n++
				kept = append(kept, id)
			}
		}
		live = kept
		if n != e.Pending() || n != res.Pending {
			t.Fatalf("block %d: %d live timers found, Pending %d, block result %d", h, n, e.Pending(), res.Pending)
		}
	}
	return rec.log.String()
}
