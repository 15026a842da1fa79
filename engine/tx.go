package engine

import "unsafe"

const recSize = unsafe.Sizeof(rec{})

// Tx is a transaction: a user transaction in the open block, or the
// execution of a fired timer's handler. Its calls take effect at once, so
// each sees the earlier ones; on revert all of them are undone. A Tx is
// owned by the engine and valid until it is committed or reverted.
type Tx struct {
	e        *Engine
	actor    Address
	actorIdx uint32
	nonce    uint64
	seq0     uint64
	from     TimerID
	hasFrom  bool
	open     bool
	handler  bool
}

// Actor is the actor whose calls the transaction makes.
func (tx *Tx) Actor() Address { return tx.actor }

// Nonce is the nonce that the ids of timers scheduled in tx derive from.
func (tx *Tx) Nonce() uint64 { return tx.nonce }

// SetNonce sets the nonce for the ids of later schedules; a handler's
// transaction starts with 0 and its executor sets the actor's nonce.
func (tx *Tx) SetNonce(n uint64) { tx.nonce = n }

// FromTimer is the id of the timer whose handler runs in tx, if any.
func (tx *Tx) FromTimer() (TimerID, bool) { return tx.from, tx.hasFrom }

// Schedule schedules a timer of tx's actor at height (CIP-5 §4). It returns
// the timer's id and the cost of the call, or a *CallError. The checks run
// in the order HeightNotInFuture, PayloadTooLarge, InvalidHandler,
// TooManyTimers, DuplicateTimer.
func (tx *Tx) Schedule(height uint64, payload []byte) (TimerID, Cost, error) {
	var id TimerID
	e := tx.e
	if !tx.open {
		return id, Cost{}, ErrTxClosed
	}
	if height <= e.height {
		return id, Cost{}, ErrHeightNotInFuture
	}
	if len(payload) > int(e.cfg.MaxPayloadBytes) {
		return id, Cost{}, ErrPayloadTooLarge
	}
	rt := route(payload, &e.scratch)
	if rt.routed && (len(rt.handler) == 0 || len(rt.handler) > int(e.cfg.MaxHandlerBytes)) {
		return id, Cost{}, ErrInvalidHandler
	}
	if tx.actorIdx == 0 {
		tx.actorIdx, _ = e.actors.lookup(&tx.actor)
	}
	if e.actors.recs[tx.actorIdx].pending >= e.cfg.MaxTimersPerActor {
		return id, Cost{}, ErrTooManyTimers
	}
	e.timerID(&id, &tx.actor, height, payload, tx.nonce)
	if _, dup := e.ids.get(&id); dup {
		return id, Cost{}, ErrDuplicateTimer
	}
	e.schedule(tx.actorIdx, &id, height, rt)
	return id, Cost{Cycles: e.cfg.ScheduleCycles, Cells: uint64(len(payload))}, nil
}

// Cancel cancels a pending timer of tx's actor: UnknownTimer if no timer
// with id is pending, NotOwner if it is another actor's. A timer due in the
// open block can be cancelled until end of block.
func (tx *Tx) Cancel(id TimerID) (Cost, error) {
	e := tx.e
	if !tx.open {
		return Cost{}, ErrTxClosed
	}
	i, ok := e.ids.get(&id)
	if !ok {
		return Cost{}, ErrUnknownTimer
	}
	r := e.recs.At(i)
	a := &e.actors.recs[r.actor]
	if a.addr != tx.actor {
		return Cost{}, ErrNotOwner
	}
	e.ids.del(&id)
	r.state = stCancelled
	a.pending--
	e.pending--
	e.undo = append(e.undo, undo{node: i, cancelled: true})
	return Cost{Cycles: e.cfg.CancelCycles}, nil
}

// Commit keeps the transaction's effects.
func (tx *Tx) Commit() error {
	if !tx.open {
		return ErrTxClosed
	}
	if tx.handler {
		return ErrHandlerTx
	}
	tx.commit()
	return nil
}

// Revert undoes every call of the transaction.
func (tx *Tx) Revert() error {
	if !tx.open {
		return ErrTxClosed
	}
	if tx.handler {
		return ErrHandlerTx
	}
	tx.revert()
	return nil
}

func (tx *Tx) commit() {
	e := tx.e
	for _, u := range e.undo {
		if u.cancelled {
			e.q.Remove(u.node)
			e.release(u.node)
		}
	}
	tx.close()
}

func (tx *Tx) revert() {
	e := tx.e
	for k := len(e.undo) - 1; k >= 0; k-- {
		u := e.undo[k]
		r := e.recs.At(u.node)
		if u.cancelled {
			r.state = stPending
			e.ids.put(&r.id, u.node)
			e.actors.recs[r.actor].pending++
			e.pending++
			continue
		}
		e.ids.del(&r.id)
		e.actors.recs[r.actor].pending--
		e.pending--
		e.q.Remove(u.node)
		e.release(u.node)
	}
	e.seq = tx.seq0
	tx.close()
}

func (tx *Tx) close() {
	tx.open = false
	tx.e.undo = tx.e.undo[:0]
}
