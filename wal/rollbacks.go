package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/timerlane/timerlane/internal/vfs"
)

// The ROLLBACKS file tells readers beside a writer that a rollback ran
// while they read. A rollback can cut the newest segment and write other
// records of the same sizes in place of the old ones, and a new snapshot
// under an old one's name: no name or size tells, and a reader could put
// the old chain's snapshot in front of the new chain's records (session
// 43's reviews: a state the writer never had, with the state root off).
//
// It holds a count, 8 bytes little-endian, kept as a seqlock: a Truncate
// makes it odd before it removes or cuts a file (a snapshot it
// needs at the target is written before: the state there is the same in
// both chains), and even again once it is done; a writer's Open, and so
// Repair, makes an odd count even (a Truncate that failed or crashed half
// way: Recovery.EndedRollback, the repair action "ended"). A read-only
// Log reads it as it begins and after it has read what it uses (Open,
// then Replay): an odd count, or another one, means a rollback ran or is
// running, and the read is ErrChanged; one it cannot read fails the read.
// After a crash inside a rollback, readers so fail until the node opens
// its log again (or `timerlane wal repair` runs). A missing file (a log
// no Truncate changed, or written before the file existed) counts 0.
const (
	rollbacksName    = "ROLLBACKS"
	rollbacksTmpName = "ROLLBACKS.tmp"
)

// readRollbacks is the count ROLLBACKS holds, 0 if there is no file, 0
// too if it holds no count (damage: the next write makes it one).
func readRollbacks(fsys vfs.FS, dir string) (uint64, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, rollbacksName))
	switch {
	case vfs.IsNotExist(err):
		return 0, nil
	case err != nil:
		return 0, err
	case len(b) != 8:
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// errInRollback is a read-only Open's error for an odd count: a rollback
// is running, or one stopped half way and no writer has opened the log
// since.
var errInRollback = errors.New("a rollback is running beside the reader, or one stopped half way (a crash, or a log that failed in it): opening the node, or timerlane wal repair, ends it")

// rollbacksSeen is the count a reader compares, or the error that kept it
// from reading it: a reader that cannot read the count cannot tell a
// rollback, and fails.
func rollbacksSeen(fsys vfs.FS, dir string) (uint64, error) {
	n, err := readRollbacks(fsys, dir)
	if err != nil {
		return 0, fmt.Errorf("wal: %s cannot be read, which tells a reader beside a writer of its rollbacks: %w", rollbacksName, err)
	}
	return n, nil
}

// writeRollbacks makes the count n: a temporary file renamed into place,
// which readers see at once, with no fsync. Only readers beside the
// writer need the count, and a crash ends them: a count a power loss
// takes back, or leaves empty (0), keeps out no reader of the crash's log,
// which nobody changes until a writer opens it. An Append and a Truncate
// of one record on this machine's disk (session 43, a throwaway benchmark,
// 3 alternating runs of 300): 0.30-0.38 ms before ROLLBACKS, 1.40-1.53
// with its two writes fsynced, 0.56-0.64 (against 0.40-0.42) without.
func writeRollbacks(fsys vfs.FS, dir string, n uint64) error {
	tmp := filepath.Join(dir, rollbacksTmpName)
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(binary.LittleEndian.AppendUint64(nil, n))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, rollbacksName))
	}
	if err != nil {
		fsys.Remove(tmp) // best effort: Open removes a leftover too
	}
	return err
}

// beginRollback makes the count odd, and another odd number than any a
// reader may have seen, before a Truncate removes or cuts a file; it
// returns the count to end with, less one.
func beginRollback(fsys vfs.FS, dir string) (uint64, error) {
	n, err := readRollbacks(fsys, dir)
	if err != nil {
		return 0, err
	}
	n += 1 + n%2 // odd: n+1 from even, n+2 from a rollback left half way
	return n, writeRollbacks(fsys, dir, n)
}

// evenRollbacks ends a rollback that a writer left half way: an odd
// count becomes even. A writer's Open calls it once it has recovered, and
// says whether it did.
func evenRollbacks(fsys vfs.FS, dir string) (bool, error) {
	n, err := readRollbacks(fsys, dir)
	if err != nil || n%2 == 0 {
		return false, err
	}
	return true, writeRollbacks(fsys, dir, n+1)
}
