// Package vfs is the small filesystem interface that the write-ahead log
// (package wal) is written against, with two implementations: OS, the real
// filesystem, and MemFS, a strict in-memory filesystem that models what
// survives a crash.
//
// The interface holds only what a log needs: whole-file creation and
// removal, append-only writes, reads at an offset, truncation, renames,
// directory listings, fsync of files and directories, and an exclusive
// lock that keeps a second log out of a directory. Paths are
// slash-or-OS-separated strings joined with path/filepath.
//
// Durability model. A file's bytes are durable only once a Sync of that file
// has returned after they were written; a directory entry (a created,
// renamed or removed name) is durable only once a Sync of the directory that
// holds it has returned after the change. MemFS implements exactly this
// model (see MemFS.Crash); the subpackage errorfs injects I/O errors, full
// disks and torn writes into any FS.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// File is an open file. Files from Create and OpenAppend append every Write
// at the end of the file; files from Open are read-only; a directory from
// OpenDir supports only Sync and Close.
type File interface {
	io.Writer
	io.ReaderAt
	io.Closer
	// Sync makes the file's written bytes (or, for a directory, its
	// entries) durable.
	Sync() error
	// Truncate changes the file's size; later appends go to the new end.
	Truncate(size int64) error
	// Size is the file's current size in bytes.
	Size() (int64, error)
}

// FS is a filesystem.
type FS interface {
	// Create creates name (truncating it if it exists) for appending.
	Create(name string) (File, error)
	// OpenAppend opens an existing file for appending at its end.
	OpenAppend(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenDir opens a directory so that it can be synced.
	OpenDir(name string) (File, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string) error
	// Rename renames oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// List returns the names (not paths) of a directory's entries, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size of a file; an error matching fs.ErrNotExist if
	// there is none.
	Stat(name string) (int64, error)
	// Truncate changes the size of a file.
	Truncate(name string, size int64) error
	// Lock takes an exclusive lock named name (a file, created if missing,
	// in a directory that exists; or a directory), held until the
	// returned Closer is closed or the process ends: a second Lock of the
	// name, from this process or another, fails with an error matching
	// ErrLocked. It is what keeps two logs from writing one directory.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is matched by the error of a Lock that someone else holds.
var ErrLocked = errors.New("vfs: locked by another user")

// IsNotExist reports whether err says that a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// SyncDir opens dir, syncs it and closes it.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// ReplaceFile makes data the contents of name, durably and whole: it
// writes them to tmp, syncs it, renames it to name (replacing any file of
// that name) and syncs the directory, dir. A crash leaves the old file or
// the new one, and at worst tmp; a failure before the rename removes tmp,
// which on a full disk held what room was left.
func ReplaceFile(fsys FS, dir, name, tmp string, data []byte) error {
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fsys.Remove(tmp) // best effort: a log's Open removes a leftover too
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	return SyncDir(fsys, dir)
}

// ErrShrank is ReadFile's error for a file shorter than its size a moment
// before: something truncated it as it was read (damage does not).
var ErrShrank = errors.New("the file shrank as it was read")

// ReadFile returns the whole contents of a file.
func ReadFile(fsys FS, name string) ([]byte, error) { return ReadFileInto(fsys, name, nil) }

// ReadFileInto is ReadFile into buf's array when it has room: a pass over
// files of tens of megabytes then clears no new array for each.
func ReadFileInto(fsys FS, name string, buf []byte) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf = Resize(buf, n)
	m, err := f.ReadAt(buf, 0)
	switch {
	case int64(m) == n:
		return buf, nil
	case err == nil || errors.Is(err, io.EOF):
		return buf[:m], fmt.Errorf("%s: %d of its %d bytes read: %w", name, m, n, ErrShrank)
	}
	return buf[:m], err
}

// Resize returns buf resized to n bytes, in its array if it has room (its
// bytes are then whatever it held): a buffer read into again and again.
func Resize(buf []byte, n int64) []byte {
	if int64(cap(buf)) >= n {
		return buf[:n]
	}
	return make([]byte, n)
}
