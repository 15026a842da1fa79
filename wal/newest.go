package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/timerlane/timerlane/internal/vfs"
)

// The NEWEST file bounds the log's newest segment from below: it holds
// the first record of the newest segment the log has begun (raised after
// a rotation has made the segment and its header durable, and written by
// every writer's Open, which so fails in a directory it cannot write),
// and it is lowered before anything removes the newest segment (Truncate,
// Repair; Open removes only a torn header above it). So no segment at or
// past it means that files were lost, not written: the newest segment
// deleted whole, which leaves a log that reads as whole up to the segment
// before and would recover an older state in silence. Open reports it as
// corruption; Repair lowers the bound to the newest segment there is
// (and rebuilds a damaged file so). A log without the file (one written
// before it existed, or whose file was deleted) has no bound until Open
// writes it.
const (
	newestName    = "NEWEST"
	newestTmpName = "NEWEST.tmp"
	newestMagic   = "TLNEWST\x01" // version 1
	newestSize    = 8 + 8 + 8     // magic, first record, xxh3 of the 16 bytes before
)

func encodeNewest(first uint64) []byte {
	b := binary.LittleEndian.AppendUint64([]byte(newestMagic), first)
	return binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
}

// readNewest returns the bound NEWEST holds (0 if there is no file), or a
// *CorruptError if the file is damaged.
func readNewest(fsys vfs.FS, dir string) (uint64, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, newestName))
	if vfs.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	corrupt := func(reason string, args ...any) error {
		return &CorruptError{Segment: newestName, Reason: fmt.Sprintf(reason, args...)}
	}
	switch {
	case len(b) != newestSize:
		return 0, corrupt("%d bytes, want %d", len(b), newestSize)
	case string(b[:8]) != newestMagic:
		return 0, corrupt("bad magic %q", b[:8])
	case binary.LittleEndian.Uint64(b[16:]) != xxh3.Hash(b[:16]):
		return 0, corrupt("checksum %016x, computed %016x", binary.LittleEndian.Uint64(b[16:]), xxh3.Hash(b[:16]))
	}
	return binary.LittleEndian.Uint64(b[8:16]), nil
}

// writeNewest makes first the bound, durably: a temporary file, fsynced,
// renamed into place, and the directory fsynced. A crash leaves the old
// bound or the new one (and at worst the temporary file, which Open
// removes). 0, no bound, removes the file: an emptied log has no NEWEST.
func writeNewest(fsys vfs.FS, dir string, first uint64) error {
	if first == 0 {
		if err := fsys.Remove(filepath.Join(dir, newestName)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		return vfs.SyncDir(fsys, dir)
	}
	return vfs.ReplaceFile(fsys, dir, filepath.Join(dir, newestName), filepath.Join(dir, newestTmpName), encodeNewest(first))
}

// lowerNewest makes the bound at most first, before a removal that leaves
// the segment of that first record the newest (0: no segment left). A
// damaged file is rewritten too.
func lowerNewest(fsys vfs.FS, dir string, first uint64) error {
	n, err := readNewest(fsys, dir)
	if err == nil && n <= first {
		return nil
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	return writeNewest(fsys, dir, first)
}

// checkNewest reports, as a *CorruptError naming NEWEST, a bound that no
// segment of segs (a listing, in order) reaches. bound is the lower of the
// file's values read before and after the listing: beside a writer, which
// raises the bound only once the new segment exists and lowers it before
// it removes one, the listing then holds a segment at or past it unless
// one was lost.
func checkNewest(segs []segment, bound uint64) error {
	if bound == 0 || len(segs) > 0 && segs[len(segs)-1].first >= bound {
		return nil
	}
	reason := fmt.Sprintf("the log's newest segment began at record %d, and no segment starts there or later: %s is missing (deleted, or renamed), with the blocks it held", bound, segmentName(bound))
	if len(segs) > 0 {
		reason += fmt.Sprintf(" (the newest left is %s)", segs[len(segs)-1].name)
	}
	return &CorruptError{Segment: newestName, Reason: reason}
}

// listBounded is list, with the NEWEST bound read around it (see
// checkNewest). A damaged NEWEST is its error, with the listing still
// made, for Check to go on with.
func listBounded(fsys vfs.FS, dir string) (listing, uint64, error) {
	before, berr := readNewest(fsys, dir)
	ls, err := list(fsys, dir)
	if err != nil {
		return ls, 0, err
	}
	after, aerr := readNewest(fsys, dir)
	if err := cmp.Or(berr, aerr); err != nil {
		return ls, 0, err
	}
	return ls, min(before, after), nil
}

// rebuildNewest repairs NEWEST, damaged ("rebuilt") or whole but beyond
// every segment ("lowered", accepting the loss): it takes the first record
// of the newest segment there is.
func rebuildNewest(fsys vfs.FS, dir string, ce *CorruptError) (RepairAction, error) {
	act := RepairAction{Corruption: ce, Action: "lowered", File: newestName}
	if _, err := readNewest(fsys, dir); errors.Is(err, ErrCorrupt) {
		act.Action = "rebuilt"
	} else if err != nil {
		return act, err
	}
	ls, err := list(fsys, dir)
	if err != nil {
		return act, err
	}
	var first uint64
	if len(ls.segs) > 0 {
		first = ls.segs[len(ls.segs)-1].first
		act.Into = ls.segs[len(ls.segs)-1].name
	}
	return act, writeNewest(fsys, dir, first)
}

// IsLogFile reports whether name is a file that a log keeps in its
// directory: a segment, a snapshot, NEWEST, ROLLBACKS or LOCK (not a
// temporary file, which Open removes, nor one that Repair set aside). A
// program that gives a log a directory of its own can refuse one that
// holds anything else.
func IsLogFile(name string) bool {
	if name == newestName || name == rollbacksName || name == lockName {
		return true
	}
	_, seg := parseName(name, segSuffix)
	_, snap := parseName(name, snapSuffix)
	return seg || snap
}

// IsTempFile reports whether name is a temporary file of a log's: a
// snapshot, a segment's rewrite, NEWEST or ROLLBACKS being written. A
// crash may leave one behind; a writable Open removes it.
func IsTempFile(name string) bool {
	return strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, segTmpSuffix) || name == newestTmpName || name == rollbacksTmpName
}
