package wal

import (
	"encoding/binary"
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
// makes it odd, durably, before it changes a file, and even again once it
// is done; a writer's Open makes an odd count even (a Truncate that failed
// or crashed half way). A read-only Log reads it as it begins and after
// it has read what it uses (Open, then Replay): an odd count, or another
// one, means a rollback ran or is running, and the read is ErrChanged. A
// missing file (a log no Truncate changed, or written before the file
// existed) counts 0.
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

// rollbacksSeen is what a reader compares: the count, or the error that
// kept it from reading it (which then differs from a count).
func rollbacksSeen(fsys vfs.FS, dir string) string {
	n, err := readRollbacks(fsys, dir)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprint(n)
}

// inRollback reports whether a count a reader saw says a rollback is
// running (or stopped half way).
func inRollback(seen string) bool {
	var n uint64
	_, err := fmt.Sscan(seen, &n)
	return err == nil && n%2 == 1
}

// writeRollbacks makes the count n, durably.
func writeRollbacks(fsys vfs.FS, dir string, n uint64) error {
	return vfs.ReplaceFile(fsys, dir, filepath.Join(dir, rollbacksName), filepath.Join(dir, rollbacksTmpName), binary.LittleEndian.AppendUint64(nil, n))
}

// beginRollback makes the count odd, and another odd number than any a
// reader may have seen, before a Truncate changes a file; it returns the
// count to end with.
func beginRollback(fsys vfs.FS, dir string) (uint64, error) {
	n, err := readRollbacks(fsys, dir)
	if err != nil {
		return 0, err
	}
	n += 1 + n%2 // odd: n+1 from even, n+2 from a rollback left half way
	return n, writeRollbacks(fsys, dir, n)
}

// evenRollbacks ends a rollback that a writer left half way: an odd
// count becomes even. A writer's Open calls it once it has recovered.
func evenRollbacks(fsys vfs.FS, dir string) error {
	n, err := readRollbacks(fsys, dir)
	if err != nil || n%2 == 0 {
		return err
	}
	return writeRollbacks(fsys, dir, n+1)
}
