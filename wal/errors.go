package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/timerlane/timerlane/internal/vfs"
)

var (
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("wal: corrupt")
	// ErrFailed is matched by the error of every call on a Log after a
	// write, sync, create, rename or remove failed: the log refuses further
	// writes until it is closed and reopened, so that what it holds in
	// memory never runs ahead of what its files say.
	ErrFailed = errors.New("wal: log failed (close and reopen it)")
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("wal: log closed")
	// ErrHeight is returned by Append, WriteSnapshot and Truncate for a
	// height out of sequence; the log is unchanged and still usable.
	ErrHeight = errors.New("wal: height out of sequence")
	// ErrTooLarge is returned by Append for a body above
	// Options.MaxBodySize; the log is unchanged and still usable.
	ErrTooLarge = errors.New("wal: body too large")
	// ErrNeedSnapshot is returned by Truncate, given no snapshot function,
	// for a height that nothing left in the log could recover the state
	// at; the log is unchanged and still usable.
	ErrNeedSnapshot = errors.New("wal: truncation needs a snapshot at the height")
	// ErrLocked is returned by Open and Repair for a directory that an open
	// Log already holds, in this process or another: two writers would
	// interleave their records and cut each other's tails. The directory
	// is untouched.
	ErrLocked = errors.New("wal: log directory in use")
	// ErrReadOnly is returned by Append, Sync, WriteSnapshot,
	// WriteSnapshotFunc, StartSnapshot and Truncate on a Log opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("wal: log opened read-only")
	// ErrNoBase is returned by Repair for a log that has no valid snapshot
	// and whose first segment does not start the log, or whose damage
	// lies in the log's first record: no state can be recovered from what
	// is left, and cutting segments would only make it look like a new,
	// empty log. Repair changes nothing then.
	ErrNoBase = errors.New("wal: no valid snapshot, and no whole start of the log")
	// ErrChanged is returned by a read-only Open, Replay or Check that
	// failed while the log's files changed under it: a writer beside it
	// appended, truncated (a rollback) or removed them; Log.UnlessChanged
	// adds it to the failure of a use of what such a Log read. It says
	// nothing of damage (it never matches ErrCorrupt): read again.
	ErrChanged = errors.New("wal: the log's files changed as they were read (a writer beside the reader); read again")
)

// changedError is ErrChanged with what the read found, which a writer's
// change explains: the message keeps it, errors.Is only ErrChanged.
func changedError(err error) error { return fmt.Errorf("%w: %v", ErrChanged, err) }

// dirState lists the names and sizes of the files in dir: a reader that
// fails compares it with the state it began with, to tell a writer's
// change from damage.
func dirState(fsys FS, dir string) string {
	names, err := fsys.List(dir)
	if err != nil {
		return "list: " + err.Error()
	}
	var b strings.Builder
	for _, n := range names {
		size, err := fsys.Stat(filepath.Join(dir, n))
		if err != nil {
			size = -1
		}
		fmt.Fprintf(&b, "%s %d\n", n, size)
	}
	n, err := rollbacksSeen(fsys, dir) // a rollback can keep every name and size
	fmt.Fprintf(&b, "%s %d %v\n", rollbacksName, n, err)
	return b.String()
}

// unlessChanged is err, or ErrChanged if a file shrank as it was read,
// or if dir's files are no longer the ones the failed read began with
// (before). Either alone can miss a change: a rollback can bring a file
// back to the size it had before the read, and a file can shrink and grow
// again between two reads of its size.
func unlessChanged(fsys FS, dir, before string, err error) error {
	if err != nil && !errors.Is(err, ErrChanged) && (errors.Is(err, vfs.ErrShrank) || dirState(fsys, dir) != before) {
		return changedError(err)
	}
	return err
}

// CorruptError says that a file of the log does not hold what the log
// wrote, at a place where a crash cannot explain it (anywhere but the end
// of the last segment). Open does not skip it; Repair truncates there.
type CorruptError struct {
	Segment string // the file's name in the log's directory (a segment or a snapshot)
	Offset  int64  // where in the file the bad record, header or chunk starts
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt: %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// FailedError is the failure that put a Log in the failed state: the
// operation and the filesystem's error. It matches ErrFailed and its Err
// (errors.Is(err, syscall.ENOSPC), say).
type FailedError struct {
	Op  string // "append", "sync", "rotate", "snapshot", "truncate", "close"
	Err error
}

func (e *FailedError) Error() string {
	if errors.Is(e.Err, syscall.ENOSPC) {
		// Reopened on a disk still full, it fails again at its first write.
		return fmt.Sprintf("wal: %s: %v (the log refuses further writes until reopened; free space on the disk first)", e.Op, e.Err)
	}
	return fmt.Sprintf("wal: %s: %v (the log refuses further writes until reopened)", e.Op, e.Err)
}

// Unwrap returns Err and ErrFailed.
func (e *FailedError) Unwrap() []error { return []error{e.Err, ErrFailed} }
