// Package replay drives the engine from a conformance trace
// (shared/conformance/FORMAT.md) and prints what happens as JSON Lines.
package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/epoch"
	"github.com/timerlane/timerlane/internal/trace"
	"github.com/timerlane/timerlane/ring"
)

type script struct {
	line          int // the handler op's
	cycles, cells uint64
	revert        bool
	calls         []trace.Call
}

type scriptKey struct {
	actor   engine.Address
	handler string
}

type runner struct {
	out        *bufio.Writer
	ev         event
	eng        *engine.Engine
	cfg        engine.Config
	scripts    map[scriptKey]*script
	nonces     map[engine.Address]uint64
	labels     map[string]engine.TimerID
	line       int // the op being run, for errors
	inBlock    bool
	began      bool // a block has begun: the config can no longer change
	events     int  // events printed in the open block
	failure    error
	lane       bool          // policy lane
	handlerOut bytes.Buffer  // a firing handler's events, printed after its fire line
	callsW     *bufio.Writer // writes to calls
	// A lane block's fires and their handlers' events, held until the
	// block's gc section is printed: a fire can be followed by a
	// collection (a payer the fires before spent), which FORMAT.md
	// prints first.
	laneFires  bytes.Buffer
	laneFiresW *bufio.Writer
	history    []step           // the ops that made the current chain, for rollback
	labelLog   []engine.TimerID // every label resolution of the chain, in order
	labelPos   int              // while replaying: the next one to reuse
	replaying  bool             // a rollback runs the chain again
	sysGC      []gcEvent        // the open block's collections, not yet printed
	stopped    bool             // a handler script's trace error ended the output
	payloadMax uint64           // the trace's max_payload_bytes when above the engine's

	// What the engine's Rollback leaves to its owner, and how to take it
	// back (undo.go).
	agents map[engine.Address]*agent // the gba ops' agents; nil: the default
	ledger *journalLedger
	undo   []func() // takes back a change of scripts, nonces or agents
	marks  []mark
}

// system is the sender of the trace's system ops: the one system deployer
// of the replay's engine.
var system = engine.Address{}

// Run replays the trace read from r, writing events to w. A trace error
// (a *trace.Error) stops the replay; the events before it stay written.
func Run(r io.Reader, w io.Writer) error {
	out := bufio.NewWriterSize(w, 1<<16)
	defer out.Flush()
	return newRunner(out).replay(r)
}

// newRunner returns a runner before the trace's first op, printing to out.
func newRunner(out *bufio.Writer) *runner {
	return &runner{
		out: out, ev: event{w: out}, cfg: replayConfig(),
		scripts: map[scriptKey]*script{}, nonces: map[engine.Address]uint64{}, labels: map[string]engine.TimerID{},
		agents: map[engine.Address]*agent{},
	}
}

// replay runs the trace read from r.
func (rn *runner) replay(r io.Reader) error {
	tr := trace.NewReader(r)
	for {
		op, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		rn.line = op.Line
		if err := rn.run(op); err != nil {
			return err
		}
		if op.Kind != "rollback" {
			rn.remember(op)
		}
	}
	if rn.inBlock {
		return trace.Errorf(rn.line, "the trace ends inside block %d (no end op)", rn.eng.Height())
	}
	return nil
}

// replayConfig is the default configuration with the state root on: every
// block line carries it (FORMAT.md).
func replayConfig() engine.Config {
	c := engine.DefaultConfig()
	c.StateRoot = true
	return c
}

func (rn *runner) fail(format string, args ...any) error {
	return trace.Errorf(rn.line, format, args...)
}

func (rn *runner) engine() (*engine.Engine, error) {
	if rn.eng == nil {
		e, err := engine.New(rn.cfg)
		if err != nil {
			// The trace's config, not the engine's: without the engine's
			// "invalid config" prefix.
			return nil, rn.fail("config: %s", strings.TrimPrefix(err.Error(), engine.ErrInvalidConfig.Error()+": "))
		}
		rn.eng = e
		e.SetObserver(rn)
		rn.ledger = newJournalLedger()
		e.SetLedger(rn.ledger)
	}
	return rn.eng, nil
}

func (rn *runner) run(op *trace.Op) error {
	switch op.Kind {
	case "config":
		return rn.config(op.Config)
	case "fund":
		return rn.fund(op)
	case "gba":
		if _, err := rn.engine(); err != nil {
			return err
		}
		var a *agent // the default agent
		if !op.GBA.Default {
			var err error
			if a, err = newAgent(op.GBA); err != nil {
				return rn.fail("gba: %v", err)
			}
		}
		rn.setAgent(op.Actor, a)
		return nil
	case "system":
		return rn.system(op.System)
	case "handler":
		setLogged(rn, rn.scripts, scriptKey{op.Actor, op.Handler}, &script{line: op.Line, cycles: op.Cycles, cells: op.Cells, revert: op.Revert, calls: op.Calls})
		return nil
	case "block":
		if err := rn.block(op.Height); err != nil {
			return err
		}
		rn.eng.SetProposer(op.Proposer) // the zero address when absent
		return nil
	case "tx":
		return rn.tx(op)
	case "end":
		if !rn.inBlock {
			return rn.fail("end without an open block")
		}
		return rn.end(true)
	case "advance":
		return rn.advance(op.To)
	case "rollback":
		return rn.rollback(op.To)
	}
	// trace.Parse refuses every other op, so this is a bug of ours.
	return rn.fail("op %s: parsed but not run (a bug in timerlane)", op.Kind)
}

func (rn *runner) config(c *trace.Config) error {
	if c.Policy == "lane" {
		rn.lane = true
		rn.cfg.Policy = engine.PolicyLane
		rn.cfg.SystemDeployers = []engine.Address{system}
		if c.ActivationHeight != nil {
			rn.cfg.ActivationHeight = *c.ActivationHeight
		}
		if err := laneConfig(c, &rn.cfg.Lane); err != nil {
			return rn.fail("config: %v", err)
		}
		if v, ok := c.Ints["max_cycles_per_fire"]; ok {
			rn.cfg.CyclesPerFire = v
		}
		if v, ok := c.Amounts["initial_lane_basefee"]; ok {
			a, err := engine.ParseAmount(v)
			if err != nil {
				return rn.fail("config: initial_lane_basefee: %v", err)
			}
			rn.cfg.InitialBasefee = a
		}
	}
	// A fixed order, so that a trace with several bad values always names
	// the same one.
	for _, f := range []struct {
		key string
		u64 *uint64
	}{
		{"ring_size", &rn.cfg.RingSize},
		{"epoch_length", &rn.cfg.EpochLength},
		{"epoch_count", &rn.cfg.EpochCount},
	} {
		if v, ok := c.Ints[f.key]; ok {
			*f.u64 = v
		}
	}
	rn.defaultLayout(c.Ints)
	// FORMAT.md's bounds, in its words: the engine's own (a ring of at
	// most 2^24 buckets, 2^20 epochs) are met by withinStorage's clamp.
	switch l := &rn.cfg; {
	case l.RingSize < 2 || l.RingSize&(l.RingSize-1) != 0:
		return rn.fail("config: ring_size %d: must be a power of two, at least 2", l.RingSize)
	case l.EpochLength < 1 || l.EpochLength > l.RingSize:
		return rn.fail("config: epoch_length %d: must be in [1, ring_size %d]", l.EpochLength, l.RingSize)
	case l.EpochCount < 1:
		return rn.fail("config: epoch_count %d: must be at least 1", l.EpochCount)
	}
	rn.withinStorage(c.Ints)
	_, err := rn.engine()
	return err
}

// defaultLayout fits the layout's defaults to what the trace set: an
// epoch_length left out is at most the ring_size set, and a ring_size left
// out is at least the epoch_length set (the next power of two), so that a
// trace setting one of them alone, within FORMAT.md's bounds, runs. The
// layout changes no event (docs/SPEC.md §11).
func (rn *runner) defaultLayout(ints map[string]uint64) {
	c := &rn.cfg
	_, ring := ints["ring_size"]
	_, length := ints["epoch_length"]
	switch {
	case ring && !length:
		c.EpochLength = max(1, min(c.EpochLength, c.RingSize))
	case length && !ring && c.EpochLength > c.RingSize:
		c.RingSize = 1 << bits.Len64(c.EpochLength-1)
	}
}

// withinStorage brings the configuration's values that FORMAT.md leaves
// unbounded above, and the engine's storage does not, within the engine's
// bounds where that changes no event (docs/SPEC.md §11): a layout changes
// none, and an actor cannot hold 2^32 timers. A max_payload_bytes above
// the largest payload the engine stores runs as that largest, and a
// payload longer than it that the trace allows is a trace error (see
// calls): nothing is silently different.
func (rn *runner) withinStorage(ints map[string]uint64) {
	c := &rn.cfg
	if r := c.RingSize; r > ring.MaxSize && r&(r-1) == 0 && c.EpochLength <= r {
		c.RingSize, c.EpochLength = ring.MaxSize, min(c.EpochLength, ring.MaxSize)
	}
	c.EpochCount = min(c.EpochCount, epoch.MaxCount)
	if v, ok := ints["max_timers_per_actor"]; ok {
		c.MaxTimersPerActor = uint32(min(v, 1<<32-1))
	}
	if v, ok := ints["max_handler_bytes"]; ok {
		// A handler is part of its payload: past 2^32-1 bytes, no
		// limit can refuse one.
		c.MaxHandlerBytes = uint32(min(v, 1<<32-1))
	}
	if v, ok := ints["max_payload_bytes"]; ok {
		c.MaxPayloadBytes = uint32(min(v, engine.MaxPayloadLimit))
		if v > engine.MaxPayloadLimit {
			rn.payloadMax = v
		}
	}
}

func (rn *runner) block(h uint64) error {
	e, err := rn.engine()
	if err != nil {
		return err
	}
	if rn.inBlock {
		return rn.fail("block %d: block %d has not ended", h, e.Height())
	}
	if rn.began && h != e.Height()+1 {
		return rn.fail("block %d: expected height %d", h, e.Height()+1)
	}
	if err := e.BeginBlock(h); err != nil {
		return rn.fail("block %d: %v", h, err)
	}
	rn.inBlock, rn.began, rn.events = true, true, 0
	return nil
}

func (rn *runner) end(always bool) error {
	res, err := rn.eng.EndBlock(rn)
	if err == nil {
		err = rn.eng.Commit()
	}
	if err != nil {
		return rn.fail("end: %v", err)
	}
	if rn.failure != nil {
		return rn.failure
	}
	rn.inBlock = false
	rn.markHere(true)
	rn.flushEnd()
	if always || rn.events > 0 || res.Fired > 0 {
		ev := rn.ev.begin("block", res.Height).int("fired", res.Fired).int("deferred", res.Deferred).int("gc", res.GC).int("pending", res.Pending)
		if res.Lane != nil {
			laneBlock(ev, res.Lane)
		}
		// A rollback's silent run of the chain asks for the root once, at
		// its end: hashing each block's changes is most of that run.
		if !rn.replaying {
			root := rn.eng.Root()
			ev.hex("root", root[:])
		}
		ev.end()
	}
	return nil
}

func (rn *runner) advance(to uint64) error {
	e, err := rn.engine()
	if err != nil {
		return err
	}
	if rn.inBlock {
		return rn.fail("advance inside open block %d", e.Height())
	}
	if to <= e.Height() {
		return rn.fail("advance to %d: not above the current height %d", to, e.Height())
	}
	rn.markHere(false)
	for e.Height() < to {
		h, err := e.SkipEmpty(to)
		if err != nil {
			return rn.fail("advance: %v", err)
		}
		if h == to {
			break
		}
		if err := rn.block(h + 1); err != nil {
			return err
		}
		if err := rn.end(false); err != nil {
			return err
		}
	}
	rn.began = true
	return nil
}

func (rn *runner) tx(op *trace.Op) error {
	if !rn.inBlock {
		return rn.fail("tx outside a block")
	}
	setLogged(rn, rn.nonces, op.Actor, op.Nonce)
	tx, err := rn.eng.Begin(op.Actor, op.Nonce)
	if err != nil {
		return rn.fail("tx: %v", err)
	}
	if err := rn.calls(tx, op.Calls, nil); err != nil {
		return err
	}
	if op.Revert {
		tx.Revert()
		rn.ev.begin("revert", rn.eng.Height()).raw("actor", engine.Address(op.Actor).String()).uint("nonce", op.Nonce).end()
		rn.events++
		return nil
	}
	return tx.Commit()
}

// calls runs calls in tx and prints a call event for each.
func (rn *runner) calls(tx engine.Tx, calls []trace.Call, from *engine.TimerID) error {
	h := rn.eng.Height()
	actor := tx.Actor()
	for _, c := range calls {
		var (
			res  engine.Scheduled
			cost engine.Cost
			err  error
		)
		switch c.Kind {
		case "schedule":
			height := c.Height
			if c.InScript {
				height = h + c.After
			}
			var f *engine.Fees
			if c.HasFee {
				if f, err = fees(&c.Fee); err != nil {
					return rn.fail("calls[%d]: %v", c.Index, err)
				}
			}
			res, err = tx.ScheduleFees(height, c.Payload, f)
			if errors.Is(err, engine.ErrPayloadTooLarge) && uint64(len(c.Payload)) <= rn.payloadMax {
				return rn.fail("calls[%d]: a payload of %d bytes: max_payload_bytes %d allows it, but this engine stores payloads of at most %d bytes", c.Index, len(c.Payload), rn.payloadMax, engine.MaxPayloadLimit)
			}
			cost = res.Cost
			if err == nil && c.HasLabel && !rn.replaying {
				rn.labels[c.Label] = res.ID
			}
		case "cancel", "extend":
			target, known, bound := rn.target(c)
			switch {
			case !bound:
				return rn.fail("calls[%d]: label %q was never bound", c.Index, c.Timer)
			case !known:
				err = engine.ErrUnknownTimer
			case c.Kind == "cancel":
				cost, err = tx.Cancel(target)
			default:
				cost, err = tx.Extend(target, c.Expires)
			}
		default:
			return rn.fail("calls[%d]: unknown call %s", c.Index, c.Kind)
		}
		ev := rn.ev.begin("call", h).raw("actor", engine.Address(actor).String()).uint("nonce", tx.Nonce()).int("index", c.Index).str("call", c.Kind)
		if err != nil {
			name := engine.ErrorName(err)
			if name == "" {
				return rn.fail("calls[%d]: %v", c.Index, err)
			}
			ev.bool("ok", false).str("error", name)
		} else {
			ev.bool("ok", true)
			if c.Kind == "schedule" {
				ev.hex("timer_id", res.ID[:])
			}
			ev.uint("cycles", cost.Cycles).uint("cells", cost.Cells)
			// Below activation_height the policy is fifo and the lane
			// fields are absent (FORMAT.md), though the clamp applies.
			if res.Clamped && h >= rn.cfg.ActivationHeight {
				ev.amount("stated_priority_fee", res.StatedPriorityFee).amount("clamped_priority_fee", res.ClampedPriorityFee)
			}
		}
		if from != nil {
			ev.hex("from_timer", from[:])
		}
		ev.end()
		rn.events++
	}
	return nil
}

// target resolves the timer a cancel names: bound is false for a label
// never bound (a trace error); known is false for an id that is not 32
// bytes, which names no timer and is simply unknown (FORMAT.md).
func (rn *runner) target(c trace.Call) (id engine.TimerID, known, bound bool) {
	if c.ByLabel {
		if rn.replaying { // as resolved the first time (rollback.go)
			id = rn.labelLog[rn.labelPos]
			rn.labelPos++
			return id, true, true
		}
		id, bound = rn.labels[c.Timer]
		if bound {
			rn.labelLog = append(rn.labelLog, id)
		}
		return id, bound, bound
	}
	if len(c.TimerID) != len(id) {
		return id, false, true
	}
	copy(id[:], c.TimerID)
	return id, true, true
}

// Execute runs the handler script of a fired timer (engine.Executor). The
// events of its calls wait in rn.handlerOut for Fired, which prints the fire
// line first: under the lane that line carries the settlement, known only
// after the handler ran.
func (rn *runner) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	rn.events++
	if rn.callsW == nil {
		rn.callsW = bufio.NewWriter(&rn.handlerOut)
	}
	rn.handlerOut.Reset()
	rn.ev.w = rn.callsW
	if rn.failure != nil { // an earlier script of the block failed: the replay stops there
		return engine.Usage{}, nil
	}
	s := rn.scripts[scriptKey{d.Actor, string(d.Handler)}]
	if s == nil {
		s = &script{cycles: 10000}
	}
	tx.SetNonce(rn.nonces[d.Actor])
	from := d.TimerID
	if err := rn.calls(tx, s.calls, &from); err != nil {
		// Reported at the op that ended the block; it names the script.
		var te *trace.Error
		if errors.As(err, &te) {
			te.Msg = fmt.Sprintf("in block %d, the script of handler %q of actor %s (line %d): %s", d.Block, d.Handler, d.Actor, s.line, te.Msg)
		}
		rn.failure = err
	}
	u := engine.Usage{Cycles: s.cycles, Cells: s.cells}
	if s.revert {
		return u, errScriptRevert
	}
	return u, nil
}

var errScriptRevert = errors.New("handler script reverts")

// stop ends the output at a trace error met while the engine runs on (a
// handler script's): what is printed stays, nothing more is.
func (rn *runner) stop() {
	rn.out.Flush()
	rn.out.Reset(io.Discard)
	rn.stopped = true
}

// Fired prints the fire line, the events of the handler's calls and, if
// it reverted, a revert line (engine.Observer). After a script's trace
// error, its fire line and the calls before the failing one are the last
// events printed: the replay stops at the error (FORMAT.md), though the
// engine finishes its end of block.
func (rn *runner) Fired(d *engine.Delivery, r engine.FireResult) {
	rn.callsW.Flush()
	rn.ev.w = rn.out
	if rn.stopped {
		return
	}
	if r.Fee != nil { // a lane fire: held until the block's gc section is out
		if rn.laneFiresW == nil {
			rn.laneFiresW = bufio.NewWriter(&rn.laneFires)
		}
		rn.ev.w = rn.laneFiresW
	} else {
		rn.printSysGC()
	}
	ev := rn.ev.begin("fire", d.Block).hex("timer_id", d.TimerID[:]).raw("actor", d.Actor.String()).
		str("handler", string(d.Handler)).hex("payload", d.Payload).uint("cycles_limit", d.CyclesLimit).
		uint("cells_limit", d.CellsLimit).hex("origin", d.Origin[:]).raw("sender", d.Sender.String())
	if r.Fee != nil {
		laneFire(ev, r.Fee)
	}
	ev.end()
	rn.ev.w.Write(rn.handlerOut.Bytes())
	if rn.failure != nil {
		rn.ev.w = rn.out
		rn.flushEnd() // the gc section, then the fires up to this one
		rn.stop()
		return
	}
	if r.Reverted {
		rn.ev.begin("revert", d.Block).raw("actor", d.Actor.String()).uint("nonce", rn.nonces[d.Actor]).end()
	}
	rn.ev.w = rn.out
}
