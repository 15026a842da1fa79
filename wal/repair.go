package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/timerlane/timerlane/internal/vfs"
)

// RepairAction is one change Repair made.
type RepairAction struct {
	// The corruption repaired.
	Corruption *CorruptError
	// What was done: "truncated" (Segment cut at the corruption's offset),
	// "removed" (a segment whose header was damaged, or a later segment
	// that no longer joins the log), "set aside" (a damaged snapshot the
	// log does not cover, renamed to NAME.corrupt so that recovery falls
	// back to an older state), "rebuilt" (a segment whose damaged header
	// was written anew, its records kept; or NEWEST, damaged, written anew
	// from the newest segment there is), "lowered" (NEWEST, naming a
	// segment that is lost, made to name the newest there is, Into, or
	// removed), "leftover" (a temporary file a crash left, removed),
	// "ended" (ROLLBACKS: a Truncate that stopped half way, ended),
	// "rewritten" (see Into), "renamed" (a segment whose name
	// disagreed with its whole header and first record, given the
	// header's name, Into) or "torn tail" (the torn tail that any
	// writable Open cuts, Corruption nil: Removed bytes of File from
	// Offset, the whole file if Offset is 0).
	Action  string
	File    string
	Offset  int64
	Removed int64 // bytes cut or removed
	// Into is the segment that "rewritten" wrote (File's records from
	// Offset on, under a header naming the first of them), or the name
	// "renamed" gave File.
	Into string
}

func (a RepairAction) String() string {
	switch a.Action {
	case "truncated":
		return fmt.Sprintf("truncated %s at offset %d (%d bytes) because %v", a.File, a.Offset, a.Removed, a.Corruption)
	case "removed":
		return fmt.Sprintf("removed %s (%d bytes) because %v", a.File, a.Removed, a.Corruption)
	case "rewritten":
		return fmt.Sprintf("rewrote %s from offset %d as %s, dropping %d bytes of records the newest valid snapshot covers, because %v", a.File, a.Offset, a.Into, a.Removed, a.Corruption)
	case "lowered":
		if a.Into == "" {
			return fmt.Sprintf("removed %s: no segment is left, and the blocks of the missing one are lost, because %v", a.File, a.Corruption)
		}
		return fmt.Sprintf("lowered %s to %s, the newest segment there is: the blocks of the missing one are lost, because %v", a.File, a.Into, a.Corruption)
	case "leftover":
		return fmt.Sprintf("removed %s, a temporary file that a crash left", a.File)
	case "ended":
		return fmt.Sprintf("ended in %s a rollback that had stopped half way, which kept readers out: the log is what was recovered", a.File)
	case "rebuilt":
		if a.File == newestName {
			return fmt.Sprintf("rebuilt %s from the newest segment there is, because %v", a.File, a.Corruption)
		}
		return fmt.Sprintf("rebuilt the header of %s from its name and first record, keeping every record, because %v", a.File, a.Corruption)
	case "renamed":
		return fmt.Sprintf("renamed %s to %s, the name its header and first record give, keeping every record, because %v", a.File, a.Into, a.Corruption)
	case "torn tail":
		if a.Offset == 0 {
			return fmt.Sprintf("removed %s (%d bytes), a torn tail: its header incomplete", a.File, a.Removed)
		}
		return fmt.Sprintf("cut %s at offset %d (%d bytes), a torn tail: no whole record after it", a.File, a.Offset, a.Removed)
	}
	return fmt.Sprintf("set aside %s as %s.corrupt because %v", a.File, a.File, a.Corruption)
}

// Repair makes the log in dir openable by cutting it at every corruption
// Open would report: a damaged segment is truncated at the damaged record
// (a damaged header is rebuilt from the segment's name and first record,
// "rebuilt", or the segment removed when that cannot be done) and every
// later segment removed,
// unless the damage lies among records that the newest valid snapshot
// covers, before the record after it: then the segment is rewritten from
// the next whole record on ("rewritten"), and nothing the state needs is
// lost (Open reads a segment from its start, so such damage fails it
// too); a
// damaged newest snapshot that the log does not cover is renamed aside,
// and so are damaged snapshots that it does cover (which Open skips with
// a warning at every open), which loses nothing.
// The records after the corruption, and any state newer than the older
// snapshot fallen back to, are lost: call it only when a user asks (the
// `timerlane wal repair` command, or Options.Repair). It returns what it
// did (nothing, for a log that opens as it is), also reported through
// Options.Logf.
func Repair(fsys FS, dir string, opts Options) ([]RepairAction, error) {
	if err := checkDirName(dir); err != nil {
		return nil, err
	}
	fsys = orOS(fsys)
	if opts.ReadOnly {
		return nil, errReadOnlyRepair
	}
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	return repair(fsys, dir, opts.withDefaults())
}

func repair(fsys vfs.FS, dir string, opts Options) ([]RepairAction, error) {
	opts.Repair = false
	actions, err := renameMisnamed(fsys, dir)
	for _, a := range actions {
		opts.Logf("wal: repair: %s", a)
	}
	if err != nil {
		return actions, err
	}
	fix := func(ce *CorruptError) error {
		acts, err := repairOne(fsys, dir, ce, opts)
		if err != nil {
			return err
		}
		for _, a := range acts {
			opts.Logf("wal: repair: %s", a)
		}
		actions = append(actions, acts...)
		return nil
	}
	for range 10_000 {
		l := &Log{fs: fsys, dir: dir, opts: opts}
		err := l.recover()
		if l.cur != nil {
			l.cur.Close()
		}
		for _, name := range l.rec.RemovedTemp {
			actions = append(actions, RepairAction{Action: "leftover", File: name})
		}
		if l.rec.EndedRollback {
			actions = append(actions, RepairAction{Action: "ended", File: rollbacksName})
		}
		if c := l.rec.Cut; c != nil {
			a := RepairAction{Action: "torn tail", File: c.Segment, Offset: c.Offset, Removed: c.Bytes}
			opts.Logf("wal: repair: %s", a)
			actions = append(actions, a)
		}
		if err == nil {
			// Damaged snapshots the log covers cost nothing to set aside
			// and would be reported at every open until the next snapshot.
			for _, e := range l.rec.SkippedSnapshots {
				if ce, ok := e.(*CorruptError); ok {
					if err := fix(ce); err != nil {
						return actions, err
					}
				}
			}
			return actions, repairUnread(fsys, dir, opts, &actions)
		}
		ce := pickCorruption(err)
		if ce == nil {
			return actions, err
		}
		if err := fix(ce); err != nil {
			return actions, err
		}
	}
	return actions, errors.New("wal: repair did not converge")
}

// pickCorruption returns the corruption to repair first among those err
// holds: a segment's before a snapshot's.
func pickCorruption(err error) *CorruptError {
	var all []*CorruptError
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*CorruptError); ok {
			all = append(all, ce)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if n := u.Unwrap(); n != nil {
				walk(n)
			}
		case interface{ Unwrap() []error }:
			for _, n := range u.Unwrap() {
				walk(n)
			}
		}
	}
	walk(err)
	for _, ce := range all {
		if strings.HasSuffix(ce.Segment, segSuffix) {
			return ce
		}
	}
	if len(all) > 0 {
		return all[0]
	}
	return nil
}

func repairOne(fsys vfs.FS, dir string, ce *CorruptError, opts Options) ([]RepairAction, error) {
	path := filepath.Join(dir, ce.Segment)
	var acts []RepairAction
	if ce.Reason == reasonNoStart {
		return nil, fmt.Errorf("%w (%v): no state can be recovered from what is left, so repair stops here; restore a snapshot, or the log's earlier segments", ErrNoBase, ce)
	}
	if ce.Segment == newestName {
		act, err := rebuildNewest(fsys, dir, ce)
		return []RepairAction{act}, err
	}
	if !strings.HasSuffix(ce.Segment, segSuffix) {
		size, _ := fsys.Stat(path)
		if err := fsys.Rename(path, path+".corrupt"); err != nil {
			return nil, err
		}
		acts = append(acts, RepairAction{Corruption: ce, Action: "set aside", File: ce.Segment, Removed: size})
		return acts, vfs.SyncDir(fsys, dir)
	}
	act, ok, err := mendSegment(fsys, dir, ce, opts)
	if err != nil {
		return nil, err
	}
	if ok {
		return []RepairAction{act}, nil
	}
	size, err := fsys.Stat(path)
	if err != nil {
		return nil, err
	}
	first, _ := parseName(ce.Segment, segSuffix)
	if ce.Offset < segHeaderSize {
		if err := leavesABase(fsys, dir, ce, "removing it and the segments after it"); err != nil {
			return nil, err
		}
		return removeSegments(fsys, dir, ce, nil, func(f uint64) bool { return f >= first })
	}
	if ce.Offset == segHeaderSize {
		// Its first record is damaged: the cut keeps none of its
		// records, and a log that starts here would open empty.
		if err := leavesABase(fsys, dir, ce, "cutting it at its first record, and removing the segments after it,"); err != nil {
			return nil, err
		}
	}
	f, err := fsys.OpenAppend(path)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(ce.Offset)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return nil, err
	}
	acts = append(acts, RepairAction{Corruption: ce, Action: "truncated", File: ce.Segment, Offset: ce.Offset, Removed: size - ce.Offset})
	return removeSegments(fsys, dir, ce, acts, func(f uint64) bool { return f > first })
}

// leavesABase refuses (ErrNoBase) the removal of segment ce.Segment's
// records and every later segment (what names that, for the error) where
// what would be left holds no state to recover: no valid snapshot, and no
// whole segment that starts the log before it.
func leavesABase(fsys vfs.FS, dir string, ce *CorruptError, what string) error {
	ls, err := list(fsys, dir)
	if err != nil {
		return err
	}
	for _, s := range ls.snaps {
		err := checkSnapshot(fsys, dir, s)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return err
		}
	}
	if first, _ := parseName(ce.Segment, segSuffix); len(ls.segs) > 0 && ls.segs[0].first < first {
		hdr, err := readRange(fsys, filepath.Join(dir, ls.segs[0].name), 0, segHeaderSize)
		if err != nil {
			return err
		}
		if _, flags, ferr := decodeSegmentHeader(hdr); ferr == nil && flags&flagGenesis != 0 {
			return nil
		}
	}
	return fmt.Errorf("%w (%v): %s would leave no state to recover, so repair stops here; restore a snapshot, or the log's earlier segments", ErrNoBase, ce, what)
}

// removeSegments removes the segments of dir whose first height gone
// selects, appending a "removed" action for each (because of ce) to
// acts, then syncs the directory. It lowers NEWEST first to the newest
// segment that stays.
func removeSegments(fsys vfs.FS, dir string, ce *CorruptError, acts []RepairAction, gone func(first uint64) bool) ([]RepairAction, error) {
	ls, err := list(fsys, dir)
	if err != nil {
		return acts, err
	}
	var stays uint64
	for _, s := range ls.segs {
		if !gone(s.first) {
			stays = s.first
		}
	}
	if err := lowerNewest(fsys, dir, stays); err != nil {
		return acts, err
	}
	for _, s := range ls.segs {
		if gone(s.first) {
			p := filepath.Join(dir, s.name)
			n, _ := fsys.Stat(p)
			if err := fsys.Remove(p); err != nil {
				return acts, err
			}
			acts = append(acts, RepairAction{Corruption: ce, Action: "removed", File: s.name, Removed: n})
		}
	}
	return acts, vfs.SyncDir(fsys, dir)
}

// skipCovered repairs damage at ce (in a segment, past its header) that
// lies among records the newest valid snapshot covers: it writes the
// segment's records from the next whole record on, which must be at most
// the snapshot's height + 1 and follow the records before the damage, as
// a new segment named for the first of them, then removes the old one. It
// reports false, changing nothing, where that does not hold. A crash
// between the two leaves both segments, which Open reads past: it starts
// at the last segment holding the record after the snapshot, the new one.
func skipCovered(fsys vfs.FS, dir string, ce *CorruptError, opts Options) (RepairAction, bool, error) {
	ls, err := list(fsys, dir)
	if err != nil {
		return RepairAction{}, false, err
	}
	var base uint64 // the newest valid snapshot's height
	for i := len(ls.snaps) - 1; i >= 0 && base == 0; i-- {
		h, err := verifySnapshot(fsys, dir, ls.snaps[i].name)
		if err == nil {
			base = h
		} else if !errors.Is(err, ErrCorrupt) {
			return RepairAction{}, false, err
		}
	}
	path := filepath.Join(dir, ce.Segment)
	data, err := vfs.ReadFile(fsys, path)
	if base == 0 || err != nil {
		return RepairAction{}, false, err
	}
	// The height the damaged record should have had: the records before
	// it are whole (Open found the first damage at ce.Offset). Damage in
	// the header: the file's name gives the first height.
	next, ok := parseName(ce.Segment, segSuffix)
	if !ok {
		return RepairAction{}, false, nil
	}
	for off := int64(segHeaderSize); off < ce.Offset; {
		r, ferr := decodeRecord(data[off:], maxRecordLength)
		if ferr != nil {
			return RepairAction{}, false, nil
		}
		next, off = next+1, off+int64(r.size)
	}
	from := nextSuccessor(data, ce.Offset, max(ce.Offset+1, segHeaderSize), next)
	if from < 0 {
		return RepairAction{}, false, nil
	}
	r, _ := decodeRecord(data[from:], maxRecordLength)
	into := segmentName(r.height)
	if r.height < next || r.height > base+1 || slices.ContainsFunc(ls.segs, func(s segment) bool { return s.name == into }) {
		return RepairAction{}, false, nil
	}
	err = writeSegment(fsys, dir, into, r.height, 0, data[from:])
	if err == nil {
		err = fsys.Remove(path)
	}
	if err == nil {
		err = vfs.SyncDir(fsys, dir)
	}
	act := RepairAction{Corruption: ce, Action: "rewritten", File: ce.Segment, Offset: from, Removed: from - segHeaderSize, Into: into}
	return act, true, err
}

// writeSegment writes segment file name, with a header for first and
// flags and then records (whole record frames), to a temporary file that
// it syncs and renames into place (replacing any file of that name), then
// syncs the directory: a crash leaves the old file or the new one, and at
// worst the temporary file, which Open removes.
func writeSegment(fsys vfs.FS, dir, name string, first, flags uint64, records []byte) error {
	path := filepath.Join(dir, name)
	tmp := strings.TrimSuffix(path, segSuffix) + segTmpSuffix
	return vfs.ReplaceFile(fsys, dir, path, tmp, append(appendSegmentHeader(nil, first, flags), records...))
}

// rebuildHeader repairs a segment whose header is damaged but whose
// first record is whole and has the height the file's name gives: every
// field of the header is known without it (the first height from the
// name; the flag that the segment starts the log iff that height is 1, the
// engine's first record), so the segment is rewritten with a new header
// and keeps all its records ("rebuilt"). It reports false, changing
// nothing, where that does not hold (then the segment goes, as before).
func rebuildHeader(fsys vfs.FS, dir string, ce *CorruptError, opts Options) (RepairAction, bool, error) {
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, ce.Segment))
	if err != nil {
		return RepairAction{}, false, err
	}
	first, ok := parseName(ce.Segment, segSuffix)
	if _, _, ferr := decodeSegmentHeader(data); !ok || ferr == nil || len(data) <= segHeaderSize {
		return RepairAction{}, false, nil // a whole header that disagrees, or no record
	}
	if r, ferr := decodeRecord(data[segHeaderSize:], maxRecordLength); ferr != nil || r.height != first {
		return RepairAction{}, false, nil
	}
	var flags uint64
	if first == 1 {
		flags = flagGenesis
	}
	act := RepairAction{Corruption: ce, Action: "rebuilt", File: ce.Segment, Removed: 0}
	return act, true, writeSegment(fsys, dir, ce.Segment, first, flags, data[segHeaderSize:])
}

// renameMisnamed gives each segment whose whole header and first record
// agree on a first record other than its name's the header's name, where
// no file has it ("renamed"), and removes such a segment where the file of
// that name holds the same bytes (a copy, "removed"): before any damage is
// judged, so that a segment renamed by hand is not taken for a gap or
// damage and cut, with every segment after it. Where the name is held by
// another misnamed segment (names swapped, or a longer cycle), that one
// first moves to a free name past the last segment; it is still misnamed
// there, so a repair cut short by a crash finishes the job on its next run.
func renameMisnamed(fsys vfs.FS, dir string) ([]RepairAction, error) {
	var acts []RepairAction
	for {
		act, err := renameOneMisnamed(fsys, dir)
		if err != nil {
			return acts, err
		}
		if act == nil {
			break
		}
		acts = append(acts, *act)
	}
	if len(acts) == 0 {
		return nil, nil
	}
	return acts, vfs.SyncDir(fsys, dir)
}

// renameOneMisnamed takes one step of renameMisnamed and returns it, or
// nil when no step is left.
func renameOneMisnamed(fsys vfs.FS, dir string) (*RepairAction, error) {
	ls, err := list(fsys, dir)
	if err != nil {
		return nil, err
	}
	var aside *RepairAction // a misnamed segment that holds another's name
	for _, s := range ls.segs {
		path := filepath.Join(dir, s.name)
		first, data, err := misnamed(fsys, path, s.first)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		into := segmentName(first)
		ce := &CorruptError{Segment: s.name, Reason: headerSaysFirst(first)}
		other, err := vfs.ReadFile(fsys, filepath.Join(dir, into))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			act := &RepairAction{Corruption: ce, Action: "renamed", File: s.name, Into: into}
			return act, fsys.Rename(path, filepath.Join(dir, into))
		case err == nil && bytes.Equal(data, other):
			ce.Reason += ", and " + into + " holds the same bytes"
			act := &RepairAction{Corruption: ce, Action: "removed", File: s.name, Removed: int64(len(data))}
			return act, fsys.Remove(path)
		case err == nil && aside == nil:
			// into is another file's: if that one is misnamed too, it
			// makes way, unless no name past the last segment is free.
			oFirst, oData, err := misnamed(fsys, filepath.Join(dir, into), first)
			if err != nil {
				return nil, err
			}
			if free := ls.segs[len(ls.segs)-1].first + 1; oData != nil && free != 0 {
				oce := &CorruptError{Segment: into, Reason: fmt.Sprintf("%s; moved aside for %s, whose header names this file", headerSaysFirst(oFirst), s.name)}
				aside = &RepairAction{Corruption: oce, Action: "renamed", File: into, Into: segmentName(free)}
			}
		}
	}
	if aside == nil {
		return nil, nil
	}
	return aside, fsys.Rename(filepath.Join(dir, aside.File), filepath.Join(dir, aside.Into))
}

// misnamed reads the segment at path, whose name says its first record is
// named, and returns the header's first record and the segment's bytes when
// a whole header and the first record agree on another; data is nil
// otherwise. Only the header is read when it agrees with the name.
func misnamed(fsys vfs.FS, path string, named uint64) (first uint64, data []byte, err error) {
	size, err := fsys.Stat(path)
	if err != nil || size <= segHeaderSize {
		return 0, nil, err // no record to confirm a header with (or a torn one)
	}
	hdr, err := readRange(fsys, path, 0, segHeaderSize)
	if err != nil {
		return 0, nil, err
	}
	first, _, ferr := decodeSegmentHeader(hdr)
	if ferr != nil || first == named {
		return 0, nil, nil // the common case: only the header is read
	}
	if data, err = vfs.ReadFile(fsys, path); err != nil || len(data) <= segHeaderSize {
		return 0, nil, err
	}
	if r, ferr := decodeRecord(data[segHeaderSize:], maxRecordLength); ferr != nil || r.height != first {
		return 0, nil, nil
	}
	return first, data, nil
}

// repairUnread repairs the damage Check finds in files that a recovery
// which just succeeded did not read, so that `timerlane verify` passes
// after a repair: a damaged snapshot is set aside, and a damaged segment,
// all of whose records the newest valid snapshot covers, is rewritten
// from its next whole record (skipCovered) or else removed with every
// older segment: nothing replays past it any more, and the state needs
// none of them.
func repairUnread(fsys vfs.FS, dir string, opts Options, actions *[]RepairAction) error {
	// A rewritten segment may hold more damage, and dropping records
	// leaves the older segments behind a gap: check again until clean.
	for range 10_000 {
		bad, err := Check(fsys, dir, opts)
		if err != nil || len(bad) == 0 {
			return err
		}
		ce := bad[0]
		var acts []RepairAction
		if !strings.HasSuffix(ce.Segment, segSuffix) {
			acts, err = repairOne(fsys, dir, ce, opts)
		} else {
			acts, err = dropUnread(fsys, dir, ce, opts)
		}
		if err != nil {
			return err
		}
		for _, a := range acts {
			opts.Logf("wal: repair: %s", a)
		}
		*actions = append(*actions, acts...)
	}
	return errors.New("wal: repair did not converge")
}

// dropUnread repairs damaged segment ce.Segment, older than recovery
// reads (see repairUnread). A gap before it (Check's reasonGap) drops the
// older segments alone: nothing replays from them past the gap.
func dropUnread(fsys vfs.FS, dir string, ce *CorruptError, opts Options) ([]RepairAction, error) {
	first, _ := parseName(ce.Segment, segSuffix)
	if strings.HasPrefix(ce.Reason, reasonBehind) {
		// Nothing in it or before it replays past the snapshot: the
		// next record begins a segment of its own, with no gap behind.
		return removeSegments(fsys, dir, ce, nil, func(f uint64) bool { return f <= first })
	}
	act, ok, err := mendSegment(fsys, dir, ce, opts)
	if err != nil {
		return nil, err
	}
	if ok {
		return []RepairAction{act}, nil
	}
	gap := strings.HasPrefix(ce.Reason, reasonGap)
	return removeSegments(fsys, dir, ce, nil, func(f uint64) bool { return f < first || f == first && !gap })
}

// mendSegment repairs damaged segment ce.Segment in place where no record
// the state needs is lost: a damaged header rebuilt (rebuildHeader),
// damage among records the newest valid snapshot covers cut out
// (skipCovered). It reports false, changing nothing, where neither
// applies, and for a gap before the segment (nothing in it to mend).
func mendSegment(fsys vfs.FS, dir string, ce *CorruptError, opts Options) (RepairAction, bool, error) {
	if strings.HasPrefix(ce.Reason, reasonGap) {
		return RepairAction{}, false, nil
	}
	if ce.Offset < segHeaderSize {
		if act, ok, err := rebuildHeader(fsys, dir, ce, opts); err != nil || ok {
			return act, ok, err
		}
	}
	return skipCovered(fsys, dir, ce, opts)
}
