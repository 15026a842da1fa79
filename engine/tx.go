package engine

import "unsafe"

const recSize = unsafe.Sizeof(rec{})

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
// TooManyTimers, DuplicateTimer.
func (tx Tx) Schedule(height uint64, payload []byte) (TimerID, Cost, error) {
	var id TimerID
	s, err := tx.state()
	if err != nil {
		return id, Cost{}, err
	}
	e := tx.e
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
	if s.actorIdx == 0 {
		s.actorIdx, _ = e.actors.lookup(&s.actor)
	}
	if e.actors.recs[s.actorIdx].pending >= e.cfg.MaxTimersPerActor {
		return id, Cost{}, ErrTooManyTimers
	}
	e.timerID(&id, &s.actor, height, payload, s.nonce)
	at, _, dup := e.ids.lookup(&id)
	if dup {
		return id, Cost{}, ErrDuplicateTimer
	}
	e.schedule(s, at, &id, height, rt)
	return id, Cost{Cycles: e.cfg.ScheduleCycles, Cells: uint64(len(payload))}, nil
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
	if !ok {
		return Cost{}, ErrUnknownTimer
	}
	r := e.recs.At(i)
	a := &e.actors.recs[r.actor]
	if a.addr != s.actor {
		return Cost{}, ErrNotOwner
	}
	e.ids.delAt(at)
	a.pending--
	e.pending--
	e.undo = append(e.undo, undo{rec: i, cancelled: true})
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

func (e *Engine) commitTx() {
	for _, u := range e.undo {
		if u.cancelled {
			e.unqueue(u.rec)
			e.release(u.rec)
		}
	}
	e.closeTx()
}

func (e *Engine) revertTx() {
	for k := len(e.undo) - 1; k >= 0; k-- {
		u := e.undo[k]
		r := e.recs.At(u.rec)
		if u.cancelled {
			e.ids.put(&r.id, u.rec)
			e.actors.recs[r.actor].pending++
			e.pending++
			continue
		}
		e.ids.del(&r.id)
		e.actors.recs[r.actor].pending--
		e.pending--
		e.unqueue(u.rec)
		e.release(u.rec)
	}
	e.seq = e.txs.seq0
	e.closeTx()
}

func (e *Engine) closeTx() {
	e.txs.open = false
	e.undo = e.undo[:0]
}
