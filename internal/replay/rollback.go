package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/trace"
)

// step is an op of the current chain and the height committed after it.
type step struct {
	op     *trace.Op
	height uint64 // the last committed block after the op (0 before any)
	ended  bool   // the op ended one block or more (end, advance)
}

// remember adds op, which has just run, to the history of the chain.
func (rn *runner) remember(op *trace.Op) {
	s := step{op: op}
	if rn.eng != nil && rn.began && !rn.inBlock {
		s.height = rn.eng.Height()
	}
	s.ended = op.Kind == "end" || op.Kind == "advance"
	rn.history = append(rn.history, s)
}

// rollback makes everything what it was right after block to ended
// (FORMAT.md): pending timers, lane figures, balances, nonces, handler
// scripts and agents are those of block to, and the root is the root
// printed for it. Labels are kept as they are. Within the engine's
// RollbackDepth the engine's own Rollback and the replay's undo logs do
// it (undo.go); deeper targets (FORMAT.md bounds no rollback's depth) run
// the ops of the chain up to that point again, silently, on a new
// engine, the replayed calls resolving labels as they did the first time.
func (rn *runner) rollback(to uint64) error {
	if rn.inBlock {
		return rn.fail("rollback inside open block %d", rn.eng.Height())
	}
	if rn.eng == nil || !rn.began {
		return rn.fail("rollback to %d: no block has been committed", to)
	}
	cur := rn.eng.Height()
	if to > cur {
		return rn.fail("rollback to %d: above the current height %d", to, cur)
	}
	// The chain up to the op that ended block to; an advance that ran
	// through it is cut at to.
	keep := -1
	var cut *trace.Op
	for i, s := range rn.history {
		if !s.ended || s.height < to {
			continue
		}
		if s.height == to {
			keep = i + 1
		} else if s.op.Kind == "advance" && rn.startOf(i) < to {
			c := *s.op
			c.To = to
			cut, keep = &c, i
		}
		break
	}
	if keep < 0 {
		return rn.fail("rollback to %d: block %d was never committed", to, to)
	}
	if ok, err := rn.undoTo(to); err != nil {
		return fmt.Errorf("replay: engine Rollback(%d): %w", to, err)
	} else if ok {
		rn.history = rn.history[:keep]
		if cut != nil {
			rn.history = append(rn.history, step{op: cut, height: to, ended: true})
		}
		rn.events, rn.failure, rn.sysGC = 0, nil, nil
	} else if err := rn.runAgain(to, keep, cut); err != nil {
		return err
	}
	root := rn.eng.Root()
	rn.ev.begin("rollback", to).uint("to", to).int("pending", rn.eng.Pending()).hex("root", root[:]).end()
	return nil
}

// runAgain is a rollback to block to that runs the first keep ops of the
// chain again, and cut, if any, after them, on a new engine.
func (rn *runner) runAgain(to uint64, keep int, cut *trace.Op) error {
	old := rn.eng
	kept := make([]*trace.Op, 0, keep+1)
	for _, s := range rn.history[:keep] {
		kept = append(kept, s.op)
	}
	if cut != nil {
		kept = append(kept, cut)
	}

	// Labels are not rolled back, so the calls that name one resolve it as
	// they did the first time: from the log of resolutions, in order.
	out, line := rn.out, rn.line
	silent := bufio.NewWriter(io.Discard)
	rn.out, rn.ev.w = silent, silent
	rn.eng, rn.cfg = nil, replayConfig()
	rn.scripts, rn.nonces, rn.agents = map[scriptKey]*script{}, map[engine.Address]uint64{}, map[engine.Address]*agent{}
	rn.undo, rn.marks = nil, nil
	rn.inBlock, rn.began, rn.events, rn.failure, rn.lane = false, false, 0, nil, false
	rn.history, rn.replaying, rn.labelPos, rn.sysGC = nil, true, 0, nil
	for _, op := range kept {
		rn.line = op.Line
		if err := rn.run(op); err != nil {
			// The same ops on the same engine ran before: a bug, not the trace's.
			return fmt.Errorf("replay: rollback to %d: line %d no longer runs: %w", to, op.Line, err)
		}
		rn.remember(op)
	}
	rn.labelLog = rn.labelLog[:rn.labelPos]
	rn.out, rn.ev.w, rn.line, rn.replaying = out, out, line, false
	return checkRollback(old, rn.eng, to)
}

// checkRollback rolls old back to block to with the engine's own Rollback
// and compares it with again, the chain run again up to to. A target
// older than old keeps history for is not checked.
func checkRollback(old, again *engine.Engine, to uint64) error {
	err := old.Rollback(to)
	if errors.Is(err, engine.ErrRollbackTooDeep) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replay: engine Rollback(%d): %w", to, err)
	}
	if got, want := old.Root(), again.Root(); got != want || old.Pending() != again.Pending() || old.Basefee() != again.Basefee() {
		return fmt.Errorf("replay: engine Rollback(%d) gives root %x, %d pending, basefee %s; the chain run again %x, %d, %s",
			to, got, old.Pending(), old.Basefee(), want, again.Pending(), again.Basefee())
	}
	return nil
}

// startOf is the last committed height before history step i.
func (rn *runner) startOf(i int) uint64 {
	if i == 0 {
		return 0
	}
	return rn.history[i-1].height
}
