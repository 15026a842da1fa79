package engine

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/timerlane/timerlane/internal/bytepool"
	"github.com/timerlane/timerlane/internal/prefetch"
)

// Rollback (reorgs). The engine keeps, for each of the last
// Config.RollbackDepth blocks, how to take it back:
//
//   - the scheduler encoding before it (height, sequence, lane figures and
//     parameters);
//   - its timer operations in order, as undo entries: a timer added, a
//     timer removed (cancelled or collected) or a timer extended;
//   - the timers its end of block took to fire, in one list, each entry
//     with what its record holds: under fifo written before the fires,
//     with the entry, from records take has just read; under the lane,
//     each entry is written just before its own fire (keepOne) and
//     completed after it (retireOne).
//     They are relinked after the block's operations are undone, which is
//     exact as no operation touches a timer once it is taken;
//   - the fairness entries its window expiry dropped (the entries it added
//     are the window's entries above the height before it).
//
// A removed or taken timer's record is not freed until its block leaves the
// history, so taking the removal back relinks the record as it was.
//
// Rollback undoes the blocks newest first. The calendar queue runs back in
// place (calendar.Queue.Rewind) unless two windows of the tiers began in
// the undone blocks, or a timer they took out of it belongs in a stage:
// the cost is then the undone operations, the queue's buckets they touch,
// the lane's deferred list and, across a window start, that window's
// stages. Otherwise it is rebuilt from the pending timers in insertion
// order, for one pass over all of them. Either way every timer is where
// a node that never saw the rolled-back blocks would have it
// (docs/SPEC.md §14).

// DefaultRollbackDepth is the rollback depth of DefaultConfig (R).
const DefaultRollbackDepth = 256

// ErrRollbackTooDeep is a rollback to a block older than the engine keeps:
// beyond Config.RollbackDepth, before the engine was opened or restored,
// or with rollback off.
var ErrRollbackTooDeep = errors.New("timerlane: rollback beyond the blocks the engine keeps")

// histBlock is one committed block of the history, or a run of empty
// blocks SkipEmpty ran, or a log record applied at recovery. Its entries
// in the history's buffers start at the given positions and end where the
// next block's start (or at the buffers' ends).
type histBlock struct {
	from, to uint64 // the heights it covers
	first    bool   // nothing was committed before it
	sized    bool   // bytes is counted (Config.RollbackBytes)
	records  uint64 // log records before it
	sched    uint64 // its scheduler encoding in history.sched
	ops      uint64 // its undo entries in history.ops
	taken    uint64 // its taken timers in history.taken
	expired  uint64 // its expired fairness entries in history.expired
	// bytes is what the pool holds for the handlers and payloads of the
	// timers it removed or fired, once sized.
	bytes uint64
}

type history struct {
	depth uint64
	// maxBytes bounds the sized blocks' bytes (Config.RollbackBytes; 0:
	// none); bytes is their sum.
	maxBytes, bytes uint64
	blocks          fifoBuf[histBlock]
	ops             chunkFIFO[undo]
	taken           chunkFIFO[takenRec] // the timers taken to fire
	expired         fifoBuf[byte]       // appendFairEntry encodings
	sched           fifoBuf[byte]
}

// fifoBuf is a buffer that grows at its end and is trimmed at its front,
// reusing its memory; items are addressed by absolute position.
type fifoBuf[T any] struct {
	buf  []T
	base uint64 // absolute position of buf[0]
	head int    // buf[:head] is trimmed
}

func (f *fifoBuf[T]) len() int             { return len(f.buf) - f.head }
func (f *fifoBuf[T]) end() uint64          { return f.base + uint64(len(f.buf)) }
func (f *fifoBuf[T]) at(k int) *T          { return &f.buf[f.head+k] }
func (f *fifoBuf[T]) abs(k int) uint64     { return f.base + uint64(f.head+k) }
func (f *fifoBuf[T]) span(a, b uint64) []T { return f.buf[a-f.base : b-f.base] }
func (f *fifoBuf[T]) push(v ...T)          { f.room(len(v)); f.buf = append(f.buf, v...) }
func (f *fifoBuf[T]) push1(v T)            { f.room(1); f.buf = append(f.buf, v) }

// room makes space for n more items when the buffer is full: by moving the
// live ones down over the trimmed ones if those are at least half of it,
// else by letting append grow it. Moving a mostly live buffer to win a
// little room would copy it all again at nearly every block.
func (f *fifoBuf[T]) room(n int) {
	if len(f.buf)+n > cap(f.buf) && f.head > 0 && f.head >= len(f.buf)/2 {
		f.compact()
	}
}

func (f *fifoBuf[T]) compact() {
	k := copy(f.buf, f.buf[f.head:])
	f.buf = f.buf[:k]
	f.base += uint64(f.head)
	f.head = 0
}

// cut drops the items from absolute position a on.
func (f *fifoBuf[T]) cut(a uint64) { f.buf = f.buf[:a-f.base] }

// trim drops the items before absolute position a, moving the rest down
// once more than half the buffer is trimmed, so memory is reused.
func (f *fifoBuf[T]) trim(a uint64) {
	f.head = int(a - f.base)
	if f.head > len(f.buf)/2 {
		f.compact()
	}
}

// takenRec is a timer an end of block took to fire and what its record
// holds (under the lane, once it has fired), so that freeing it reads no
// cold record.
type takenRec struct {
	rec  uint32
	held holds
}

// end returns where block k's entries end in each buffer: where the next
// block's start, or at the buffers' ends.
func (h *history) end(k int) histBlock {
	if k+1 < h.blocks.len() {
		return *h.blocks.at(k + 1)
	}
	return histBlock{ops: h.ops.end(), taken: h.taken.end(), expired: h.expired.end(), sched: h.sched.end()}
}

// beginHist opens the history entry of the block (or run of empty blocks,
// or log record) from..to, before it changes anything.
func (e *Engine) beginHist(from, to uint64) {
	h := e.hist
	if h == nil {
		return
	}
	b := histBlock{from: from, to: to, first: !e.started, ops: h.ops.end(), taken: h.taken.end(), expired: h.expired.end(), sched: h.sched.end()}
	if e.dur != nil {
		b.records = e.dur.rec
	} else {
		b.records = e.replayed
	}
	h.sched.room(512)
	h.sched.buf = e.appendScheduler(h.sched.buf)
	h.blocks.push(b)
}

// histOp records a timer operation of the open block.
func (e *Engine) histOp(u undo) {
	if e.hist != nil {
		e.hist.ops.push1(u)
	}
}

// retire ends a pending timer that is out of the queue and the index: its
// record is freed now, or kept for a rollback until its block leaves the
// history.
func (e *Engine) retire(i uint32) {
	if e.hist == nil {
		e.release(i)
		return
	}
	e.hist.ops.push1(cancelUndo(i, e.recs.At(i)))
}

// keepTakenHeld hands the history the timers the open block took to fire
// under fifo, recs, whose records take just read: their entries note at
// once what each holds, which no fire changes, and the fires retire
// nothing (fired). A pass of its own: writing the entries in take's loop,
// the one that waits on the records' misses, saved 6 instructions a timer
// at 10k pending, and at 1M looked slower (161 against 152 ns a timer,
// medians of 8 alternating rounds, on a machine whose noise was as large).
func (e *Engine) keepTakenHeld(recs []uint32) {
	if e.hist == nil {
		return
	}
	t := &e.hist.taken
	for len(recs) > 0 {
		c := t.extend(len(recs))
		for j, i := range recs[:len(c)] {
			c[j] = takenRec{rec: i, held: e.recs.At(i).held()}
		}
		recs = recs[len(c):]
	}
}

// keepOne hands the history timer i, which the lane's walk takes to fire
// next, before its fire, and returns its entry's position for retireOne.
func (e *Engine) keepOne(i uint32) uint64 {
	if e.hist == nil {
		return 0
	}
	t := &e.hist.taken
	p := t.end()
	t.push1(takenRec{rec: i})
	return p
}

// retireOne ends timer i, kept at position p by keepOne, whose record is
// in cache: its entry notes what the record holds after the fire, or
// without a history the record is freed.
func (e *Engine) retireOne(p uint64, i uint32) {
	if e.hist == nil {
		e.release(i)
		return
	}
	e.hist.taken.pos(p).held = e.recs.At(i).held()
}

// windowExpired hears each fairness entry an expiry drops.
func (e *Engine) windowExpired(height uint64, actor uint32, n uint64) {
	e.fairExpired(height, actor, n)
	if h := e.hist; h != nil && h.blocks.len() > 0 {
		h.expired.room(fairEntryLen)
		h.expired.buf = appendFairEntry(h.expired.buf, height, &e.actors.at(actor).addr, n)
	}
}

// trimAhead is how many undo entries ahead trimHist loads: 16 entries of
// 24 bytes are 6 cache lines.
const trimAhead = 16

// trimHist drops the blocks the history no longer needs: those at or below
// height - depth, then, with Config.RollbackBytes, the oldest but the
// newest while the payloads the blocks hold pass it. Their removed timers'
// records are freed. The newest block stays, whatever it holds: a Commit
// whose record the log fails to write undoes it (undoUndurable), and
// Rollback(height-1) stays possible.
func (e *Engine) trimHist() {
	h := e.hist
	if h == nil {
		return
	}
	// b.to <= e.height; a sum could wrap near 2^64.
	for h.blocks.len() > 0 && e.height-h.blocks.at(0).to >= h.depth {
		e.dropOldest()
	}
	if h.maxBytes == 0 {
		return
	}
	for k := h.blocks.len() - 1; k >= 0 && !h.blocks.at(k).sized; k-- {
		h.size(k)
	}
	for h.blocks.len() > 1 && h.bytes > h.maxBytes {
		e.dropOldest()
	}
}

// size counts what block k's removed and fired timers hold in the pool:
// once the block is whole, its entries just written and in cache.
func (h *history) size(k int) {
	b := h.blocks.at(k)
	end := h.end(k)
	for span := range h.ops.segs(b.ops, end.ops) {
		for i := range span {
			if u := &span[i]; u.kind == undoCancel {
				b.bytes += uint64(bytepool.SizeOf(u.held().data))
			}
		}
	}
	for span := range h.taken.segs(b.taken, end.taken) {
		for _, t := range span {
			b.bytes += uint64(bytepool.SizeOf(t.held.data))
		}
	}
	b.sized = true
	h.bytes += b.bytes
}

// dropOldest drops the history's oldest block and frees its removed
// timers' records.
func (e *Engine) dropOldest() {
	h := e.hist
	b := h.blocks.at(0)
	h.bytes -= b.bytes
	end := h.end(0)
	for span := range h.ops.segs(b.ops, end.ops) {
		for k := range span {
			// The block's entries are depth blocks old, long out of
			// the cache: load them well ahead of the loop, from
			// every other one: two entries are less than a line
			// (TestUndoSize), so every line is hinted.
			if k%2 == 0 && k+trimAhead < len(span) {
				prefetch.Line(unsafe.Pointer(&span[k+trimAhead]))
			}
			if u := &span[k]; u.kind == undoCancel {
				e.releaseHeld(u.rec, u.held())
			}
		}
	}
	for span := range h.taken.segs(b.taken, end.taken) {
		e.releaseTaken(span)
	}
	h.ops.trim(end.ops)
	h.taken.trim(end.taken)
	h.expired.trim(end.expired)
	h.sched.trim(end.sched)
	h.blocks.trim(h.blocks.abs(1))
}

// releaseTaken frees the records of the fired timers of span, the common
// one without a call (releasePlain): trimHist frees a record for every
// timer fired, every block.
func (e *Engine) releaseTaken(span []takenRec) {
	for _, t := range span {
		if !e.releasePlain(t.rec, t.held) {
			e.releaseRest(t.rec, t.held)
		}
	}
}

// Rollback returns the engine, between blocks, to its state after the
// committed block to: its timers, its scheduler state and its root are
// exactly what they were then. It undoes up to Config.RollbackDepth
// blocks: the target can be any block from the highest height reached
// minus RollbackDepth on, or from a later one when Config.RollbackBytes let
// older blocks go (ErrRollbackTooDeep for older ones, naming the oldest
// target; an engine opened
// on a directory reaches back over the records it recovered: the log keeps
// those of every such target, see docs/SPEC.md §14). An engine
// with a log truncates it to the same block, so that reopening recovers
// the rolled-back state; a failure there leaves the engine refusing
// blocks, as after a failed Commit. The Ledger is the embedder's: a node
// rolls its accounts back with the rest of its chain state.
func (e *Engine) Rollback(to uint64) error {
	if err := e.logFailed(); err != nil {
		return err
	}
	if e.phase != phaseIdle {
		return e.notIdle()
	}
	if !e.started || to > e.height {
		return fmt.Errorf("%w: rollback to block %d at block %d", ErrBadHeight, to, e.height)
	}
	if to == e.height {
		return nil
	}
	h := e.hist
	if h == nil {
		return fmt.Errorf("%w: rollback is off (Config.RollbackDepth 0)", ErrRollbackTooDeep)
	}
	if h.blocks.len() == 0 {
		return fmt.Errorf("%w: rollback to block %d at block %d: the history holds no block (none since the engine was restored or opened, or Config.RollbackBytes let none stay)", ErrRollbackTooDeep, to, e.height)
	}
	k := h.blocks.len() // the oldest block to undo
	for k > 0 && h.blocks.at(k-1).to > to {
		k--
	}
	if k == 0 {
		switch b := h.blocks.at(0); {
		case b.first && to < b.from:
			return fmt.Errorf("%w: rollback to block %d: the first block was %d", ErrBadHeight, to, b.from)
		case to+1 < b.from:
			return fmt.Errorf("%w: rollback to block %d at block %d: the oldest block it can return to is %d", ErrRollbackTooDeep, to, e.height, b.from-1)
		}
	}
	// Runs of empty blocks that end at the target wrote no record: they
	// are undone too and run again below, so that the snapshot the log's
	// truncation may write for the record before them holds that record's
	// state, not the state after them (a later record would follow a
	// snapshot of a greater height, and the log would not open).
	for k > 0 && e.dur != nil && h.blocks.at(k-1).records == h.blocks.at(k).records {
		k--
	}
	records := h.blocks.at(k).records
	if e.dur != nil {
		// A failure in the background (a snapshot's write) is reported
		// before memory changes, as the next Commit would: back to the
		// durable block.
		if err := e.dur.log.WaitSnapshot(); err != nil {
			return e.failLog(err)
		}
	}
	if err := e.undoFrom(k); err != nil {
		return err
	}
	if e.dur != nil {
		d := e.dur
		d.journal, d.fair, d.nfair = d.journal[:0], d.fair[:0], 0
		err := d.log.Truncate(records, func(w io.Writer) error { return e.WriteSnapshot(w) })
		if err != nil {
			d.failed = err
			return fmt.Errorf("%w: %w", ErrLogFailed, err)
		}
		d.rec = records
	}
	// A target inside a run of empty blocks: run them again up to it.
	if e.height < to {
		if _, err := e.SkipEmpty(to); err != nil {
			return err
		}
	}
	return nil
}

// undoFrom takes back history blocks k and later, and with them the
// calendar queue and the lane's deferred list: in place when the queue
// can run back (rewind), else rebuilt from the pending timers.
func (e *Engine) undoFrom(k int) error {
	e.unqueueUndone(k)
	for e.hist.blocks.len() > k {
		if err := e.undoBlock(e.hist.blocks.len() - 1); err != nil {
			return err
		}
	}
	if !e.rewind() {
		e.rebuilds++
		e.requeue()
	}
	return nil
}

// unqueueUndone readies history blocks k and later to be undone with the
// calendar queue run back in place: it takes out of the queue (or off the
// deferred list) the timers those blocks scheduled that are still in it,
// and lists in e.back every timer they took out (fired, cancelled or
// collected), which the queue must get back if it was pending before them.
func (e *Engine) unqueueUndone(k int) {
	h := e.hist
	back := e.back[:0]
	defer func() { e.back = back }()
	if k == h.blocks.len() {
		return // nothing to undo
	}
	from, end := h.blocks.at(k), h.end(h.blocks.len()-1)
	// Newest first: a bucket's newest timer is at its tail, which a
	// removal takes back without leaving a tombstone (ring.Bucket.Kill).
	for p := end.ops; p > from.ops; {
		p--
		switch u := h.ops.pos(p); u.kind {
		case undoSchedule:
			if j, ok := e.ids.get(&e.recs.At(u.rec).id); ok && j == u.rec {
				e.unqueue(u.rec, false)
			}
		case undoCancel:
			back = append(back, e.recs.At(u.rec).entry(u.rec))
		}
	}
	for span := range h.taken.segs(from.taken, end.taken) {
		for _, t := range span {
			back = append(back, e.recs.At(t.rec).entry(t.rec))
		}
	}
}

// rewind, once the blocks are undone, takes the calendar queue and the
// deferred list to the height they left (calendar.Queue.Rewind): of the
// timers unqueueUndone listed, those scheduled after it are gone, those
// due by it wait on the list and the others go back to the queue, as do
// those of the list that are not due yet. It reports false, changing
// nothing, when the queue cannot run back.
func (e *Engine) rewind() bool {
	s := &e.lane
	back, due, n := e.back, e.due[:0], 0
	for _, x := range back {
		switch {
		case x.Seq >= e.seq: // gone with the block that scheduled it
		case x.Height <= e.height:
			due = append(due, x.Val)
		default:
			back[n] = x
			n++
		}
	}
	back = back[:n]
	for _, i := range s.deferred {
		if r := e.recs.At(i); r.height > e.height {
			back = append(back, r.entry(i))
		}
	}
	ok := e.q.Rewind(e.height, e.seq, back)
	if ok {
		kept := 0
		for _, i := range s.deferred {
			if e.recs.At(i).height <= e.height {
				s.deferred[kept] = i
				e.recs.At(i).at = listed | uint32(kept)
				kept++
			}
		}
		// The reasons start anew, as on a list built anew: each block
		// states its own.
		s.deferred, s.reasons = s.deferred[:kept], s.reasons[:kept]
		clear(s.reasons)
		for _, i := range due {
			e.addDeferred(i)
		}
	}
	clear(due)
	e.back, e.due = back[:0], due[:0]
	return ok
}

// failLog, between blocks, makes the engine refuse blocks after its log
// failed with err, takes its memory back to the last durable block
// (undoUndurable) and returns the error that reports it.
func (e *Engine) failLog(err error) error {
	e.dur.failed = err
	e.undoUndurable()
	return fmt.Errorf("%w: %w", ErrLogFailed, err)
}

// undoUndurable, after the log failed to take a block, takes the engine's
// memory back to the last durable block, if the history reaches it: the
// blocks whose records are not on stable storage are undone.
func (e *Engine) undoUndurable() {
	h := e.hist
	if h == nil || h.blocks.len() == 0 {
		return
	}
	durable := e.dur.log.DurableHeight()
	k := h.blocks.len()
	for k > 0 && h.blocks.at(k-1).records >= durable {
		k--
	}
	if k == 0 && h.blocks.at(0).records > durable {
		return // further back than the history holds
	}
	if err := e.undoFrom(k); err != nil {
		panic(err) // the history's own encodings: a bug, not the disk's
	}
}

// undoBlock takes back history block k, the newest.
func (e *Engine) undoBlock(k int) error {
	h := e.hist
	b := *h.blocks.at(k)
	h.bytes -= b.bytes
	end := h.end(k)
	for p := end.ops; p > b.ops; {
		p--
		u := *h.ops.pos(p)
		e.touch(&e.recs.At(u.rec).id) // before undoOp may free the record
		e.undoOp(u, false)
	}
	h.ops.cut(b.ops)
	for p := end.taken; p > b.taken; {
		p--
		i := h.taken.pos(p).rec
		e.touch(&e.recs.At(i).id)
		e.undoOp(undo{rec: i, kind: undoCancel}, false) // relinks it
	}
	h.taken.cut(b.taken)

	// The block's fires leave the window; what its expiry dropped returns.
	e.lane.window.DropAfter(b.from-1, e.fairExpired, e.lane.onPruned)
	exp := h.expired.span(b.expired, end.expired)
	for off := len(exp) - fairEntryLen; off >= 0; off -= fairEntryLen {
		height, addr, n := readFairEntry(exp[off:])
		i := e.windowActor(&addr)
		e.lane.window.Unexpire(height, i, n)
		e.fairAdded(height, i, n)
	}
	h.expired.cut(b.expired)

	if err := e.restoreScheduler(h.sched.span(b.sched, end.sched)); err != nil {
		return fmt.Errorf("rollback of block %d: scheduler state: %v", b.to, err)
	}
	h.sched.cut(b.sched)
	h.blocks.cut(h.blocks.abs(k))
	return nil
}

// requeue rebuilds the calendar queue and the lane's deferred list at the
// current height from the pending timers, in insertion order.
func (e *Engine) requeue() {
	pending := e.pendingBySeq()
	// The new queue takes over the old one's arena, emptied: its memory
	// (and Reserve's room) stays, and the old queue is never used again.
	c := e.q.C
	c.Reset()
	q, err := e.newQueue(c)
	if err != nil {
		panic(err) // the layout was validated by New
	}
	q.Advance(e.height)
	e.q = q
	e.lane.deferred, e.lane.reasons = e.lane.deferred[:0], e.lane.reasons[:0]
	q.Bulk()
	for k, i := range pending {
		if k+ahead < len(pending) { // in seq order, the records lie at random
			e.prefetchRec(pending[k+ahead])
		}
		r := e.recs.At(i)
		r.at = 0
		e.place(i, r)
	}
	q.Flush()
}
