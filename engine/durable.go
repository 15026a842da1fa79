package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/timerlane/timerlane/internal/radix"
	"github.com/timerlane/timerlane/internal/scratch"
	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/ring"
	"github.com/timerlane/timerlane/wal"
)

// Durability: an engine opened on a directory writes one record per
// committed block to a write-ahead log (package wal) and a full snapshot
// every Config.SnapshotEvery records; Open recovers the last durable
// block from the newest snapshot and the records after it.
//
// A record is the block's net change, in the canonical encodings of
// docs/STATE_ROOT.md:
//
//	version[1] = 1 || height[8]
//	|| len(scheduler)[4] || scheduler encoding (the state after the block)
//	|| n_upserts[4] || n × (timer_id[32] || len[4] || timer encoding), by seq
//	|| n_deletes[4] || n × timer_id[32]
//	|| n_fairness[4] || n × (height[8] || actor[20] || fires[8])
//	|| root[32] (zero when Config.StateRoot is off)
//
// Upserts are the timers pending after the block that it added or changed;
// deletes the timers it removed (fired, cancelled, collected). Applying a
// record to the state of the block before gives the state after, and its
// root is checked.

// ErrLogFailed is returned by every block call after the log failed to
// take a block (an I/O error or a full disk): the engine's state may be
// ahead of its log, so it refuses to go on until it is closed and reopened
// (Close releases the directory, which a second Open cannot take while the
// failed engine holds it).
var ErrLogFailed = errors.New("timerlane: the write-ahead log failed; close and reopen the engine")

// ErrReadOnly is returned by every block call of an engine opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("timerlane: the engine was opened read-only")

// ErrBadRecord is a log record that cannot be applied: damaged (past its
// checksum), or not a record of the engine's. One written under another
// configuration is ErrConfigMismatch instead.
var ErrBadRecord = errors.New("timerlane: bad log record")

// durable is the engine's side of its log.
type durable struct {
	log      *wal.Log
	rec      uint64 // records in the log: the log's height
	every    uint64 // records between snapshots
	inline   bool   // Config.SnapshotInline
	journal  []TimerID
	sorted   []TimerID    // logBlock's scratch: the journal in order
	order    []radix.Item // sortJournal's sort items
	spare    []radix.Item // their scratch
	seqs     seqScratch   // logBlock's sort of the upserts
	fair     []byte       // the block's fairness entries (appendFairEntry)
	ups      []uint32
	dels     []uint32
	nfair    uint32
	buf      scratch.Buf // the record's body
	failed   error
	readOnly bool // OpenReadOnly: every block call fails with ErrReadOnly
}

// Open opens the engine whose write-ahead log is in dir (created if
// missing), recovering the state of the last durable block; later blocks
// are logged at Commit. The configuration must be the one the log was
// written with, except for the tier layout, the state root, the rollback
// depth and bound (RollbackDepth, RollbackBytes), Logf and the durability
// options (Sync, SnapshotEvery, SnapshotInline, CheckEveryRoot); the lane
// parameters are the log's (governance may have
// changed them), whatever cfg.Lane says. Another configuration fails with
// an error matching ErrConfigMismatch that names the first field that
// differs (LogConfig reads the log's).
// A directory is open in one engine at a time: another Open of it, in
// this process or another, fails with an error matching wal.ErrLocked
// until the first engine is closed or its process ends.
func Open(dir string, cfg Config) (*Engine, error) {
	return openFS(vfs.OS, dir, cfg, wal.Options{})
}

// OpenReadOnly opens the engine in dir as Open does, to read its state:
// it writes nothing to dir (see wal.Options.ReadOnly: no lock is taken and
// a torn tail is left in place), so that it works beside the node that
// has the directory open, on a copy, or without write access. Every block
// call (BeginBlock, SkipEmpty, Rollback) fails with ErrReadOnly; queries
// such as Root, Lookup, Prove, CheckRoot and WriteSnapshot work. The
// directory must exist. Beside a node that writes it, the node may remove
// or rewrite a file as it is read: a file it reads is held open until the
// recovery ends (up to 16 of them, and none on Windows), so that one
// removed meanwhile (a snapshot made old by a newer one) still reads as it
// was; one gone before it was opened, a rollback running or run
// meanwhile, or a file cut or rewritten by one, fails the read, and
// OpenReadOnly reads again, three tries in all, waiting 10 then 40 ms. A
// rollback that a crash stopped half way keeps readers out until the node
// opens its log again (or `timerlane wal repair` runs). An error after the
// last matches wal.ErrChanged or fs.ErrNotExist, which say to try again
// later, not damage.
func OpenReadOnly(dir string, cfg Config) (*Engine, error) {
	return openReadOnly(vfs.OS, dir, cfg, wal.Options{})
}

// readOnlyTries is how many times OpenReadOnly reads a log whose files
// change as it reads them, waiting readOnlyWait before the second and
// four times that before the third: a read that begins inside a rollback
// fails at once, and three back to back all fell inside the same one
// (a rollback's fsyncs take milliseconds: session 43, beside a writer
// rolling back 35 times a second, 12,802 failed opens in 10 s).
const (
	readOnlyTries = 3
	readOnlyWait  = 10 * time.Millisecond
)

func openReadOnly(fsys vfs.FS, dir string, cfg Config, opts wal.Options) (*Engine, error) {
	opts.ReadOnly = true
	for try := 1; ; try++ {
		e, err := openFS(fsys, dir, cfg, opts)
		changed := errors.Is(err, wal.ErrChanged) || errors.Is(err, fs.ErrNotExist)
		if !changed || try == readOnlyTries {
			return e, err
		}
		if _, serr := fsys.Stat(dir); serr != nil {
			return nil, err // no directory: nothing to read again
		}
		time.Sleep(readOnlyWait << (2 * (try - 1)))
	}
}

func openFS(fsys vfs.FS, dir string, cfg Config, opts wal.Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err // before the log creates dir and its lock
	}
	if opts.Sync == (wal.SyncPolicy{}) {
		opts.Sync = cfg.Sync
	}
	if opts.Logf == nil {
		opts.Logf = cfg.Logf
	}
	// Recovery replays at least the blocks a rollback may undo, so that
	// the rollback history survives a restart: twice R, because a rollback
	// of up to R blocks followed by a restart must still find R records
	// before the new last one. A read-only engine never rolls back: it
	// starts from the newest snapshot, which a writer beside it keeps
	// longest (it started from the oldest kept, the next one the writer
	// removes, and failed beside a writer that snapshots often).
	if !opts.ReadOnly {
		opts.KeepRecords = max(opts.KeepRecords, 2*min(cfg.RollbackDepth, math.MaxUint64/2))
	}
	log, err := wal.Open(fsys, dir, opts)
	if err != nil {
		return nil, err
	}
	e, err := recoverFrom(log, cfg)
	if err != nil {
		log.Close()
		err = log.UnlessChanged(err)
		// Not damage, in a snapshot or a record: the log's own
		// configuration is not the one given.
		if cm := (*configMismatch)(nil); !errors.Is(err, wal.ErrChanged) && errors.As(err, &cm) {
			return nil, fmt.Errorf("timerlane: the log in %s was %w; engine.LogConfig reads its configuration", dir, cm)
		}
		return nil, err
	}
	every := cfg.SnapshotEvery
	if every == 0 {
		every = DefaultSnapshotEvery
	}
	e.dur = &durable{log: log, rec: log.LastHeight(), every: every, inline: cfg.SnapshotInline, readOnly: opts.ReadOnly}
	return e, nil
}

// DefaultSnapshotEvery is the records between snapshots when
// Config.SnapshotEvery is 0.
const DefaultSnapshotEvery = 1000

func recoverFrom(log *wal.Log, cfg Config) (*Engine, error) {
	_, r, ok, err := log.OpenSnapshot()
	if err != nil {
		return nil, err
	}
	var e *Engine
	if ok {
		e, err = restore(cfg, r, true)
		r.Close()
	} else {
		e, err = New(cfg)
	}
	if err != nil {
		return nil, err
	}
	e.replayed = log.Recovery().SnapshotHeight
	last := log.Recovery().LastHeight
	err = log.Replay(func(n uint64, body []byte) error {
		// The root after the last record proves the state recovered; the
		// ones before it cost a rehash per record (CheckEveryRoot).
		e.skipRoot = n != last && !cfg.CheckEveryRoot
		if err := e.applyRecord(body); err != nil {
			return recordError{n, err}
		}
		e.replayed = n
		return nil
	})
	e.skipRoot = false
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Close closes the engine's log, if it has one, once the snapshot being
// written in the background, if any, is on disk; a failure of the log
// that no call reported (a sync, its own or in the background, or that
// snapshot's write) is returned matching ErrLogFailed. Afterwards every
// call that would change the state (a block, a transaction, a rollback, a
// system instruction) fails with ErrClosed, and a call on a Tx still held
// with ErrTxClosed, as for any transaction that has ended; queries such as
// Root and Pending still answer, and WriteSnapshot writes the state closed.
// Closing again does nothing. A block left open is not committed (a
// durable engine reopens at the last committed block), but the queries
// then describe the engine as Close found it, that block's changes
// included, and WriteSnapshot fails with ErrClosed: close between blocks
// for a state to record.
func (e *Engine) Close() error {
	switch e.phase {
	case phaseClosed:
		return nil
	case phaseEnding:
		return ErrInEndBlock
	}
	e.closedInBlock = e.phase != phaseIdle
	e.phase, e.txs.open = phaseClosed, false // every Tx handle is closed too
	if e.dur == nil {
		return nil
	}
	err := e.dur.log.Close()
	e.dur.failed = ErrLogFailed
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	return nil
}

// WaitSnapshot waits until the snapshot that a Commit began writing in
// the background (Config.SnapshotInline off) is on disk. It returns nil at
// once when no snapshot is being written or the engine has no log,
// ErrClosed once the engine is closed, and ErrLogFailed once its log has
// failed (reported already). If writing the snapshot failed, it
// returns an error matching ErrLogFailed; between blocks, the engine then
// refuses blocks and returns to the last durable block, as Commit does on
// the failure it would otherwise report; in a block, that Commit reports it.
func (e *Engine) WaitSnapshot() error {
	if e.phase == phaseClosed {
		return ErrClosed
	}
	if e.dur == nil || e.dur.readOnly {
		return nil
	}
	if e.dur.failed != nil {
		return ErrLogFailed
	}
	if err := e.dur.log.WaitSnapshot(); err != nil {
		if e.phase == phaseIdle {
			return e.failLog(err)
		}
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	return nil
}

// Durable is the number of log records (committed blocks) known to be on
// stable storage; with a SyncInterval policy, later ones may still be lost.
func (e *Engine) Durable() (records uint64) {
	if e.dur == nil {
		return 0
	}
	return e.dur.log.DurableHeight()
}

// logFailed reports whether the engine refuses blocks.
func (e *Engine) logFailed() error {
	switch {
	case e.phase == phaseClosed: // before its log's failure, which Close also sets
		return ErrClosed
	case e.dur == nil:
		return nil
	case e.dur.readOnly:
		return ErrReadOnly
	case e.dur.failed != nil:
		return ErrLogFailed
	}
	return nil
}

// journalTouch notes a changed timer for the block's record.
func (d *durable) journalTouch(id *TimerID) { d.journal = append(d.journal, *id) }

// sortJournal puts the block's changed ids in ascending order, each once:
// a radix sort by their first 8 bytes, then, within the rare runs that
// share them, a comparison of the whole ids.
func (d *durable) sortJournal() {
	items := d.order[:0]
	for k := range d.journal {
		items = append(items, radix.Item{Key: binary.BigEndian.Uint64(d.journal[k][:8]), Pos: uint32(k)})
	}
	items, d.spare = radix.Sort(items, d.spare, ^uint64(0))
	ids := d.sorted[:0]
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].Key == items[i].Key {
			j++
		}
		run := items[i:j]
		if len(run) > 1 {
			slices.SortFunc(run, func(a, b radix.Item) int { return bytes.Compare(d.journal[a.Pos][:], d.journal[b.Pos][:]) })
		}
		for _, it := range run {
			if n := len(ids); n == 0 || ids[n-1] != d.journal[it.Pos] {
				ids = append(ids, d.journal[it.Pos])
			}
		}
		i = j
	}
	d.journal, d.sorted, d.order = ids, d.journal[:0], items[:0]
}

// logBlock writes the committed block's record, and a snapshot when due.
func (e *Engine) logBlock() error {
	d := e.dur
	d.sortJournal()
	ups, dels := d.ups[:0], d.dels[:0] // records of upserts; indexes in journal of deletes
	for k := range d.journal {
		if i, ok := e.ids.get(&d.journal[k]); ok {
			ups = append(ups, i)
		} else {
			dels = append(dels, uint32(k))
		}
	}
	d.ups, d.dels = ups, dels
	e.sortBySeq(ups, &d.seqs)
	b := append(d.buf.Take(), 1)
	b = binary.BigEndian.AppendUint64(b, e.height)
	b = e.appendSchedulerEntry(b)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ups)))
	for _, i := range ups {
		b = e.appendTimerEntry(b, i)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(dels)))
	for _, k := range dels {
		b = append(b, d.journal[k][:]...)
	}
	b = binary.BigEndian.AppendUint32(b, d.nfair)
	b = append(b, d.fair...)
	root := e.Root()
	b = append(b, root[:]...)
	d.journal, d.fair, d.nfair = d.journal[:0], d.fair[:0], 0
	err := d.log.Append(d.rec+1, b)
	d.buf.Keep(b)
	if err != nil {
		return err
	}
	d.rec++
	if d.rec%d.every == 0 {
		snapshot := d.log.StartSnapshot // written in the background
		if d.inline {
			snapshot = d.log.WriteSnapshotFunc
		}
		if err := snapshot(d.rec, e.WriteSnapshot); err != nil {
			return err
		}
	}
	return nil
}

// recordError is an error applying log record n, worded "timerlane:
// record n: bad log record: ...": the engine's name once, not again after
// the record number.
type recordError struct {
	n   uint64
	err error
}

func (r recordError) Error() string {
	return fmt.Sprintf("timerlane: record %d: %s", r.n, strings.TrimPrefix(r.err.Error(), "timerlane: "))
}

func (r recordError) Unwrap() error { return r.err }

// applyRecord applies a block's record to the state of the block before.
func (e *Engine) applyRecord(body []byte) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadRecord, fmt.Sprintf(format, args...))
	}
	b := body
	take := func(n int) []byte {
		if n < 0 || len(b) < n {
			b = nil
			return nil
		}
		x := b[:n]
		b = b[n:]
		return x
	}
	u32 := func() (uint32, bool) {
		x := take(4)
		if x == nil {
			return 0, false
		}
		return binary.BigEndian.Uint32(x), true
	}
	head := take(9)
	if head == nil || head[0] != 1 {
		return bad("not a version 1 record")
	}
	height := binary.BigEndian.Uint64(head[1:])
	if height < e.height || height == e.height && e.started {
		return bad("block %d after block %d", height, e.height)
	}
	n, ok := u32()
	sched := take(int(n))
	if !ok || sched == nil {
		return bad("truncated scheduler state")
	}
	// The first record's configuration before any of its timers: under
	// other limits a timer could fail first, and the error would not say
	// why (restoreScheduler checks every record's, after its timers).
	if !e.started {
		if _, err := e.checkConfig(sched); errors.Is(err, ErrConfigMismatch) {
			return err
		}
	}
	from := e.height + 1
	if !e.started {
		// The log does not say whether empty blocks ran before the first
		// block it holds (SkipEmpty from a new engine): none to go back to.
		from = height
	}
	e.beginHist(from, height)
	e.q.Advance(height)
	nUps, ok := u32()
	if !ok {
		return bad("truncated")
	}
	type up struct {
		id  TimerID
		enc []byte
	}
	ups := make([]up, 0, min(int(nUps), 1<<16))
	for k := uint32(0); k < nUps; k++ {
		id := take(32)
		n, ok := u32()
		enc := take(int(n))
		if id == nil || !ok || enc == nil {
			return bad("truncated upsert %d", k)
		}
		ups = append(ups, up{TimerID(id), enc})
	}
	nDels, ok := u32()
	if !ok {
		return bad("truncated")
	}
	if uint64(nDels)*32 > uint64(len(b)) {
		return bad("truncated delete %d", len(b)/32)
	}
	dels := take(32 * int(nDels))
	del := func(k int) *TimerID { return (*TimerID)(dels[32*k:][:32]) }
	for k := range int(nDels) {
		e.lookupAhead(del, k, int(nDels))
		// Most deletes are the block's fires, in id order, at random in
		// their ring bucket: load the queue slot of the timer whose record
		// lookupAhead loaded half its lead ago.
		if j := k + lookAhead/2; j < int(nDels) {
			if i, ok := e.ids.candidate(e.ids.tag(del(j))); ok {
				r := e.recs.At(i)
				e.q.PrefetchAt(r.height, ring.Pos(r.at))
			}
		}
		if i, ok := e.ids.get(del(k)); ok {
			e.drop(i)
		}
	}
	var lastNew uint64 // new timers come in insertion order
	upID := func(k int) *TimerID { return &ups[k].id }
	for k, u := range ups {
		e.lookupAhead(upID, k, len(ups))
		// Most upserts are new timers, each taking the record on top of
		// the free list (no record is freed before trimHist): load the
		// one lookAhead new timers on, long out of the cache.
		if r, ok := e.free.Below(lookAhead); ok && k+lookAhead < len(ups) {
			e.prefetchRec(r)
		}
		t, err := e.decodeTimer(u.enc)
		if err != nil {
			return bad("upsert %s: %v", u.id, err)
		}
		at, i, ok := e.ids.lookup(&u.id)
		if ok && e.recs.At(i).seq != t.seq {
			// A new timer with the id of a pending one, which the block
			// cancelled (or collected) and then scheduled again (the same
			// actor, height, payload and nonce): the old one goes, as a
			// delete takes it.
			e.drop(i)
		} else if ok {
			// A pending timer changes only by an extend: its expiry.
			r := e.recs.At(i)
			old := Fees{}
			if f := e.feeOf(r); f != nil {
				old = *f
			}
			want := old
			want.Set |= HasExpiresAt
			want.ExpiresAt = t.fees.ExpiresAt
			if r.height != t.height || t.fees != want && t.fees != old {
				return bad("upsert %s changes more than its expiry", u.id)
			}
			if t.fees == old {
				continue // touched, not changed
			}
			h := undo{rec: i, kind: undoExtend, newFee: r.fee == 0, oldSet: old.Set}
			h.setOldExpiry(old.ExpiresAt)
			if r.fee == 0 {
				r.fee = e.allocFee()
			}
			*e.lane.fees.At(r.fee) = t.fees
			e.histOp(h)
			e.touch(&u.id)
			continue
		}
		if t.seq < e.seq || t.seq <= lastNew {
			return bad("new timer %s has seq %d: below the next %d, or not after the record's previous new timer (%d)", u.id, t.seq, e.seq, lastNew)
		}
		lastNew = t.seq
		e.height = height // restoreTimer places by the current height
		if ok {
			// The id's old timer went: its slot may have too.
			i, err = e.restoreTimer(u.id, &t)
		} else {
			i, err = e.restoreTimerAt(at, u.id, &t)
		}
		if err != nil {
			return bad("%v", err)
		}
		e.histOp(undo{rec: i, kind: undoSchedule})
	}
	// What is left due at this height waited (the lane's deferred list).
	due := e.q.Take()
	for x, ok := due.Next(e.q.C); ok; x, ok = due.Next(e.q.C) {
		e.addDeferred(x.Val)
	}
	nFair, ok := u32()
	if !ok {
		return bad("truncated")
	}
	if u := e.lane.update; u != nil {
		// The update pending after the previous block took effect as this
		// one began (beginLaneBlock): its end expired the window under the
		// new length, before the record's own scheduler state is restored.
		e.lane.window.SetBlocks(u.FairnessWindowBlocks)
	}
	if e.laneActive(height) {
		e.expireWindow(height)
	}
	for k := uint32(0); k < nFair; k++ {
		x := take(fairEntryLen)
		if x == nil {
			return bad("truncated fairness entry %d", k)
		}
		h, addr, fires := readFairEntry(x)
		if h != height {
			return bad("fairness entry %d at height %d in the record of block %d", k, h, height)
		}
		if err := e.addFiresOf(h, &addr, fires); err != nil {
			return bad("fairness entry %d: %v", k, err)
		}
	}
	root := take(32)
	if root == nil || len(b) != 0 {
		return bad("bad length")
	}
	if err := e.restoreScheduler(sched); err != nil {
		return bad("scheduler: %v", err)
	}
	if e.height != height {
		return bad("scheduler height %d in the record of block %d", e.height, height)
	}
	if e.root != nil && e.skipRoot && (e.root.stale || len(e.root.dirty) > e.dirtyBound()) {
		// No check, and no unbounded list of changed timers either: past
		// twice the pending timers, the tree is built anew from the state
		// when the last record's root is checked, in fewer hashes than
		// these changes would take (flushing them into the tree and
		// rehashing it every 65,536 changes made the recovery of 999
		// records of a steady load 10.4 s, against 1.5 s for the replay
		// alone: BenchmarkRecoverTail, docs/DURABILITY.md).
		e.root.stale = true
		e.root.dirty = dropLarge(e.root.dirty, rootKeep)
	}
	if e.root != nil && !e.skipRoot && string(root) != string(make([]byte, 32)) {
		if got := e.Root(); string(got[:]) != string(root) {
			return bad("block %d: the root after the record is %x, the record says %x", height, got, root)
		}
		e.checked++
	}
	e.trimHist()
	return nil
}

// LogConfig reads, from the log in dir, the configuration its state was
// written under (everything but the tier layout and the durability
// options, which are not state), so that tools can open a log they did not
// write: Open(dir, cfg) with it succeeds. The fields that are not state
// are DefaultConfig's (the tier layout, RollbackDepth, RollbackBytes, Sync,
// SnapshotEvery, SnapshotInline, CheckEveryRoot), except StateRoot, which
// is on whatever the log was written with, so that the tools can prove
// and check the state: a node that does not want the root's memory and
// time sets it back. It reads the log read-only
// (wal.Options.ReadOnly), writing nothing, and quietly: the Open that
// follows reports a torn tail or a leftover temporary snapshot. It opens
// under SyncEveryBlock, the strictest reading of a damaged tail
// (wal.Options.Sync). Beside a node that rolls back as it reads, it fails
// with wal.ErrChanged, once: the caller reads again (OpenReadOnly's reads
// fail so too, and it reads again itself).
func LogConfig(dir string) (Config, error) {
	log, err := wal.Open(vfs.OS, dir, wal.Options{ReadOnly: true, Logf: func(string, ...any) {}})
	if err != nil {
		return Config{}, err
	}
	defer log.Close()
	var sched []byte
	_, r, ok, err := log.OpenSnapshot()
	if err != nil {
		return Config{}, err
	}
	if ok {
		head := make([]byte, len(snapshotMagic)+4)
		_, err := io.ReadFull(r, head)
		if magic := string(head[:len(snapshotMagic)]); err == nil && (magic == string(snapshotMagic) || magic == string(snapshotMagicV1)) {
			n := binary.BigEndian.Uint32(head[len(snapshotMagic):])
			if n <= 1<<20 {
				sched = make([]byte, n)
				if _, err := io.ReadFull(r, sched); err != nil {
					sched = nil
				}
			}
		}
		r.Close()
	} else {
		errFirst := errors.New("first record read")
		err := log.Replay(func(_ uint64, body []byte) error {
			if len(body) >= 13 {
				n := binary.BigEndian.Uint32(body[9:13])
				if int(n) <= len(body)-13 {
					sched = bytes.Clone(body[13 : 13+n])
				}
			}
			return errFirst
		})
		if err != nil && !errors.Is(err, errFirst) {
			return Config{}, err
		}
	}
	if sched == nil {
		return Config{}, fmt.Errorf("%w: %s", ErrEmptyLog, dir)
	}
	return configFromScheduler(sched)
}

// ErrEmptyLog is LogConfig's error for a log that holds no block yet (no
// snapshot, and no whole record): its state is the empty one at height 0,
// under whatever configuration the node will give it.
var ErrEmptyLog = errors.New("timerlane: the log holds no block yet: no state to read a configuration from")

// configFromScheduler reads the configuration part of a scheduler
// encoding (appendScheduler) into the default configuration.
func configFromScheduler(b []byte) (Config, error) {
	c := DefaultConfig()
	const head = 1 + 8 + 1 + 8
	if len(b) < head+4*3+8*4+1+8+16+4 || b[0] != tagScheduler {
		return c, fmt.Errorf("%w: truncated scheduler state", ErrBadRecord)
	}
	x := b[head:]
	c.MaxTimersPerActor = binary.BigEndian.Uint32(x[0:])
	c.MaxPayloadBytes = binary.BigEndian.Uint32(x[4:])
	c.MaxHandlerBytes = binary.BigEndian.Uint32(x[8:])
	c.CyclesPerFire = binary.BigEndian.Uint64(x[12:])
	c.CellsPerFire = binary.BigEndian.Uint64(x[20:])
	c.ScheduleCycles = binary.BigEndian.Uint64(x[28:])
	c.CancelCycles = binary.BigEndian.Uint64(x[36:])
	c.Policy = Policy(x[44])
	c.ActivationHeight = binary.BigEndian.Uint64(x[45:])
	c.InitialBasefee = amountBE(x[53:69])
	n := int(binary.BigEndian.Uint32(x[69:]))
	x = x[73:]
	if n > 1<<16 || len(x) < 20*n {
		return c, fmt.Errorf("%w: system deployers truncated", ErrBadRecord)
	}
	for k := range n {
		c.SystemDeployers = append(c.SystemDeployers, Address(x[20*k:20*k+20]))
	}
	x = x[20*n:]
	if len(x) < 1+16+16+8 {
		return c, fmt.Errorf("%w: lane state truncated", ErrBadRecord)
	}
	p, _, err := decodeParams(x[41:])
	if err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	c.Lane = p
	c.StateRoot = true
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
