package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/internal/bytepool"
	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/slab"
	"github.com/timerlane/timerlane/ring"
)

// rec is the engine's record of one timer. Its index is the Val of the
// timer's entry in the calendar queue.
type rec struct {
	id     TimerID
	height uint64
	seq    uint64
	at     uint32 // where it waits: a ring.Pos, or listed|k for place k on the lane's deferred list
	actor  uint32 // index in the actor table
	data   uint32 // bytepool reference of handler bytes ++ payload, tagged with their lengths (dataTag)
	fee    uint32 // lane fee fields (laneState.fees), 0 for none
}

// A record is 64 bytes, one cache line, so that cancelling or firing a
// timer touches one line of it; the lengths of its bytes, needed only when
// it has some, are the tag of its bytes in the pool. The two arrays fail to
// compile if a change of rec makes it any other size.
const recSize = unsafe.Sizeof(rec{})

var (
	_ [recSize - 64]struct{}
	_ [64 - recSize]struct{}
)

// listed marks rec.at as a place on the lane's deferred list rather than a
// calendar position (ring.Pos stays below 2^31: see ring.MaxChunks).
const listed = 1 << 31

// killed is rec.at of a timer that a committed cancel took out of the
// calendar queue for good, which the queue may keep as a tombstone in its
// overflow tree (calendar.Queue.Kill). No place on the deferred list is
// this high: the list would hold 2^31 timers (addDeferred refuses).
const killed = ^uint32(0)

// dataTag is the pool tag of a timer's bytes, handler ++ payload: their
// split. A per-record array of it cost every record 8 bytes, timers
// without bytes too (BenchmarkPendingBytes at 1M, empty payloads: 193.4 ->
// 180.5 B per timer without it, docs/BENCHMARK_HISTORY.md).
func dataTag(handler, payload int) uint64 { return uint64(handler)<<32 | uint64(uint32(payload)) }

// entry is record r, of index i, as the calendar queue holds it.
func (r *rec) entry(i uint32) ring.Entry { return ring.Entry{Height: r.height, Seq: r.seq, Val: i} }

// onList returns the place of record r on the deferred list, if it is there.
func (r *rec) onList() (uint32, bool) { return r.at &^ listed, r.at&listed != 0 }

// dueNow reports whether pending timer r is of the due set of the lane's
// end of block that runs: a handler's cancel or extend of it is then
// UnknownTimer, as of a timer that fifo took out before its fires
// (FORMAT.md, docs/SPEC.md §12.5).
func (e *Engine) dueNow(r *rec) bool {
	_, ok := r.onList()
	return ok && e.phase == phaseEnding
}

type phase uint8

const (
	phaseIdle   phase = iota // between blocks
	phaseTxs                 // block open: transactions run
	phaseEnding              // EndBlock runs: only the handlers' own transactions call in
	phaseEnded               // end of block done; commit next
	phaseClosed              // Close was called: every call that changes state fails
	phaseFailed              // an end of block failed half done: a Ledger's panic or error (ErrEndBlockFailed)
)

// Engine is the timer scheduler of one chain. It is not safe for concurrent
// use: a node drives it from its block-execution goroutine.
type Engine struct {
	cfg    Config
	q      *calendar.Queue
	recs   slab.Slab[rec]
	free   slab.Stack // records to reuse, last freed first
	nrecs  uint32     // records handed out at least once; index 0 is reserved
	ids    idIndex
	actors actorTable
	data   bytepool.Pool

	height  uint64 // the open or last committed block; 0 before the first
	started bool
	phase   phase
	// closedInBlock: Close found a block open, so the state the queries
	// describe was never committed (WriteSnapshot refuses it).
	closedInBlock bool
	seq           uint64 // insertion sequence of the next timer
	pending       int

	policy   policy
	txs      txState // the open transaction, if any
	undo     []undo
	due      []uint32
	tags     []uint64     // id hashes of the due timers, for take
	back     []ring.Entry // a rollback's timers to put back in the queue (undoFrom)
	rebuilds int          // Stats.QueueRebuilds
	checked  int          // Stats.RootsChecked
	bulk     []uint32     // a restore's records, not in the id index yet (nil: not restoring)
	del      Delivery
	lastFire FireResult
	obsPanic any // the first panic of the Observer in this call, raised again at its end
	obs      Observer
	lane     laneState
	root     *stateRoot // nil unless Config.StateRoot
	hist     *history   // nil when Config.RollbackDepth is 0
	replayed uint64     // during recovery: the log records applied
	skipRoot bool       // during recovery: do not check this record's root
	dur      *durable   // nil unless opened on a directory (Open)

	executing bool // a handler of fireRun's runs

	keccak  hash.Hash
	squeeze io.Reader      // keccak's sponge read in place, if it offers that; else nil
	pre     [idPreLen]byte // an id's preimage, when its payload is short
	nonce   [8]byte
	sum     [32]byte
	scratch []byte

	reserved int // Reserve's largest n
}

// undo is how to take back one call of the open transaction.
type undo struct {
	rec    uint32
	kind   undoKind
	newFee bool     // extend: the timer had no fee record before
	oldSet FeeField // extend: the fee fields before
	// extend: the expiry before, high and low halves (see oldExpiry);
	// cancel: what the record holds (see held), so that freeing it once the
	// history lets go of it reads no cold record.
	x, y, z uint32
}

func (u *undo) oldExpiry() uint64 { return uint64(u.x)<<32 | uint64(u.y) }

func (u *undo) setOldExpiry(v uint64) { u.x, u.y = uint32(v>>32), uint32(v) }

func (u *undo) held() holds { return holds{data: u.x, actor: u.y, fee: u.z} }

// pushUndo appends to the open transaction's undo log an entry of kind for
// record i, its other fields zero, and returns it. It writes the entry in
// place: a literal appended is built on the stack and copied with 16-byte
// loads that must wait for the narrower stores that built it (store-to-load
// forwarding fails), which cost Schedule about 13 ns.
func (e *Engine) pushUndo(i uint32, kind undoKind) *undo {
	e.undo = append(e.undo, undo{})
	u := &e.undo[len(e.undo)-1]
	u.rec, u.kind = i, kind
	return u
}

func (u *undo) setHeld(h holds) { u.x, u.y, u.z = h.data, h.actor, h.fee }

// cancelUndo is the undo of a cancel (or a fire, or a collect) of record i.
func cancelUndo(i uint32, r *rec) undo {
	u := undo{rec: i, kind: undoCancel}
	u.setHeld(r.held())
	return u
}

// holds is what a record holds in other tables, freed with it.
type holds struct{ data, actor, fee uint32 }

func (r *rec) held() holds { return holds{data: r.data, actor: r.actor, fee: r.fee} }

type undoKind uint8

const (
	undoSchedule undoKind = iota
	undoCancel
	undoExtend
)

// New returns an empty in-memory engine, before its first block.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The deployers are consensus state (the root encodes them): the
	// engine keeps a copy the caller's slice cannot change.
	cfg.SystemDeployers = slices.Clone(cfg.SystemDeployers)
	e := &Engine{cfg: cfg, policy: fifo{}, actors: newActorTable(), keccak: sha3.NewLegacyKeccak256(), seq: 1, nrecs: 1}
	e.squeeze, _ = e.keccak.(io.Reader)
	if cfg.Policy == PolicyLane {
		e.policy = lane{}
	}
	e.lane.init(cfg)
	if cfg.StateRoot {
		e.root = newStateRoot()
	}
	if cfg.RollbackDepth > 0 {
		e.hist = &history{depth: cfg.RollbackDepth, maxBytes: cfg.RollbackBytes}
	}
	e.lane.onExpired = e.windowExpired
	e.lane.onPruned = func(a uint32) { e.actors.unref(a) }
	e.lane.byID = func(a, b uint32) int { return bytes.Compare(e.recs.At(a).id[:], e.recs.At(b).id[:]) }
	e.lane.tie = func(a, b uint32) bool {
		c := e.lane.cands
		return e.lane.byID(c[a].rec, c[b].rec) < 0
	}
	q, err := e.newQueue(ring.NewChunks())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	e.q = q
	e.ids = newIDIndex(func(i uint32) *TimerID { return &e.recs.At(i).id })
	e.recs.Ensure(0)
	return e, nil
}

// Config returns the engine's configuration: a copy, SystemDeployers
// included, which the caller may change freely.
func (e *Engine) Config() Config {
	c := e.cfg
	c.SystemDeployers = slices.Clone(c.SystemDeployers)
	return c
}

// SetObserver sets who hears end-of-block events; nil for nobody.
func (e *Engine) SetObserver(o Observer) { e.obs = o }

// Height is the open block, or the last committed one between blocks
// (0 before the first block).
func (e *Engine) Height() uint64 { return e.height }

// Pending is the number of pending timers.
func (e *Engine) Pending() int { return e.pending }

// BeginBlock opens block h: the first block may have any height >= 1, each
// later one must be the previous + 1. Epoch maintenance runs here, before
// the block's transactions (CIP-1 §3 step 2).
func (e *Engine) BeginBlock(h uint64) error {
	if err := e.logFailed(); err != nil {
		return err
	}
	if e.phase != phaseIdle {
		return e.notIdle()
	}
	switch {
	case !e.started && h == 0:
		return fmt.Errorf("%w: block 0: heights start at 1", ErrBadHeight)
	case e.started && e.height == math.MaxUint64:
		return fmt.Errorf("%w: block %d: no block follows the last height", ErrBadHeight, h)
	case e.started && h != e.height+1:
		return fmt.Errorf("%w: block %d after %d (want %d)", ErrBadHeight, h, e.height, e.height+1)
	}
	e.beginHist(h, h)
	e.q.Advance(h)
	e.height, e.started, e.phase = h, true, phaseTxs
	if e.cfg.Policy == PolicyLane {
		e.beginLaneBlock()
	}
	return nil
}

// Begin opens a transaction of actor with the given nonce in the open
// block. Its calls take effect as they are made; Commit keeps them, Revert
// undoes all of them.
func (e *Engine) Begin(actor Address, nonce uint64) (Tx, error) {
	if e.phase != phaseTxs {
		return Tx{}, e.notInTxs()
	}
	if e.txs.open {
		return Tx{}, ErrTxOpen
	}
	return e.openTx(&actor, nonce, false), nil
}

// openTx writes the state field by field: a struct literal with *actor in
// it is built on the stack and copied, as actor might alias e.txs.
func (e *Engine) openTx(actor *Address, nonce uint64, handler bool) Tx {
	s := &e.txs
	s.gen++
	s.actor, s.actorIdx, s.nonce, s.seq0, s.from = *actor, 0, nonce, e.seq, 0
	s.open, s.handler = true, handler
	e.undo = e.undo[:0]
	return Tx{e: e, gen: s.gen}
}

// EndBlock delivers the timers due at the open block's height. The tiers
// hand over the due timers in FIFO order; the engine's policy decides what
// fires, in what order, and (for fee-charging policies) what is deferred or
// collected. Each fire's handler calls commit or revert as a unit. x must
// not be nil (ErrNoExecutor).
//
// A handler whose Execute panics is reverted, as one that failed, with a
// FireResult.Err matching ErrExecutorPanic, and the block goes on: every
// due timer is still dealt with. An Observer that panics does not stop
// the block either: EndBlock ends it, then panics with the Observer's
// first panic value; Commit follows as usual.
//
// A Ledger that fails (an error other than those Ledger documents) stops
// the block half done: EndBlock returns an error matching
// ErrEndBlockFailed and the ledger's error (and naming the Observer's
// panic, if one came first), and the engine takes no further block.
func (e *Engine) EndBlock(x Executor) (BlockResult, error) {
	if e.phase != phaseTxs {
		return BlockResult{}, e.notInTxs()
	}
	if e.txs.open {
		return BlockResult{}, ErrTxOpen
	}
	if x == nil {
		return BlockResult{}, ErrNoExecutor
	}
	// Agents, observers and handlers run inside: none may begin a
	// transaction, a block or a system instruction of its own.
	e.phase = phaseEnding
	defer func() {
		if e.phase == phaseEnding {
			// A panic went through (a Ledger's, or the engine's own): the
			// block is half done, and no call may build on it.
			e.phase = phaseFailed
		}
	}()
	res := e.policy.endBlock(e, x, e.q.Take())
	if err := e.lane.ledgerErr; err != nil {
		// The node's account store failed mid-settlement: as for a
		// Ledger's panic, the block is half done. An Observer's panic
		// is named, not raised: the engine's failure comes first.
		e.phase = phaseFailed
		if p := e.obsPanic; p != nil {
			e.obsPanic = nil
			return BlockResult{}, fmt.Errorf("%w: %w (and the Observer panicked first: %v)", ErrEndBlockFailed, err, p)
		}
		return BlockResult{}, fmt.Errorf("%w: %w", ErrEndBlockFailed, err)
	}
	res.Height, res.Pending = e.height, e.pending
	res.GC += e.lane.sysGC
	e.phase = phaseEnded
	e.raiseObserverPanic()
	return res, nil
}

// unusable is the error of every call that changes the state once the
// engine is closed or failed, else nil.
func (e *Engine) unusable() error {
	switch e.phase {
	case phaseClosed:
		return ErrClosed
	case phaseFailed:
		return ErrEndBlockFailed
	}
	return nil
}

// notIdle is the error of a call that needs to be between blocks.
func (e *Engine) notIdle() error {
	switch e.phase {
	case phaseEnding:
		return ErrInEndBlock
	case phaseEnded:
		return ErrBlockEnded
	case phaseTxs:
		return ErrBlockOpen
	}
	return e.unusable()
}

// notInTxs is the error of a call that needs an open block's
// transaction phase, in another phase.
func (e *Engine) notInTxs() error {
	if e.phase == phaseEnding {
		return ErrInEndBlock
	}
	if err := e.unusable(); err != nil {
		return err
	}
	if e.phase == phaseEnded {
		return ErrBlockEnded // a block is there, but past its transactions
	}
	return ErrNoBlock
}

// observed recovers a panic of the Observer, keeping the first, so that
// the call that heard it can finish its work before raising it again
// (raiseObserverPanic). Deferred around each Observer call.
func (e *Engine) observed() {
	if p := recover(); p != nil && e.obsPanic == nil {
		e.obsPanic = p
	}
}

func (e *Engine) raiseObserverPanic() {
	if p := e.obsPanic; p != nil {
		e.obsPanic = nil
		panic(p)
	}
}

// notifyFired tells the Observer of the fire just made.
func (e *Engine) notifyFired() {
	defer e.observed()
	e.obs.Fired(&e.del, e.lastFire)
}

// execute runs the handler; a panic of the Executor is its error.
func execute(x Executor, tx Tx, d *Delivery) (u Usage, err error) {
	defer func() {
		if p := recover(); p != nil {
			u, err = Usage{}, fmt.Errorf("%w: %v", ErrExecutorPanic, p)
		}
	}()
	return x.Execute(tx, d)
}

// A policy decides, at end of block, what happens to the due timers. It
// receives them as an iterator over entries already out of the tiers, and works
// through the engine's take, fire and release steps; it never touches the
// tiers.
type policy interface {
	endBlock(e *Engine, x Executor, due ring.Iter) BlockResult
}

// fifo is CIP-5 as implemented: every due timer is first taken out of the
// pending set, then each fires in insertion order (CIP-5 §5.1).
type fifo struct{}

func (fifo) endBlock(e *Engine, x Executor, due ring.Iter) BlockResult {
	order := due.AppendVals(e.q.C, e.due[:0])
	e.touchAll(order)
	e.take(order)
	e.keepTakenHeld(order)
	for k := 0; k < len(order); {
		k = e.fireRun(x, order, k)
	}
	clear(order) // no stale record index survives in the buffer
	e.due = order[:0]
	return BlockResult{Fired: len(order)}
}

// fireRun fires order[k:], each as fire does, and returns where the next
// run starts: len(order), or the timer after one whose handler panicked.
// One deferred recover guards the run, where fire's execute defers one
// per handler, about 5 ns of each fire.
// A panic is the Executor's only while e.executing; any other is the
// engine's own, and goes on.
func (e *Engine) fireRun(x Executor, order []uint32, k int) (next int) {
	defer func() {
		if !e.executing {
			return // no panic, or not the Executor's: recover would stop it
		}
		e.executing = false
		p := recover()
		if p == nil {
			return // runtime.Goexit in the handler: the goroutine ends
		}
		e.closeFire(Usage{}, fmt.Errorf("%w: %v", ErrExecutorPanic, p), nil)
		e.fired(order[next])
		next++
	}()
	for ; k < len(order); k++ {
		if k%4 == 0 {
			e.prefetchRecs(order, k+fireAhead)
		}
		next = k
		tx := e.openFire(order[k], e.cfg.CyclesPerFire)
		e.executing = true
		u, err := x.Execute(tx, &e.del)
		e.executing = false
		e.closeFire(u, err, nil)
		if e.obs != nil || e.hist == nil { // a call for the rare cases only
			e.fired(order[k])
		}
	}
	return len(order)
}

// fired tells the Observer of the fire just made of timer i, whose
// history entry keepTakenHeld made, and without a history frees its
// record.
func (e *Engine) fired(i uint32) {
	if e.obs != nil {
		e.notifyFired()
	}
	if e.hist == nil {
		e.release(i)
	}
}

// take removes due timers from the pending set: their ids are no longer
// pending and they no longer count toward their actors' caps; those on the
// lane's deferred list are marked for compactList to drop. It works in
// passes over the list, each a short loop of independent loads, so that
// the cache misses of many timers overlap instead of queueing one timer
// at a time.
func (e *Engine) take(due []uint32) {
	tags := e.tags[:0]
	for k, i := range due {
		if k%4 == 0 {
			e.prefetchRecs(due, k+takeAhead)
		}
		r := e.recs.At(i)
		tags = append(tags, e.ids.tag(&r.id))
		e.actors.at(r.actor).pending--
		if at, ok := r.onList(); ok { // the lane's: compactList drops it
			e.lane.reasons[at] = unlisted
		}
		r.at = 0
	}
	e.unindex(due, tags)
	e.tags = tags[:0]
}

// unindex takes records recs, whose ids have tags, out of the id index and
// the pending count, loading each one's slot ahead.
func (e *Engine) unindex(recs []uint32, tags []uint64) {
	e.ids.delRecs(recs, tags)
	e.pending -= len(recs)
}

// fire delivers taken timer i through x as a deferred transaction (CIP-5
// §5.2) with the given cycles limit, and commits or reverts its handler's
// calls. The outcome stays in e.lastFire (and e.del) for the observer.
func (e *Engine) fire(x Executor, i uint32, cycles uint64, fee *FireFee) (Usage, bool) {
	tx := e.openFire(i, cycles)
	u, err := execute(x, tx, &e.del)
	return u, e.closeFire(u, err, fee)
}

// openFire fills e.del with taken timer i's delivery and opens its
// deferred transaction.
func (e *Engine) openFire(i uint32, cycles uint64) Tx {
	r := e.recs.At(i)
	handler, payload := e.bytesOf(r)
	d := &e.del
	d.TimerID = r.id
	// Each copy of the address reads the actor table, not d.Actor: a load
	// of bytes just stored with other widths waits for the stores.
	actor := &e.actors.at(r.actor).addr
	d.Actor = *actor
	d.Sender = *actor
	d.Handler = defaultHandler
	if len(handler) > 0 {
		d.Handler = handler
	}
	d.Payload = payload
	d.Height, d.Block = r.height, e.height
	d.CyclesLimit, d.CellsLimit = cycles, e.cfg.CellsPerFire

	tx := e.openTx(actor, 0, true)
	// The firing record lives until after the handler, and its actor's
	// entry with it: the handler's calls need no actor lookup.
	e.txs.from, e.txs.actorIdx = i, r.actor
	return tx
}

// closeFire commits or reverts the open fire's handler calls after its
// handler returned u and err, and reports whether it reverted.
func (e *Engine) closeFire(u Usage, err error, fee *FireFee) bool {
	d := &e.del
	reverted := err != nil || u.Cycles > d.CyclesLimit || u.Cells > d.CellsLimit
	if reverted {
		e.revertTx()
	} else {
		e.commitTx()
	}
	if e.obs != nil { // the outcome is the Observer's only
		// Field by field: a FireResult built on the stack and copied whole
		// would be loaded back while its stores are still in flight.
		res := &e.lastFire
		res.Usage, res.Reverted, res.Err, res.Fee = u, reverted, err, fee
	}
	return reverted
}

// Commit seals the ended block.
func (e *Engine) Commit() error {
	if e.phase != phaseEnded {
		if err := e.unusable(); err != nil {
			return err
		}
		switch e.phase {
		case phaseEnding:
			return ErrInEndBlock
		case phaseIdle:
			return ErrNoBlock
		}
		return ErrBlockNotEnded
	}
	if err := e.logFailed(); err != nil {
		return err
	}
	e.phase = phaseIdle
	e.trimHist()
	if r := e.root; r != nil && len(r.dirty) > e.dirtyBound() {
		// An embedder that never asks for the root would otherwise keep 32
		// bytes for every change since the engine started. Hashing them now
		// is mostly work the next Root would do: only a timer changed again
		// before that Root is hashed twice. The list is kept if it is not
		// far beyond the bound: it grows back to it by the next flush, and
		// an embedder that never asks for the root would otherwise allocate
		// it anew every time.
		e.flushRoot(2 * e.dirtyBound())
	}
	if e.dur != nil {
		if err := e.logBlock(); err != nil {
			return e.failLog(err)
		}
	}
	return nil
}

// SkipEmpty runs, between blocks, the empty blocks after the current height
// up to to, stopping early before any block in which a timer is due. It
// returns the height reached. An empty block changes nothing but the height
// (and under policy lane the basefee, which SkipEmpty lowers as each
// empty block would: SPEC §12.7), so skipping is exactly equivalent to
// running them one by one.
func (e *Engine) SkipEmpty(to uint64) (uint64, error) {
	if err := e.logFailed(); err != nil {
		return e.height, err
	}
	if e.phase != phaseIdle {
		return e.height, e.notIdle()
	}
	if to <= e.height {
		return e.height, nil
	}
	if len(e.lane.deferred) > 0 {
		return e.height, nil // deferred timers are due in every block
	}
	if next, ok := e.q.NextAfter(); ok && next-1 < to {
		to = next - 1
	}
	if to > e.height {
		from := e.height + 1
		e.beginHist(from, to)
		e.q.Advance(to)
		e.height, e.started = to, true
		if e.cfg.Policy == PolicyLane {
			// The lane's figures move in empty blocks too (CIP-1 §5).
			e.beginLaneBlock()
			if first := max(from, e.cfg.ActivationHeight); first <= to {
				e.lane.emptyLaneBlocks(to - first + 1)
				// The window expires as the skipped blocks' ends would have.
				e.expireWindow(to)
			}
		}
		e.trimHist()
	}
	return e.height, nil
}

// addTimer makes a new pending timer: its record, its handler and payload
// bytes, its actor's count and its id in the index (at is from a lookup of
// id that found nothing). The caller places the record in the queue or on
// the deferred list.
func (e *Engine) addTimer(at slot, id *TimerID, height, seq uint64, handler, body []byte, fee, actorIdx uint32, actor *Address) uint32 {
	i, r := e.newRec(id, height, seq, handler, body)
	e.linkRec(i, r, at, fee, actorIdx, actor)
	return i
}

// newRec takes a record for a new timer and writes its own fields and its
// handler and payload bytes; it links it to no actor, fee or index entry
// yet (linkRec does), so that dropNewRec can give it back. It returns the
// record's index and the record, which its caller passes on: each lookup
// of a slab's slot costs about 10 instructions.
func (e *Engine) newRec(id *TimerID, height, seq uint64, handler, body []byte) (uint32, *rec) {
	i := e.allocRec()
	r := e.recs.At(i)
	// Field by field, as in openTx: the literal would go through the stack.
	r.id, r.height, r.seq, r.at, r.data, r.fee, r.actor = *id, height, seq, 0, 0, 0, 0
	if n := len(handler) + len(body); n > 0 {
		ref, buf := e.data.Alloc(n, dataTag(len(handler), len(body)))
		copy(buf[copy(buf, handler):], body)
		r.data = ref
	}
	return i, r
}

// dropNewRec gives back record i from newRec, never linked (and no longer
// queued): its place on the free list is the one it was taken from.
func (e *Engine) dropNewRec(i uint32) {
	e.data.Free(e.recs.At(i).data)
	e.free.Push(i)
}

// linkRec makes record i, r, from newRec a pending timer: its fee, its
// actor's count and its id in the index (at is from a lookup of its id
// that found nothing). It returns the actor's index.
func (e *Engine) linkRec(i uint32, r *rec, at slot, fee, actorIdx uint32, actor *Address) uint32 {
	r.fee = fee
	if actorIdx == 0 {
		actorIdx = e.actors.add(actor)
	}
	r.actor = actorIdx
	a := e.actors.at(actorIdx) // ref's work, inline: its call to add keeps it from inlining
	a.refs++
	a.pending++
	if e.bulk != nil {
		e.bulk = append(e.bulk, i)
	} else {
		e.ids.putAt(at, i)
	}
	e.pending++
	e.touch(&r.id)
	return r.actor
}

// ahead is how many timers ahead of its work a pass over timers starts
// loading their records (and index slots): far enough that a miss is over
// when the pass gets there, near enough that the lines are still cached.
const ahead = 8

// fireAhead is ahead for the fires, whose records take brought into the
// cache but, a block's 64 KiB of them being more than a core's L1, not into
// the nearest level.
const fireAhead = 4

// takeAhead is ahead for the first pass of take, whose work per timer is
// short (a hash and two counters), so that 8 timers ahead is less time
// than a miss to memory. Per timer at 1M pending, timed by pass: 18.3
// ns at 8, 13.1 at 16, 9.8 at 32, 12.5 at 64.
const takeAhead = 4 * ahead

// prefetchRec starts loading record i.
func (e *Engine) prefetchRec(i uint32) { prefetch.Line(unsafe.Pointer(e.recs.At(i))) }

// prefetchRecs starts loading the records recs[j:j+4] that exist. A pass
// that calls it every fourth timer makes a fourth of prefetchRec's calls,
// and loses its registers a fourth as often: the compiler keeps no value
// in a register across the call of an assembly function.
func (e *Engine) prefetchRecs(recs []uint32, j int) {
	if j+4 > len(recs) {
		for ; j < len(recs); j++ {
			e.prefetchRec(recs[j])
		}
		return
	}
	r := recs[j : j+4 : j+4]
	prefetch.Lines(unsafe.Pointer(e.recs.At(r[0])), unsafe.Pointer(e.recs.At(r[1])),
		unsafe.Pointer(e.recs.At(r[2])), unsafe.Pointer(e.recs.At(r[3])))
}

// prefetchNew starts loading the record the next new timer will take, the
// pool slot of its dataLen bytes (handler ++ payload) and their tag, and
// the queue slot a timer of height h would take, so that their cache
// misses overlap the Keccak of its id instead of following it.
func (e *Engine) prefetchNew(h uint64, dataLen int) {
	var rec, data, tag unsafe.Pointer
	if i, ok := e.free.Top(); ok {
		rec = unsafe.Pointer(e.recs.At(i))
	}
	if dataLen > 0 && dataLen <= bytepool.MaxLen {
		data, tag = e.data.NextAddr(dataLen)
	}
	prefetch.Lines(rec, tag, data, e.q.InsertAddr(h))
}

func (e *Engine) allocRec() uint32 {
	if i, ok := e.free.Pop(); ok {
		return i
	}
	i := e.nrecs
	if i == ^uint32(0) {
		panic("engine: 2^32-1 timer records")
	}
	e.recs.Ensure(i)
	// Room to free every record without growing: releasing allocates
	// nothing, even when a block fires far more timers than it schedules.
	e.free.Reserve(e.recs.Cap())
	e.nrecs++
	return i
}

// newQueue returns an empty calendar queue of the configured layout on
// arena c (all free) that tells each record where its timer moves.
func (e *Engine) newQueue(c *ring.Chunks) (*calendar.Queue, error) {
	q, err := calendar.NewIn(e.cfg.layout(), c, func(val uint32, p ring.Pos) { e.recs.At(val).at = uint32(p) })
	if err != nil {
		return nil, err
	}
	// A tombstone's record is killed, or was freed and holds another seq.
	q.SetResident(func(val uint32, seq uint64) bool {
		r := e.recs.At(val)
		return r.seq == seq && r.at != killed
	})
	return q, nil
}

// place puts pending timer i, r, in the calendar queue, or on the lane's
// deferred list if it is due already.
func (e *Engine) place(i uint32, r *rec) {
	if r.height <= e.height {
		e.addDeferred(i)
		return
	}
	e.queue(i, r)
}

// queue puts pending timer i, r, whose height is in the future, in the
// calendar queue.
func (e *Engine) queue(i uint32, r *rec) { r.at = uint32(e.q.Insert(r.entry(i))) }

// unqueue takes pending timer i out of the calendar queue, or off the
// lane's deferred list. forGood says that its (height, seq) never returns
// to the queue, as for a cancel that a transaction commits (a rollback
// builds a new queue): the queue may then keep it as a tombstone
// (calendar.Queue.Kill), which spares Cancel a search of the overflow
// tree. A reverted schedule or a refused duplicate is not for good: the
// next timer may take its seq.
func (e *Engine) unqueue(i uint32, forGood bool) {
	r := e.recs.At(i)
	if _, ok := r.onList(); ok {
		e.dropDeferred(i)
		return
	}
	if !forGood {
		e.q.Remove(r.height, r.seq, ring.Pos(r.at))
		return
	}
	e.q.Kill(r.height, r.seq, ring.Pos(r.at))
	r.at = killed
}

// drop removes pending timer i for good, without firing it: a collected
// timer, or one a log record removes.
func (e *Engine) drop(i uint32) {
	r := e.recs.At(i)
	e.unqueue(i, false)
	e.ids.del(&r.id)
	e.actors.at(r.actor).pending--
	e.pending--
	e.touch(&r.id)
	e.retire(i)
}

// release frees a timer that is no longer in the queue or the index.
func (e *Engine) release(i uint32) {
	e.releaseHeld(i, e.recs.At(i).held())
}

// releaseHeld frees record i, which holds h, without reading it: the next
// addTimer writes every field.
func (e *Engine) releaseHeld(i uint32, h holds) {
	if !e.releasePlain(i, h) {
		e.releaseRest(i, h)
	}
}

// releaseRest is releaseHeld for a record releasePlain refused.
func (e *Engine) releaseRest(i uint32, h holds) {
	e.data.Free(h.data)
	e.actors.unref(h.actor)
	e.freeFee(h.fee)
	e.free.Push(i)
}

// releasePlain is releaseHeld for the common record, small enough to
// inline into a loop: one with no bytes and no fees, whose actor has other
// records. It reports whether i was such a record, and freed.
func (e *Engine) releasePlain(i uint32, h holds) bool {
	a := e.actors.recs.At(h.actor) // not at(): one call less keeps this inlinable
	if h.data|h.fee != 0 || a.refs <= 1 {
		return false
	}
	a.refs--
	e.free.Push(i)
	return true
}

// idPreLen bounds the id preimages timerID hashes in one Write: a 100-byte
// payload, and the 36 bytes around it.
const idPreLen = 136

// timerID derives CIP-5 §3.3's id into out:
// keccak256(actor[20] || height[8 BE] || payload || nonce[8 BE]).
// A preimage whose payload is short is written to the hash in one piece:
// each Write has a fixed cost that a short preimage pays three times.
func (e *Engine) timerID(out *TimerID, actor *Address, height uint64, payload []byte, nonce uint64) {
	// The preimage goes in as whole words at multiples of 8 (e.pre is
	// 8-aligned: TestPreimageAligned), never a store across two cache
	// lines: the height at offset 20 written alone straddled a line of
	// the engine's, or a page, and cost Schedule some 10 % of its time
	// over the Keccak. In moves, not copy or an array assignment: those
	// call memmove.
	le := binary.LittleEndian
	hb := bits.ReverseBytes64(height) // big-endian in a little-endian word
	le.PutUint64(e.pre[0:8], le.Uint64(actor[0:8]))
	le.PutUint64(e.pre[8:16], le.Uint64(actor[8:16]))
	le.PutUint64(e.pre[16:24], uint64(le.Uint32(actor[16:20]))|hb<<32)
	e.keccak.Reset()
	if len(payload) == 0 {
		nb := bits.ReverseBytes64(nonce)
		le.PutUint64(e.pre[24:32], hb>>32|nb<<32)
		le.PutUint32(e.pre[32:36], uint32(nb>>32))
		e.keccak.Write(e.pre[:36])
	} else {
		le.PutUint32(e.pre[24:28], uint32(hb>>32))
		if n := 28 + len(payload); n+8 <= len(e.pre) {
			copy(e.pre[28:], payload)
			binary.BigEndian.PutUint64(e.pre[n:], nonce)
			e.keccak.Write(e.pre[:n+8])
		} else {
			binary.BigEndian.PutUint64(e.nonce[:], nonce)
			e.keccak.Write(e.pre[:28])
			e.keccak.Write(payload)
			e.keccak.Write(e.nonce[:])
		}
	}
	// Into the engine's buffer: a caller's array passed through the
	// interface would escape to the heap on every call. Reading the sponge
	// gives the digest that Sum gives (the sponge is Reset before its next
	// use), without the copy of the whole state that Sum makes so that
	// writing could go on (x/crypto's sha3).
	if e.squeeze != nil {
		e.squeeze.Read(e.sum[:])
	} else {
		e.keccak.Sum(e.sum[:0])
	}
	*out = e.sum
}

// Timer is a read-only copy of a pending timer.
type Timer struct {
	ID      TimerID
	Actor   Address
	Height  uint64
	Seq     uint64 // insertion order: FIFO among timers of one height
	Handler string
	Payload []byte // what the handler receives
	// Fees are the fee fields the timer states (policy lane): those its
	// schedule gave (a priority fee as its tier scaled and the clamp
	// lowered it then, the deprecated bid dropped), and the expiry an
	// extend set. Set says which; the others
	// take their defaults when used (docs/SPEC.md §12.1).
	Fees Fees
}

// Lookup returns the pending timer with the given id.
func (e *Engine) Lookup(id TimerID) (Timer, bool) {
	i, ok := e.ids.get(&id)
	if !ok {
		return Timer{}, false
	}
	return e.timer(i), true
}

func (e *Engine) timer(i uint32) Timer {
	r := e.recs.At(i)
	handler, payload := e.bytesOf(r)
	t := Timer{ID: r.id, Actor: e.actors.at(r.actor).addr, Height: r.height, Seq: r.seq, Handler: DefaultHandler}
	if len(handler) > 0 {
		t.Handler = string(handler)
	}
	t.Payload = append([]byte{}, payload...)
	if f := e.feeOf(r); f != nil {
		t.Fees = *f
	}
	return t
}

// bytesOf returns the handler bytes (empty for the default handler) and the
// payload of record r; they alias the pool. Small enough to inline, for
// the common timer that has neither.
func (e *Engine) bytesOf(r *rec) (handler, payload []byte) {
	if r.data == 0 {
		return nil, nil
	}
	return e.storedBytes(r)
}

// storedBytes is bytesOf for a record that holds bytes (r.data != 0).
func (e *Engine) storedBytes(r *rec) (handler, payload []byte) {
	t, room := e.data.Load(r.data)
	h, p := int(t>>32), int(uint32(t))
	return room[:h:h], room[h : h+p : h+p]
}

// PendingOf is the number of pending timers of actor.
func (e *Engine) PendingOf(actor Address) int {
	_, n := e.actors.lookup(&actor)
	return int(n)
}

// MaxReserve is the most timers Reserve makes room for.
const MaxReserve = 1 << 30

// Reserve makes room for n timers at once, so that an engine on its way to
// n pending timers never stops to grow: the timer records, the id index
// and the tiers' chunks for n timers are allocated now, and their memory
// is mapped now (hugepage.Touch), where a growing engine's calls pay for
// both, in pauses of milliseconds (BenchmarkGrowth). The id index is
// split into segments that n ids fill to three eighths on average; one
// splits again on the way only if its share passes half: 2,048 ids where
// the mean is at most 1,536 and, the count being binomial, the standard
// deviation about 39 (TestIndexReserve: no split). Count the timers
// that the rollback history holds too (those the last RollbackDepth
// blocks fired or cancelled keep their records until their block leaves
// it). Payload bytes, actors, the overflow tier's B-tree nodes and the
// history's lists still grow on demand, and so does everything past n.
// The room stays for the engine's life, rollbacks included; a smaller n
// than before changes nothing. Nothing observable depends on it (the
// delivery, the root). It holds about 148 bytes per timer at a million
// (Stats' arena and index; BenchmarkGrowth's reserved-B/timer, 146.9-152.4
// in 3 runs at 95ff28a). It fails with ErrInEndBlock from inside EndBlock,
// and with ErrClosed after Close.
func (e *Engine) Reserve(n int) error {
	if e.phase == phaseEnding {
		return ErrInEndBlock // growing the index under the fires that use it
	}
	if err := e.unusable(); err != nil {
		return err
	}
	if n < 0 || n > MaxReserve {
		return fmt.Errorf("%w: %d timers: must be in [0, %d]", ErrReserveRange, n, MaxReserve)
	}
	if n <= e.reserved {
		return nil
	}
	e.recs.Grow(n + 1) // record 0 is reserved
	e.free.Grow(e.recs.Cap())
	e.ids.reserve(n)
	e.q.Reserve(n)
	e.reserved = n
	return nil
}

// Stats describes the engine's tiers and the memory of its slabs: the
// chunk arena and timer records, the id index and the payload store. The
// overflow B-tree's nodes and the actor map are not counted; measure the
// heap (runtime.MemStats) for the whole.
type Stats struct {
	Pending                           int
	Actors                            int
	InRing, InEpochs, InOverflow      int
	ArenaBytes, IndexBytes, DataBytes int
	// OverflowTombstones counts cancelled timers that the overflow tier's
	// B-tree still holds as tombstones (docs/SPEC.md §9): at most twice
	// its timers plus 64.
	OverflowTombstones int
	// Records counts the timer records in use: the pending timers' and
	// those the rollback history still holds (timers the last
	// RollbackDepth blocks fired or cancelled). Its peak is the n that
	// Reserve needs.
	Records int
	// QueueRebuilds counts the rollbacks (and returns to the durable block
	// after a log failure) that rebuilt the calendar queue from every
	// pending timer, rather than running it back in place (docs/SPEC.md
	// §14): those cost a pass over the pending timers.
	QueueRebuilds int
	// RootsChecked counts the stored state roots (the snapshot's and the
	// records') that recovery compared with the state's: none for a log
	// written with Config.StateRoot off, whose records store none.
	RootsChecked int
	// HistoryBytes is, with Config.RollbackBytes, what the handlers and
	// payloads of the timers the rollback history holds take in the
	// payload pool (at most RollbackBytes); 0 without it, uncounted.
	HistoryBytes int
}

// Stats returns the current figures.
func (e *Engine) Stats() Stats {
	s := Stats{Pending: e.pending, Actors: e.actors.len()}
	s.InRing, s.InEpochs, s.InOverflow = e.q.TierLens()
	s.ArenaBytes = e.q.C.Bytes() + e.recs.Bytes() + e.free.Bytes()
	s.IndexBytes = e.ids.bytes()
	s.DataBytes = e.data.Bytes()
	s.OverflowTombstones = e.q.Tombstones()
	s.Records = int(e.nrecs) - 1 - e.free.Len() // record 0 is never used
	s.QueueRebuilds = e.rebuilds
	s.RootsChecked = e.checked
	if e.hist != nil {
		s.HistoryBytes = int(e.hist.bytes)
	}
	return s
}
