package engine_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

func actorN(i int) engine.Address {
	var a engine.Address
	a[0] = 0xa0
	binary.BigEndian.PutUint32(a[16:], uint32(i))
	return a
}

// txOf runs f in a committed transaction of actor in the open block.
func txOf(t *testing.T, e *engine.Engine, actor engine.Address, nonce uint64, f func(tx engine.Tx)) {
	t.Helper()
	tx, err := e.Begin(actor, nonce)
	require.NoError(t, err)
	f(tx)
	require.NoError(t, tx.Commit())
}

// TestLaneStorm: 100,000 timers due at one height. The lane never takes
// more than its budget, the basefee rises by 12.5% in every full block, and
// every timer fires, in the same order under every layout.
func TestLaneStorm(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	const actors, gas = 1_000, 1_000
	run := func(layout [3]uint64) []engine.TimerID {
		l := newLane(t, func(c *engine.Config) {
			c.RingSize, c.EpochLength, c.EpochCount = layout[0], layout[1], layout[2]
		})
		var order []engine.TimerID
		l.x = &recorder{hook: func(_ engine.Tx, d *engine.Delivery) (engine.Usage, error) {
			order = append(order, d.TimerID)
			return engine.Usage{Cycles: gas / 2}, nil
		}}
		require.NoError(t, l.e.BeginBlock(1))
		for a := range actors {
			l.fund(actorN(a), "1000000000000000")
			txOf(t, l.e, actorN(a), 1, func(tx engine.Tx) {
				for k := range n / actors {
					tx.SetNonce(uint64(k))
					_, err := tx.ScheduleFees(10, nil, &engine.Fees{Set: engine.HasGasLimit | engine.HasMaxPriorityFee, GasLimit: gas, MaxPriorityFee: amount(fmt.Sprint(k % 7))})
					require.NoError(t, err)
				}
			})
		}
		_, err := l.e.EndBlock(l.x)
		require.NoError(t, err)
		require.NoError(t, l.e.Commit())
		_, err = l.e.SkipEmpty(9)
		require.NoError(t, err)
		fired := 0
		for h := uint64(10); fired < n; h++ {
			require.Less(t, h, uint64(10+n), "the storm never drains")
			res, _ := l.block(h, actorN(0), nil)
			p := l.e.LaneParams()
			require.LessOrEqual(t, res.Lane.LaneCycles, p.LaneTimerCycles)
			fired += res.Fired
			if res.Lane.LaneCycles == p.LaneTimerCycles {
				b := res.Lane.Basefee
				want := b.Add(b.Div64(8))
				if b.Div64(8).IsZero() {
					want = b.Add64(1)
				}
				require.Equal(t, want.String(), res.Lane.NextBasefee.String(), "block %d", h)
			}
			require.Equal(t, n-fired, res.Pending)
			require.Equal(t, res.Pending, res.Deferred)
		}
		return order
	}
	a := run([3]uint64{4096, 1024, 64})
	b := run([3]uint64{4, 2, 2})
	require.Len(t, a, n)
	require.Equal(t, a, b, "the order among equals depends on nothing but the state")
}

// TestLaneSpamCannotStarveQuiet: a spam actor keeps a thousand timers
// waiting with the same bid as a quiet actor; W(actor) puts the quiet
// actor's timers first, so each fires in the block it is due.
func TestLaneSpamCannotStarveQuiet(t *testing.T) {
	spam, quiet := actorN(1), actorN(2)
	l := newLane(t, func(c *engine.Config) {
		c.MaxTimersPerActor = 100_000
		c.Lane.FairnessWindowBlocks = 50
	})
	l.fund(spam, "1000000000000000000000000000000")
	l.fund(quiet, "1000000000000000000000000000000")
	bid := engine.Fees{Set: engine.HasMaxFee | engine.HasMaxPriorityFee, MaxFee: amount("1000000000000000000000000000"), MaxPriorityFee: amount("10")}
	due := map[engine.TimerID]uint64{}
	late := 0
	l.x = &recorder{hook: func(_ engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		if h, ok := due[d.TimerID]; ok && d.Block != h {
			late++
		}
		return engine.Usage{Cycles: d.CyclesLimit}, nil // so the lane runs 8 a block
	}}
	nonce := uint64(0)
	for h := uint64(1); h <= 200; h++ {
		require.NoError(t, l.e.BeginBlock(h))
		txOf(t, l.e, spam, h, func(tx engine.Tx) {
			for range 100 { // 100 new a block; the lane runs 8
				nonce++
				tx.SetNonce(nonce)
				_, err := tx.ScheduleFees(h+1, nil, &bid)
				require.NoError(t, err)
			}
		})
		if h%5 == 0 {
			txOf(t, l.e, quiet, h, func(tx engine.Tx) {
				r, err := tx.ScheduleFees(h+1, nil, &bid)
				require.NoError(t, err)
				due[r.ID] = h + 1
			})
		}
		_, err := l.e.EndBlock(l.x)
		require.NoError(t, err)
		require.NoError(t, l.e.Commit())
	}
	require.Len(t, due, 40)
	require.Zero(t, late, "a quiet actor's timer waited behind the spam")
	require.Greater(t, l.e.PendingOf(spam), 10_000, "the spam really congests the lane")
}

// TestLaneOutageGCStorm: thousands of timers wait (their max fee below a
// raised basefee) past their TTL, then expire together: the GC lane
// collects them within TIMER_GC_CYCLES per block, the execution lane
// untouched, until none is left.
func TestLaneOutageGCStorm(t *testing.T) {
	n, wait := 5_000, uint64(1_000)
	if testing.Short() {
		n, wait = 2_000, 100
	}
	l := newLane(t, func(c *engine.Config) {
		c.MaxTimersPerActor = 100_000
		c.InitialBasefee, c.Lane.MinBasefee = amount("10"), amount("10")
	})
	require.NoError(t, l.e.BeginBlock(1))
	require.NoError(t, l.e.SystemUpdateConfig(sysS, withMinBasefee(l.e.LaneParams(), "11")))
	txOf(t, l.e, actorA, 1, func(tx engine.Tx) {
		for k := range n {
			tx.SetNonce(uint64(k))
			_, err := tx.ScheduleFees(2, nil, &engine.Fees{Set: engine.HasMaxFee | engine.HasExpiresAt, MaxFee: amount("10"), ExpiresAt: 2 + wait})
			require.NoError(t, err)
		}
	})
	_, err := l.e.EndBlock(l.x)
	require.NoError(t, err)
	require.NoError(t, l.e.Commit())
	p := l.e.LaneParams()
	perBlock := int(p.GCCycles / p.GCCostPerTimer)
	collected := 0
	for h := uint64(2); l.e.Pending() > 0; h++ {
		res, _ := l.block(h, actorA, nil)
		require.LessOrEqual(t, res.Lane.GCCycles, p.GCCycles)
		require.Zero(t, res.Fired)
		require.Zero(t, res.Lane.LaneCycles)
		if h <= 2+wait {
			require.Zero(t, res.GC, "block %d: not expired yet", h)
			continue
		}
		require.Equal(t, min(perBlock, n-collected), res.GC)
		collected += res.GC
	}
	require.Equal(t, n, collected)
}

// TestLaneBalancesRunOut: a payer funds a stream of timers until its
// balance no longer covers max_cost; from then its timers are collected
// for insufficient funds. No balance goes negative and no token is made or
// lost: funds in = balances + tips + burned.
func TestLaneBalancesRunOut(t *testing.T) {
	l := newLane(t, func(c *engine.Config) { c.InitialBasefee, c.Lane.MinBasefee = amount("1"), amount("1") })
	const funded = 10_000_000
	l.fund(payerP, fmt.Sprint(funded))
	fee := engine.Fees{Set: engine.HasFeePayer | engine.HasGasLimit | engine.HasMaxPriorityFee, FeePayer: payerP, GasLimit: 100_000, MaxPriorityFee: amount("1")}
	l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) { return engine.Usage{Cycles: 100_000}, nil }}
	fired, gc := 0, 0
	for h := uint64(1); h <= 60; h++ {
		res, _ := l.block(h, actorA, func(tx engine.Tx) {
			for k := range 5 {
				tx.SetNonce(uint64(k))
				l.schedule(tx, h+1, "", fee)
			}
		})
		fired += res.Fired
		gc += res.GC
		if res.GC > 0 {
			require.Contains(t, l.log.lines[0], "insufficient_funds")
		}
	}
	require.Greater(t, fired, 0)
	require.Greater(t, gc, 0)
	led := l.e.Ledger().(*engine.MemLedger)
	total := l.e.Ledger().Balance(payerP).Add(l.e.Ledger().Balance(proposerQ)).Add(led.Burned())
	require.Equal(t, fmt.Sprint(funded), total.String())
}

// TestLaneConservation drives random lane blocks (random fees, payers,
// handler usage and reverts, cancels from handlers) and checks after each:
// every fire's charge splits exactly, the ledger's total is constant, the
// pending count adds up.
func TestLaneConservation(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	payers := []engine.Address{actorN(1), actorN(2), actorN(3)}
	l := newLane(t, func(c *engine.Config) {
		c.Lane.LaneTimerCycles = 400_000
		c.Lane.MaxCyclesPerFireAuction = 200_000
		c.Lane.GCCycles = 20_000
		c.InitialBasefee = amount("5")
		c.MaxTimersPerActor = 10_000
	})
	supply := uint64(0)
	for _, p := range payers {
		v := 1_000_000 + r.Uint64N(50_000_000)
		supply += v
		l.fund(p, fmt.Sprint(v))
	}
	var live []engine.TimerID
	l.x = &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		if len(live) > 0 && r.IntN(4) == 0 {
			tx.Cancel(live[r.IntN(len(live))]) // may be unknown, fired or taken: any answer is fine
		}
		if r.IntN(3) == 0 {
			tx.Schedule(d.Block+1+r.Uint64N(3), []byte{byte(r.IntN(256)), byte(r.IntN(256))})
		}
		u := engine.Usage{Cycles: r.Uint64N(d.CyclesLimit + 1000)}
		if r.IntN(5) == 0 {
			return u, fmt.Errorf("revert")
		}
		return u, nil
	}}
	for h := uint64(1); h <= 300; h++ {
		res, _ := l.block(h, actorN(r.IntN(5)), func(tx engine.Tx) {
			for range r.IntN(6) {
				f := engine.Fees{}
				if r.IntN(2) == 0 {
					f.Set |= engine.HasFeePayer
					f.FeePayer = payers[r.IntN(len(payers))]
				}
				if r.IntN(2) == 0 {
					f.Set |= engine.HasGasLimit
					f.GasLimit = 1 + r.Uint64N(200_000)
				}
				if r.IntN(3) == 0 {
					f.Set |= engine.HasMaxFee | engine.HasMaxPriorityFee
					f.MaxFee = amount(fmt.Sprint(10 + r.IntN(40)))
					f.MaxPriorityFee = amount(fmt.Sprint(r.IntN(20)))
				}
				if r.IntN(4) == 0 {
					f.Set |= engine.HasExpiresAt
					f.ExpiresAt = h + 1 + r.Uint64N(5)
				}
				tx.SetNonce(r.Uint64())
				s, err := tx.ScheduleFees(h+1+r.Uint64N(4), nil, &f)
				if err == nil {
					live = append(live, s.ID)
				}
			}
		})
		for _, f := range l.log.fees {
			require.Equal(t, f.Charged.String(), f.Refund.Add(f.Tip).Add(f.Burned).String())
		}
		led := l.e.Ledger().(*engine.MemLedger)
		total := led.Burned().Add(l.e.Ledger().Balance(proposerQ))
		for _, p := range payers {
			total = total.Add(l.e.Ledger().Balance(p))
		}
		require.Equal(t, fmt.Sprint(supply), total.String(), "block %d", h)
		require.LessOrEqual(t, res.Lane.LaneCycles, uint64(400_000))
		require.LessOrEqual(t, res.Lane.GCCycles, uint64(20_000))
		require.Equal(t, l.e.Pending(), res.Pending)
	}
}

// TestLaneHandlerCancelsDeferred: a handler's cancel or extend of a timer
// of its block's due set, fired or yet to fire or left waiting, is
// UnknownTimer, as of fifo's due timers (FORMAT.md); the block's defer
// events name the timers left waiting, and the next block's transaction
// cancels one of them.
func TestLaneHandlerCancelsDeferred(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.Lane.LaneTimerCycles = 500_000 // two fires of 250,000
	})
	l.fund(actorA, "1000000000000000")
	var ids []engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		for k := range 5 {
			ids = append(ids, l.schedule(tx, 2, fmt.Sprint(k), engine.Fees{Set: engine.HasExpiresAt, ExpiresAt: 100}))
		}
	})
	calls := 0
	l.x = &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		for _, id := range ids {
			calls++
			_, err := tx.Cancel(id)
			require.ErrorIs(t, err, engine.ErrUnknownTimer)
			_, err = tx.Extend(id, 200)
			require.ErrorIs(t, err, engine.ErrUnknownTimer)
		}
		tx.Schedule(d.Block+5, d.TimerID[:])
		return engine.Usage{Cycles: d.CyclesLimit}, nil // two fires fill the lane
	}}
	res, lines := l.block(2, actorA, nil)
	require.Equal(t, 2, res.Fired)
	require.Equal(t, 10, calls)
	require.Equal(t, 3, res.Deferred)
	var waiting []string
	for _, id := range ids {
		if _, ok := l.e.Lookup(id); ok {
			waiting = append(waiting, fmt.Sprintf("defer %x lane_full", id[:2]))
		}
	}
	slices.Sort(waiting)
	require.Equal(t, waiting, lines[2:])
	require.Equal(t, 5, l.e.Pending()) // three waiting, two new
	l.x = &recorder{}
	l.block(3, actorA, func(tx engine.Tx) {
		var cancelled bool
		for _, id := range ids {
			if _, err := tx.Cancel(id); err == nil {
				cancelled = true
				break
			}
		}
		require.True(t, cancelled, "a transaction cancels a waiting timer")
	})
}

// TestLeavesDuringLaneFires: a handler that lists the state's leaves in
// the middle of a lane block sees exactly the pending timers: those whose
// turn has not come or who wait, not those taken to fire, itself included.
func TestLeavesDuringLaneFires(t *testing.T) {
	l := newLane(t, func(c *engine.Config) {
		c.Lane.LaneTimerCycles = 750_000 // three fires of 250,000
	})
	l.fund(actorA, "1000000000000000")
	var ids []engine.TimerID
	l.block(1, actorA, func(tx engine.Tx) {
		for k := range 6 {
			ids = append(ids, l.schedule(tx, 2, fmt.Sprint(k), engine.Fees{}))
		}
	})
	fires := 0
	l.x = &recorder{hook: func(_ engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		fires++
		var want, got []engine.TimerID
		for _, id := range ids {
			if _, ok := l.e.Lookup(id); ok {
				want = append(want, id)
			}
		}
		for _, leaf := range l.e.Leaves() {
			if leaf.Kind == "timer" {
				got = append(got, engine.TimerID(leaf.Key))
			}
		}
		slices.SortFunc(want, func(a, b engine.TimerID) int { return slices.Compare(a[:], b[:]) })
		slices.SortFunc(got, func(a, b engine.TimerID) int { return slices.Compare(a[:], b[:]) })
		require.Len(t, want, 6-fires, "fire %d: the fired ones are gone", fires)
		require.Equal(t, want, got, "fire %d", fires)
		return engine.Usage{Cycles: d.CyclesLimit}, nil // three fires fill the lane
	}}
	res, _ := l.block(2, actorA, nil)
	require.Equal(t, 3, res.Fired)
	require.Equal(t, 3, fires)
}

// TestLaneDueSetLeavesTheCap: while a lane block's handlers run, its due
// set is out of the pending set for the cap, as FORMAT.md's end of block
// takes fifo's out, those yet to fire and those left waiting too. A
// handler of an actor at its cap of 3, whose three timers are due and of
// which the lane fits one, schedules three new ones; after the block the
// actor holds five, the two left waiting and the three new, more than its
// cap, until it fires or cancels some. Such a state snapshots, restores
// and reopens from the log like any other.
func TestLaneDueSetLeavesTheCap(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable %v", durable), func(t *testing.T) {
			dir := t.TempDir()
			cfg := engine.DefaultConfig()
			cfg.Policy, cfg.StateRoot, cfg.MaxTimersPerActor = engine.PolicyLane, true, 3
			cfg.Lane.LaneTimerCycles = 250_000 // one fire of 250,000
			var e *engine.Engine
			var err error
			if durable {
				e, err = engine.Open(dir, cfg)
			} else {
				e, err = engine.New(cfg)
			}
			require.NoError(t, err)
			require.NoError(t, e.Ledger().Credit(actorA, amount("1000000000000000")))
			inBlock(t, e, 1, actorA, func(tx engine.Tx) {
				for k := range 3 {
					_, _, err := tx.Schedule(2, []byte{byte(k)})
					require.NoError(t, err)
				}
				_, _, err := tx.Schedule(2, []byte{9})
				require.ErrorIs(t, err, engine.ErrTooManyTimers, "at the cap")
			})
			var errs []error
			x := &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
				for k := range 4 {
					_, _, err := tx.Schedule(d.Block+10, []byte{byte(10 + k)})
					errs = append(errs, err)
				}
				return engine.Usage{Cycles: d.CyclesLimit}, nil
			}}
			require.NoError(t, e.BeginBlock(2))
			res, err := e.EndBlock(x)
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			require.Equal(t, 1, res.Fired)
			require.Equal(t, 2, res.Deferred)
			require.Equal(t, []error{nil, nil, nil, engine.ErrTooManyTimers}, errs)
			require.Equal(t, 5, e.PendingOf(actorA), "two waiting, three new")

			var snap bytes.Buffer
			require.NoError(t, e.WriteSnapshot(&snap))
			r, err := engine.Restore(cfg, &snap)
			require.NoError(t, err, "a state over the cap restores")
			require.Equal(t, e.Root(), r.Root())
			if durable {
				require.NoError(t, e.Close())
				e, err = engine.Open(dir, cfg)
				require.NoError(t, err, "and reopens")
				require.Equal(t, r.Root(), e.Root())
			}
			inBlock(t, e, 3, actorA, func(tx engine.Tx) {
				_, _, err := tx.Schedule(20, []byte{30})
				require.ErrorIs(t, err, engine.ErrTooManyTimers, "over the cap, the actor schedules nothing")
			})
		})
	}
}
