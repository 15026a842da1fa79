package wal

import (
	"slices"
	"strings"
	"sync"

	"github.com/timerlane/timerlane/internal/vfs"
)

// heldFS is a read-only Log's filesystem from Open until its first Replay
// returns (or Close): the first Open of a segment or a snapshot keeps the
// file open, and every later Open of that name reads the same file.
// Recovery reads its snapshot and segments twice (Open checks them,
// OpenSnapshot and Replay read them again), and a writer beside it
// removes its older files as it writes new ones: with a snapshot every
// few records, the snapshot was often gone by the second read (the fault
// soak of session 42: 12 to 26 of about 940 read-only opens failed with
// "no such file" after three tries). A held file still reads as it was
// once removed. At most maxHeld files are held. NEWEST and ROLLBACKS are
// not held: the writer replaces them whole, and the reader reads them
// again to see a change. Windows refuses to remove a file open for
// reading: there nothing is held, so that a reader never makes a
// writer's removal fail.
type heldFS struct {
	vfs.FS
	mu    sync.Mutex
	files []heldFile // in the order opened, at most maxHeld
	done  bool       // released: Open passes through
}

// maxHeld bounds the files held: a read-only Open from the newest
// snapshot reads it and a segment or two after it, but one of a log
// without a snapshot reads every segment from the log's start (1,339
// files for session 43's review), which could pass the process's limit
// on open files. Past the bound, files are read as before, by name.
const maxHeld = 16

// heldFile is a held file as Open returns it: Close leaves it open.
type heldFile struct {
	vfs.File
	name string
}

func (heldFile) Close() error { return nil }

func (h *heldFS) Open(name string) (vfs.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || !strings.HasSuffix(name, segSuffix) && !strings.HasSuffix(name, snapSuffix) {
		return h.FS.Open(name)
	}
	for _, f := range h.files {
		if f.name == name {
			return f, nil
		}
	}
	f, err := h.FS.Open(name)
	if err != nil || len(h.files) == maxHeld {
		return f, err
	}
	held := heldFile{File: f, name: name}
	h.files = append(h.files, held)
	return held, nil
}

// take is Open for a caller that keeps the file past the release: a held
// file is no longer held, and its Close closes it.
func (h *heldFS) take(name string) (vfs.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, f := range h.files {
		if f.name == name {
			h.files = slices.Delete(h.files, k, k+1)
			return f.File, nil
		}
	}
	return h.FS.Open(name)
}

// release closes every held file; later Opens hold nothing.
func (h *heldFS) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.files {
		f.File.Close() // read-only: nothing to lose
	}
	h.files, h.done = nil, true
}

// release ends l's holding of the files it read, if it held them.
func (l *Log) release() {
	if l.held != nil {
		l.held.release()
	}
}
