package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/timerlane/timerlane/internal/vfs"
)

// Check reads every snapshot and segment in dir whole and returns the
// damage it finds, one *CorruptError per damaged file, in file order. It
// writes nothing. Recovery reads only the snapshot it starts from and the
// segments after it, so damage to an older file (kept for a rollback
// after a restart, or for a fallback from a damaged newer snapshot) shows
// here before the day it is needed. Per file it checks what Open would:
// a snapshot's header, chunks, payload checksum and length, and the
// height its name gives; a segment's header, the first height its name
// gives, and every record's checksum and height, each one more than the
// one before; and that each segment starts at most one height after the
// one before it ends (a missing segment; two may overlap after a crash in
// a Repair that rewrote one), and that the newest one ends at or above
// the newest whole snapshot (records lost below it, which the next
// segment would follow after a gap); and the file NEWEST, whole, with a segment
// at or past the record it names (the newest segment deleted whole). A
// torn tail of the last segment is not damage: Open cuts it (and reports
// it). A file removed between the listing and its reading (by a writer
// beside Check, which removes the older files as it writes newer ones) is
// skipped. Damage or a failure found while the directory's files changed
// (a writer truncated a segment to roll back, or removed a file) is
// ErrChanged instead: read again.
func Check(fsys FS, dir string, opts Options) ([]*CorruptError, error) {
	if err := checkDirName(dir); err != nil {
		return nil, err
	}
	fsys = orOS(fsys)
	before := dirState(fsys, dir)
	bad, err := check(fsys, dir, opts)
	found := err
	if len(bad) > 0 && err == nil {
		found = bad[0]
	}
	if changed := unlessChanged(fsys, dir, before, found); errors.Is(changed, ErrChanged) {
		return nil, changed
	}
	return bad, err
}

func check(fsys FS, dir string, opts Options) ([]*CorruptError, error) {
	opts = opts.withDefaults()
	var bad []*CorruptError
	add := func(err error) error {
		var ce *CorruptError
		if errors.As(err, &ce) {
			bad = append(bad, ce)
			return nil
		}
		return err
	}
	ls, bound, err := listBounded(fsys, dir)
	if err := add(err); err != nil { // a damaged NEWEST is added, the listing kept
		return nil, err
	}
	if err := add(checkNewest(ls.segs, bound)); err != nil {
		return bad, err
	}
	// A file listed but gone when read was removed after the listing: a
	// writer beside Check removes its older snapshots and segments as it
	// writes new ones. It is skipped, as if listed after its removal.
	var snapTop uint64 // the newest whole snapshot's height
	for _, s := range ls.snaps {
		err := checkSnapshot(fsys, dir, s)
		if err == nil {
			snapTop = max(snapTop, s.height)
		}
		if err := add(err); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return bad, err
		}
	}
	lostPages := opts.Sync.mode != syncEvery
	var prevEnd uint64 // the last height of the segment before, whole (0: none, or damaged)
	var data []byte    // one array for every segment, the largest's size
	for i, s := range ls.segs {
		if prevEnd > 0 && s.first > prevEnd+1 {
			bad = append(bad, &CorruptError{Segment: s.name, Offset: 0,
				Reason: fmt.Sprintf("%s: segment starts at record %d, the one before ends at record %d (a segment is missing)", reasonGap, s.first, prevEnd)})
		}
		var err error
		data, err = vfs.ReadFileInto(fsys, filepath.Join(dir, s.name), data)
		if errors.Is(err, fs.ErrNotExist) {
			prevEnd = 0 // removed: its successor's start has nothing to follow
			continue
		}
		if err != nil {
			return bad, err
		}
		ce, end := checkSegment(s, data, i == len(ls.segs)-1, lostPages, bound)
		if ce != nil {
			bad = append(bad, ce)
		}
		if i == len(ls.segs)-1 && ce == nil && end < snapTop {
			// A log's record is on disk before its snapshot is written:
			// only records gone leave this (a repair truncating below
			// the snapshot, a file cut at a record boundary, or a crash
			// in a Truncate whose kept segments do not reach its height,
			// before it removed the snapshots above), and the next record
			// would begin a segment after a gap.
			bad = append(bad, &CorruptError{Segment: s.name, Offset: int64(len(data)),
				Reason: fmt.Sprintf("%s: the newest segment ends at record %d, below the snapshot of record %d", reasonBehind, end, snapTop)})
		}
		prevEnd = end
	}
	return bad, nil
}

// reasonGap starts the reason of a gap between segments that Check finds,
// reasonBehind that of a newest segment that ends below the newest
// snapshot.
const (
	reasonGap    = "gap"
	reasonBehind = "behind"
)

// checkSegment checks one segment file's bytes (see Check; bound is
// NEWEST's, for headerTorn) and returns
// its damage, if any, and else the height of its last record (its first
// height - 1 if it has none).
func checkSegment(s segment, data []byte, last, lostPages bool, bound uint64) (*CorruptError, uint64) {
	corrupt := func(off int64, reason string) (*CorruptError, uint64) {
		return &CorruptError{Segment: s.name, Offset: off, Reason: reason}, 0
	}
	first, _, ferr := decodeSegmentHeader(data)
	if ferr != nil {
		if last && headerTorn(data, s.first, bound) {
			return nil, 0
		}
		return corrupt(0, ferr.reason+whyNotTorn(data, s.first, bound))
	}
	if first != s.first {
		return corrupt(0, headerSaysFirst(first))
	}
	next := first
	for off := int64(segHeaderSize); off < int64(len(data)); {
		r, ferr := decodeRecord(data[off:], maxRecordLength)
		if ferr != nil {
			if last && tornAt(data, off, next, lostPages) {
				break
			}
			return corrupt(off, ferr.reason)
		}
		if r.height != next {
			return corrupt(off, fmt.Sprintf("record %d, expected record %d", r.height, next))
		}
		next++
		off += int64(r.size)
	}
	return nil, next - 1
}
