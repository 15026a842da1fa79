// Package errorfs wraps a vfs.FS and injects faults into its operations:
// an error such as EIO or ENOSPC in place of an operation, or a torn write
// (a prefix of the bytes is written, then the write fails). Which operation
// fails is decided by an Injector; OnIndex fails the N-th operation of
// chosen kinds, which is what a test sweeping every write and sync point of
// a scripted run needs, and Func lets a test observe every operation (to
// simulate a crash at that point with vfs.MemFS.Crash, say).
//
// The design follows the idea of Pebble's vfs/errorfs (an injector
// consulted before each operation); the code is our own.
package errorfs

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/timerlane/timerlane/internal/vfs"
)

// OpKind is a kind of filesystem operation.
type OpKind uint8

// The kinds of operation an FS reports to its Injector.
const (
	OpCreate       OpKind = iota // FS.Create
	OpOpenAppend                 // FS.OpenAppend
	OpOpen                       // FS.Open
	OpOpenDir                    // FS.OpenDir
	OpMkdirAll                   // FS.MkdirAll
	OpRename                     // FS.Rename
	OpRemove                     // FS.Remove
	OpList                       // FS.List
	OpStat                       // FS.Stat
	OpTruncate                   // FS.Truncate
	OpWrite                      // File.Write
	OpSync                       // File.Sync of a file
	OpSyncDir                    // File.Sync of a directory
	OpFileTruncate               // File.Truncate
	OpRead                       // File.ReadAt
	OpSize                       // File.Size
	OpClose                      // File.Close
	numOpKinds
)

var opNames = [...]string{"create", "open-append", "open", "open-dir", "mkdir-all", "rename", "remove", "list", "stat", "truncate", "write", "sync", "sync-dir", "file-truncate", "read", "size", "close"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Kinds is a set of operation kinds.
type Kinds uint32

// Of returns the set of the given kinds.
func Of(kinds ...OpKind) Kinds {
	var s Kinds
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in s.
func (s Kinds) Has(k OpKind) bool { return s&(1<<k) != 0 }

// Sets of kinds.
var (
	// Writes are the operations that change the filesystem.
	Writes = Of(OpCreate, OpMkdirAll, OpRename, OpRemove, OpTruncate, OpWrite, OpSync, OpSyncDir, OpFileTruncate)
	// Syncs are file and directory syncs.
	Syncs = Of(OpSync, OpSyncDir)
	// Reads are the operations that only read.
	Reads = Of(OpOpenAppend, OpOpen, OpOpenDir, OpList, OpStat, OpRead, OpSize)
	// All is every kind but Close (closing never fails here).
	All = Writes | Reads
)

// Op is one operation, as shown to an Injector.
type Op struct {
	Kind OpKind
	Path string // the file or directory (for Rename, the old name)
	Len  int    // for OpWrite and OpRead, the number of bytes to write or read
}

func (op Op) String() string {
	if op.Kind == OpWrite || op.Kind == OpRead {
		return fmt.Sprintf("%s %s (%d bytes)", op.Kind, op.Path, op.Len)
	}
	return fmt.Sprintf("%s %s", op.Kind, op.Path)
}

// Fault is what an Injector does to an operation. The zero Fault lets it
// through.
type Fault struct {
	// Err, if not nil, fails the operation with an *Error wrapping Err
	// (syscall.EIO, syscall.ENOSPC, ...).
	Err error
	// Torn, for OpWrite with Err set, first writes the first Keep bytes of
	// the buffer (at most len-1), as a write cut short by a crash or a full
	// disk would.
	Torn bool
	Keep int
}

// Injector decides the fate of each operation.
type Injector interface {
	Inject(op Op) Fault
}

// Func is an Injector made of a function.
type Func func(op Op) Fault

// Inject implements Injector.
func (f Func) Inject(op Op) Fault { return f(op) }

// ErrInjected is matched (errors.Is) by every error this package injects.
var ErrInjected = errors.New("injected fault")

// The errors a test usually injects.
var (
	EIO    = syscall.EIO
	ENOSPC = syscall.ENOSPC
)

// Error is an injected failure of an operation. It matches both its Err
// (errors.Is(err, syscall.ENOSPC)) and ErrInjected.
type Error struct {
	Op  Op
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v (injected)", e.Op, e.Err) }

// Unwrap returns Err and ErrInjected.
func (e *Error) Unwrap() []error { return []error{e.Err, ErrInjected} }

// Index is an Injector that faults the N-th (0-based) operation whose kind
// is in a set, and, if Sticky, every later one of those kinds too. It
// counts the operations it sees, so a first clean run with an Index that
// never fires (N < 0) tells how many points a sweep must cover.
type Index struct {
	mu     sync.Mutex
	n      int
	kinds  Kinds
	fault  Fault
	sticky bool
	seen   int
	fired  *Op
}

// OnIndex returns an Index faulting the n-th operation of the given kinds
// with fault; n < 0 never fires.
func OnIndex(n int, kinds Kinds, fault Fault) *Index {
	return &Index{n: n, kinds: kinds, fault: fault}
}

// Sticky makes every operation of the kinds after the n-th fail too (a disk
// that stays full or broken). It returns ii.
func (ii *Index) Sticky() *Index {
	ii.mu.Lock()
	ii.sticky = true
	ii.mu.Unlock()
	return ii
}

// Inject implements Injector.
func (ii *Index) Inject(op Op) Fault {
	ii.mu.Lock()
	defer ii.mu.Unlock()
	if !ii.kinds.Has(op.Kind) {
		return Fault{}
	}
	i := ii.seen
	ii.seen++
	if ii.n < 0 || i < ii.n || (i > ii.n && !ii.sticky) {
		return Fault{}
	}
	if ii.fired == nil {
		op := op
		ii.fired = &op
	}
	return ii.fault
}

// Count is the number of operations of the kinds seen so far.
func (ii *Index) Count() int {
	ii.mu.Lock()
	defer ii.mu.Unlock()
	return ii.seen
}

// Fired returns the operation that was faulted first, if any.
func (ii *Index) Fired() (Op, bool) {
	ii.mu.Lock()
	defer ii.mu.Unlock()
	if ii.fired == nil {
		return Op{}, false
	}
	return *ii.fired, true
}

// FS is a vfs.FS that consults an Injector before each operation.
type FS struct {
	fs  vfs.FS
	inj Injector
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns fs with faults injected by inj.
func Wrap(fs vfs.FS, inj Injector) *FS { return &FS{fs: fs, inj: inj} }

// Inner returns the wrapped FS.
func (e *FS) Inner() vfs.FS { return e.fs }

func (e *FS) check(kind OpKind, path string) error {
	op := Op{Kind: kind, Path: path}
	if f := e.inj.Inject(op); f.Err != nil {
		return &Error{Op: op, Err: f.Err}
	}
	return nil
}

func (e *FS) wrap(f vfs.File, name string, dir bool) vfs.File {
	return &file{f: f, name: name, dir: dir, inj: e.inj}
}

// Create implements vfs.FS.
func (e *FS) Create(name string) (vfs.File, error) {
	if err := e.check(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return e.wrap(f, name, false), nil
}

// OpenAppend implements vfs.FS.
func (e *FS) OpenAppend(name string) (vfs.File, error) {
	if err := e.check(OpOpenAppend, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return e.wrap(f, name, false), nil
}

// Open implements vfs.FS.
func (e *FS) Open(name string) (vfs.File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return e.wrap(f, name, false), nil
}

// OpenDir implements vfs.FS.
func (e *FS) OpenDir(name string) (vfs.File, error) {
	if err := e.check(OpOpenDir, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return e.wrap(f, name, true), nil
}

// MkdirAll implements vfs.FS.
func (e *FS) MkdirAll(dir string) error {
	if err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir)
}

// Rename implements vfs.FS.
func (e *FS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

// Remove implements vfs.FS.
func (e *FS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

// List implements vfs.FS.
func (e *FS) List(dir string) ([]string, error) {
	if err := e.check(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

// Lock implements vfs.FS: it takes the wrapped FS's lock, with no fault
// injected (a lock holds no data).
func (e *FS) Lock(name string) (io.Closer, error) { return e.fs.Lock(name) }

// Stat implements vfs.FS.
func (e *FS) Stat(name string) (int64, error) {
	if err := e.check(OpStat, name); err != nil {
		return 0, err
	}
	return e.fs.Stat(name)
}

// Truncate implements vfs.FS.
func (e *FS) Truncate(name string, size int64) error {
	if err := e.check(OpTruncate, name); err != nil {
		return err
	}
	return e.fs.Truncate(name, size)
}

type file struct {
	f    vfs.File
	name string
	dir  bool
	inj  Injector
}

func (f *file) check(kind OpKind) error {
	op := Op{Kind: kind, Path: f.name}
	if ft := f.inj.Inject(op); ft.Err != nil {
		return &Error{Op: op, Err: ft.Err}
	}
	return nil
}

func (f *file) Write(p []byte) (int, error) {
	op := Op{Kind: OpWrite, Path: f.name, Len: len(p)}
	ft := f.inj.Inject(op)
	if ft.Err == nil {
		return f.f.Write(p)
	}
	n := 0
	if ft.Torn && len(p) > 0 {
		keep := max(0, min(ft.Keep, len(p)-1))
		var err error
		if n, err = f.f.Write(p[:keep]); err != nil {
			return n, err
		}
	}
	return n, &Error{Op: op, Err: ft.Err}
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	op := Op{Kind: OpRead, Path: f.name, Len: len(p)}
	if ft := f.inj.Inject(op); ft.Err != nil {
		return 0, &Error{Op: op, Err: ft.Err}
	}
	return f.f.ReadAt(p, off)
}

func (f *file) Sync() error {
	kind := OpSync
	if f.dir {
		kind = OpSyncDir
	}
	if err := f.check(kind); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.check(OpFileTruncate); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *file) Size() (int64, error) {
	if err := f.check(OpSize); err != nil {
		return 0, err
	}
	return f.f.Size()
}

// Close is never faulted (its errors are not actionable), but it is shown
// to the Injector.
func (f *file) Close() error {
	f.inj.Inject(Op{Kind: OpClose, Path: f.name})
	return f.f.Close()
}
