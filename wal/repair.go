package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/timerlane/timerlane/internal/vfs"
)

// RepairAction is one change Repair made.
type RepairAction struct {
	// The corruption repaired.
	Corruption *CorruptError
	// What was done: "truncated" (Segment cut at the corruption's offset),
	// "removed" (a segment whose header was damaged, or a later segment
	// that no longer joins the log) or "set aside" (a damaged snapshot the
	// log does not cover, renamed to NAME.corrupt so that recovery falls
	// back to an older state).
	Action  string
	File    string
	Offset  int64
	Removed int64 // bytes cut or removed
}

func (a RepairAction) String() string {
	switch a.Action {
	case "truncated":
		return fmt.Sprintf("truncated %s at offset %d (%d bytes) because %v", a.File, a.Offset, a.Removed, a.Corruption)
	case "removed":
		return fmt.Sprintf("removed %s (%d bytes) because %v", a.File, a.Removed, a.Corruption)
	}
	return fmt.Sprintf("set aside %s as %s.corrupt because %v", a.File, a.File, a.Corruption)
}

// Repair makes the log in dir openable by cutting it at every corruption
// Open would report: a damaged segment is truncated at the damaged record
// (removed, if its header is damaged) and every later segment removed; a
// damaged newest snapshot that the log does not cover is renamed aside,
// and so are damaged snapshots that it does cover (which Open skips with
// a warning at every open), which loses nothing.
// The records after the corruption, and any state newer than the older
// snapshot fallen back to, are lost: call it only when a user asks (the
// `timerlane wal repair` command, or Options.Repair). It returns what it
// did (nothing, for a log that opens as it is), also reported through
// Options.Logf.
func Repair(fsys vfs.FS, dir string, opts Options) ([]RepairAction, error) {
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
	var actions []RepairAction
	fix := func(ce *CorruptError) error {
		acts, err := repairOne(fsys, dir, ce)
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
			return actions, nil
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

func repairOne(fsys vfs.FS, dir string, ce *CorruptError) ([]RepairAction, error) {
	path := filepath.Join(dir, ce.Segment)
	var acts []RepairAction
	if !strings.HasSuffix(ce.Segment, segSuffix) {
		size, _ := fsys.Stat(path)
		if err := fsys.Rename(path, path+".corrupt"); err != nil {
			return nil, err
		}
		acts = append(acts, RepairAction{Corruption: ce, Action: "set aside", File: ce.Segment, Removed: size})
		return acts, vfs.SyncDir(fsys, dir)
	}
	size, err := fsys.Stat(path)
	if err != nil {
		return nil, err
	}
	if ce.Offset < segHeaderSize {
		if err := fsys.Remove(path); err != nil {
			return nil, err
		}
		acts = append(acts, RepairAction{Corruption: ce, Action: "removed", File: ce.Segment, Removed: size})
	} else {
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
	}
	ls, err := list(fsys, dir)
	if err != nil {
		return nil, err
	}
	first, _ := parseName(ce.Segment, segSuffix)
	for _, s := range ls.segs {
		if s.first > first {
			p := filepath.Join(dir, s.name)
			n, _ := fsys.Stat(p)
			if err := fsys.Remove(p); err != nil {
				return nil, err
			}
			acts = append(acts, RepairAction{Corruption: ce, Action: "removed", File: s.name, Removed: n})
		}
	}
	return acts, vfs.SyncDir(fsys, dir)
}
