package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/timerlane/timerlane/internal/vfs"
)

// Open opens the log in dir (creating the directory if it is missing) and
// recovers it: it picks the newest valid snapshot, checks every record
// after it, cuts a torn tail from the last segment (reporting it through
// Options.Logf and Recovery().Cut), and opens the last segment for
// appending. Read the state back with OpenSnapshot and Replay.
//
// Open fails with a *CorruptError (matching ErrCorrupt) naming the file and
// offset of any damage a crash cannot explain: a bad record, header or gap
// in heights anywhere but at the very end of the last segment, or a
// damaged newest snapshot that the log does not cover from an older
// snapshot. With Options.Repair it truncates there instead (see Repair).
// With Options.ReadOnly it writes nothing at all. Other errors are the
// filesystem's.
func Open(fsys FS, dir string, opts Options) (*Log, error) {
	if err := checkDirName(dir); err != nil {
		return nil, err
	}
	fsys = orOS(fsys)
	opts = opts.withDefaults()
	if opts.ReadOnly {
		return openReadOnly(fsys, dir, opts)
	}
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	if opts.Repair {
		if _, err := repair(fsys, dir, opts); err != nil {
			lock.Close()
			return nil, err
		}
	}
	l := &Log{fs: fsys, dir: dir, opts: opts, lock: lock}
	if opts.Compression == CompressZstd {
		l.zenc = newZstdEncoder()
	}
	if err := l.recover(); err != nil {
		if l.cur != nil {
			l.cur.Close()
		}
		if l.zenc != nil {
			l.zenc.Close()
		}
		lock.Close()
		return nil, err
	}
	if opts.Sync.mode == syncInterval {
		l.stop = make(chan struct{})
		l.done = make(chan struct{})
		go l.syncer(opts.Sync.interval)
	}
	return l, nil
}

// checkDirName refuses an empty directory name, which the filesystem
// would take for the working directory: a log (and its LOCK file) written
// where the node happened to start.
func checkDirName(dir string) error {
	if dir == "" {
		return fmt.Errorf("wal: %w: the log's directory name is empty (\".\" names the working directory)", fs.ErrInvalid)
	}
	return nil
}

var errReadOnlyRepair = errors.New("wal: a repair writes: Options.Repair, or a call of Repair, with Options.ReadOnly")

// openReadOnly is Open with Options.ReadOnly: recovery that writes
// nothing, and a Log that refuses to.
func openReadOnly(fsys vfs.FS, dir string, opts Options) (*Log, error) {
	if opts.Repair {
		return nil, errReadOnlyRepair
	}
	if _, err := fsys.Stat(dir); err != nil {
		return nil, err // a missing directory is not an empty log here
	}
	rollbacks, err := rollbacksSeen(fsys, dir) // before any other read
	if err != nil {
		return nil, err
	}
	if rollbacks%2 == 1 {
		return nil, changedError(errInRollback)
	}
	before := dirState(fsys, dir)
	l := &Log{fs: fsys, dir: dir, opts: opts, rollbacks: rollbacks}
	if runtime.GOOS != "windows" { // which refuses to remove a file open for reading
		l.held = &heldFS{FS: fsys}
		l.fs = l.held
	}
	if err := l.recover(); err != nil {
		l.release()
		return nil, unlessChanged(fsys, dir, before, err)
	}
	if l.rec.Snapshot != "" {
		// From the file checked, held (unless on Windows).
		end, err := snapshotEnd(l.fs, l.path(l.rec.Snapshot))
		if err != nil {
			l.release()
			return nil, unlessChanged(fsys, dir, before, err)
		}
		l.snapEnd = end
	}
	if err := l.rolledBack(); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// lockName is the file in a log's directory whose lock (vfs.FS.Lock) an
// open Log holds until it is closed.
const lockName = "LOCK"

// lockDir creates dir if it is missing and takes its locks: LOCK's, as
// every version of the log has, and the directory's own. LOCK is an empty
// file that stays after every run, like a stale lock file, and an
// operator removed it beside a live writer (an operations audit): a
// second writer then made a new LOCK, locked it, and the two wrote one
// log. The directory cannot be removed and made again while the log is
// in it. Where the filesystem refuses a directory's lock (flock on some
// network filesystems), LOCK's holds alone, as before.
func lockDir(fsys vfs.FS, dir string) (io.Closer, error) {
	if err := ensureDir(fsys, dir); err != nil {
		return nil, err
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockName))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is open in another process, or elsewhere in this one (its lock file, %s, is held)", ErrLocked, dir, filepath.Join(dir, lockName))
	}
	if err != nil {
		return nil, err
	}
	dirLock, err := fsys.Lock(dir)
	switch {
	case errors.Is(err, vfs.ErrLocked):
		lock.Close()
		return nil, fmt.Errorf("%w: %s is open in another process, or elsewhere in this one (the directory's lock is held; its lock file, %s, was removed and made again)", ErrLocked, dir, filepath.Join(dir, lockName))
	case err != nil:
		return lock, nil
	}
	return closers{dirLock, lock}, nil
}

// closers closes each of its Closers, returning the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ensureDir creates dir if it is missing, with any missing parents, and
// syncs the parent of each directory it creates so that they survive a
// crash.
func ensureDir(fsys vfs.FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !vfs.IsNotExist(err) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := vfs.SyncDir(fsys, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// listing is what a log directory holds.
type listing struct {
	segs  []segment
	snaps []snapshotFile
	temps []string
}

func list(fsys vfs.FS, dir string) (listing, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return listing{}, err
	}
	var ls listing
	for _, name := range names {
		if h, ok := parseName(name, segSuffix); ok {
			ls.segs = append(ls.segs, segment{first: h, name: name})
		} else if h, ok := parseName(name, snapSuffix); ok {
			ls.snaps = append(ls.snaps, snapshotFile{height: h, name: name})
		} else if IsTempFile(name) {
			ls.temps = append(ls.temps, name)
		}
	}
	slices.SortFunc(ls.segs, func(a, b segment) int { return cmp.Compare(a.first, b.first) })
	slices.SortFunc(ls.snaps, func(a, b snapshotFile) int { return cmp.Compare(a.height, b.height) })
	return ls, nil
}

// verifySnapshot reads a whole snapshot file, checking it, and returns its
// height. A damaged file gives a *CorruptError; other errors are the
// filesystem's.
func verifySnapshot(fsys vfs.FS, dir, name string) (uint64, error) {
	f, err := fsys.Open(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	h, err := decodeSnapshotFrom(f, size)
	if err != nil {
		var fe *formatError
		if errors.As(err, &fe) {
			return 0, &CorruptError{Segment: name, Offset: fe.off, Reason: fe.reason}
		}
		return 0, err
	}
	return h, nil
}

// decodeSnapshotFrom checks a whole snapshot and returns its height.
func decodeSnapshotFrom(src io.ReaderAt, size int64) (uint64, error) {
	r, err := newSnapReader(src, size)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return 0, err
	}
	return r.height, nil
}

// scanned is what a scan of the segments needed for recovery found.
type scanned struct {
	from     uint64 // first height of the first segment read (0: none read)
	first    uint64 // first record height after the snapshot (0: none)
	last     uint64 // last record height (0: no record)
	records  int    // records after the snapshot
	plan     []replaySeg
	cut      *Cut
	tailName string // the last segment, if it survives
	tailSize int64
	tailNext uint64 // the height the next record of the last segment must have
}

// found is the snapshot recovery starts from and what the scan of the
// segments after it found.
type found struct {
	base *snapshotFile  // nil: from the log's first record
	bad  []snapshotFile // damaged snapshots newer than base, skipped (the log covers them)
	errs []error        // their *CorruptErrors
	sc   scanned
	last uint64
}

func (l *Log) recover() error {
	fsys, dir, opts := l.fs, l.dir, l.opts
	if !opts.ReadOnly {
		if err := ensureDir(fsys, dir); err != nil {
			return err
		}
	}
	ls, bound, err := listBounded(fsys, dir)
	if err != nil {
		return err
	}
	if err := checkNewest(ls.segs, bound); err != nil {
		return err
	}
	l.bound = bound
	if len(ls.temps) > 0 && !opts.ReadOnly {
		for _, name := range ls.temps {
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !vfs.IsNotExist(err) {
				return err
			}
			opts.Logf("wal: removed leftover temporary file %s", name)
		}
		if err := vfs.SyncDir(fsys, dir); err != nil {
			return err
		}
		l.rec.RemovedTemp = ls.temps
	}
	var f *found
	if opts.KeepRecords > 0 {
		if f, err = l.keepingBase(&ls); err != nil {
			return err
		}
	}
	if f == nil {
		if f, err = l.newestBase(&ls); err != nil {
			return err
		}
	}
	for _, e := range f.errs {
		opts.Logf("wal: skipped damaged snapshot (the state is recovered without it): %v", e)
	}
	rec := &l.rec
	if f.base != nil {
		rec.SnapshotHeight, rec.Snapshot = f.base.height, f.base.name
	}
	rec.SkippedSnapshots = f.errs
	rec.LastHeight = f.last
	rec.FirstHeight = f.sc.first
	rec.Records = f.sc.records

	l.segs = ls.segs
	// Every snapshot but the damaged ones found: with KeepRecords, newer
	// ones than the base too (the next snapshot must be above them).
	l.snaps = slices.DeleteFunc(slices.Clone(ls.snaps), func(s snapshotFile) bool { return slices.Contains(f.bad, s) })
	l.bad = f.bad
	l.last, l.durable, l.written = f.last, f.last, f.last
	l.plan = f.sc.plan
	// Segments below this one Open did not read; Truncate reads them
	// before it keeps them (segments written from now on are after it).
	l.readFrom = f.sc.from
	if f.sc.from == 0 { // none read: any segment there is older than the state
		l.readFrom = f.last + min(1, math.MaxUint64-f.last)
	}
	if f.sc.tailName != "" && !opts.ReadOnly {
		file, err := fsys.OpenAppend(filepath.Join(dir, f.sc.tailName))
		if err != nil {
			return err
		}
		l.cur = file
		l.curSize = f.sc.tailSize
		l.curNext = f.sc.tailNext
	}
	if opts.ReadOnly {
		return nil
	}
	if err := syncKept(fsys, dir, l.segs); err != nil {
		return err
	}
	// A rollback that failed or crashed half way is over: the log is what
	// recovery found, durably (rollbacks.go).
	ended, err := evenRollbacks(fsys, dir)
	if err != nil {
		return err
	}
	if ended {
		l.rec.EndedRollback = true
		opts.Logf("wal: a rollback had stopped half way (a crash, or a log that failed in it); the log is what was recovered, and %s says so to readers", rollbacksName)
	}
	// The bound follows the newest segment kept, which is durable now: a
	// log written before the file existed gets it here, and so does a
	// segment whose rotation a crash cut short after its header's sync.
	// It is written even when it holds that value: a directory the writer
	// cannot write fails Open here, where it failed the first rotation or
	// snapshot, up to SnapshotEvery blocks later (an operations audit).
	if n := len(l.segs); n > 0 {
		return writeNewest(fsys, dir, l.segs[n-1].first)
	}
	return nil
}

// syncKept makes durable what recovery found: a writer killed before its
// syncs may have left records, a segment's name, a snapshot's rename or
// the directory's own entry (ensureDir syncs the parent only when it
// creates the directory) in the page cache alone, and recovery built on
// them. The next record is written after them, and a rotation syncs only
// a segment this Log wrote to, so a power loss later would otherwise take
// acknowledged blocks with them (or leave a gap before them). A truncated
// tail is synced here too.
func syncKept(fsys vfs.FS, dir string, segs []segment) error {
	for _, s := range segs {
		f, err := fsys.Open(filepath.Join(dir, s.name))
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := vfs.SyncDir(fsys, dir); err != nil {
		return err
	}
	if dir = filepath.Clean(dir); filepath.Dir(dir) != dir {
		return vfs.SyncDir(fsys, filepath.Dir(dir))
	}
	return nil
}

// newestBase is recovery's usual choice: the newest valid snapshot, or an
// older one if the log covers the damaged newer ones, or none (the log from
// its start).
func (l *Log) newestBase(ls *listing) (*found, error) {
	f := &found{}
	for i := len(ls.snaps) - 1; i >= 0; i-- {
		if err := l.checkSnapshot(ls.snaps[i]); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			f.bad = append(f.bad, ls.snaps[i])
			f.errs = append(f.errs, err)
			continue
		}
		f.base = &ls.snaps[i]
		break
	}
	var snapHeight uint64
	start := -1
	if f.base != nil {
		snapHeight = f.base.height
		start = startFor(ls.segs, snapHeight)
		if start < 0 && len(ls.segs) > 0 {
			return nil, &CorruptError{Segment: ls.segs[0].name, Offset: 0,
				Reason: fmt.Sprintf("gap: snapshot of record %d, first segment starts at record %d", snapHeight, ls.segs[0].first)}
		}
	} else if len(ls.segs) > 0 {
		start = 0 // which must start the log
	}
	if start >= 0 {
		sc, err := l.scanSegs(ls, start, snapHeight, f.base == nil)
		if err != nil {
			if len(f.errs) > 0 && errors.Is(err, ErrCorrupt) {
				return nil, fmt.Errorf("%w; falling back from it: %w", f.errs[0], err)
			}
			return nil, err
		}
		f.sc = sc
	}
	f.last = max(f.sc.last, snapHeight)
	if len(f.bad) > 0 {
		// Falling back is right only if the log reaches every damaged
		// snapshot newer than the one used: else a state that was durable
		// would be lost.
		if start < 0 {
			return nil, fmt.Errorf("%w (and the log does not cover it from an older snapshot or from its start)", f.errs[0])
		}
		if newest := f.bad[0].height; f.last < newest {
			return nil, fmt.Errorf("%w (and the log, from %s, reaches only record %d)", f.errs[0], describeBase(f.base), f.last)
		}
	}
	return f, nil
}

// keepingBase is recovery's choice under Options.KeepRecords: the newest
// valid snapshot at least KeepRecords below the last height, provided it
// and every record after it are present. When none is that far below (a
// young log, or one a Truncate just cut back), the base that gives the
// most records: the log from its start if it still has it, else the
// oldest usable snapshot. nil means recovering as usual (newestBase), for
// which any damage is reported there.
func (l *Log) keepingBase(ls *listing) (*found, error) {
	n := len(ls.snaps)
	if n == 0 {
		return nil, nil // recovery replays the log from its start anyway
	}
	// The last height, from the records after the newest snapshot: not
	// verified yet, and it need not be, if the records reach past it.
	top := ls.snaps[n-1].height
	start := startFor(ls.segs, top)
	if start < 0 {
		return nil, nil
	}
	sc, err := l.scanSegs(ls, start, top, false)
	if err != nil {
		return nil, notCorrupt(err) // newestBase reports any damage
	}
	// No record may follow the newest snapshot yet (a crash as the segment
	// after it began leaves a header, or a torn record that recovery
	// cuts): the last height is then the snapshot's, and the records
	// before it are still worth keeping.
	last, k := max(sc.last, top), l.opts.KeepRecords
	// skipped reports damage that leaves fewer records to keep: recovery
	// goes on from a newer base, and `timerlane verify` names the file.
	var logged []string
	skipped := func(err error) error {
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
		if msg := err.Error(); !slices.Contains(logged, msg) {
			logged = append(logged, msg)
			l.opts.Logf("wal: fewer records kept for rollback, past damage: %v", err)
		}
		return nil
	}
	// try returns the base at snapshot i (or the log's start, for i = -1),
	// nil if it is damaged or the records after it do not reach last.
	var bad []snapshotFile
	var errs []error
	try := func(i int) (*found, error) {
		f := &found{last: last, bad: bad, errs: errs}
		if i < 0 {
			if len(ls.segs) == 0 || ls.segs[0].first != 1 {
				return nil, nil
			}
			sc, err := l.scanSegs(ls, 0, 0, true)
			if err != nil || sc.last != last {
				return nil, skipped(err)
			}
			f.sc = sc
			return f, nil
		}
		s := ls.snaps[i]
		if err := l.checkSnapshot(s); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			if !slices.Contains(bad, s) { // try may come back to it
				bad, errs = append(bad, s), append(errs, err)
			}
			return nil, nil
		}
		f.sc = sc
		if s.height != top {
			start := startFor(ls.segs, s.height)
			if start < 0 {
				return nil, nil
			}
			if f.sc, err = l.scanSegs(ls, start, s.height, false); err != nil || f.sc.last != last {
				return nil, skipped(err)
			}
		}
		f.base = &ls.snaps[i]
		return f, nil
	}
	for i := n - 1; i >= 0; i-- {
		if k > last || ls.snaps[i].height > last-k {
			continue
		}
		if f, err := try(i); f != nil || err != nil {
			return f, err
		}
	}
	for i := -1; i < n; i++ {
		if f, err := try(i); f != nil || err != nil {
			return f, err
		}
	}
	return nil, nil
}

// notCorrupt is err unless it is a *CorruptError.
func notCorrupt(err error) error {
	if errors.Is(err, ErrCorrupt) {
		return nil
	}
	return err
}

// startFor returns the index of the first segment recovery from a snapshot
// at snapHeight needs: the last one starting at or before the height after
// it; -1 if none does.
func startFor(segs []segment, snapHeight uint64) int {
	start := -1
	for i, s := range segs {
		if s.first <= snapHeight+1 {
			start = i
		}
	}
	return start
}

// checkSnapshot verifies a snapshot file whole: a *CorruptError if it is
// damaged (or says another height than its name), or the filesystem's.
func checkSnapshot(fsys vfs.FS, dir string, s snapshotFile) error {
	h, err := verifySnapshot(fsys, dir, s.name)
	if err == nil && h != s.height {
		err = &CorruptError{Segment: s.name, Offset: 0, Reason: fmt.Sprintf("snapshot header says record %d", h)}
	}
	return err
}

// checkSnapshot is the package's checkSnapshot, remembering the snapshots
// found whole, so that Truncate need not read them again.
func (l *Log) checkSnapshot(s snapshotFile) error {
	if slices.Contains(l.whole, s.name) {
		return nil
	}
	err := checkSnapshot(l.fs, l.dir, s)
	if err == nil {
		l.whole = append(l.whole, s.name)
	}
	return err
}

// scanSegs scans ls.segs[start:] (see scan), recording and logging a torn
// tail it cuts, and dropping a segment it removes from ls.
func (l *Log) scanSegs(ls *listing, start int, snapHeight uint64, genesis bool) (scanned, error) {
	sc, err := l.scan(ls.segs[start:], snapHeight, genesis)
	if c := sc.cut; c != nil {
		if l.rec.Cut == nil || *l.rec.Cut != *c { // a second scan finds it again, read-only
			l.opts.Logf("wal: torn tail: %s", c)
		}
		l.rec.Cut = c
		if c.Removed {
			ls.segs = slices.DeleteFunc(ls.segs, func(s segment) bool { return s.name == c.Segment })
		}
	}
	return sc, err
}

func describeBase(base *snapshotFile) string {
	if base == nil {
		return "its start"
	}
	return base.name
}

// reasonNoStart is the corruption of a log without a valid snapshot
// whose first segment does not start the log (see ErrNoBase).
const reasonNoStart = "the log's first segment does not start the log, and there is no snapshot"

// scan checks segs (the segments recovery needs, in order) and cuts a torn
// tail from the last. snapHeight is the recovered snapshot's height (0 if
// none); genesis says the first segment must be the log's first.
func (l *Log) scan(segs []segment, snapHeight uint64, genesis bool) (scanned, error) {
	var sc scanned
	if len(segs) > 0 {
		sc.from = segs[0].first
	}
	lostPages := l.opts.Sync.mode != syncEvery
	var prevLast uint64 // last height of the previous segment (or its first-1 if empty)
	var data []byte     // one array for every segment, the largest's size
	for i, seg := range segs {
		isLast := i == len(segs)-1
		path := filepath.Join(l.dir, seg.name)
		var err error
		data, err = vfs.ReadFileInto(l.fs, path, data)
		if err != nil {
			return sc, err
		}
		corrupt := func(off int64, reason string) error {
			return &CorruptError{Segment: seg.name, Offset: off, Reason: reason}
		}
		// A tail cut short below the snapshot is not a torn write: the
		// snapshot was written after a sync that covered its height.
		belowSnap := func(last uint64) bool { return snapHeight > 0 && last < snapHeight }
		first, flags, ferr := decodeSegmentHeader(data)
		if ferr != nil {
			if isLast && seg.first > 0 && belowSnap(seg.first-1) {
				return sc, corrupt(0, fmt.Sprintf("%s; the segment would start at record %d, at or below the snapshot of record %d, whose records were synced before it was written", ferr.reason, seg.first, snapHeight))
			}
			if isLast && headerTorn(data, seg.first, l.bound) {
				// A segment whose header never became whole (a crash while
				// rotating): it holds no record.
				if !l.opts.ReadOnly {
					if err := l.fs.Remove(path); err != nil {
						return sc, err
					}
					if err := vfs.SyncDir(l.fs, l.dir); err != nil {
						return sc, err
					}
				}
				sc.cut = &Cut{Segment: seg.name, Offset: 0, Bytes: int64(len(data)), Removed: true, Left: l.opts.ReadOnly}
				break
			}
			return sc, corrupt(0, ferr.reason+whyNotTorn(data, seg.first, l.bound))
		}
		if first != seg.first {
			return sc, corrupt(0, headerSaysFirst(first))
		}
		if i == 0 && genesis && flags&flagGenesis == 0 {
			return sc, corrupt(0, reasonNoStart)
		}
		if i > 0 {
			if want := max(prevLast, snapHeight) + 1; first != want {
				return sc, corrupt(0, fmt.Sprintf("gap: segment starts at record %d, expected record %d", first, want))
			}
		}
		next := first
		off := int64(segHeaderSize)
		replayFrom := int64(-1)
		for off < int64(len(data)) {
			r, ferr := decodeRecord(data[off:], maxRecordLength)
			if ferr != nil {
				if isLast && belowSnap(next-1) {
					return sc, corrupt(off, fmt.Sprintf("%s; the log would end at record %d, below the snapshot of record %d, whose records were synced before it was written: damage, not a torn write", ferr.reason, next-1, snapHeight))
				}
				if isLast && tornAt(data, off, next, lostPages) {
					if !l.opts.ReadOnly {
						if err := l.fs.Truncate(path, off); err != nil {
							return sc, err
						}
					}
					sc.cut = &Cut{Segment: seg.name, Offset: off, Bytes: int64(len(data)) - off, Left: l.opts.ReadOnly}
					break
				}
				return sc, corrupt(off, ferr.reason)
			}
			if r.height != next {
				return sc, corrupt(off, fmt.Sprintf("record %d, expected record %d", r.height, next))
			}
			if r.height > snapHeight {
				if replayFrom < 0 {
					replayFrom = off
				}
				if sc.first == 0 {
					sc.first = r.height
				}
				sc.records++
			}
			sc.last = r.height
			next++
			off += int64(r.size)
		}
		prevLast = next - 1
		if replayFrom >= 0 {
			sum, _ := recordSums(data[replayFrom:off]) // whole records, checked above
			sc.plan = append(sc.plan, replaySeg{name: seg.name, from: replayFrom, to: off, sum: sum})
		}
		if isLast {
			sc.tailName, sc.tailSize, sc.tailNext = seg.name, off, next
		}
	}
	return sc, nil
}

// tornAt reports whether damage found at off in the last segment is a
// torn tail, which a crash explains, rather than corruption. It is if no
// whole, checksum-valid record frame starts anywhere after off (the bytes
// from off on are what a write cut short left), or, when lostPages says
// that several records may have waited for one sync, if before the next
// valid frame a whole 512-byte sector (at a multiple of 512 in the file)
// reads as zeros: a page that a crash lost while the OS had already
// written later ones, which only happens to data no sync had covered.
// Under SyncEveryBlock only the record being written can be unsynced, so
// zeros followed by a valid record are damage to synced data: corruption,
// reported, never cut silently.
func tornAt(data []byte, off int64, height uint64, lostPages bool) bool {
	next := nextSuccessor(data, off, off+1, height)
	if next < 0 {
		return true
	}
	if !lostPages {
		return false
	}
	for s := (off + 511) &^ 511; s+512 <= next; s += 512 {
		if allZero(data[s : s+512]) {
			return true
		}
	}
	return false
}

// headerTorn reports whether segment first, whose header is not whole, is
// one that a crash in its rotation left: the header is written and fsynced
// before any record, so such a file holds a prefix of a header (shorter
// than one, its magic as far as it goes) or, its page lost, zeros; and
// NEWEST (bound) is raised to a segment only after that fsync, so one at
// or below the bound is damage whatever it holds. A longer file, or other
// bytes, is damage too (until session 39 any bytes with no whole record
// in them passed for a torn header: a file of random bytes, or the newest
// segment cut short with its blocks, was removed as a torn tail).
func headerTorn(data []byte, first, bound uint64) bool {
	if first <= bound {
		return false
	}
	if allZero(data) {
		return true
	}
	n := min(len(data), len(segMagic))
	return len(data) < segHeaderSize && string(data[:n]) == segMagic[:n]
}

// whyNotTorn adds to a damaged header's reason why it is not taken for a
// torn one, where NEWEST is the reason.
func whyNotTorn(data []byte, first, bound uint64) string {
	if first <= bound && headerTorn(data, first, 0) {
		return fmt.Sprintf(" (not a crash's torn header: NEWEST says the header of the segment of record %d was made durable)", first)
	}
	return ""
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// nextSuccessor returns the offset of the first whole, checksum-valid
// record frame at or after from that can be the record after damage at x,
// where a record of the given height belongs, or -1. A frame inside the
// extent that the length field at x claims is part of that record's body,
// since a payload may hold bytes that frame a record: a crash that tears
// such a record, or a bit flipped in its checksum, must not make them one.
// Such a frame is the next record only if the length alone was damaged
// (the bytes from x to the frame then checksum as the record at x with the
// length that ends there), or if the header at x is not that record's (its
// kind or height is wrong: garbage, whose length means nothing). x below
// the records, in the segment header, claims no extent.
func nextSuccessor(data []byte, x, from int64, height uint64) int64 {
	end := int64(-1)
	if x >= segHeaderSize && x+recHeaderSize <= int64(len(data)) {
		if k := data[x+12]; k >= kindRaw && k <= kindZstd && binary.LittleEndian.Uint64(data[x+13:x+21]) == height {
			end = x + 12 + int64(binary.LittleEndian.Uint32(data[x:x+4]))
		}
	}
	var h *xxh3.Hasher // the checksum of the record at x up to each frame, in one pass
	hashed := x + 12
	for f := nextValidFrame(data, from); f >= 0; f = nextValidFrame(data, f+1) {
		if end < 0 || f >= end {
			return f
		}
		if f-x-12 >= recMinLength {
			if h == nil {
				h = xxh3.New()
			}
			h.Write(data[hashed:f])
			hashed = f
			if h.Sum64() == binary.LittleEndian.Uint64(data[x+4:x+12]) {
				return f
			}
		}
	}
	return -1
}

// nextValidFrame returns the offset of the first whole, checksum-valid
// record frame at or after from, or -1.
func nextValidFrame(data []byte, from int64) int64 {
	for off := max(from, 0); off+recHeaderSize <= int64(len(data)); off++ {
		b := data[off:]
		// A cheap filter before the checksum: a known kind.
		if k := b[12]; k < kindRaw || k > kindZstd {
			continue
		}
		if _, ferr := decodeRecord(b, maxRecordLength); ferr == nil {
			return off
		}
	}
	return -1
}
