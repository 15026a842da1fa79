package engine

import (
	"github.com/timerlane/timerlane/internal/u128"
	"github.com/timerlane/timerlane/ring"
)

// Tx is a handle on a transaction: a user transaction in the open block, or
// the execution of a fired timer's handler. Its calls take effect at once,
// so each sees the earlier ones; on revert all of them are undone. A handle
// is valid until its transaction is committed or reverted; after that every
// call on it returns ErrTxClosed, even once a later transaction is open.
// The zero Tx is closed.
type Tx struct {
	e   *Engine
	gen uint64
}

// txState is the open transaction, kept in the engine so that handles
// allocate nothing.
type txState struct {
	gen      uint64
	actor    Address
	actorIdx uint32
	nonce    uint64
	seq0     uint64
	from     uint32 // the record of the timer whose handler runs; 0 for a user tx
	open     bool
	handler  bool
}

// state returns the open transaction that tx names.
func (tx Tx) state() (*txState, error) {
	if tx.e == nil || !tx.e.txs.open || tx.e.txs.gen != tx.gen {
		return nil, ErrTxClosed
	}
	return &tx.e.txs, nil
}

// Actor is the actor whose calls the transaction makes.
func (tx Tx) Actor() Address {
	if s, err := tx.state(); err == nil {
		return s.actor
	}
	return Address{}
}

// Nonce is the nonce that the ids of timers scheduled in tx derive from.
func (tx Tx) Nonce() uint64 {
	if s, err := tx.state(); err == nil {
		return s.nonce
	}
	return 0
}

// SetNonce sets the nonce for the ids of later schedules; a handler's
// transaction starts with 0 and its executor sets the actor's nonce.
func (tx Tx) SetNonce(n uint64) {
	if s, err := tx.state(); err == nil {
		s.nonce = n
	}
}

// FromTimer is the id of the timer whose handler runs in tx, if any.
func (tx Tx) FromTimer() (TimerID, bool) {
	if s, err := tx.state(); err == nil {
		if s.from != 0 {
			return tx.e.recs.At(s.from).id, true
		}
	}
	return TimerID{}, false
}

// Schedule schedules a timer of tx's actor at height (CIP-5 §4). It returns
// the timer's id and the cost of the call, or a *CallError. The checks run
// in the order HeightNotInFuture, PayloadTooLarge, InvalidHandler,
// TooManyTimers, DuplicateTimer. Under policy lane the timer takes every
// default fee argument (docs/SPEC.md §12.1).
func (tx Tx) Schedule(height uint64, payload []byte) (TimerID, Cost, error) {
	var r Scheduled
	err := tx.schedule(height, payload, nil, &r)
	return r.ID, r.Cost, err
}

// ScheduleFees is Schedule with CIP-1 §6's fee arguments: f.Set says
// which fields are given, and the others take their defaults. f nil, or
// with no Set bit, is Schedule under either policy; a Set bit needs policy
// lane (ErrNeedsLane). ErrInvalidFees, naming what is wrong, refuses a Set
// bit or Tier that names no field or tier, and a field with a value but
// without its Set bit (the call would ignore it). The lane's checks come
// after InvalidHandler, in
// the order TimerArgDeprecated, GasLimitTooHigh, InvalidExpiry,
// TimerRejectedBelowBasefee. A priority fee above max fee − basefee is
// clamped, and the result says so (TimerPriorityClampedAtSchedule).
func (tx Tx) ScheduleFees(height uint64, payload []byte, f *Fees) (Scheduled, error) {
	var r Scheduled
	err := tx.schedule(height, payload, f, &r)
	return r, err
}

// schedule is ScheduleFees writing its result to out, which it expects
// zero: the result is 88 bytes, and copying it back cost Schedule a few ns.
func (tx Tx) schedule(height uint64, payload []byte, f *Fees, out *Scheduled) error {
	s, err := tx.state()
	if err != nil {
		return err
	}
	e := tx.e
	if f != nil {
		if err := f.check(); err != nil {
			return err
		}
		if f.Set != 0 && e.cfg.Policy != PolicyLane {
			return ErrNeedsLane
		}
	}
	if height <= e.height {
		return ErrHeightNotInFuture
	}
	if len(payload) > int(e.cfg.MaxPayloadBytes) {
		return ErrPayloadTooLarge
	}
	rt := routing{body: payload}
	if mayRoute(payload) {
		rt = route(payload, &e.scratch)
	}
	if rt.routed && (len(rt.handler) == 0 || len(rt.handler) > int(e.cfg.MaxHandlerBytes)) {
		return ErrInvalidHandler
	}
	var stored Fees
	if f != nil && f.Set != 0 {
		if stored, err = e.checkFees(height, f, out); err != nil {
			return err
		}
	}
	if s.actorIdx == 0 {
		s.actorIdx, _ = e.actors.lookup(&s.actor)
	}
	held := e.actors.at(s.actorIdx).pending
	if e.phase == phaseEnding {
		held -= e.lane.dueOf(s.actorIdx) // a lane block's due set is out while handlers run
	}
	if held >= e.cfg.MaxTimersPerActor {
		return ErrTooManyTimers
	}
	e.prefetchNew(height, len(rt.handler)+len(rt.body))
	e.timerID(&out.ID, &s.actor, height, payload, s.nonce)
	// The id's index slot is far from everything else in memory: the
	// record is written and queued before the probe, so that the core
	// runs that work while the slot loads (the probe's loads wait for
	// nothing else). A hint for the slot's line here gained nothing, at
	// 10k or 1M pending (session 24). A duplicate takes both back.
	at := slot{tag: e.ids.tag(&out.ID)}
	i, r := e.newRec(&out.ID, height, e.seq, rt.handler, rt.body)
	e.queue(i, r)
	var dup bool
	if at, dup = e.ids.find(&out.ID, at.tag); dup {
		e.unqueue(i, false)
		e.dropNewRec(i)
		return ErrDuplicateTimer
	}
	var fee uint32
	if stored.Set != 0 {
		fee = e.allocFee()
		*e.lane.fees.At(fee) = stored
	}
	// Every check has passed: the timer is the actor's, pending.
	e.seq++
	s.actorIdx = e.linkRec(i, r, at, fee, s.actorIdx, &s.actor)
	e.pushUndo(i, undoSchedule)
	out.Cost = Cost{Cycles: e.cfg.ScheduleCycles, Cells: uint64(len(payload))}
	if out.Clamped {
		if o, ok := e.obs.(LaneObserver); ok {
			e.notifyClamped(o, out)
			if e.phase != phaseEnding { // inside a handler, EndBlock raises it
				e.raiseObserverPanic()
			}
		}
	}
	return nil
}

// notifyClamped tells the Observer of a clamped priority fee; a panic of
// it waits until the schedule is done (see observed).
func (e *Engine) notifyClamped(o LaneObserver, s *Scheduled) {
	defer e.observed()
	o.Clamped(s.ID, s.StatedPriorityFee, s.ClampedPriorityFee)
}

// checkFees validates the lane arguments of a schedule at height and
// returns what the timer keeps: the bid dropped, the priority fee clamped.
func (e *Engine) checkFees(height uint64, f *Fees, out *Scheduled) (Fees, error) {
	p := &e.lane.params
	if f.Set&HasBid != 0 && e.height >= satAddU64(e.cfg.ActivationHeight, p.BidDeprecationBlocks) {
		return Fees{}, ErrTimerArgDeprecated
	}
	if f.Set&HasGasLimit != 0 && f.GasLimit > e.fireCap(e.height) {
		return Fees{}, ErrGasLimitTooHigh
	}
	if f.Set&HasExpiresAt != 0 && (f.ExpiresAt < height || f.ExpiresAt > satAddU64(height, p.MaxTTLBlocks)) {
		return Fees{}, ErrInvalidExpiry
	}
	base := e.lane.basefee
	if f.Set&HasMaxFee != 0 && f.MaxFee.Cmp(base) < 0 {
		return Fees{}, ErrTimerRejectedBelowBasefee
	}
	kept := *f
	kept.Set &^= HasBid
	if f.Set&HasTier != 0 {
		// CIP-1 §7.3: the tier hint expands, at the call, to a priority
		// fee of its multiplier times the stated one, or without one the
		// default agent's now (the previous block's p50), which the timer
		// then states (docs/SPEC.md §12.2).
		tip := e.lane.p50
		if f.Set&HasMaxPriorityFee != 0 {
			tip = f.MaxPriorityFee
		}
		if m := p.TierMultipliers[f.Tier]; m != 1000 {
			tip, _ = u128.MulDiv64(tip, m, 1000)
		}
		kept.MaxPriorityFee = tip
		kept.Set |= HasMaxPriorityFee
	}
	if kept.Set&HasMaxPriorityFee != 0 {
		maxFee := u128.SatMul64(base, 2) // the default agent's, when none is stated
		if f.Set&HasMaxFee != 0 {
			maxFee = f.MaxFee
		}
		if bound := maxFee.Sub(base); kept.MaxPriorityFee.Cmp(bound) > 0 {
			out.Clamped, out.StatedPriorityFee, out.ClampedPriorityFee = true, kept.MaxPriorityFee, bound
			kept.MaxPriorityFee = bound
		}
	}
	return kept, nil
}

// Extend sets a new expires_at on a pending timer of tx's actor (policy
// lane): UnknownTimer, NotOwner, then InvalidExpiry when the new expiry is
// below the current one, below the timer's height, or more than
// max_ttl_blocks after it. It costs what a cancel costs.
func (tx Tx) Extend(id TimerID, expiresAt uint64) (Cost, error) {
	s, err := tx.state()
	if err != nil {
		return Cost{}, err
	}
	e := tx.e
	if e.cfg.Policy != PolicyLane {
		return Cost{}, ErrNeedsLane
	}
	_, i, ok := e.ids.lookup(&id)
	if !ok || e.dueNow(e.recs.At(i)) {
		return Cost{}, ErrUnknownTimer
	}
	if e.actors.at(e.recs.At(i).actor).addr != s.actor {
		return Cost{}, ErrNotOwner
	}
	u, err := e.extend(i, expiresAt)
	if err != nil {
		return Cost{}, err
	}
	e.undo = append(e.undo, u)
	return Cost{Cycles: e.cfg.CancelCycles}, nil
}

// extend validates and applies a new expiry of timer i, returning how to
// undo it.
func (e *Engine) extend(i uint32, expiresAt uint64) (undo, error) {
	r := e.recs.At(i)
	f := e.feeOf(r)
	if expiresAt < e.expiry(r, f) || expiresAt < r.height || expiresAt > satAddU64(r.height, e.lane.params.MaxTTLBlocks) {
		return undo{}, ErrInvalidExpiry
	}
	u := undo{rec: i, kind: undoExtend}
	if f == nil {
		r.fee = e.allocFee()
		f = e.lane.fees.At(r.fee)
		*f = Fees{} // every default; the expiry is set below
		u.newFee = true
	}
	u.oldSet = f.Set
	u.setOldExpiry(f.ExpiresAt)
	f.Set |= HasExpiresAt
	f.ExpiresAt = expiresAt
	e.touch(&r.id)
	return u, nil
}

func (e *Engine) unextend(u undo) {
	r := e.recs.At(u.rec)
	if u.newFee {
		e.freeFee(r.fee)
		r.fee = 0
		return
	}
	f := e.lane.fees.At(r.fee)
	f.Set, f.ExpiresAt = u.oldSet, u.oldExpiry()
}

// Cancel cancels a pending timer of tx's actor: UnknownTimer if no timer
// with id is pending, NotOwner if it is another actor's. A timer due in the
// open block can be cancelled until end of block.
func (tx Tx) Cancel(id TimerID) (Cost, error) {
	s, err := tx.state()
	if err != nil {
		return Cost{}, err
	}
	e := tx.e
	at, i, ok := e.ids.lookup(&id)
	if !ok || e.dueNow(e.recs.At(i)) {
		return Cost{}, ErrUnknownTimer
	}
	r := e.recs.At(i)
	a := e.actors.at(r.actor)
	if !sameAddr(&a.addr, &s.actor) {
		return Cost{}, ErrNotOwner
	}
	e.ids.delAt(at)
	a.pending--
	e.pending--
	if _, listed := r.onList(); !listed {
		e.q.PrefetchAt(r.height, ring.Pos(r.at)) // the commit unlinks it
	}
	e.pushUndo(i, undoCancel).setHeld(r.held())
	e.touch(&id)
	return Cost{Cycles: e.cfg.CancelCycles}, nil
}

// Commit keeps the transaction's effects.
func (tx Tx) Commit() error {
	s, err := tx.state()
	if err != nil {
		return err
	}
	if s.handler {
		return ErrHandlerTx
	}
	tx.e.commitTx()
	return nil
}

// Revert undoes every call of the transaction.
func (tx Tx) Revert() error {
	s, err := tx.state()
	if err != nil {
		return err
	}
	if s.handler {
		return ErrHandlerTx
	}
	tx.e.revertTx()
	return nil
}

// commitTx is small enough to inline for the transaction that made no
// call, as most handlers' fires are.
func (e *Engine) commitTx() {
	if len(e.undo) > 0 {
		e.commitUndo()
	}
	e.closeTx()
}

// commitUndo is commitTx's work on a non-empty undo log: cancels leave
// the queue for good, and the log goes to the history.
func (e *Engine) commitUndo() {
	for _, u := range e.undo {
		if u.kind == undoCancel {
			e.unqueue(u.rec, true)
			if e.hist == nil {
				e.release(u.rec)
			}
		}
	}
	if e.hist != nil {
		e.hist.ops.push(e.undo...)
	}
}

func (e *Engine) revertTx() {
	for k := len(e.undo) - 1; k >= 0; k-- {
		if e.root != nil {
			// A Root read inside the transaction may have hashed its
			// changes into the tree already: hash these timers again.
			e.root.dirty = append(e.root.dirty, e.recs.At(e.undo[k].rec).id)
		}
		e.undoOp(e.undo[k], true)
	}
	e.seq = e.txs.seq0
	e.closeTx()
}

// undoOp takes back one call: a cancel relinks the record, an extend
// restores the fees, a schedule unlinks and frees the record (taking it out
// of the queue first if queued: a rollback sees to the queue itself, see
// undoFrom).
func (e *Engine) undoOp(u undo, queued bool) {
	r := e.recs.At(u.rec)
	switch u.kind {
	case undoCancel:
		e.ids.put(&r.id, u.rec)
		e.actors.at(r.actor).pending++
		e.pending++
	case undoExtend:
		e.unextend(u)
	case undoSchedule:
		e.ids.del(&r.id)
		e.actors.at(r.actor).pending--
		e.pending--
		if queued {
			e.unqueue(u.rec, false)
		}
		e.release(u.rec)
	}
}

func (e *Engine) closeTx() {
	e.txs.open = false
	e.undo = e.undo[:0]
}
