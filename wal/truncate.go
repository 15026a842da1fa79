package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/timerlane/timerlane/internal/vfs"
)

// Truncate makes height the log's last height, rolling back the blocks
// above it (a reorg): it removes every record and every snapshot above
// height. height == LastHeight() does nothing; height 0 empties the log
// (which then takes any first height, as a new one).
//
// If no snapshot at or below height with the records after it up to
// height, nor the log's records from its start, would be left to recover
// the state at height from, Truncate first writes a snapshot at height,
// whose payload (the state after block height, as given to WriteSnapshot)
// snapshot writes to w; if snapshot is nil it returns an error matching
// ErrNeedSnapshot instead and changes nothing. With Options.KeepRecords at
// least the depth of the rollback, the log's own history covers it once
// there is a snapshot KeepRecords or more blocks below the newest one.
//
// snapshot runs on the calling goroutine and must not call the Log's
// writing methods.
//
// When Truncate returns nil the truncation is durable: LastHeight,
// DurableHeight and SnapshotHeight reflect it and Append takes height+1.
// Truncate first syncs the blocks appended; a crash or a failure after
// that leaves files from which Open recovers some block between height
// and the old last height, never anything else (see the package
// documentation, Rollback); the caller compares what it recovers with
// height and truncates again. An error of snapshot's own fails only the
// call; a filesystem error (a *FailedError) fails the log, like Append's.
// An error reading the segments before anything changed leaves the log as
// it was.
func (l *Log) Truncate(height uint64, snapshot func(w io.Writer) error) (err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	defer l.report(&err)
	l.finishSnapshot()
	if err := l.check(); err != nil {
		return err
	}
	if height > l.last {
		return fmt.Errorf("%w: truncate to height %d, last height %d", ErrHeight, height, l.last)
	}
	if height == l.last {
		return nil
	}
	// Every block up to the old last one durable first: from here on a
	// crash must recover a block at or above height.
	if err := l.syncActive(); err != nil {
		return err
	}
	// The active segment is cut or replaced below: no background sync of
	// it meanwhile (syncActive takes syncMu too).
	l.syncMu.Lock()
	defer l.syncMu.Unlock()

	// What to do, found by reading only.
	n := 0 // l.segs[:n] start at or below height and stay
	for n < len(l.segs) && l.segs[n].first <= height {
		n++
	}
	// The segments kept last are what recovery reads after the
	// truncation. Those Open did not read (it started from a snapshot after
	// them) are read whole now; a damaged one goes, first of all, and the
	// state at height then comes from a snapshot at height (written now if
	// there is none).
	var damaged []string
	for n > 0 {
		err := l.verifySegment(l.segs[n-1])
		if err == nil {
			break
		}
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
		l.opts.Logf("wal: truncate to height %d: %v; the segment goes whole", height, err)
		damaged = append(damaged, l.segs[n-1].name)
		n--
	}
	keep, above := l.segs[:n], l.segs[n+len(damaged):]
	cut, next := int64(-1), uint64(0)
	if len(keep) > 0 {
		var err error
		if cut, next, err = l.findCut(keep[n-1], height); err != nil {
			return err
		}
	}
	need, err := l.needSnapshot(height, keep, next == height+1)
	if err != nil {
		return err
	}
	if need && snapshot == nil {
		return fmt.Errorf("%w: no snapshot at or below height %d with the records after it, nor the log's start, is left to recover it from", ErrNeedSnapshot, height)
	}

	if need {
		if err := l.writeSnapshotFile(height, l.zenc, snapshot); err != nil {
			return err
		}
	}
	var goodAbove, badAbove, segsAbove []string // newest first
	for _, s := range slices.Backward(l.snaps) {
		if s.height > height {
			goodAbove = append(goodAbove, s.name)
		}
	}
	for _, s := range slices.Backward(l.bad) {
		if s.height > height {
			badAbove = append(badAbove, s.name)
		}
	}
	// Segments above height that Open did not read: once the snapshots
	// above height go, a crash recovers from one at or below height and
	// reads them. Those that are damaged go first, and then all the
	// segments above height go before those snapshots (a crash meanwhile
	// recovers from a snapshot above height, reading only what is left
	// after it).
	var damagedAbove []string
	for _, s := range slices.Backward(above) {
		err := l.verifySegment(s)
		if err == nil {
			segsAbove = append(segsAbove, s.name)
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
		l.opts.Logf("wal: truncate to height %d: %v; it goes first", height, err)
		damagedAbove = append(damagedAbove, s.name)
	}
	// Damaged snapshots are never needed: they go first. Then, if the
	// records from height+1 on are there, the snapshots above height, so
	// that every crash point recovers from a snapshot at or below height
	// and replays the records after it up to a block at or above height
	// (which the caller can roll back again); then the segments, newest
	// first, so that those left always run on without a gap. If they are
	// not there (the segments kept do not run on to height+1, and none
	// left starts there: all start above it, or a damaged one took some),
	// a snapshot at or below height cannot join them: the segments go
	// first, and the snapshots above height recover a block above height
	// until they go.
	present := damagedAbove == nil && (len(keep) > 0 && next == height+1 ||
		len(keep) == 0 && len(above) > 0 && above[0].first == height+1)
	if !present {
		// The snapshots above height outlive the segments: one that Open
		// did not read, if damaged, must not be the newest left when a
		// crash comes (the log would no longer cover it). Those go first.
		var whole []string
		for _, name := range goodAbove {
			h, _ := parseName(name, snapSuffix)
			err := l.checkSnapshot(snapshotFile{height: h, name: name})
			if err == nil {
				whole = append(whole, name)
				continue
			}
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			l.opts.Logf("wal: truncate to height %d: %v; it goes first", height, err)
			badAbove = append(badAbove, name)
		}
		goodAbove = whole
	}
	order := append(append(badAbove, damaged...), damagedAbove...)
	if present {
		order = append(append(order, goodAbove...), segsAbove...)
	} else {
		order = append(append(order, segsAbove...), goodAbove...)
	}
	// Readers beside: files are removed or cut from here on, until the
	// count is even again (rollbacks.go). A snapshot written above at
	// height changes nothing they read: it is the state at height in
	// either chain. Every failure from here on fails the log and leaves
	// the count odd, for the next writer's Open to end.
	rb, err := beginRollback(l.fs, l.dir)
	if err != nil {
		return l.fail("truncate", err)
	}
	defer func() {
		if err == nil {
			if werr := writeRollbacks(l.fs, l.dir, rb+1); werr != nil {
				err = l.fail("truncate", werr)
			}
		}
	}()
	if len(damaged)+len(damagedAbove)+len(segsAbove) > 0 {
		var first uint64 // the newest segment kept (0: none)
		if len(keep) > 0 {
			first = keep[len(keep)-1].first
		}
		if err := lowerNewest(l.fs, l.dir, first); err != nil {
			return l.fail("truncate", err)
		}
	}
	for _, name := range order {
		if err := l.fs.Remove(l.path(name)); err != nil && !vfs.IsNotExist(err) {
			return l.fail("truncate", err)
		}
		// Each removal durable before the next: a directory's changes may
		// reach the disk in any order.
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			return l.fail("truncate", err)
		}
	}
	active := l.cur != nil && len(above) == 0 && damaged == nil // the active segment stays
	if cut >= 0 {
		f := l.cur
		if !active {
			if f, err = l.fs.OpenAppend(l.path(keep[n-1].name)); err != nil {
				return l.fail("truncate", err)
			}
		}
		err := f.Truncate(cut)
		if err == nil {
			err = f.Sync()
		}
		if !active {
			f.Close()
		}
		if err != nil {
			return l.fail("truncate", err)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if active {
		if cut >= 0 {
			l.curSize = cut
		}
		l.curNext = next
	} else if l.cur != nil {
		// Its file is gone: the next Append starts segment height+1 (no
		// segment of that name is left).
		l.cur.Close()
		l.cur = nil
	}
	l.curDirty = false
	l.segs = keep
	// The snapshots above height are gone, and the one written at height
	// replaced any file of that name: a damaged one, found by Open or not
	// read (listed twice, the older entry's removal would later take the
	// new file).
	gone := func(s snapshotFile) bool { return s.height > height || need && s.height == height }
	l.snaps = slices.DeleteFunc(l.snaps, gone)
	l.bad = slices.DeleteFunc(l.bad, gone)
	if need {
		l.addSnapshot(height)
	}
	l.last, l.written, l.durable = height, height, height
	return nil
}

// verifySegment reads segment seg whole, unless Open read it (or it was
// written since), checking every record as recovery will: a *CorruptError
// if it is damaged.
func (l *Log) verifySegment(seg segment) error {
	if seg.first >= l.readFrom {
		return nil
	}
	data, err := vfs.ReadFile(l.fs, l.path(seg.name))
	if err != nil {
		return err
	}
	if ce, _ := checkSegment(seg, data, false, false, 0); ce != nil {
		return ce
	}
	return nil
}

// findCut walks the record frames of segment seg, reading only their
// headers, and returns the offset of its record at height+1 (-1 if it has
// none) and the height its next record must have once cut there.
func (l *Log) findCut(seg segment, height uint64) (cut int64, next uint64, err error) {
	f, err := l.fs.Open(l.path(seg.name))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, 0, err
	}
	var hdr [recHeaderSize]byte
	off, next := int64(segHeaderSize), seg.first
	for off < size {
		if next == height+1 {
			return off, next, nil
		}
		corrupt := &CorruptError{Segment: seg.name, Offset: off}
		m, err := f.ReadAt(hdr[:], off)
		if m < len(hdr) && err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		length := binary.LittleEndian.Uint32(hdr[0:4])
		h := binary.LittleEndian.Uint64(hdr[13:21])
		switch {
		case m < len(hdr):
			corrupt.Reason = "record header cut short (changed since Open)"
		case h != next:
			corrupt.Reason = fmt.Sprintf("record %d, expected record %d (changed since Open)", h, next)
		case length < recMinLength || length > maxRecordLength || off+12+int64(length) > size:
			corrupt.Reason = fmt.Sprintf("record length %d out of range (changed since Open)", length)
		}
		if corrupt.Reason != "" {
			return 0, 0, corrupt
		}
		off += 12 + int64(length)
		next++
	}
	return -1, next, nil
}

// needSnapshot reports whether, once everything above height is gone,
// nothing would be left to recover the state at height from: no snapshot
// at height, nor one below it whose later records keep holds (toHeight
// says keep's records reach height), nor keep's records from the log's
// start.
func (l *Log) needSnapshot(height uint64, keep []segment, toHeight bool) (bool, error) {
	if height == 0 {
		return false, nil
	}
	// Newest first, and those already read whole before the others: the
	// first that will do costs the least to check.
	cands := slices.Clone(l.snaps)
	slices.Reverse(cands)
	slices.SortStableFunc(cands, func(a, b snapshotFile) int {
		return cmp.Compare(l.wholeRank(a), l.wholeRank(b))
	})
	for _, s := range cands {
		if s.height == height || (s.height < height && toHeight && keep[0].first <= s.height+1) {
			// Only one read whole will do, with the records after it: the
			// rollback removes newer snapshots, which Open may have used
			// instead of it, reading none of them.
			err := l.checkSnapshot(s)
			if err == nil && s.height < height {
				err = l.verifySegments(keep[max(0, startFor(keep, s.height)):])
			}
			if err == nil {
				return false, nil
			}
			if !errors.Is(err, ErrCorrupt) {
				return false, err
			}
			l.opts.Logf("wal: truncate to height %d: not relying on a damaged snapshot: %v", height, err)
		}
	}
	if !toHeight {
		return true, nil
	}
	hdr, err := readRange(l.fs, l.path(keep[0].name), 0, segHeaderSize)
	if err != nil {
		return false, err
	}
	_, flags, ferr := decodeSegmentHeader(hdr)
	if ferr != nil || flags&flagGenesis == 0 {
		return true, nil // a damaged header: not relied on either
	}
	if err := l.verifySegments(keep); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// wholeRank is 0 for a snapshot known to be whole, 1 for one not read.
func (l *Log) wholeRank(s snapshotFile) int {
	if slices.Contains(l.whole, s.name) {
		return 0
	}
	return 1
}

// verifySegments is verifySegment of each of segs, in order.
func (l *Log) verifySegments(segs []segment) error {
	for _, s := range segs {
		if err := l.verifySegment(s); err != nil {
			return err
		}
	}
	return nil
}
