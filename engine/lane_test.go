package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

var (
	payerP    = engine.Address{0xfe}
	proposerQ = engine.Address{0x99}
	sysS      = engine.Address{0x5e}
)

func amount(s string) engine.Amount {
	a, err := engine.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// laneLog is an Observer and LaneObserver that records a block's events
// as lines, in the order they happen.
type laneLog struct {
	lines []string
	fees  []engine.FireFee
}

func (l *laneLog) Fired(d *engine.Delivery, r engine.FireResult) {
	if r.Fee == nil {
		l.lines = append(l.lines, fmt.Sprintf("fire %x", d.TimerID[:2]))
		return
	}
	l.fees = append(l.fees, *r.Fee)
	l.lines = append(l.lines, fmt.Sprintf("fire %x gas=%d prio=%s w=%d charged=%s refund=%s tip=%s burned=%s",
		d.TimerID[:2], r.Fee.GasLimit, r.Fee.PriorityFee, r.Fee.Weight, r.Fee.Charged, r.Fee.Refund, r.Fee.Tip, r.Fee.Burned))
}

func (l *laneLog) Collected(id engine.TimerID, why engine.GCReason) {
	l.lines = append(l.lines, fmt.Sprintf("gc %x %s", id[:2], why))
}

func (l *laneLog) Deferred(id engine.TimerID, why engine.DeferReason) {
	l.lines = append(l.lines, fmt.Sprintf("defer %x %s", id[:2], why))
}

func (l *laneLog) Clamped(id engine.TimerID, stated, clamped engine.Amount) {
	l.lines = append(l.lines, fmt.Sprintf("clamped %x %s %s", id[:2], stated, clamped))
}

// lane is a test driver of an engine under policy lane.
type lane struct {
	t   *testing.T
	e   *engine.Engine
	log laneLog
	x   engine.Executor
}

func newLane(t *testing.T, mod func(*engine.Config)) *lane {
	t.Helper()
	l := &lane{t: t, x: &recorder{}}
	l.e = newEngine(t, func(c *engine.Config) {
		c.Policy = engine.PolicyLane
		c.SystemDeployers = []engine.Address{sysS}
		if mod != nil {
			mod(c)
		}
	})
	l.e.SetObserver(&l.log)
	return l
}

func (l *lane) fund(a engine.Address, s string) {
	require.NoError(l.t, l.e.Ledger().Credit(a, amount(s)))
}

func (l *lane) balance(a engine.Address) string { return l.e.Ledger().Balance(a).String() }

// block runs block h: f (if any) in one transaction of actor, then end of
// block. It returns the block's result and event lines.
func (l *lane) block(h uint64, actor engine.Address, f func(tx engine.Tx)) (engine.BlockResult, []string) {
	l.t.Helper()
	require.NoError(l.t, l.e.BeginBlock(h))
	l.e.SetProposer(proposerQ)
	if f != nil {
		tx, err := l.e.Begin(actor, h)
		require.NoError(l.t, err)
		f(tx)
		require.NoError(l.t, tx.Commit())
	}
	l.log.lines, l.log.fees = nil, nil
	res, err := l.e.EndBlock(l.x)
	require.NoError(l.t, err)
	require.NoError(l.t, l.e.Commit())
	if res.Lane != nil {
		c := *res.Lane
		res.Lane = &c
	}
	return res, l.log.lines
}

func (l *lane) schedule(tx engine.Tx, height uint64, payload string, f engine.Fees) engine.TimerID {
	l.t.Helper()
	r, err := tx.ScheduleFees(height, []byte(payload), &f)
	require.NoError(l.t, err)
	return r.ID
}

func TestLaneScheduleChecks(t *testing.T) {
	const cur = 10
	tests := []struct {
		name   string
		height uint64
		fees   engine.Fees
		want   error
	}{
		{"defaults", cur + 1, engine.Fees{}, nil},
		{"bid after activation", cur + 1, engine.Fees{Set: engine.HasBid}, engine.ErrTimerArgDeprecated},
		{"height before bid", cur, engine.Fees{Set: engine.HasBid}, engine.ErrHeightNotInFuture},
		{"gas at the cap", cur + 1, engine.Fees{Set: engine.HasGasLimit, GasLimit: 250_000}, nil},
		{"gas over the cap", cur + 1, engine.Fees{Set: engine.HasGasLimit, GasLimit: 250_001}, engine.ErrGasLimitTooHigh},
		{"bid before gas", cur + 1, engine.Fees{Set: engine.HasBid | engine.HasGasLimit, GasLimit: 250_001}, engine.ErrTimerArgDeprecated},
		{"expiry at the height", cur + 5, engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: cur + 5}, nil},
		{"expiry below the height", cur + 5, engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: cur + 4}, engine.ErrInvalidExpiry},
		{"expiry at the TTL", cur + 5, engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: cur + 5 + 100}, nil},
		{"expiry past the TTL", cur + 5, engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: cur + 5 + 101}, engine.ErrInvalidExpiry},
		{"gas before expiry", cur + 5, engine.Fees{Set: engine.HasExpiresAt | engine.HasGasLimit, ExpiresAt: 1, GasLimit: 1 << 40}, engine.ErrGasLimitTooHigh},
		{"max fee at the basefee", cur + 1, engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("1000")}, nil},
		{"max fee below the basefee", cur + 1, engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("999")}, engine.ErrTimerRejectedBelowBasefee},
		{"expiry before max fee", cur + 1, engine.Fees{Set: engine.HasMaxFee | engine.HasExpiresAt, MaxFee: amount("1"), ExpiresAt: 1}, engine.ErrInvalidExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				// The floor keeps the basefee at 1000 through empty blocks.
				c.InitialBasefee, c.Lane.MinBasefee = amount("1000"), amount("1000")
				c.Lane.MaxTTLBlocks = 100
			})
			_, err := l.e.SkipEmpty(cur - 1)
			require.NoError(t, err)
			require.NoError(t, l.e.BeginBlock(cur))
			require.Equal(t, "1000", l.e.Basefee().String())
			tx, err := l.e.Begin(actorA, 1)
			require.NoError(t, err)
			_, err = tx.ScheduleFees(tc.height, nil, &tc.fees)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

func TestLaneScheduleClampAndBidWindow(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.ActivationHeight = 5
		c.Lane.BidDeprecationBlocks = 3
		c.InitialBasefee, c.Lane.MinBasefee = amount("100"), amount("100")
	})
	for h := uint64(1); h <= 9; h++ {
		l.block(h, actorA, func(tx engine.Tx) {
			_, err := tx.ScheduleFees(h+100, []byte{byte(h)}, &engine.Fees{Set: engine.HasBid})
			if h < 8 { // accepted below activation + 3
				require.NoError(t, err, "block %d", h)
			} else {
				require.ErrorIs(t, err, engine.ErrTimerArgDeprecated, "block %d", h)
			}
			// The fifo phase's cap is 550,000, the lane's 250,000.
			_, err = tx.ScheduleFees(h+100, []byte{byte(h), 1}, &engine.Fees{Set: engine.HasGasLimit, GasLimit: 400_000})
			if h < 5 {
				require.NoError(t, err, "block %d", h)
			} else {
				require.ErrorIs(t, err, engine.ErrGasLimitTooHigh, "block %d", h)
			}
		})
	}
	l.block(10, actorA, func(tx engine.Tx) {
		r, err := tx.ScheduleFees(20, nil, &engine.Fees{Set: engine.HasMaxFee | engine.HasMaxPriorityFee, MaxFee: amount("150"), MaxPriorityFee: amount("70")})
		require.NoError(t, err)
		require.True(t, r.Clamped)
		require.Equal(t, "70", r.StatedPriorityFee.String())
		require.Equal(t, "50", r.ClampedPriorityFee.String())
		require.Equal(t, fmt.Sprintf("clamped %x 70 50", r.ID[:2]), l.log.lines[len(l.log.lines)-1])
		// Without a stated max fee the default agent's 2 × basefee bounds it.
		r, err = tx.ScheduleFees(20, []byte{1}, &engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("101")})
		require.NoError(t, err)
		require.True(t, r.Clamped)
		require.Equal(t, "100", r.ClampedPriorityFee.String())
		r, err = tx.ScheduleFees(20, []byte{2}, &engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("100")})
		require.NoError(t, err)
		require.False(t, r.Clamped)
	})
}

func TestFeesNeedLane(t *testing.T) {
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(actorA, 1)
	require.NoError(t, err)
	_, err = tx.ScheduleFees(5, nil, &engine.Fees{Set: engine.HasGasLimit, GasLimit: 1})
	require.ErrorIs(t, err, engine.ErrNeedsLane)
	_, err = tx.Extend(engine.TimerID{}, 5)
	require.ErrorIs(t, err, engine.ErrNeedsLane)
	_, err = tx.ScheduleFees(5, nil, &engine.Fees{}) // no fields: a plain schedule
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.ErrorIs(t, e.SystemCancel(sysS, engine.TimerID{}), engine.ErrNeedsLane)
}

// TestLaneSettlement follows one fire's money: the pre-charge, the split,
// the ledger.
func TestLaneSettlement(t *testing.T) {
	for _, revert := range []bool{false, true} {
		t.Run(fmt.Sprintf("revert=%v", revert), func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) { c.InitialBasefee, c.Lane.MinBasefee = amount("10"), amount("10") })
			l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
				if revert {
					return engine.Usage{Cycles: 30_000}, errors.New("handler reverts")
				}
				return engine.Usage{Cycles: 30_000}, nil
			}}
			l.fund(payerP, "100000000")
			l.block(1, actorA, func(tx engine.Tx) {
				l.schedule(tx, 2, "x", engine.Fees{Set: engine.HasFeePayer | engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee,
					FeePayer: payerP, GasLimit: 100_000, MaxFee: amount("20"), MaxPriorityFee: amount("4")})
			})
			res, _ := l.block(2, actorA, nil)
			require.Equal(t, 1, res.Fired)
			f := l.log.fees[0]
			require.Equal(t, payerP, f.FeePayer)
			require.Equal(t, "4", f.PriorityFee.String())
			require.Equal(t, uint32(2_000_000), f.Weight, "no fires in the window: W = 2")
			require.Equal(t, "1400000", f.Charged.String()) // 100,000 × (10 + 4)
			billed := uint64(30_000)
			if revert {
				billed = 100_000 // no refund on a revert
			}
			require.Equal(t, fmt.Sprint(4*billed), f.Tip.String())
			require.Equal(t, fmt.Sprint(10*billed), f.Burned.String())
			require.Equal(t, fmt.Sprint(1_400_000-14*billed), f.Refund.String())
			require.Equal(t, fmt.Sprint(100_000_000-14*billed), l.balance(payerP))
			require.Equal(t, fmt.Sprint(4*billed), l.balance(proposerQ))
			require.Equal(t, fmt.Sprint(10*billed), l.e.Ledger().(*engine.MemLedger).Burned().String())
			require.Equal(t, billed, res.Lane.LaneCycles, "the lane counts the cycles billed")
			require.Equal(t, "10", res.Lane.Basefee.String())
			require.Equal(t, "4", res.Lane.P50Tip.String())
		})
	}
}

// TestLaneTipsTheProposerCannotHold: tips that would take the proposer's
// balance past 2^128 − 1 are burned, and the block's figures say so: Tips
// counts what the proposer received, Burned what the ledger burned (found
// by the session 20 lane model: the tips were burned while Tips still
// counted them).
func TestLaneTipsTheProposerCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name, proposer   string // the proposer's balance before the block
		tips, burnedTips string
	}{
		{"room", "1000", "8", "0"},
		{"no room", "340282366920938463463374607431768211450", "0", "8"}, // 2^128 − 6
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				c.InitialBasefee, c.Lane.MinBasefee = amount("10"), amount("10")
			})
			l.fund(actorA, "100000000")
			l.fund(proposerQ, tc.proposer)
			l.block(1, actorA, func(tx engine.Tx) {
				for _, p := range []string{"x", "y"} {
					l.schedule(tx, 2, p, engine.Fees{Set: engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee,
						GasLimit: 100_000, MaxFee: amount("20"), MaxPriorityFee: amount("4")})
				}
			})
			res, _ := l.block(2, actorA, nil)
			require.Equal(t, 2, res.Fired)
			const billed = 1 // each handler's cycles (recorder)
			for _, f := range l.log.fees {
				require.Equal(t, fmt.Sprint(4*billed), f.Tip.String(), "the fire's tip, owed to the proposer")
			}
			burned := amount(fmt.Sprint(2 * 10 * billed)).Add(amount(tc.burnedTips))
			require.Equal(t, tc.tips, res.Lane.Tips.String())
			require.Equal(t, burned.String(), res.Lane.Burned.String())
			require.Equal(t, burned.String(), l.e.Ledger().(*engine.MemLedger).Burned().String())
			require.Equal(t, amount(tc.proposer).Add(amount(tc.tips)).String(), l.balance(proposerQ))
		})
	}
}

// refusingLedger is a Ledger (not an AccountLedger) that refuses every
// credit to one address, as a ledger whose account can take no more
// would.
type refusingLedger struct {
	m  *engine.MemLedger
	to engine.Address
}

func (r refusingLedger) Balance(a engine.Address) engine.Amount        { return r.m.Balance(a) }
func (r refusingLedger) Debit(a engine.Address, x engine.Amount) error { return r.m.Debit(a, x) }
func (r refusingLedger) Burn(x engine.Amount) error                    { return r.m.Burn(x) }
func (r refusingLedger) Credit(a engine.Address, x engine.Amount) error {
	if a == r.to {
		return engine.ErrAmountOverflow
	}
	return r.m.Credit(a, x)
}

// TestLaneRefundTheLedgerRefuses: a refund the payer's account cannot
// take is burned, not lost from the books: the fire's figures and the
// block's say so, and what the payer paid is what the proposer got plus
// what was burned.
func TestLaneRefundTheLedgerRefuses(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.InitialBasefee, c.Lane.MinBasefee = amount("10"), amount("10")
	})
	mem := engine.NewMemLedger()
	l.e.SetLedger(refusingLedger{m: mem, to: actorA})
	require.NoError(t, mem.Credit(actorA, amount("100000000")))
	l.block(1, actorA, func(tx engine.Tx) {
		l.schedule(tx, 2, "x", engine.Fees{Set: engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee,
			GasLimit: 100_000, MaxFee: amount("20"), MaxPriorityFee: amount("4")})
	})
	res, _ := l.block(2, actorA, nil)
	require.Equal(t, 1, res.Fired)
	require.Len(t, l.log.fees, 1)
	f := l.log.fees[0]
	require.Equal(t, "0", f.Refund.String(), "the refund the ledger refused")
	require.Equal(t, f.Charged.String(), f.Tip.Add(f.Burned).String(), "all of the charge is tip or burned")
	require.Equal(t, "1400000", f.Charged.String(), "the pre-charge: gas limit × (basefee + priority fee)")
	require.Equal(t, f.Burned.String(), res.Lane.Burned.String())
	require.Equal(t, f.Burned.String(), mem.Burned().String())
	require.Equal(t, amount("100000000").Sub(f.Charged).String(), mem.Balance(actorA).String())
	require.Equal(t, f.Tip.String(), mem.Balance(proposerQ).String())
}

// TestLaneFullGreedy: the lane takes the highest priorities that fit, goes
// on past a timer that does not fit, and defers the rest, visibly.
// usesAll is a handler that uses all the cycles its fire allows: the lane
// then fills as if it were budgeted by gas limits.
func usesAll(_ engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{Cycles: d.CyclesLimit}, nil
}

func TestLaneFullGreedy(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.Lane.LaneTimerCycles = 1_000
		c.Lane.MaxCyclesPerFireAuction = 1_000
		c.InitialBasefee, c.Lane.MinBasefee = amount("1"), amount("1")
	})
	l.x = &recorder{hook: usesAll}
	l.fund(actorA, "1000000000")
	ids := map[string]engine.TimerID{}
	l.block(1, actorA, func(tx engine.Tx) {
		for _, c := range []struct {
			name string
			gas  uint64
			tip  string
		}{{"big", 700, "50"}, {"huge", 400, "40"}, {"small", 300, "10"}, {"tiny", 100, "5"}} {
			ids[c.name] = l.schedule(tx, 2, c.name, engine.Fees{Set: engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee,
				GasLimit: c.gas, MaxFee: amount("100"), MaxPriorityFee: amount(c.tip)})
		}
	})
	res, lines := l.block(2, actorA, nil)
	require.Equal(t, 2, res.Fired)
	require.Equal(t, 2, res.Deferred)
	require.Equal(t, uint64(1_000), res.Lane.LaneCycles)
	short := func(n string) []byte { id := ids[n]; return id[:2] }
	fire := func(n string) string { return fmt.Sprintf("fire %x", short(n)) }
	require.Contains(t, lines[0], fire("big"))
	require.Contains(t, lines[1], fire("small")) // "huge" did not fit after "big"
	deferred := []string{fmt.Sprintf("defer %x lane_full", short("huge")), fmt.Sprintf("defer %x lane_full", short("tiny"))}
	slices.Sort(deferred) // ascending timer id
	require.Equal(t, deferred, lines[2:])
	require.Equal(t, 4+2, int(l.e.PendingOf(actorA))+res.Fired+2, "the deferred stay pending")
	require.Equal(t, 2, l.e.PendingOf(actorA))
	// A full lane raises the basefee by 12.5%: 1 → 2 (at least 1).
	require.Equal(t, "2", res.Lane.NextBasefee.String())
	res, lines = l.block(3, actorA, nil)
	require.Equal(t, 2, res.Fired, "the deferred run next: %v", lines)
	require.Equal(t, 0, l.e.Pending())
}

// TestLaneZeroGasLimit: a timer stating gas_limit 0 (docs/SPEC.md §12.1)
// takes no lane cycles and costs nothing, and fires with a cycles limit
// of 0, whatever else is due: with a backlog far larger than the lane,
// where the selection walks a heap, it once divided by that 0.
func TestLaneZeroGasLimit(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.Lane.LaneTimerCycles = 1_000
		c.Lane.MaxCyclesPerFireAuction = 1_000
	})
	l.x = &recorder{hook: usesAll}
	l.fund(actorA, "1000000000")
	l.block(1, actorA, func(tx engine.Tx) {
		for k := range 40 { // 40 × 500 cycles: 2 fit a block
			l.schedule(tx, 2, fmt.Sprint("big", k), engine.Fees{Set: engine.HasGasLimit, GasLimit: 500})
		}
		l.schedule(tx, 2, "free", engine.Fees{Set: engine.HasGasLimit, GasLimit: 0})
	})
	res, lines := l.block(2, actorA, nil)
	require.Equal(t, 3, res.Fired, "%v", lines)
	require.Equal(t, 38, res.Deferred)
	require.Equal(t, uint64(1_000), res.Lane.LaneCycles)
	var free []string
	for _, s := range lines {
		if strings.Contains(s, " gas=0 ") {
			free = append(free, s)
		}
	}
	require.Len(t, free, 1, "%v", lines)
	require.Contains(t, free[0], " charged=0 ")
}

func TestLaneExpiryAndGCBudget(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.Lane.GCCycles = 10_000
		c.Lane.GCCostPerTimer = 5_000 // two collections a block
	})
	var ids []engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		for k := range 5 {
			ids = append(ids, l.schedule(tx, 2, fmt.Sprint(k), engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: 2}))
		}
	})
	// Block 2: nothing is funded, so all five are insufficient_funds, two
	// collected, three wait for the GC budget.
	res, lines := l.block(2, actorA, nil)
	require.Equal(t, 2, res.GC)
	require.Equal(t, 3, res.Deferred)
	require.Equal(t, uint64(10_000), res.Lane.GCCycles)
	require.Equal(t, "gc", lines[0][:2])
	require.Contains(t, lines[0], "insufficient_funds")
	require.Contains(t, lines[4], "gc_budget")
	// Block 3: past expires_at 2: expired now.
	res, lines = l.block(3, actorA, nil)
	require.Equal(t, 2, res.GC)
	require.Contains(t, lines[0], "expired")
	res, _ = l.block(4, actorA, nil)
	require.Equal(t, 1, res.GC)
	require.Equal(t, 0, l.e.Pending())
}

// TestLaneBudgetCountsCyclesUsed: the lane is budgeted by the cycles the
// fires use (CIP-1 §3 step 7, §5): a timer runs when what the fires before
// it used plus its gas limit fit in the lane, so handlers that use little
// leave room for more; a reverted handler counts its whole limit; the
// basefee follows the cycles used.
func TestLaneBudgetCountsCyclesUsed(t *testing.T) {
	tests := []struct {
		name     string
		uses     uint64 // cycles each handler uses
		revert   bool
		fired    int
		deferred int
		cycles   uint64 // the block's lane_cycles
		next     string // the next basefee, from 875 (block 1 ran empty)
	}{
		// 100 a fire: 0+400, 100+400, ..., 400+400 all fit; the lane
		// is used at exactly its target, half.
		{"little used", 100, false, 5, 0, 500, "875"},
		// 300 a fire: 0+400, 300+400, 600+400 fit; 900+400 does not.
		{"more used", 300, false, 3, 2, 900, "984"},
		// A revert counts its whole limit: 0+400, 400+400, then 800+400.
		{"reverts", 100, true, 2, 3, 800, "984"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				c.Lane.LaneTimerCycles = 1_000
				c.Lane.MaxCyclesPerFireAuction = 400
			})
			l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
				if tt.revert {
					return engine.Usage{Cycles: tt.uses}, errors.New("handler reverts")
				}
				return engine.Usage{Cycles: tt.uses}, nil
			}}
			l.fund(actorA, "1000000000")
			l.block(1, actorA, func(tx engine.Tx) {
				for k := range 5 {
					l.schedule(tx, 2, fmt.Sprint(k), engine.Fees{Set: engine.HasGasLimit, GasLimit: 400})
				}
			})
			res, lines := l.block(2, actorA, nil)
			require.Equal(t, tt.fired, res.Fired, "%v", lines)
			require.Equal(t, tt.deferred, res.Deferred, "%v", lines)
			for _, s := range lines[tt.fired:] {
				require.Contains(t, s, "lane_full")
			}
			require.Equal(t, tt.cycles, res.Lane.LaneCycles)
			require.Equal(t, tt.next, res.Lane.NextBasefee.String())
		})
	}
}

// TestLanePayerSpentByEarlierFires: a payer that can cover one max_cost
// but not two pays each fire as it comes, its refund back before the next
// pre-charge (CIP-1 §3 step 8). Its second timer runs when the first
// handler used little; when it used all its limit, the second is
// collected insufficient_funds at its turn, after the first fire, or
// waits gc_budget when the GC lane has no room left. The ledger never
// goes below zero.
func TestLanePayerSpentByEarlierFires(t *testing.T) {
	tests := []struct {
		name   string
		uses   uint64
		gcRoom uint64 // timer_gc_cycles
		want   []string
		left   string // the payer's balance after the block
	}{
		{"the refund covers the second", 10_000, 5_000_000, []string{"fire first", "fire second"}, "330000"},
		{"the first spent it", 250_000, 5_000_000, []string{"fire first", "gc second insufficient_funds"}, "100000"},
		{"no room to collect it", 250_000, 0, []string{"fire first", "defer second gc_budget"}, "100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				c.InitialBasefee, c.Lane.MinBasefee = amount("1"), amount("1")
				c.Lane.GCCycles = tt.gcRoom
			})
			l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
				return engine.Usage{Cycles: tt.uses}, nil
			}}
			l.fund(actorA, "350000") // one max_cost of 250,000 × (1 + 0), plus a little
			var a, b engine.TimerID
			l.block(1, actorA, func(tx engine.Tx) {
				a = l.schedule(tx, 2, "a", engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("0")})
				b = l.schedule(tx, 2, "b", engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("1")})
			})
			// Equal priorities: the smaller id goes first.
			first, second := a, b
			if string(b[:]) < string(a[:]) {
				first, second = b, a
			}
			_, lines := l.block(2, actorA, nil)
			// "fire ID ...", "gc ID reason", "defer ID reason", with the
			// ids named and the fire's figures left out.
			names := map[string]string{fmt.Sprintf("%x", first[:2]): "first", fmt.Sprintf("%x", second[:2]): "second"}
			var got []string
			for _, s := range lines {
				f := strings.Fields(s)
				f[1] = names[f[1]]
				if f[0] == "fire" {
					f = f[:2]
				}
				got = append(got, strings.Join(f, " "))
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.left, l.balance(actorA))
		})
	}
}

// A block run again after a rollback judges its payers on the ledger's
// balances, not on what the rolled-back run read of them.
func TestLaneFundsAfterRollback(t *testing.T) {
	l := newLane(t, func(c *engine.Config) { c.InitialBasefee, c.Lane.MinBasefee = amount("1"), amount("1") })
	l.x = &recorder{hook: usesAll}
	l.fund(actorA, "350000") // one max_cost of 250,000, plus a little
	l.block(1, actorA, func(tx engine.Tx) {
		l.schedule(tx, 2, "a", engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("0")})
		l.schedule(tx, 2, "b", engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("0")})
	})
	res, _ := l.block(2, actorA, nil)
	require.Equal(t, 1, res.Fired)
	require.Equal(t, 1, res.GC)
	require.NoError(t, l.e.Rollback(1))
	l.fund(actorA, "1000000") // now enough for both
	res, _ = l.block(2, actorA, nil)
	require.Equal(t, 2, res.Fired, "gc %d", res.GC)
}

type fixedAgent struct {
	bid   engine.Bid
	err   error
	panic bool
	seen  []engine.BidContext
}

func (a *fixedAgent) Bid(c *engine.BidContext) (engine.Bid, error) {
	a.seen = append(a.seen, *c)
	if a.panic {
		panic("agent bug")
	}
	return a.bid, a.err
}

func TestLaneAgents(t *testing.T) {
	tests := []struct {
		name     string
		agent    *fixedAgent
		removed  bool // SetAgent(actor, nil) after it: the default agent again
		wantPrio string
	}{
		{"custom bid", &fixedAgent{bid: engine.Bid{MaxFee: amount("1000"), MaxPriorityFee: amount("7")}}, false, "7"},
		{"tip clamped by max fee", &fixedAgent{bid: engine.Bid{MaxFee: amount("103"), MaxPriorityFee: amount("7")}}, false, "3"},
		{"error: default agent", &fixedAgent{err: errors.New("no bid")}, false, "0"},
		{"panic: default agent", &fixedAgent{panic: true}, false, "0"},
		{"removed: default agent", &fixedAgent{bid: engine.Bid{MaxFee: amount("1000"), MaxPriorityFee: amount("7")}}, true, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) { c.InitialBasefee, c.Lane.MinBasefee = amount("100"), amount("100") })
			l.fund(actorA, "1000000000000")
			l.fund(actorB, "1000000000000")
			l.e.SetAgent(actorA, tc.agent)
			if tc.removed {
				l.e.SetAgent(actorA, nil)
			}
			l.block(1, actorA, func(tx engine.Tx) { l.schedule(tx, 3, "a", engine.Fees{}) })
			// Stated fees win over the agent.
			l.block(2, actorA, func(tx engine.Tx) {
				l.schedule(tx, 3, "b", engine.Fees{Set: engine.HasMaxFee | engine.HasMaxPriorityFee, MaxFee: amount("500"), MaxPriorityFee: amount("1")})
			})
			res, _ := l.block(3, actorA, nil)
			require.Equal(t, 2, res.Fired)
			prios := []string{l.log.fees[0].PriorityFee.String(), l.log.fees[1].PriorityFee.String()}
			require.ElementsMatch(t, []string{tc.wantPrio, "1"}, prios)
			if tc.removed {
				require.Empty(t, tc.agent.seen, "a removed agent is not asked")
				return
			}
			require.Len(t, tc.agent.seen, 1, "asked once, for the timer without fees")
			c := tc.agent.seen[0]
			require.Equal(t, uint64(3), c.TriggerHeight)
			require.Equal(t, uint64(3), c.CurrentHeight)
			require.Equal(t, "100", c.BasefeeLaneTimer.String())
			require.Equal(t, "1000000000000", c.OwnerBalance.String())
		})
	}
}

func TestLaneSystemInstructions(t *testing.T) {
	l := newLane(t, nil)
	l.fund(actorA, "1000000000000")
	var id engine.TimerID
	var id2 engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		id = l.schedule(tx, 5, "a", engine.Fees{})
		id2 = l.schedule(tx, 5, "b", engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: 6})
	})
	require.NoError(t, l.e.BeginBlock(2))
	require.ErrorIs(t, l.e.SystemCancel(actorA, id), engine.ErrNotSystem)
	require.ErrorIs(t, l.e.SystemCancel(sysS, engine.TimerID{1}), engine.ErrUnknownTimer)
	require.ErrorIs(t, l.e.SystemExtend(sysS, id2, 5), engine.ErrInvalidExpiry, "never shortens")
	require.NoError(t, l.e.SystemExtend(sysS, id2, 9))
	l.log.lines = nil
	require.NoError(t, l.e.SystemCancel(sysS, id))
	require.Equal(t, []string{fmt.Sprintf("gc %x system_cancel", id[:2])}, l.log.lines)
	p := l.e.LaneParams()
	p.MaxCyclesPerFireAuction = 100_000
	require.ErrorIs(t, l.e.SystemUpdateConfig(sysS, engine.LaneParams{}), engine.ErrInvalidConfig)
	require.NoError(t, l.e.SystemUpdateConfig(sysS, p))
	require.Equal(t, uint64(250_000), l.e.LaneParams().MaxCyclesPerFireAuction, "in force from the next block")
	res, err := l.e.EndBlock(l.x)
	require.NoError(t, err)
	require.Equal(t, 1, res.GC)
	require.NoError(t, l.e.Commit())
	l.block(3, actorA, func(tx engine.Tx) {
		require.Equal(t, uint64(100_000), l.e.LaneParams().MaxCyclesPerFireAuction)
		_, err := tx.ScheduleFees(9, nil, &engine.Fees{Set: engine.HasGasLimit, GasLimit: 100_001})
		require.ErrorIs(t, err, engine.ErrGasLimitTooHigh)
	})
	h, err := l.e.SkipEmpty(6)
	require.NoError(t, err)
	require.Equal(t, uint64(4), h, "stops before the block id2 is due in")
	res, _ = l.block(5, actorA, nil)
	require.Equal(t, 1, res.Fired)
}

// TestLaneNextBasefeeTakesTheNextFloor: a block's NextBasefee is what the
// next block runs at, also when the block updates min_lane_basefee (in
// force from the next block): raised above the computed basefee, or
// lowered below the old floor.
func TestLaneNextBasefeeTakesTheNextFloor(t *testing.T) {
	for _, tc := range []struct {
		name, floor, newFloor, want string
	}{
		{"raised", "100", "2000", "2000"},
		{"lowered", "1000", "100", "875"}, // an empty block: 1000 − 1/8
		{"unchanged", "100", "100", "875"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				c.InitialBasefee, c.Lane.MinBasefee = amount("1000"), amount(tc.floor)
			})
			require.NoError(t, l.e.BeginBlock(1))
			require.NoError(t, l.e.SystemUpdateConfig(sysS, withMinBasefee(l.e.LaneParams(), tc.newFloor)))
			res, err := l.e.EndBlock(l.x)
			require.NoError(t, err)
			require.Equal(t, "1000", res.Lane.Basefee.String())
			require.Equal(t, tc.want, res.Lane.NextBasefee.String())
			require.NoError(t, l.e.Commit())
			require.Equal(t, tc.want, l.e.Basefee().String(), "between the blocks")
			res, _ = l.block(2, actorA, nil)
			require.Equal(t, tc.want, res.Lane.Basefee.String())
		})
	}
}

// TestLaneBasefeeBetweenBlocksAcrossActivation: between blocks Basefee
// (the state root's lane_basefee) is what the next block runs at, also
// before activation (where the lane would start), in the block before it
// and after it, whatever floor updates are pending. Activation is at 4;
// each case updates min_lane_basefee in some blocks (initial 8).
func TestLaneBasefeeBetweenBlocksAcrossActivation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		floors map[uint64]string // block -> the floor its update sets
		first  string            // the basefee of block 4, the lane's first
	}{
		{"none", nil, "8"},
		{"raised in the last block before", map[uint64]string{3: "24"}, "24"},
		{"raised, lowered in the last block before", map[uint64]string{1: "24", 3: "1"}, "8"},
		{"raised, lowered earlier", map[uint64]string{1: "24", 2: "5"}, "8"},
		{"raised in the first lane block", map[uint64]string{4: "40"}, "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(t, func(c *engine.Config) {
				c.ActivationHeight, c.InitialBasefee, c.Lane.MinBasefee = 4, amount("8"), amount("1")
			})
			var between engine.Amount
			for h := uint64(1); h <= 6; h++ {
				require.NoError(t, l.e.BeginBlock(h))
				if h > 1 {
					require.Equal(t, between.String(), l.e.Basefee().String(), "block %d runs at the basefee between the blocks", h)
				}
				if f, ok := tc.floors[h]; ok {
					require.NoError(t, l.e.SystemUpdateConfig(sysS, withMinBasefee(l.e.NextLaneParams(), f)))
				}
				res, err := l.e.EndBlock(l.x)
				require.NoError(t, err)
				if h == 4 {
					require.Equal(t, tc.first, res.Lane.Basefee.String())
				}
				require.NoError(t, l.e.Commit())
				between = l.e.Basefee()
				if res.Lane != nil {
					require.Equal(t, res.Lane.NextBasefee.String(), between.String(), "block %d's next_basefee", h)
				}
			}
		})
	}
}

// TestLaneDeferredStayPending: a deferred timer can be cancelled and
// extended, keeps counting toward its actor's cap, and SkipEmpty does not
// skip the blocks it waits in.
func TestLaneDeferredStayPending(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.MaxTimersPerActor = 2
		c.InitialBasefee, c.Lane.MinBasefee = amount("10"), amount("10")
	})
	l.fund(actorA, "1000000000000")
	var a, b engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		a = l.schedule(tx, 5, "a", engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("10")})
		b = l.schedule(tx, 5, "b", engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("10")})
	})
	require.NoError(t, l.e.BeginBlock(2))
	require.NoError(t, l.e.SystemUpdateConfig(sysS, withMinBasefee(l.e.LaneParams(), "11")))
	_, err := l.e.EndBlock(l.x)
	require.NoError(t, err)
	require.NoError(t, l.e.Commit())
	_, err = l.e.SkipEmpty(4)
	require.NoError(t, err)
	// From block 3 the basefee is 11 > max fee 10: both wait, below_basefee.
	res, lines := l.block(5, actorA, nil)
	require.Equal(t, "11", res.Lane.Basefee.String())
	require.Equal(t, 2, res.Deferred, "%v", lines)
	require.Contains(t, lines[0], "below_basefee")
	l.block(6, actorA, func(tx engine.Tx) {
		_, err := tx.ScheduleFees(9, nil, nil)
		require.ErrorIs(t, err, engine.ErrTooManyTimers, "the deferred count toward the cap")
	})
	h, err := l.e.SkipEmpty(100)
	require.NoError(t, err)
	require.Equal(t, uint64(6), h, "no skipping while timers wait")
	l.block(7, actorA, func(tx engine.Tx) {
		_, err := tx.Cancel(a)
		require.NoError(t, err)
		_, err = tx.Extend(b, 4)
		require.ErrorIs(t, err, engine.ErrInvalidExpiry)
		_, err = tx.Extend(b, 5+2_592_000)
		require.NoError(t, err)
	})
	require.Equal(t, 1, l.e.Pending())
	tm, ok := l.e.Lookup(b)
	require.True(t, ok)
	require.Equal(t, uint64(5), tm.Height)
	require.Equal(t, engine.Fees{Set: engine.HasMaxFee | engine.HasExpiresAt, MaxFee: amount("10"), ExpiresAt: 5 + 2_592_000},
		tm.Fees, "Lookup shows what the timer states, the extend's expiry included")
}

func withMinBasefee(p engine.LaneParams, s string) engine.LaneParams {
	p.MinBasefee = amount(s)
	return p
}

// TestLaneActivation: fifo below the activation height (every due timer
// fires, with 550,000 cycles), the lane from it, every actor at W = 2.
func TestLaneActivation(t *testing.T) {
	l := newLane(t, func(c *engine.Config) { c.ActivationHeight = 3 })
	l.fund(actorA, "1000000000000")
	l.block(1, actorA, func(tx engine.Tx) {
		l.schedule(tx, 2, "fifo", engine.Fees{})
		l.schedule(tx, 3, "lane", engine.Fees{})
	})
	res, lines := l.block(2, actorA, nil)
	require.Nil(t, res.Lane)
	require.Equal(t, 1, res.Fired)
	require.Equal(t, "1000000000000", l.balance(actorA), "fifo charges nothing")
	require.Len(t, lines, 1)
	res, _ = l.block(3, actorA, nil)
	require.NotNil(t, res.Lane)
	require.Equal(t, "1000", res.Lane.Basefee.String())
	require.Equal(t, uint32(2_000_000), l.log.fees[0].Weight)
	require.Equal(t, uint64(250_000), l.log.fees[0].GasLimit)
}

// TestLaneOverCapNeedsFunds: CIP-1 §3 step 4's funds check comes before
// step 7's per-fire cap. Of two timers a lowered cap leaves over it, the
// one whose payer cannot cover its max_cost is collected
// insufficient_funds; the funded one waits over_cap, and fires once the
// cap is raised again.
func TestLaneOverCapNeedsFunds(t *testing.T) {
	l := newLane(t, nil)
	l.fund(actorB, "1000000000000")
	over := engine.Fees{Set: engine.HasGasLimit, GasLimit: 200_000}
	paid := over
	paid.Set, paid.FeePayer = paid.Set|engine.HasFeePayer, actorB
	var poor, rich engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		poor = l.schedule(tx, 3, "poor", over)
		rich = l.schedule(tx, 3, "rich", paid)
	})
	setCap := func(h, fireCap uint64) { // in force from block h+1
		require.NoError(t, l.e.BeginBlock(h))
		p := l.e.LaneParams()
		p.MaxCyclesPerFireAuction = fireCap
		require.NoError(t, l.e.SystemUpdateConfig(sysS, p))
		_, err := l.e.EndBlock(l.x)
		require.NoError(t, err)
		require.NoError(t, l.e.Commit())
	}
	setCap(2, 100_000)
	res, lines := l.block(3, actorA, nil)
	require.Equal(t, []string{fmt.Sprintf("gc %x insufficient_funds", poor[:2]), fmt.Sprintf("defer %x over_cap", rich[:2])}, lines)
	require.Equal(t, 1, res.GC)
	require.Equal(t, 1, l.e.Pending())
	setCap(4, 250_000)
	res, _ = l.block(5, actorA, nil)
	require.Equal(t, 1, res.Fired)
	require.Equal(t, 0, l.e.Pending())
}

// A config update made in a block that a rollback undoes is undone with it:
// the block run again starts with the parameters in force before, whether
// the undone block was the last (the update still pending) or not (it had
// taken effect).
func TestLaneRollbackUndoesConfigUpdate(t *testing.T) {
	for _, depth := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("undone blocks %d", depth), func(t *testing.T) {
			l := newLane(t, nil)
			l.block(1, actorA, nil)
			before := l.e.LaneParams()
			require.NoError(t, l.e.BeginBlock(2))
			p := before
			p.FairnessWindowBlocks, p.GCCycles = 7, 0
			require.NoError(t, l.e.SystemUpdateConfig(sysS, p))
			_, err := l.e.EndBlock(l.x)
			require.NoError(t, err)
			require.NoError(t, l.e.Commit())
			if depth == 2 {
				l.block(3, actorA, nil)
				require.Equal(t, p, l.e.LaneParams())
			}
			require.NoError(t, l.e.Rollback(1))
			require.Equal(t, before, l.e.NextLaneParams(), "the undone update is still pending")
			l.block(2, actorA, nil)
			require.Equal(t, before, l.e.LaneParams())
		})
	}
}
