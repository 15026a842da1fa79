package wal

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/timerlane/timerlane/internal/scratch"
	"github.com/timerlane/timerlane/internal/vfs"
)

type syncMode uint8

const (
	syncEvery syncMode = iota
	syncInterval
	syncNone
)

// SyncPolicy says when the log fsyncs its active segment.
type SyncPolicy struct {
	mode     syncMode
	interval time.Duration
}

var (
	// SyncEveryBlock fsyncs in every Append: a block is durable when Append
	// returns nil. It is the default (the zero SyncPolicy).
	SyncEveryBlock = SyncPolicy{mode: syncEvery}
	// SyncNone never fsyncs by itself (only Sync, WriteSnapshot,
	// WriteSnapshotFunc, StartSnapshot, Truncate, segment rotation and
	// Close do); the OS writes the data back when it likes.
	SyncNone = SyncPolicy{mode: syncNone}
)

// SyncInterval is group commit: Append only writes, and a background
// goroutine fsyncs every d when there is something to sync, so that one
// fsync covers every block appended since the last. A block is durable once
// a sync that covers it has returned: DurableHeight says which; Sync forces
// one now. A failed background sync fails the log; the next call reports
// it (Close, if none comes). A d of 0 or less is SyncEveryBlock.
func SyncInterval(d time.Duration) SyncPolicy {
	if d <= 0 {
		return SyncEveryBlock
	}
	return SyncPolicy{mode: syncInterval, interval: d}
}

func (p SyncPolicy) String() string {
	switch p.mode {
	case syncInterval:
		return fmt.Sprintf("SyncInterval(%v)", p.interval)
	case syncNone:
		return "SyncNone"
	}
	return "SyncEveryBlock"
}

// Options configure a Log. The zero Options are the defaults.
type Options struct {
	// Sync is the fsync policy (default SyncEveryBlock).
	Sync SyncPolicy
	// SegmentSize is the size past which Append starts a new segment
	// (default 64 MiB). A segment holds at least one record.
	SegmentSize int64
	// Compression of block bodies and snapshot chunks (default CompressS2).
	Compression Compression
	// MaxBodySize bounds a block body that Append takes, before
	// compression (default 256 MiB, at most 4 GiB minus the header). It
	// does not bound what the log reads: records written under a larger
	// MaxBodySize read whole.
	MaxBodySize int
	// RetainSnapshots is how many snapshots WriteSnapshot keeps, with the
	// segments needed to recover from the oldest of them (default 2: if the
	// newest snapshot is found damaged, Open falls back to the one before
	// and replays the log from there).
	RetainSnapshots int
	// KeepRecords, if above 0, keeps the last KeepRecords blocks replayable
	// after a restart, for a caller that must be able to roll them back
	// (see Truncate): Open recovers from the newest valid snapshot at
	// least KeepRecords blocks below the last height, if it and every
	// record after it are there and valid, so that Replay yields at least
	// KeepRecords records; and WriteSnapshot keeps that snapshot (the
	// newest at least KeepRecords below the newest; while there is none,
	// the log's start), every newer one (each becomes it in turn) and the
	// segments after it, whatever RetainSnapshots says. Recovery then
	// replays at most KeepRecords plus one snapshot interval of records.
	// Default 0: recover from the newest valid snapshot.
	KeepRecords uint64
	// Logf reports what Open cut or removed (a torn tail, a leftover
	// temporary snapshot, a skipped damaged snapshot) and what a repair
	// truncated. Default log.Printf.
	Logf func(format string, args ...any)
	// Repair makes Open truncate the log at a corruption it finds (see
	// Repair) instead of failing with a *CorruptError. Only for a user who
	// asked for it: the records after the corruption are lost.
	Repair bool
	// ReadOnly opens the log to read it only, as a tool that inspects or
	// verifies a directory must: Open then writes nothing. It creates no
	// directory and no lock file, leaves a torn tail in its file (the
	// log's state ends before it, and Recovery().Cut describes it with
	// Left set) and leftover temporary snapshots in place, and takes no
	// lock: writing nothing, it cannot harm a writer, so it works beside a
	// running node, on a copy, or on a directory it may not write. Beside
	// a writer it sees the records that were whole when it read them: it
	// holds open the segments and snapshot it reads until its first
	// Replay returns (or Close), so that a file the writer removes
	// meanwhile still reads as it was (up to 16 files; not on Windows,
	// which would refuse the writer's removal). Open and Replay fail with
	// ErrChanged if the writer rolls back meanwhile (a rollback can
	// rewrite records and a snapshot in place: ROLLBACKS in the package
	// doc), or if a file was cut as they read it; with an error of a file
	// not found if one was gone before they read it. Both say to try
	// again. After a crash inside a rollback, readers fail so until a
	// writer opens the log, or Repair runs. Read the snapshot before
	// Replay: its check covers what was read by then. Append, Sync,
	// WriteSnapshot, WriteSnapshotFunc, StartSnapshot and Truncate fail
	// with ErrReadOnly (WaitSnapshot returns nil: no snapshot is ever in
	// flight). Open with Repair, and Repair, refuse it.
	ReadOnly bool
}

func (o Options) withDefaults() Options {
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = 256 << 20
	}
	o.MaxBodySize = min(o.MaxBodySize, maxBodyLimit)
	if o.RetainSnapshots <= 0 {
		o.RetainSnapshots = 2
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// maxBodyLimit is the largest body a log can hold: a record's length is a
// uint32, and on 32-bit platforms an int bounds it first.
const maxBodyLimit = min(1<<32-1-recMinLength, math.MaxInt)

// maxRecordLength bounds a record's length field when reading. It is the
// format's bound, not this Log's MaxBodySize: a log written with a larger
// MaxBodySize must read whole under a smaller one (or under `timerlane wal
// repair`'s default), where a smaller bound made its larger records look
// torn and cut acknowledged blocks. The readers take a record from bytes in
// hand or check its length against the file's size first, so a damaged
// length allocates nothing; and a body is decompressed only once its
// record's checksum holds.
const maxRecordLength = uint32(min(int64(maxBodyLimit)+int64(maxBodyLimit)/8+4096+recMinLength, 1<<32-1))

// segment is a segment file of the log.
type segment struct {
	first uint64
	name  string
}

// snapshotFile is a snapshot file of the log.
type snapshotFile struct {
	height uint64
	name   string
}

// Log is an open write-ahead log. Append, Sync, WriteSnapshot,
// WriteSnapshotFunc, StartSnapshot, WaitSnapshot, Truncate and Close are
// meant to be called from one goroutine (they are serialized all the
// same); DurableHeight, LastHeight, SnapshotHeight and Err may be called
// from any.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options
	zenc *zstd.Encoder
	held *heldFS // read-only, until Replay: the files read, held open
	// A read-only Log's ROLLBACKS count as Open began (rollbacksSeen).
	rollbacks uint64
	// snapEnd is a read-only Log's snapshot's last bytes, its payload's
	// length and xxh3, as Open read it: a writer built before ROLLBACKS
	// rewrites a snapshot under its name and counts nothing.
	snapEnd []byte

	wmu    sync.Mutex // serializes the calls that write
	syncMu sync.Mutex // serializes syncs of the active segment and its replacement

	mu       sync.Mutex // guards the fields below
	failed   *FailedError
	closed   bool
	written  uint64    // last height written to the active segment
	durable  uint64    // last height made durable by a sync
	cur      vfs.File  // the active segment, nil before the first Append of an empty log
	curDirty bool      // cur has bytes not yet synced
	curNext  uint64    // the height the next record of cur must have
	curSize  int64     // bytes in cur
	segs     []segment // every segment file, by first height; the active one last
	snaps    []snapshotFile
	bad      []snapshotFile // damaged snapshots found by Open
	whole    []string       // snapshots read whole and found valid, by Open or since (written here)
	readFrom uint64         // segments starting below this height were not read by Open
	bound    uint64         // NEWEST as recovery read it: segments from there have whole headers
	last     uint64         // last height of the log's state (snapshot or record); 0: empty

	rec  Recovery
	plan []replaySeg // what Replay reads

	buf scratch.Buf // the frame of the record being appended

	job *snapJob // the snapshot being written, if any (StartSnapshot); guarded by wmu
	// reported: a call has returned the log's failure (guarded by wmu), so
	// Close does not return it again.
	reported bool

	stop chan struct{}
	done chan struct{}

	lock io.Closer // the directory's lock, held from Open to Close
}

// Recovery is what Open found.
type Recovery struct {
	// SnapshotHeight is the height of the snapshot recovery starts from
	// (0: none, the log is replayed from its first record). With
	// Options.KeepRecords it may be below the newest snapshot (which
	// Log.SnapshotHeight reports).
	SnapshotHeight uint64
	// Snapshot is the snapshot's file name ("" if none).
	Snapshot string
	// FirstHeight is the height of the first record Replay yields (0: none):
	// SnapshotHeight+1, or the log's first record if there is no snapshot.
	FirstHeight uint64
	// LastHeight is the last height recovered: the state is the snapshot's
	// plus records SnapshotHeight+1 .. LastHeight (0: the log is empty).
	LastHeight uint64
	// Records is the number of records Replay yields.
	Records int
	// Cut, if not nil, is the torn tail that Open cut from the last segment
	// (or, read-only, found and left there: Cut.Left).
	Cut *Cut
	// SkippedSnapshots are damaged snapshots newer than the one used (each
	// a *CorruptError); Open used an older snapshot because the log still
	// covers them.
	SkippedSnapshots []error
	// RemovedTemp are leftover temporary files Open removed: snapshots,
	// or a segment a repair was rewriting, that a crash cut short.
	RemovedTemp []string
	// EndedRollback says that a Truncate had stopped half way (a crash,
	// or a log that failed in it) and Open ended it in ROLLBACKS: the log
	// is what Open recovered, and readers beside it read again.
	EndedRollback bool
}

// Cut is a torn tail cut by Open: the bytes from Offset to the end of
// Segment (Bytes of them) did not hold a whole record. Removed says the
// whole file went (its header was torn). Left says that the log was
// opened read-only: the bytes, or the file, are still there, and the
// log's state ends before them all the same.
type Cut struct {
	Segment string
	Offset  int64
	Bytes   int64
	Removed bool
	Left    bool
}

func (c *Cut) String() string {
	switch {
	case c.Left && c.Removed:
		return fmt.Sprintf("ignored %s (%d bytes, its header incomplete; read-only, left in place)", c.Segment, c.Bytes)
	case c.Left:
		return fmt.Sprintf("ignored %s from offset %d (%d bytes; read-only, left in place)", c.Segment, c.Offset, c.Bytes)
	case c.Removed:
		return fmt.Sprintf("removed %s (%d bytes, its header incomplete)", c.Segment, c.Bytes)
	}
	return fmt.Sprintf("cut %s at offset %d (%d bytes)", c.Segment, c.Offset, c.Bytes)
}

type replaySeg struct {
	name     string
	from, to int64  // byte range of the records to read
	sum      uint64 // their recordSums as Open read them
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// Recovery returns what Open found.
func (l *Log) Recovery() Recovery { return l.rec }

// LastHeight is the height of the last block appended (or of the snapshot
// or record recovered, before any Append); 0 if the log is empty.
func (l *Log) LastHeight() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// DurableHeight is the height of the last block known durable: a sync
// covering it has returned (or it was recovered by Open, or is covered by a
// snapshot). Under SyncEveryBlock it equals LastHeight after every
// successful Append.
func (l *Log) DurableHeight() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// SnapshotHeight is the height of the newest snapshot (0 if none).
func (l *Log) SnapshotHeight() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.snaps) == 0 {
		return 0
	}
	return l.snaps[len(l.snaps)-1].height
}

// Err returns the failure that put the log in the failed state, or nil.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		return nil
	}
	return l.failed
}

// check returns why the log cannot write, if it cannot.
// The caller holds wmu.
func (l *Log) check() error {
	l.mu.Lock()
	closed, failed := l.closed, l.failed
	l.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case l.opts.ReadOnly:
		return ErrReadOnly
	case failed != nil:
		return failed
	}
	return nil
}

// report notes that a call returns the log's failure (*err), so that
// Close does not return it again. Every method that writes defers it,
// holding wmu: the failure may come from its own check, its own I/O, or a
// failure in the background that its sync meets.
func (l *Log) report(err *error) {
	if errors.Is(*err, ErrFailed) {
		l.reported = true
	}
}

// fail puts the log in the failed state (keeping the first failure) and
// returns the failure.
func (l *Log) fail(op string, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = &FailedError{Op: op, Err: err}
	}
	return l.failed
}

// Append adds the block at height with its body (the changes the block
// made, in the engine's encoding; the log compresses it). height must be
// LastHeight()+1, or anything above 0 for an empty log. Under
// SyncEveryBlock the block is durable when Append returns nil; under the
// other policies, once DurableHeight reaches it.
//
// An error matching ErrHeight or ErrTooLarge leaves the log as it was. Any
// other error is a *FailedError (matching ErrFailed and the filesystem's
// error): the block may or may not be in the log's files, the log refuses
// further writes, and the state to continue from is the one a fresh Open
// recovers (the last block of the log, which is this block or the one
// before it).
func (l *Log) Append(height uint64, body []byte) (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	if err := l.check(); err != nil {
		return err
	}
	if height == 0 || (l.last != 0 && height != l.last+1) {
		return fmt.Errorf("%w: append of height %d, last height %d", ErrHeight, height, l.last)
	}
	if len(body) > l.opts.MaxBodySize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(body), l.opts.MaxBodySize)
	}
	rec := appendRecord(l.buf.Take(), height, body, l.opts.Compression, l.zenc)
	defer l.buf.Keep(rec)
	if l.cur == nil || l.curNext != height || (l.curSize > segHeaderSize && l.curSize+int64(len(rec)) > l.opts.SegmentSize) {
		if err := l.rotate(height); err != nil {
			return err
		}
	}
	if _, err := l.cur.Write(rec); err != nil {
		return l.fail("append", err)
	}
	l.mu.Lock()
	l.curSize += int64(len(rec))
	l.curNext = height + 1
	l.curDirty = true
	l.written = height
	if l.opts.Sync.mode != syncEvery {
		l.last = height
	}
	l.mu.Unlock()
	if l.opts.Sync.mode == syncEvery {
		if err := l.syncActive(); err != nil {
			return err
		}
		l.mu.Lock()
		l.last = height
		l.mu.Unlock()
	}
	return nil
}

// Sync makes every block appended so far durable.
func (l *Log) Sync() (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	if err := l.check(); err != nil {
		return err
	}
	return l.syncActive()
}

// syncActive fsyncs the active segment if it has unsynced bytes. It holds
// syncMu but not mu during the fsync, so Append can write meanwhile.
func (l *Log) syncActive() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	f, h, dirty, failed := l.cur, l.written, l.curDirty, l.failed
	l.curDirty = false
	l.mu.Unlock()
	if failed != nil {
		return failed
	}
	if f == nil || !dirty {
		return nil
	}
	if err := f.Sync(); err != nil {
		return l.fail("sync", err)
	}
	l.mu.Lock()
	l.durable = max(l.durable, h)
	l.mu.Unlock()
	return nil
}

// rotate seals the active segment (syncing it) and starts a new one whose
// first record will have height first: created, its header written and
// synced, and the directory synced, before any record goes in.
func (l *Log) rotate(first uint64) error {
	if err := l.syncActive(); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	old := l.cur
	l.cur = nil
	genesis := l.last == 0 && len(l.snaps) == 0
	l.mu.Unlock()
	if old != nil {
		old.Close() // synced above; a close error loses nothing
	}
	name := segmentName(first)
	var flags uint64
	if genesis {
		flags = flagGenesis
	}
	f, err := l.fs.Create(l.path(name))
	if err != nil {
		return l.fail("rotate", err)
	}
	// Record the segment before anything can fail, so that a later
	// snapshot's cleanup knows it.
	l.mu.Lock()
	if n := len(l.segs); n > 0 && l.segs[n-1].name == name {
		l.segs = l.segs[:n-1] // a segment that Open found empty, recreated
	}
	l.segs = append(l.segs, segment{first: first, name: name})
	l.mu.Unlock()
	hdr := appendSegmentHeader(nil, first, flags)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return l.fail("rotate", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return l.fail("rotate", err)
	}
	if err := vfs.SyncDir(l.fs, l.dir); err != nil {
		f.Close()
		return l.fail("rotate", err)
	}
	if err := writeNewest(l.fs, l.dir, first); err != nil {
		f.Close()
		return l.fail("rotate", err)
	}
	l.mu.Lock()
	l.cur = f
	l.curSize = int64(len(hdr))
	l.curNext = first
	l.curDirty = false
	l.mu.Unlock()
	return nil
}

// WriteSnapshot writes a full checkpoint of the state after block height
// (at most LastHeight(), above the newest snapshot), read from state to its
// end: it syncs the log, writes the snapshot to a temporary file, fsyncs
// it, renames it into place and fsyncs the directory; then it removes the
// snapshots beyond Options.RetainSnapshots and the segments whose records
// all precede the oldest snapshot kept. A failure to read state fails the
// call but not the log; a filesystem failure fails the log.
func (l *Log) WriteSnapshot(height uint64, state io.Reader) error {
	return l.WriteSnapshotFunc(height, func(w io.Writer) error {
		_, err := io.Copy(w, state)
		return err
	})
}

// WriteSnapshotFunc is WriteSnapshot with the state written by fill, which
// streams it into the file as it encodes it: no buffer of the snapshot's
// size, and no copy through one. An error of fill's own (not a write's)
// fails the call but not the log.
//
// fill runs on the calling goroutine while the call holds the log: it
// must not call the Log's writing methods (they would wait for good), and
// must not use w once it has returned.
func (l *Log) WriteSnapshotFunc(height uint64, fill func(w io.Writer) error) (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	if err := l.prepareSnapshot(height); err != nil {
		return err
	}
	return l.installSnapshot(height, l.zenc, func(w io.Writer) error {
		if err := fill(w); err != nil {
			return &sourceError{err}
		}
		return nil
	})
}

// StartSnapshot is WriteSnapshotFunc with the file written in the
// background: fill runs on the calling goroutine, and StartSnapshot
// returns once it has, while a goroutine of the log compresses, writes,
// fsyncs and renames the file and then removes what the new snapshot makes
// unneeded, as WriteSnapshotFunc does. Append goes on meanwhile. The
// payload waits in memory for the writer (at most 512 MiB queued, 518 MiB
// with the chunks in hand and kept for reuse; past that, fill waits for
// it), and is released as it is written. As with WriteSnapshotFunc, fill
// must not call the Log's writing methods (they would wait for good), and
// must not use w once it has returned.
//
// One snapshot is written at a time: StartSnapshot, WriteSnapshotFunc,
// Truncate and Close first wait for the one in flight, and WaitSnapshot
// waits for it alone. An error of fill's own fails the call, not the log,
// and leaves no file. A filesystem failure in the background fails the
// log: the next call returns the *FailedError (WaitSnapshot at once;
// Close, if none comes). The blocks appended before stay durable, as the
// log was synced before fill ran; SnapshotHeight and DurableHeight count
// the snapshot once its directory entry is synced.
func (l *Log) StartSnapshot(height uint64, fill func(w io.Writer) error) (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	return l.startSnapshot(height, fill)
}

// WaitSnapshot waits until the snapshot that StartSnapshot began, if any,
// is written, and returns the log's failure, if it has failed (the
// snapshot's, or any before). On a closed Log it returns ErrClosed, as
// every call does: Close waited for the snapshot, and returned its failure
// if no call had.
func (l *Log) WaitSnapshot() (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	l.finishSnapshot()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	}
	return nil
}

// installSnapshot writes the snapshot at height (writeSnapshotFile),
// counts it and removes what it makes unneeded (cleanup).
func (l *Log) installSnapshot(height uint64, zenc *zstd.Encoder, fill func(w io.Writer) error) error {
	if err := l.writeSnapshotFile(height, zenc, fill); err != nil {
		return err
	}
	l.mu.Lock()
	l.addSnapshot(height)
	l.mu.Unlock()
	return l.cleanup()
}

// addSnapshot counts the snapshot at height, written and synced, as the
// newest. The caller holds mu.
func (l *Log) addSnapshot(height uint64) {
	l.snaps = append(l.snaps, snapshotFile{height: height, name: snapshotName(height)})
	l.whole = append(l.whole, snapshotName(height))
	l.durable = max(l.durable, height)
}

// checkSnapshotHeight refuses a snapshot that is not above the newest one
// and at most the last height.
func (l *Log) checkSnapshotHeight(height uint64) error {
	if height == 0 || height > l.last {
		return fmt.Errorf("%w: snapshot at height %d, last height %d", ErrHeight, height, l.last)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.snaps); n > 0 && height <= l.snaps[n-1].height {
		return fmt.Errorf("%w: snapshot at height %d, newest snapshot at %d", ErrHeight, height, l.snaps[n-1].height)
	}
	return nil
}

// writeSnapshotFile writes the snapshot of the state after block height,
// whose payload fill writes (compressed with zenc under CompressZstd): to
// a temporary file, fsynced, then renamed into place and the directory
// fsynced, so that a crash leaves either a whole snapshot at height or
// none. An error of fill's own (not the
// file's) fails only this call, and the temporary file goes; a filesystem
// error fails the log.
func (l *Log) writeSnapshotFile(height uint64, zenc *zstd.Encoder, fill func(w io.Writer) error) error {
	tmp := l.path(tempName(height))
	f, err := l.fs.Create(tmp)
	if err != nil {
		return l.fail("snapshot", err)
	}
	sw := newSnapWriter(f, height, l.opts.Compression, zenc, snapChunkSize)
	err = fill(sw)
	if err == nil {
		err = sw.Close()
	}
	if sw.err != nil {
		f.Close()
		return l.fail("snapshot", sw.err)
	}
	if err != nil {
		f.Close()
		l.fs.Remove(tmp) // best effort; Open removes leftovers
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return l.fail("snapshot", err)
	}
	if err := f.Close(); err != nil {
		return l.fail("snapshot", err)
	}
	// A failed log writes nothing more; a background snapshot may see it
	// fail meanwhile (an Append, a background sync).
	if err := l.Err(); err != nil {
		l.fs.Remove(tmp) // best effort; Open removes leftovers
		return err
	}
	if err := l.fs.Rename(tmp, l.path(snapshotName(height))); err != nil {
		return l.fail("snapshot", err)
	}
	if err := vfs.SyncDir(l.fs, l.dir); err != nil {
		return l.fail("snapshot", err)
	}
	return nil
}

// cleanup removes snapshots beyond the retention (and damaged ones older
// than the newest good one) and the segments no kept snapshot needs.
func (l *Log) cleanup() error {
	l.mu.Lock()
	if l.failed != nil { // since the snapshot's rename: it removes nothing
		defer l.mu.Unlock()
		return l.failed
	}
	newest := l.snaps[len(l.snaps)-1].height
	from := max(0, len(l.snaps)-l.opts.RetainSnapshots)
	fromStart := false
	if k := l.opts.KeepRecords; k > 0 {
		// Keep the newest snapshot at least k below newest (Open starts
		// from it when the log ends at newest) and every newer one (each
		// becomes it as the log grows); all of them if none is that old.
		a := -1
		for i, s := range l.snaps {
			if newest >= k && s.height <= newest-k {
				a = i
			}
		}
		from = min(from, max(a, 0))
		// With none that old, the log's start is that base (Open replays
		// from the empty state): its segments stay, if it still has them.
		fromStart = a < 0 && len(l.segs) > 0 && l.segs[0].first == 1
	}
	keep := l.snaps[from:]
	var remove []string
	for _, s := range l.snaps[:from] {
		remove = append(remove, s.name)
	}
	var bad []snapshotFile
	for _, s := range l.bad {
		if s.height < newest {
			remove = append(remove, s.name)
		} else {
			bad = append(bad, s)
		}
	}
	// A sealed segment is wholly older than the oldest kept snapshot if
	// the segment after it starts at most one past that snapshot.
	oldest := keep[0].height
	nseg := 0
	for !fromStart && nseg+1 < len(l.segs) && l.segs[nseg+1].first <= oldest+1 {
		remove = append(remove, l.segs[nseg].name)
		nseg++
	}
	l.mu.Unlock()
	if len(remove) == 0 {
		return nil
	}
	for _, name := range remove {
		if err := l.fs.Remove(l.path(name)); err != nil && !vfs.IsNotExist(err) {
			return l.fail("snapshot", err)
		}
	}
	l.mu.Lock()
	l.snaps = slices.Clone(keep)
	l.bad = bad
	l.segs = l.segs[nseg:]
	l.mu.Unlock()
	if err := vfs.SyncDir(l.fs, l.dir); err != nil {
		return l.fail("snapshot", err)
	}
	return nil
}

// Close waits for the snapshot in flight (StartSnapshot), syncs the log
// (under every policy) and closes it; a failed log it only closes. It
// returns the log's failure (a *FailedError) if no call has returned it:
// one in the background (a sync under SyncInterval, a snapshot's write)
// that no call came after, or its own sync's. Otherwise it returns nil
// (ErrClosed on a closed Log).
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.finishSnapshot()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.Unlock()
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	if l.Err() == nil {
		l.syncActive() // a failure fails the log: returned below
	}
	l.release()
	l.syncMu.Lock()
	l.mu.Lock()
	l.closed = true
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
	}
	l.mu.Unlock()
	l.syncMu.Unlock()
	if l.zenc != nil {
		l.zenc.Close()
	}
	if l.lock != nil {
		l.lock.Close()
	}
	if err := l.Err(); err != nil && !l.reported {
		return err
	}
	return nil
}

// syncer is the group-commit goroutine of SyncInterval.
func (l *Log) syncer(d time.Duration) {
	defer close(l.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if l.syncActive() != nil {
				return // the log has failed; the next call (or Close) reports it
			}
		}
	}
}

// Replay calls fn with every record after the recovered snapshot, in
// order of height (SnapshotHeight+1 .. Recovery().LastHeight), with the
// block's body as appended. body is valid only during the call. Call it
// after Open and before Append or Truncate; it re-reads the segments and
// re-checks every record, and each segment's records against those Open
// read (a fold of the checksums their frames store), before fn sees any.
// It ends a read-only Log's hold on its files (Options.ReadOnly).
func (l *Log) Replay(fn func(height uint64, body []byte) error) error {
	var fnErr error
	err := l.replay(func(height uint64, body []byte) error {
		fnErr = fn(height, body)
		return fnErr
	})
	l.release() // recovery's last read
	if rb := l.rolledBack(); rb != nil {
		// Every record can be whole and in order, and fn content, and
		// still not follow the snapshot read before (rollbacks.go).
		if err == nil || !errors.Is(rb, ErrChanged) {
			return rb
		}
		return changedError(err)
	}
	if err != nil && err != fnErr && l.opts.ReadOnly {
		// Open read the same bytes whole: a writer has changed them since.
		return changedError(err)
	}
	return err
}

func (l *Log) replay(fn func(height uint64, body []byte) error) error {
	next := l.rec.FirstHeight
	var dec, data []byte
	for _, ps := range l.plan {
		var err error
		data, err = readRangeInto(l.fs, l.path(ps.name), ps.from, ps.to, data)
		if err != nil {
			return err
		}
		// Every record is checked again below, but a writer beside a
		// read-only Log can rewrite the range with other whole records
		// (a rollback, then blocks of the same sizes), which would not
		// follow the snapshot Open read: compared first, before fn sees
		// any of them.
		if sum, ok := recordSums(data); !ok || sum != ps.sum {
			return &CorruptError{Segment: ps.name, Offset: ps.from, Reason: fmt.Sprintf("the %d bytes of records are not those Open read (changed since Open)", len(data))}
		}
		for off := 0; off < len(data); {
			r, ferr := decodeRecord(data[off:], maxRecordLength)
			if ferr != nil {
				return &CorruptError{Segment: ps.name, Offset: ps.from + int64(off), Reason: ferr.reason + " (changed since Open)"}
			}
			off += r.size
			if r.height <= l.rec.SnapshotHeight {
				continue // covered by the snapshot
			}
			if r.height != next {
				return &CorruptError{Segment: ps.name, Offset: ps.from + int64(off-r.size), Reason: fmt.Sprintf("record %d, expected record %d (changed since Open)", r.height, next)}
			}
			body, err := decodeBody(dec, r.kind, r.payload, maxBodyLimit)
			if err != nil {
				return &CorruptError{Segment: ps.name, Offset: ps.from + int64(off-r.size), Reason: "body: " + err.Error()}
			}
			if r.kind != kindRaw {
				dec = body
			}
			if err := fn(r.height, body); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// UnlessChanged is err, or ErrChanged if err is not nil, l is read-only
// and a writer beside it has rolled back since its Open began (or wrote
// its snapshot again): a use of what l read that fails then met a change,
// not damage, and reading again succeeds. A writer that only appended
// changed nothing l read, so a failure then is the failure.
func (l *Log) UnlessChanged(err error) error {
	if err == nil || !l.opts.ReadOnly || errors.Is(err, ErrChanged) {
		return err
	}
	if rb := l.rolledBack(); errors.Is(rb, ErrChanged) {
		return changedError(err)
	}
	return err
}

// rolledBack is ErrChanged if l is read-only and a rollback has run since
// l's Open began (rollbacks.go), or the snapshot l read is no longer the
// one under its name; else nil.
func (l *Log) rolledBack() error {
	if !l.opts.ReadOnly {
		return nil
	}
	switch n, err := rollbacksSeen(l.fs, l.dir); {
	case err != nil:
		return err
	case n != l.rollbacks:
		return changedError(errors.New("the writer rolled back as the log was read"))
	}
	if l.snapEnd != nil {
		// Read by name, not from the file held: gone is no change (a
		// newer snapshot made it old); another is.
		end, err := snapshotEnd(l.rawFS(), l.path(l.rec.Snapshot))
		if err == nil && string(end) != string(l.snapEnd) {
			return changedError(fmt.Errorf("%s was written again as the log was read (a rollback)", l.rec.Snapshot))
		}
	}
	return nil
}

// rawFS is l's filesystem, past any hold.
func (l *Log) rawFS() vfs.FS {
	if l.held != nil {
		return l.held.FS
	}
	return l.fs
}

// snapshotEnd is a snapshot file's last 16 bytes: its payload's length and
// xxh3.
func snapshotEnd(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < 16 {
		return nil, fmt.Errorf("%s: %d bytes", path, size)
	}
	end := make([]byte, 16)
	if _, err := f.ReadAt(end, size-16); err != nil {
		return nil, err
	}
	return end, nil
}

// OpenSnapshot returns the recovered snapshot's state stream (the bytes
// given to WriteSnapshot), checked as it is read: a read error other than
// io.EOF means the file changed since Open. ok is false if recovery starts
// from no snapshot.
func (l *Log) OpenSnapshot() (height uint64, r io.ReadCloser, ok bool, err error) {
	if l.rec.Snapshot == "" {
		return 0, nil, false, nil
	}
	open := l.fs.Open
	if l.held != nil {
		open = l.held.take // the reader may outlive the hold (Replay, Close)
	}
	f, err := open(l.path(l.rec.Snapshot))
	if err != nil {
		return 0, nil, false, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return 0, nil, false, err
	}
	sr, err := newSnapReader(f, size)
	if err != nil {
		f.Close()
		return 0, nil, false, l.snapshotErr(l.rec.Snapshot, err)
	}
	return sr.height, &snapReadCloser{sr: sr, f: f, name: l.rec.Snapshot}, true, nil
}

type snapReadCloser struct {
	sr   *snapReader
	f    vfs.File
	name string
}

func (s *snapReadCloser) Read(p []byte) (int, error) {
	n, err := s.sr.Read(p)
	var fe *formatError
	if errors.As(err, &fe) {
		err = &CorruptError{Segment: s.name, Offset: fe.off, Reason: fe.reason}
	}
	return n, err
}

func (s *snapReadCloser) Close() error { return s.f.Close() }

func (l *Log) snapshotErr(name string, err error) error {
	var fe *formatError
	if errors.As(err, &fe) {
		return &CorruptError{Segment: name, Offset: fe.off, Reason: fe.reason}
	}
	return err
}

// readRange reads bytes [from, to) of a file.
func readRange(fsys vfs.FS, path string, from, to int64) ([]byte, error) {
	return readRangeInto(fsys, path, from, to, nil)
}

// readRangeInto is readRange into buf's array when it has room.
func readRangeInto(fsys vfs.FS, path string, from, to int64, buf []byte) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf = vfs.Resize(buf, to-from)
	n, err := f.ReadAt(buf, from)
	if n == len(buf) {
		return buf, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("wal: %s: %d bytes at %d, read %d (file changed since Open)", path, len(buf), from, n)
	}
	return nil, err
}
