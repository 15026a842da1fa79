package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// addressLedger hides MemLedger's account numbers: the lane charges it by
// address only.
type addressLedger struct{ engine.Ledger }

func TestMemLedgerAccounts(t *testing.T) {
	a, b := engine.Address{1}, engine.Address{2}
	max := amount("340282366920938463463374607431768211455")
	tests := []struct {
		name string
		run  func(l *engine.MemLedger) error
		want error
	}{
		{"debit 0 from no account", func(l *engine.MemLedger) error { return l.Debit(b, engine.Amount{}) }, nil},
		{"debit 1 from no account", func(l *engine.MemLedger) error { return l.Debit(b, amount("1")) }, engine.ErrInsufficientFunds},
		{"debit all by number", func(l *engine.MemLedger) error {
			n, _ := l.Account(a)
			return l.DebitAccount(n, amount("100"))
		}, nil},
		{"debit too much by number", func(l *engine.MemLedger) error {
			n, _ := l.Account(a)
			return l.DebitAccount(n, amount("101"))
		}, engine.ErrInsufficientFunds},
		{"credit past 2^128-1 by number", func(l *engine.MemLedger) error {
			n, _ := l.Account(a)
			return l.CreditAccount(n, max)
		}, engine.ErrAmountOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := engine.NewMemLedger()
			require.NoError(t, l.Credit(a, amount("100")))
			_, ok := l.Account(b)
			require.False(t, ok, "an address never credited has no account")
			before := l.Clone()
			err := tc.run(l)
			require.ErrorIs(t, err, tc.want)
			if err != nil {
				require.Contains(t, err.Error(), "0x", "the error names the account")
				require.Equal(t, before.Balance(a), l.Balance(a), "a failed operation changes nothing")
			}
		})
	}
	l := engine.NewMemLedger()
	require.NoError(t, l.Credit(b, amount("7")))
	require.NoError(t, l.Credit(a, amount("5")))
	na, _ := l.Account(a)
	nb, _ := l.Account(b)
	require.NotEqual(t, na, nb)
	require.NoError(t, l.CreditAccount(na, amount("3")))
	require.NoError(t, l.DebitAccount(nb, amount("2")))
	require.Equal(t, "8", l.Balance(a).String())
	require.Equal(t, "5", l.BalanceOf(nb).String())
}

// TestLaneAccountNumbersChangeNothing runs one random lane scenario twice:
// on a MemLedger, which the lane charges by account number, and on the same
// ledger seen through Ledger alone, charged by address. Handlers move the
// payers' funds, so some pre-charges fail mid-block. Every event, balance
// and block result must be the same.
func TestLaneAccountNumbersChangeNothing(t *testing.T) {
	run := func(hide bool) []string {
		r := rand.New(rand.NewPCG(23, 22))
		payers := []engine.Address{actorN(1), actorN(2), actorN(3), {0xee}} // the last has no timers
		mem := engine.NewMemLedger()
		l := newLane(t, func(c *engine.Config) {
			c.Lane.LaneTimerCycles = 600_000
			c.Lane.MaxCyclesPerFireAuction = 200_000
			c.InitialBasefee = amount("3")
			c.MaxTimersPerActor = 10_000
		})
		if hide {
			l.e.SetLedger(addressLedger{mem})
		} else {
			l.e.SetLedger(mem)
		}
		for _, p := range payers {
			l.fund(p, fmt.Sprint(1_000_000+r.Uint64N(5_000_000)))
		}
		var out []string
		l.x = &recorder{hook: func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
			if r.IntN(4) == 0 { // the handler spends a payer's funds
				p := payers[r.IntN(len(payers))]
				err := mem.Debit(p, amount(fmt.Sprint(r.IntN(2_000_000))))
				out = append(out, fmt.Sprintf("spend %s %v", p, err != nil))
			}
			if r.IntN(3) == 0 {
				tx.Schedule(d.Block+1+r.Uint64N(2), []byte{byte(r.IntN(256))})
			}
			return engine.Usage{Cycles: r.Uint64N(d.CyclesLimit + 1)}, nil
		}}
		for h := uint64(1); h <= 120; h++ {
			l.fund(payers[r.IntN(len(payers))], fmt.Sprint(r.IntN(2_000_000)))
			res, lines := l.block(h, actorN(1+r.IntN(3)), func(tx engine.Tx) {
				for range r.IntN(8) {
					f := engine.Fees{Set: engine.HasGasLimit, GasLimit: 1 + r.Uint64N(200_000)}
					if r.IntN(2) == 0 {
						f.Set |= engine.HasFeePayer
						f.FeePayer = payers[r.IntN(len(payers))]
					}
					tx.SetNonce(r.Uint64())
					_, _ = tx.ScheduleFees(h+1+r.Uint64N(3), nil, &f)
				}
			})
			out = append(out, lines...)
			out = append(out, fmt.Sprintf("block %d fired %d gc %d deferred %d basefee %s", h, res.Fired, res.GC, res.Deferred, res.Lane.Basefee))
			for _, p := range payers {
				out = append(out, fmt.Sprintf("balance %s %s", p, mem.Balance(p)))
			}
		}
		out = append(out, fmt.Sprintf("burned %s tips %s", mem.Burned(), mem.Balance(proposerQ)))
		return out
	}
	byNumber, byAddress := run(false), run(true)
	require.Equal(t, byAddress, byNumber)
	// A collection after a fire in one block is a pre-charge that failed
	// mid-block: the path where the lane charges by number matters most.
	var collected, firedYet bool
	for _, line := range byNumber {
		switch {
		case strings.HasPrefix(line, "block "):
			firedYet = false
		case strings.HasPrefix(line, "fire "):
			firedYet = true
		case strings.HasPrefix(line, "gc ") && strings.HasSuffix(line, "insufficient_funds") && firedYet:
			collected = true
		}
	}
	require.True(t, collected, "no pre-charge failed mid-block")
}

// TestSetLedgerDuringEndOfBlock: a handler that swaps the ledger does not
// change the one the running end of block charges; the next one charges
// the new ledger.
func TestSetLedgerDuringEndOfBlock(t *testing.T) {
	l := newLane(t, func(c *engine.Config) { c.InitialBasefee = amount("1") })
	first, second := engine.NewMemLedger(), engine.NewMemLedger()
	l.e.SetLedger(first)
	a := actorN(1)
	require.NoError(t, first.Credit(a, amount("10000000")))
	require.NoError(t, second.Credit(a, amount("10000000")))
	l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
		l.e.SetLedger(second)
		return engine.Usage{Cycles: 1000}, nil
	}}
	gas := engine.Fees{Set: engine.HasGasLimit, GasLimit: 1000}
	l.block(1, a, func(tx engine.Tx) {
		tx.SetNonce(1)
		l.schedule(tx, 2, "x", gas)
		tx.SetNonce(2)
		l.schedule(tx, 2, "y", gas)
	})
	res, _ := l.block(2, a, nil)
	require.Equal(t, 2, res.Fired)
	require.Equal(t, "10000000", second.Balance(a).String(), "the swapped-in ledger is not charged in the block that swapped it")
	require.Less(t, first.Balance(a).Cmp(amount("10000000")), 0, "both fires are charged to the first ledger")
	require.Equal(t, second, l.e.Ledger())
}

// errStore stands for a node's account store that failed.
var errStore = errors.New("account store: disk I/O error")

// failingLedger is a MemLedger whose operation op fails with errStore for
// the account who (any account if zero). With accounts it also offers the
// account-number operations, failing alike.
type failingLedger struct {
	mem    *engine.MemLedger
	op     string
	who    engine.Address
	failed bool // it has failed once
	after  int  // operations asked of it after its failure
}

func (l *failingLedger) fails(op string, a engine.Address) bool {
	if l.failed {
		l.after++
	}
	if op == l.op && (l.who == engine.Address{} || a == l.who) {
		l.failed = true
		return true
	}
	return false
}

func (l *failingLedger) Balance(a engine.Address) engine.Amount { return l.mem.Balance(a) }

func (l *failingLedger) Debit(a engine.Address, x engine.Amount) error {
	if l.fails("Debit", a) {
		return errStore
	}
	return l.mem.Debit(a, x)
}

func (l *failingLedger) Credit(a engine.Address, x engine.Amount) error {
	if l.fails("Credit", a) {
		return errStore
	}
	return l.mem.Credit(a, x)
}

func (l *failingLedger) Burn(x engine.Amount) error {
	if l.fails("Burn", engine.Address{}) {
		return errStore
	}
	return l.mem.Burn(x)
}

// accountFailingLedger adds account numbers to failingLedger.
type accountFailingLedger struct{ *failingLedger }

func (l accountFailingLedger) Account(a engine.Address) (uint32, bool) { return l.mem.Account(a) }
func (l accountFailingLedger) BalanceOf(n uint32) engine.Amount        { return l.mem.BalanceOf(n) }

// failsAccount is fails for account n.
func (l accountFailingLedger) failsAccount(op string, n uint32) bool {
	if w, ok := l.mem.Account(l.who); l.who != (engine.Address{}) && (!ok || n != w) {
		return l.fails(op, engine.Address{1, 2, 3}) // not the account that fails
	}
	return l.fails(op, l.who)
}

func (l accountFailingLedger) DebitAccount(n uint32, x engine.Amount) error {
	if l.failsAccount("Debit", n) {
		return errStore
	}
	return l.mem.DebitAccount(n, x)
}

func (l accountFailingLedger) CreditAccount(n uint32, x engine.Amount) error {
	if l.failsAccount("Credit", n) {
		return errStore
	}
	return l.mem.CreditAccount(n, x)
}

// TestLaneLedgerFailure: a Ledger error other than the two a Ledger
// documents is the node's account store failing. The block cannot be
// settled: EndBlock returns the error, matching ErrEndBlockFailed, and no
// later block call succeeds; nothing is turned into a collection, a burnt
// refund or a lost burn.
func TestLaneLedgerFailure(t *testing.T) {
	tests := []struct {
		name string
		op   string
		who  engine.Address
	}{
		{"none", "", engine.Address{}},
		{"pre-charge", "Debit", engine.Address{}},
		{"refund", "Credit", actorA},
		{"tips to the proposer", "Credit", proposerQ},
		{"burn", "Burn", engine.Address{}},
	}
	for _, numbered := range []bool{false, true} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/accounts=%v", tc.name, numbered), func(t *testing.T) {
				l := newLane(t, nil)
				led := &failingLedger{mem: engine.NewMemLedger()}
				require.NoError(t, led.mem.Credit(actorA, amount("1000000000000000")))
				if numbered {
					l.e.SetLedger(accountFailingLedger{led})
				} else {
					l.e.SetLedger(led)
				}
				l.x = &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
					return engine.Usage{Cycles: 100}, nil // leaves a refund
				}}
				l.block(1, actorA, func(tx engine.Tx) {
					l.schedule(tx, 2, "a", engine.Fees{Set: engine.HasMaxPriorityFee, MaxPriorityFee: amount("5")})
				})
				require.NoError(t, l.e.BeginBlock(2))
				l.e.SetProposer(proposerQ)
				led.op, led.who = tc.op, tc.who
				res, err := l.e.EndBlock(l.x)
				if tc.op == "" {
					require.NoError(t, err)
					require.Equal(t, 1, res.Fired)
					require.NoError(t, l.e.Commit())
					return
				}
				require.ErrorIs(t, err, engine.ErrEndBlockFailed)
				require.ErrorIs(t, err, errStore)
				require.Contains(t, err.Error(), "the Ledger's "+tc.op+" failed")
				require.ErrorIs(t, l.e.Commit(), engine.ErrEndBlockFailed)
				require.ErrorIs(t, l.e.BeginBlock(3), engine.ErrEndBlockFailed)
				for _, line := range l.log.lines {
					require.NotContains(t, line, "insufficient_funds", "a failed store is no payer's want of funds")
				}
				require.Zero(t, led.after, "nothing is asked of a failed store")
			})
		}
	}
}

// TestLaneLedgerFailureDurable: a store that fails after the block charged
// a payer (its refund's credit fails) fails the end of block. The durable
// engine reopens at its last committed block, the timer still pending;
// the node takes its ledger back to that block too, and the block runs
// again as if it had never failed: the payer is charged once.
func TestLaneLedgerFailureDurable(t *testing.T) {
	run := func(dir string, fail bool) engine.Amount {
		cfg := engine.DefaultConfig()
		cfg.Policy, cfg.StateRoot = engine.PolicyLane, true
		led := &failingLedger{mem: engine.NewMemLedger()}
		require.NoError(t, led.mem.Credit(actorA, amount("1000000000000000")))
		open := func() *engine.Engine {
			e, err := engine.Open(dir, cfg)
			require.NoError(t, err)
			e.SetLedger(led)
			return e
		}
		x := &recorder{hook: func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
			return engine.Usage{Cycles: 100}, nil // leaves a refund
		}}
		e := open()
		inBlock(t, e, 1, actorA, func(tx engine.Tx) {
			_, _, err := tx.Schedule(2, []byte("a"))
			require.NoError(t, err)
		})
		if fail {
			committed, root := led.mem.Clone(), e.Root()
			require.NoError(t, e.BeginBlock(2))
			led.op, led.who = "Credit", actorA
			_, err := e.EndBlock(x)
			require.ErrorIs(t, err, errStore)
			require.NoError(t, e.Close())
			require.NotEqual(t, committed.Balance(actorA), led.mem.Balance(actorA), "the charge was made")

			led.mem, led.op = committed, "" // the node's ledger, back at block 1
			e = open()
			require.Equal(t, uint64(1), e.Height())
			require.Equal(t, root, e.Root())
			require.Equal(t, 1, e.Pending())
		}
		require.NoError(t, e.BeginBlock(2))
		res, err := e.EndBlock(x)
		require.NoError(t, err)
		require.Equal(t, 1, res.Fired)
		require.NoError(t, e.Commit())
		require.NoError(t, e.Close())
		return led.mem.Balance(actorA)
	}
	require.Equal(t, run(t.TempDir(), false), run(t.TempDir(), true))
}

// TestLaneLedgerFailureAfterObserverPanic: an Observer's panic earlier in a
// block whose ledger then fails is named in EndBlock's error, not lost.
func TestLaneLedgerFailureAfterObserverPanic(t *testing.T) {
	l := newLane(t, nil)
	led := &failingLedger{mem: engine.NewMemLedger()}
	require.NoError(t, led.mem.Credit(actorA, amount("1000000000000000")))
	l.e.SetLedger(led)
	l.block(1, actorA, func(tx engine.Tx) { l.schedule(tx, 2, "a", engine.Fees{}) })
	l.e.SetObserver(observerFunc(func(*engine.Delivery, engine.FireResult) { panic("observer bug") }))
	require.NoError(t, l.e.BeginBlock(2))
	led.op = "Burn" // at the block's end, after the fire
	_, err := l.e.EndBlock(l.x)
	require.ErrorIs(t, err, engine.ErrEndBlockFailed)
	require.ErrorIs(t, err, errStore)
	require.ErrorContains(t, err, "observer bug")
}
