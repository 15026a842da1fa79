package wal

import (
	"encoding/binary"
	"path/filepath"

	"github.com/timerlane/timerlane/internal/vfs"
)

// The ROLLBACKS file counts the Truncates that changed the log: each adds
// one, durably, before it removes or cuts a file. Only readers beside a
// writer need it. A rollback can cut the newest segment and write other
// records of the same sizes in place of the old ones, and a new snapshot
// under an old one's name, between two reads of a read-only Log: no name
// or size tells, and the reader could put the old chain's snapshot in
// front of the new chain's records (session 43's review: a state the
// writer never had, with the state root off). A reader reads the file as
// it begins and again once it has read everything it uses: a different
// content means a rollback ran meanwhile, and the read is ErrChanged.
// Its content is the count, 8 bytes little-endian; readers compare bytes and
// parse nothing, and a missing file (a log no Truncate changed, or one
// written before the file existed) reads as empty.
const (
	rollbacksName    = "ROLLBACKS"
	rollbacksTmpName = "ROLLBACKS.tmp"
)

// readRollbacks is the ROLLBACKS file's content, "" if there is none or it
// cannot be read: a reader compares two of them.
func readRollbacks(fsys vfs.FS, dir string) string {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, rollbacksName))
	if err != nil {
		return ""
	}
	return string(b)
}

// countRollback adds one to the ROLLBACKS file, durably; a file that does
// not hold a count starts again from 1, which differs from what it held.
func countRollback(fsys vfs.FS, dir string) error {
	var n uint64
	if b := readRollbacks(fsys, dir); len(b) == 8 {
		n = binary.LittleEndian.Uint64([]byte(b))
	}
	return vfs.ReplaceFile(fsys, dir, filepath.Join(dir, rollbacksName), filepath.Join(dir, rollbacksTmpName), binary.LittleEndian.AppendUint64(nil, n+1))
}
