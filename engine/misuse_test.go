package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/merkle"
)

// Cases an audit of the public API found, each a test that failed on the
// code before its fix.

// A root read inside a transaction that is then reverted must not keep
// the reverted changes: the committed root equals that of an engine that
// never saw the transaction, and CheckRoot agrees. The same through a
// handler that reads the root and then fails.
func TestRootReadInsideRevertedTx(t *testing.T) {
	withRoot := func(c *engine.Config) { c.StateRoot = true }
	for _, kind := range []string{"schedule", "cancel"} {
		t.Run(kind, func(t *testing.T) {
			e, ref := newEngine(t, withRoot), newEngine(t, withRoot)
			var id engine.TimerID
			for _, x := range []*engine.Engine{e, ref} {
				inBlock(t, x, 1, actorA, func(tx engine.Tx) {
					var err error
					id, _, err = tx.Schedule(10, []byte("keep"))
					require.NoError(t, err)
				})
			}
			require.NoError(t, e.BeginBlock(2))
			tx, err := e.Begin(actorA, 2)
			require.NoError(t, err)
			if kind == "schedule" {
				_, _, err = tx.Schedule(20, []byte("reverted"))
			} else {
				_, err = tx.Cancel(id)
			}
			require.NoError(t, err)
			e.Root() // hashes the open transaction's change into the tree
			require.NoError(t, tx.Revert())
			_, err = e.EndBlock(&recorder{})
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			require.NoError(t, ref.BeginBlock(2))
			_, err = ref.EndBlock(&recorder{})
			require.NoError(t, err)
			require.NoError(t, ref.Commit())
			require.Equal(t, ref.Root(), e.Root())
			require.NoError(t, e.CheckRoot())
		})
	}
	t.Run("handler", func(t *testing.T) {
		e := newEngine(t, withRoot)
		inBlock(t, e, 1, actorA, func(tx engine.Tx) {
			_, _, err := tx.Schedule(2, nil)
			require.NoError(t, err)
		})
		require.NoError(t, e.BeginBlock(2))
		_, err := e.EndBlock(&recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
			_, _, err := tx.Schedule(d.Block+5, []byte("from the handler"))
			require.NoError(t, err)
			e.Root()
			return engine.Usage{}, errors.New("the handler fails: its calls are reverted")
		}})
		require.NoError(t, err)
		require.NoError(t, e.Commit())
		require.Zero(t, e.Pending())
		require.NoError(t, e.CheckRoot())
	})
}

// A durable lane engine reopens after a SYS_UPDATE_TIMER_CONFIG changed
// the fairness window: recovery expires the window under the length in
// force in each block, as the live engine did (it used the length before
// the update in the block the update took effect, and the root the record
// carried did not match: the committed blocks could not be recovered).
func TestLaneWindowUpdateReopens(t *testing.T) {
	for _, window := range []uint64{3, 5000} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			cfg := engine.DefaultConfig()
			cfg.Policy, cfg.StateRoot = engine.PolicyLane, true
			cfg.SystemDeployers = []engine.Address{sysS}
			dir := t.TempDir()
			e, err := engine.Open(dir, cfg)
			require.NoError(t, err)
			require.NoError(t, e.Ledger().Credit(actorA, engine.Amount{Lo: 1 << 40}))
			for h := uint64(1); h <= 12; h++ {
				require.NoError(t, e.BeginBlock(h))
				if h <= 6 {
					tx, err := e.Begin(actorA, h)
					require.NoError(t, err)
					_, _, err = tx.Schedule(h+1, []byte{byte(h)})
					require.NoError(t, err)
					require.NoError(t, tx.Commit())
				}
				if h == 7 {
					p := e.NextLaneParams()
					p.FairnessWindowBlocks = window
					require.NoError(t, e.SystemUpdateConfig(sysS, p))
				}
				_, err := e.EndBlock(&recorder{})
				require.NoError(t, err)
				require.NoError(t, e.Commit())
			}
			root := e.Root()
			require.NoError(t, e.Close())
			cfg.CheckEveryRoot = true // each record's root, not the last one's alone
			e, err = engine.Open(dir, cfg)
			require.NoError(t, err, "reopening after committed blocks")
			defer e.Close()
			require.Equal(t, root, e.Root())
		})
	}
}

// ScheduleFees refuses fee arguments that name no field or tier (they
// panicked at the next end of block, or made the log record one that
// recovery refuses), and reports a closed handle as closed first.
func TestScheduleFeesInvalid(t *testing.T) {
	l := newLane(t, nil)
	require.NoError(t, l.e.BeginBlock(1))
	tx, err := l.e.Begin(actorA, 1)
	require.NoError(t, err)
	for _, c := range []struct {
		f    engine.Fees
		what string
	}{
		{engine.Fees{Set: engine.HasTier, Tier: engine.Urgent + 1}, "Tier 4 names no priority tier"},
		{engine.Fees{Set: engine.HasBid << 1}, "Set bits 0x80 name no field"},
		// A value without its bit would be ignored: a forgotten bit.
		{engine.Fees{FeePayer: actorB}, "FeePayer has a value but Set lacks HasFeePayer"},
		{engine.Fees{Set: engine.HasMaxFee, MaxFee: amount("9"), GasLimit: 10}, "GasLimit has a value but Set lacks HasGasLimit"},
		{engine.Fees{ExpiresAt: 9}, "ExpiresAt"},
		{engine.Fees{MaxFee: amount("1")}, "MaxFee"},
		{engine.Fees{MaxPriorityFee: amount("1")}, "MaxPriorityFee"},
		{engine.Fees{Tier: engine.Urgent}, "Tier has a value but Set lacks HasTier"},
	} {
		_, err := tx.ScheduleFees(5, []byte("x"), &c.f)
		require.ErrorIs(t, err, engine.ErrInvalidFees, "%+v", c.f)
		require.ErrorContains(t, err, c.what)
	}
	require.Zero(t, l.e.Pending())
	require.NoError(t, tx.Commit())
	_, err = tx.ScheduleFees(5, nil, &engine.Fees{Set: engine.HasGasLimit})
	require.ErrorIs(t, err, engine.ErrTxClosed)

	fifo := newEngine(t, nil)
	require.NoError(t, fifo.BeginBlock(1))
	tx, err = fifo.Begin(actorA, 1)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, err = tx.ScheduleFees(5, nil, &engine.Fees{Set: engine.HasGasLimit})
	require.ErrorIs(t, err, engine.ErrTxClosed)

	// Under fifo, no fee argument is Schedule; any Set bit needs the lane.
	_, err = fifo.EndBlock(&recorder{})
	require.NoError(t, err)
	require.NoError(t, fifo.Commit())
	inBlock(t, fifo, 2, actorA, func(tx engine.Tx) {
		_, err := tx.ScheduleFees(5, []byte("nil"), nil)
		require.NoError(t, err)
		_, err = tx.ScheduleFees(5, []byte("none"), &engine.Fees{})
		require.NoError(t, err)
		_, err = tx.ScheduleFees(5, []byte("gas"), &engine.Fees{Set: engine.HasGasLimit, GasLimit: 1})
		require.ErrorIs(t, err, engine.ErrNeedsLane)
	})
	require.Equal(t, 2, fifo.Pending())
}

// Rollback works at the top of the heights and with any depth: the
// history's trim compared height + depth, which wrapped past 2^64 and
// dropped every block kept.
func TestRollbackDepthNearTheTop(t *testing.T) {
	for _, c := range []struct {
		name         string
		depth, start uint64
	}{
		{"default depth near 2^64", engine.DefaultRollbackDepth, math.MaxUint64 - 100},
		{"depth 2^64-1", math.MaxUint64, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, func(cfg *engine.Config) { cfg.RollbackDepth = c.depth })
			for h := c.start; h < c.start+10; h++ {
				inBlock(t, e, h, actorA, func(tx engine.Tx) {
					_, _, err := tx.Schedule(h+1, []byte("x"))
					require.NoError(t, err)
				})
			}
			require.NoError(t, e.Rollback(c.start+1))
			require.Equal(t, c.start+1, e.Height())
		})
	}
}

// panicObserver panics at its first Fired.
type panicObserver struct{ fired int }

func (o *panicObserver) Fired(*engine.Delivery, engine.FireResult) {
	o.fired++
	if o.fired == 1 {
		panic("observer bug")
	}
}

// An Executor that panics reverts its handler, as a failed one, and the
// block goes on (the engine was left with a handler transaction open and
// refused every call after); an Observer that panics does not stop the
// block: EndBlock ends it, then panics with the Observer's value (due
// timers vanished without an error when the embedder called EndBlock
// again); EndBlock(nil) is an error, not a panic.
func TestEmbedderPanics(t *testing.T) {
	setup := func(t *testing.T) *engine.Engine {
		e := newEngine(t, func(c *engine.Config) { c.StateRoot = true })
		inBlock(t, e, 1, actorA, func(tx engine.Tx) {
			for _, p := range []string{"a", "b", "c"} {
				_, _, err := tx.Schedule(2, []byte(p))
				require.NoError(t, err)
			}
		})
		require.NoError(t, e.BeginBlock(2))
		return e
	}
	for _, panics := range []string{"b", "ab", "c", "abc"} { // the first, in a row, the last, all
		t.Run("executor panics at "+panics, func(t *testing.T) {
			e := setup(t)
			var results []error
			x := &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
				_, _, err := tx.Schedule(d.Block+1, append([]byte("child of "), d.Payload...))
				require.NoError(t, err)
				if strings.Contains(panics, string(d.Payload)) {
					panic("handler bug")
				}
				return engine.Usage{}, nil
			}}
			e.SetObserver(observerFunc(func(_ *engine.Delivery, r engine.FireResult) { results = append(results, r.Err) }))
			res, err := e.EndBlock(x)
			require.NoError(t, err)
			require.Equal(t, 3, res.Fired)
			require.Len(t, results, 3)
			for k, p := range []string{"a", "b", "c"} {
				if strings.Contains(panics, p) {
					require.ErrorIs(t, results[k], engine.ErrExecutorPanic)
					require.ErrorContains(t, results[k], "handler bug")
				} else {
					require.NoError(t, results[k])
				}
			}
			require.NoError(t, e.Commit())
			require.Equal(t, 3-len(panics), e.Pending(), "the panicking handlers' schedules are reverted")
			require.NoError(t, e.CheckRoot())
		})
	}
	t.Run("observer", func(t *testing.T) {
		e := setup(t)
		x := &recorder{}
		e.SetObserver(&panicObserver{})
		require.PanicsWithValue(t, "observer bug", func() { _, _ = e.EndBlock(x) })
		require.Len(t, x.fired, 3, "every due timer fired")
		_, err := e.EndBlock(x)
		require.ErrorIs(t, err, engine.ErrBlockEnded, "the block has ended")
		require.NoError(t, e.Commit())
		require.Zero(t, e.Pending())
		require.NoError(t, e.CheckRoot())
	})
	t.Run("nil executor", func(t *testing.T) {
		e := setup(t)
		_, err := e.EndBlock(nil)
		require.ErrorIs(t, err, engine.ErrNoExecutor)
		res, err := e.EndBlock(&recorder{})
		require.NoError(t, err)
		require.Equal(t, 3, res.Fired, "nothing was taken by the refused call")
	})
}

type observerFunc func(*engine.Delivery, engine.FireResult)

func (f observerFunc) Fired(d *engine.Delivery, r engine.FireResult) { f(d, r) }

// meddler is a Gas Bidding Agent that calls back into the engine.
type meddler struct {
	e    *engine.Engine
	errs []error
}

func (m *meddler) Bid(ctx *engine.BidContext) (engine.Bid, error) {
	_, err := m.e.Begin(actorB, 1)
	m.errs = append(m.errs, err, m.e.SystemCancel(sysS, ctx.TimerID), m.e.Rollback(1), m.e.BeginBlock(ctx.CurrentHeight+1))
	return engine.DefaultBid(ctx), nil
}

// While end of block runs, an agent (or observer, or handler outside its
// own transaction) can begin no transaction, block, rollback or system
// instruction: each gets ErrInEndBlock (a transaction begun from an agent
// and a system cancel of the timer being priced broke the engine's index).
func TestNoCallsIntoEndBlock(t *testing.T) {
	l := newLane(t, nil)
	l.fund(actorA, "1000000000000")
	l.block(1, actorA, func(tx engine.Tx) {
		l.schedule(tx, 2, "x", engine.Fees{})
	})
	m := &meddler{e: l.e}
	l.e.SetAgent(actorA, m)
	res, _ := l.block(2, actorA, nil)
	require.Equal(t, 1, res.Fired)
	require.Len(t, m.errs, 4)
	for _, err := range m.errs {
		require.ErrorIs(t, err, engine.ErrInEndBlock)
	}
}

// Nil arguments get an error or a stated meaning, never a nil dereference.
func TestNilArguments(t *testing.T) {
	l := newLane(t, nil)
	l.e.SetLedger(nil) // a new, empty ledger
	l.block(1, actorA, func(tx engine.Tx) { l.schedule(tx, 2, "x", engine.Fees{}) })
	res, _ := l.block(2, actorA, nil)
	require.Equal(t, 1, res.GC, "collected: the new ledger holds nothing")
	require.Error(t, l.e.WriteSnapshot(nil))
	_, err := engine.Restore(engine.DefaultConfig(), nil)
	require.ErrorIs(t, err, engine.ErrSnapshot)
}

// After Close every call that would change the state fails with
// ErrClosed, a Tx held from before too (a durable engine's Begin and
// Schedule went on changing memory); queries answer; Close again is nil.
func TestCallsAfterClose(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable %v", durable), func(t *testing.T) {
			e := newEngine(t, nil)
			if durable {
				var err error
				e, err = engine.Open(t.TempDir(), engine.DefaultConfig())
				require.NoError(t, err)
			}
			require.NoError(t, e.BeginBlock(1))
			tx, err := e.Begin(actorA, 1)
			require.NoError(t, err)
			require.NoError(t, e.Close())
			_, _, err = tx.Schedule(5, []byte("after close"))
			require.ErrorIs(t, err, engine.ErrTxClosed)
			_, err = e.Begin(actorA, 1)
			require.ErrorIs(t, err, engine.ErrClosed)
			_, err = e.EndBlock(&recorder{})
			require.ErrorIs(t, err, engine.ErrClosed)
			require.ErrorIs(t, e.Commit(), engine.ErrClosed)
			require.ErrorIs(t, e.BeginBlock(2), engine.ErrClosed)
			require.ErrorIs(t, e.Rollback(0), engine.ErrClosed)
			_, err = e.SkipEmpty(9)
			require.ErrorIs(t, err, engine.ErrClosed)
			require.Zero(t, e.Pending())
			require.ErrorIs(t, e.WriteSnapshot(io.Discard), engine.ErrClosed, "the open block was never committed")
			require.NoError(t, e.Close())
		})
	}
}

// TestSnapshotAfterClose: an engine closed between blocks still writes its
// state, which restores to the same root.
func TestSnapshotAfterClose(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.StateRoot = true })
	inBlock(t, e, 1, actorA, func(tx engine.Tx) {
		_, _, err := tx.Schedule(9, []byte("kept"))
		require.NoError(t, err)
	})
	require.NoError(t, e.Close())
	var b bytes.Buffer
	require.NoError(t, e.WriteSnapshot(&b))
	cfg := engine.DefaultConfig()
	cfg.StateRoot = true
	r, err := engine.Restore(cfg, &b)
	require.NoError(t, err)
	require.Equal(t, e.Root(), r.Root())
	require.Equal(t, 1, r.Pending())
}

// A second audit round: Close from inside EndBlock is refused (it was
// undone when EndBlock ended the block, and the engine ran on); a
// panicking Observer.Clamped inside a handler waits for the end of
// EndBlock like the other observer calls (it reverted the handler as an
// executor panic, a state change); a Ledger that panics leaves the engine
// failed with a clear error (ErrInEndBlock for good before); CheckRoot
// inside a transaction that cancelled a timer agrees (Leaves listed it).
func TestEndBlockRoundTwo(t *testing.T) {
	t.Run("close inside", func(t *testing.T) {
		e := newEngine(t, nil)
		inBlock(t, e, 1, actorA, func(tx engine.Tx) {
			_, _, err := tx.Schedule(2, nil)
			require.NoError(t, err)
		})
		require.NoError(t, e.BeginBlock(2))
		var closeErr error
		_, err := e.EndBlock(&recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
			closeErr = e.Close()
			return engine.Usage{}, nil
		}})
		require.NoError(t, err)
		require.ErrorIs(t, closeErr, engine.ErrInEndBlock)
		require.NoError(t, e.Commit())
		require.NoError(t, e.BeginBlock(3))
	})
	t.Run("clamped observer inside a handler", func(t *testing.T) {
		l := newLane(t, nil)
		l.fund(actorA, "1000000000000000")
		l.block(1, actorA, func(tx engine.Tx) { l.schedule(tx, 2, "a", engine.Fees{}) })
		l.e.SetObserver(clampPanics{})
		require.NoError(t, l.e.BeginBlock(2))
		require.PanicsWithValue(t, "observer bug in Clamped", func() {
			_, _ = l.e.EndBlock(&recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
				_, err := tx.ScheduleFees(d.Block+5, []byte("child"), &engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("1000000000")})
				return engine.Usage{Cycles: 10}, err
			}})
		})
		require.NoError(t, l.e.Commit())
		require.Equal(t, 1, l.e.Pending(), "the handler's schedule stands")
	})
	t.Run("ledger panics", func(t *testing.T) {
		l := newLane(t, nil)
		led := &panicLedger{MemLedger: engine.NewMemLedger()}
		require.NoError(t, led.Credit(actorA, amount("1000000000000000")))
		l.e.SetLedger(struct{ engine.Ledger }{led}) // charged by address
		l.block(1, actorA, func(tx engine.Tx) { l.schedule(tx, 2, "a", engine.Fees{}) })
		require.NoError(t, l.e.BeginBlock(2))
		led.on = true
		require.Panics(t, func() { _, _ = l.e.EndBlock(&recorder{}) })
		_, err := l.e.EndBlock(&recorder{})
		require.ErrorIs(t, err, engine.ErrEndBlockFailed)
		require.ErrorIs(t, l.e.Commit(), engine.ErrEndBlockFailed)
		require.ErrorIs(t, l.e.Rollback(1), engine.ErrEndBlockFailed)
		require.ErrorIs(t, l.e.BeginBlock(3), engine.ErrEndBlockFailed)
	})
	t.Run("check root inside a transaction", func(t *testing.T) {
		e := newEngine(t, func(c *engine.Config) { c.StateRoot = true })
		var id engine.TimerID
		inBlock(t, e, 1, actorA, func(tx engine.Tx) {
			var err error
			id, _, err = tx.Schedule(9, nil)
			require.NoError(t, err)
		})
		require.NoError(t, e.BeginBlock(2))
		tx, err := e.Begin(actorA, 2)
		require.NoError(t, err)
		_, err = tx.Cancel(id)
		require.NoError(t, err)
		require.NoError(t, e.CheckRoot())
		require.NoError(t, tx.Revert())
	})
}

type clampPanics struct{}

func (clampPanics) Fired(*engine.Delivery, engine.FireResult)   {}
func (clampPanics) Collected(engine.TimerID, engine.GCReason)   {}
func (clampPanics) Deferred(engine.TimerID, engine.DeferReason) {}
func (clampPanics) Clamped(engine.TimerID, engine.Amount, engine.Amount) {
	panic("observer bug in Clamped")
}

type panicLedger struct {
	*engine.MemLedger
	on bool
}

func (l *panicLedger) Debit(a engine.Address, x engine.Amount) error {
	if l.on {
		panic("ledger bug")
	}
	return l.MemLedger.Debit(a, x)
}

// Prove calls pending only a pending timer: the scheduler leaf's key is
// no timer (it said pending, with a proof that verified), and its proof
// proves no absence either.
func TestProveOnlyTimers(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.StateRoot = true })
	inBlock(t, e, 1, actorA, func(tx engine.Tx) {})
	var sched engine.TimerID
	for _, l := range e.Leaves() {
		if l.Kind == "scheduler" {
			sched = l.Key
		}
	}
	p, v, pending := e.Prove(sched)
	require.False(t, pending)
	require.Zero(t, v)
	require.Error(t, merkle.Verify(e.Root(), sched, nil, p))
}

// TestConfigIsCopied: the system deployers are consensus state. Neither the
// slice given to New nor the one Config returns reaches the engine's.
func TestConfigIsCopied(t *testing.T) {
	other := engine.Address{0x77}
	cfg := engine.DefaultConfig()
	cfg.Policy = engine.PolicyLane
	cfg.StateRoot = true
	cfg.SystemDeployers = []engine.Address{sysS, other}
	e, err := engine.New(cfg)
	require.NoError(t, err)
	root := e.Root()

	cfg.SystemDeployers[0] = engine.Address{0x99} // the caller reuses its config
	got := e.Config().SystemDeployers
	got[0], got[1] = got[1], got[0] // and sorts the engine's for display
	require.Equal(t, []engine.Address{sysS, other}, e.Config().SystemDeployers)
	require.Equal(t, root, e.Root())
	require.NoError(t, e.BeginBlock(1))
	require.NoError(t, e.SystemUpdateConfig(sysS, e.LaneParams()), "the configured deployer still may")
	require.ErrorIs(t, e.SystemUpdateConfig(engine.Address{0x99}, e.LaneParams()), engine.ErrNotSystem)
}

// TestRollbackBytes: Config.RollbackBytes bounds what the history's
// removed timers hold. Each block fires four timers of 1,000-byte payloads
// (1 KiB each in the pool): a bound of 10,000 keeps two blocks, so a
// rollback of two blocks is exact and one of three is too deep. The same
// holds for a durable engine reopened.
func TestRollbackBytes(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable %v", durable), func(t *testing.T) {
			dir := t.TempDir()
			cfg := engine.DefaultConfig()
			cfg.StateRoot, cfg.RollbackBytes = true, 10_000
			open := func() *engine.Engine {
				if !durable {
					e, err := engine.New(cfg)
					require.NoError(t, err)
					return e
				}
				e, err := engine.Open(dir, cfg)
				require.NoError(t, err)
				return e
			}
			e := open()
			roots := map[uint64][32]byte{}
			for h := uint64(1); h <= 10; h++ {
				inBlock(t, e, h, actorA, func(tx engine.Tx) {
					for k := range 4 {
						payload := bytes.Repeat([]byte{byte(k)}, 1000)
						_, _, err := tx.Schedule(h+1, payload)
						require.NoError(t, err)
					}
				})
				roots[h] = e.Root()
				if h > 2 {
					require.Equal(t, 8192, e.Stats().HistoryBytes, "block %d", h)
				}
			}
			if durable {
				require.NoError(t, e.Close())
				e = open()
				require.Equal(t, roots[10], e.Root())
				require.LessOrEqual(t, e.Stats().HistoryBytes, 10_000)
			}
			err := e.Rollback(7)
			require.ErrorIs(t, err, engine.ErrRollbackTooDeep)
			require.ErrorContains(t, err, "the oldest block it can return to is 8")
			require.Equal(t, roots[10], e.Root(), "a refused rollback changes nothing")
			require.NoError(t, e.Rollback(8))
			require.Equal(t, roots[8], e.Root())
			require.Equal(t, 4, e.Pending())
			require.NoError(t, e.Close())
		})
	}
}
