package replay

import (
	"errors"
	"sort"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/u128"
)

// A rollback within the engine's RollbackDepth takes the engine back with
// its own Rollback and the replay's own state (what that Rollback leaves
// to its owner: the ledger, the agents, the handler scripts, the actors'
// nonces, the log of label resolutions) back with undo logs, to a mark
// taken where the chain's state was that of the target block. Running
// the chain again from its start, as a deeper rollback does, costs the
// whole chain per rollback, quadratic in a long trace full of reorgs.
//
// fastRollback is off in tests that compare the two ways.
var fastRollback = true

// mark is where the replay's own state stood at a point of the chain: at
// the end of block height (ended), or at the start of an advance from
// height, whose empty blocks change none of it.
type mark struct {
	height uint64
	ended  bool
	undo   int // len(rn.undo)
	ledger int // len(rn.ledger.log)
	labels int // label resolutions of the chain so far
}

// markHere records the replay's state at the current committed height,
// and forgets what no rollback the engine can make needs (trimMarks).
func (rn *runner) markHere(ended bool) {
	m := mark{height: rn.eng.Height(), ended: ended, undo: len(rn.undo), labels: len(rn.labelLog)}
	if rn.replaying {
		m.labels = rn.labelPos
	}
	if rn.ledger != nil {
		m.ledger = len(rn.ledger.log)
	}
	rn.marks = append(rn.marks, m)
	rn.trimMarks()
}

// trimMarks drops the marks below the engine's reach, RollbackDepth
// blocks under the current height, but the last of them (a target inside
// a later advance may need it), and the undo logs' entries before it: a
// long chain otherwise kept an undo entry for every change it ever made.
// A target below the marks kept runs the chain again, as one beyond the
// engine's reach does. It waits until at least half the marks can go, so
// that the copying costs O(1) a mark.
func (rn *runner) trimMarks() {
	cut := rn.eng.Height() - min(rn.eng.Height(), rn.cfg.RollbackDepth)
	j := sort.Search(len(rn.marks), func(i int) bool { return rn.marks[i].height >= cut }) - 1
	if j < 64 || j < len(rn.marks)/2 {
		return
	}
	first := rn.marks[j]
	rn.marks = append(rn.marks[:0], rn.marks[j:]...)
	rn.undo = append(rn.undo[:0], rn.undo[first.undo:]...)
	if rn.ledger != nil {
		rn.ledger.log = append(rn.ledger.log[:0], rn.ledger.log[first.ledger:]...)
	}
	for i := range rn.marks {
		rn.marks[i].undo -= first.undo
		rn.marks[i].ledger -= first.ledger
	}
}

// markOf returns the mark of the state right after block to ended: that
// of its end, or, for a block an advance skipped, the last one before it.
// The heights of the marks never decrease, and only the end of a block
// marks it ended, so the search from the newest costs the blocks undone.
func (rn *runner) markOf(to uint64) (int, bool) {
	for i := len(rn.marks) - 1; i >= 0; i-- {
		if m := rn.marks[i]; m.height < to || m.height == to && m.ended {
			return i, true
		}
	}
	return 0, false
}

// undoTo takes the engine and the replay's state back to right after
// block to ended, if the engine's history reaches it; false changes
// nothing.
func (rn *runner) undoTo(to uint64) (bool, error) {
	if !fastRollback {
		return false, nil
	}
	i, ok := rn.markOf(to)
	if !ok {
		return false, nil
	}
	if err := rn.eng.Rollback(to); errors.Is(err, engine.ErrRollbackTooDeep) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	m := rn.marks[i]
	for k := len(rn.undo) - 1; k >= m.undo; k-- {
		rn.undo[k]()
	}
	rn.undo = rn.undo[:m.undo]
	if rn.ledger != nil {
		rn.ledger.undo(m.ledger)
	}
	rn.labelLog = rn.labelLog[:m.labels]
	rn.marks = rn.marks[:i+1]
	return true, nil
}

// setLogged sets m[k] to v, logging how to undo it.
func setLogged[K comparable, V any](rn *runner, m map[K]V, k K, v V) {
	old, had := m[k]
	rn.undo = append(rn.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

// setAgent gives actor the agent a (nil: the default), logged.
func (rn *runner) setAgent(actor engine.Address, a *agent) {
	old := rn.agents[actor]
	rn.undo = append(rn.undo, func() {
		rn.agents[actor] = old
		rn.applyAgent(actor, old)
	})
	rn.agents[actor] = a
	rn.applyAgent(actor, a)
}

// applyAgent sets actor's agent in the engine: a nil *agent is the
// default agent, a nil GasBidder.
func (rn *runner) applyAgent(actor engine.Address, a *agent) {
	if a == nil {
		rn.eng.SetAgent(actor, nil)
		return
	}
	rn.eng.SetAgent(actor, a)
}

// journalLedger is the lane's ledger with a log of its changes, so that a
// rollback can take them back. An account that a change created stays,
// with its balance back to 0, which no operation tells from no account.
type journalLedger struct {
	*engine.MemLedger
	burned engine.Amount
	log    []ledgerChange
}

// ledgerChange is a change the log takes back: x credited to (or, with
// debit, debited from) account n, or a burn that left burned at before.
type ledgerChange struct {
	n      uint32
	x      engine.Amount
	debit  bool
	burn   bool
	before engine.Amount
}

func newJournalLedger() *journalLedger { return &journalLedger{MemLedger: engine.NewMemLedger()} }

func (l *journalLedger) Debit(a engine.Address, x engine.Amount) error {
	if n, ok := l.Account(a); ok {
		return l.DebitAccount(n, x)
	}
	return l.MemLedger.Debit(a, x) // no account: only 0 goes, changing nothing
}

func (l *journalLedger) DebitAccount(n uint32, x engine.Amount) error {
	if err := l.MemLedger.DebitAccount(n, x); err != nil {
		return err
	}
	l.log = append(l.log, ledgerChange{n: n, x: x, debit: true})
	return nil
}

func (l *journalLedger) Credit(a engine.Address, x engine.Amount) error {
	if err := l.MemLedger.Credit(a, x); err != nil || x.IsZero() {
		return err
	}
	n, _ := l.Account(a)
	l.log = append(l.log, ledgerChange{n: n, x: x})
	return nil
}

func (l *journalLedger) CreditAccount(n uint32, x engine.Amount) error {
	if err := l.MemLedger.CreditAccount(n, x); err != nil {
		return err
	}
	l.log = append(l.log, ledgerChange{n: n, x: x})
	return nil
}

// Burn is MemLedger's, on a total of its own that the log can restore.
func (l *journalLedger) Burn(x engine.Amount) error {
	b, ok := u128.Add(l.burned, x)
	if !ok {
		return engine.ErrAmountOverflow
	}
	l.log = append(l.log, ledgerChange{burn: true, before: l.burned})
	l.burned = b
	return nil
}

func (l *journalLedger) Burned() engine.Amount { return l.burned }

// undo takes back the changes after the first n of the log, newest
// first: each is the exact inverse of one that succeeded, so none fails.
func (l *journalLedger) undo(n int) {
	for k := len(l.log) - 1; k >= n; k-- {
		c := l.log[k]
		switch {
		case c.burn:
			l.burned = c.before
		case c.debit:
			_ = l.MemLedger.CreditAccount(c.n, c.x)
		default:
			_ = l.MemLedger.DebitAccount(c.n, c.x)
		}
	}
	l.log = l.log[:n]
}
