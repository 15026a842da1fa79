package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// MemFS is a strict in-memory filesystem that models durability: it keeps,
// beside each file's current bytes and each directory's current entries,
// the state that the last Sync made durable, and Crash returns the
// filesystem that a machine would find after losing power at that instant.
//
// Bytes written to a file but not Sync'd are lost in a crash (or, with
// CrashOptions.KeepUnsynced, cut to a prefix, as a torn write); a file
// created, renamed or removed in a directory that was not Sync'd afterwards
// is, after a crash, as it was at that directory's last Sync (a created file
// vanishes, a renamed file is back under its old name, a removed file is
// back). A file's contents belong to the file, not to its name: a file
// renamed after its last Sync keeps its synced bytes under either name.
//
// A MemFS is safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	// The names Locked now. Locks are a process's, not the disk's: the
	// filesystems that Crash and Clone return hold none, as a machine
	// after a crash, or another process, finds none held.
	locks map[string]bool
}

type memNode struct {
	dir bool
	// A file's bytes now, and those made durable by its last Sync.
	data, synced []byte
	// A directory's entries now, and those made durable by its last Sync.
	children, syncedChildren map[string]*memNode
}

func newDir() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}}
}

// NewMem returns an empty MemFS (its root directory exists and is durable).
func NewMem() *MemFS { return &MemFS{root: newDir()} }

func splitPath(name string) []string {
	name = filepath.ToSlash(filepath.Clean(name))
	name = strings.Trim(name, "/")
	if name == "" || name == "." {
		return nil
	}
	return strings.Split(name, "/")
}

// lookup returns the node at name and its parent (nil for the root).
func (m *MemFS) lookup(op, name string) (node, parent *memNode, base string, err error) {
	parts := splitPath(name)
	node = m.root
	for i, p := range parts {
		if !node.dir {
			return nil, nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		parent, base = node, p
		child, ok := node.children[p]
		if !ok {
			if i == len(parts)-1 {
				return nil, parent, base, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
			}
			return nil, nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		node = child
	}
	return node, parent, base, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, parent, base, err := m.lookup("create", name)
	if err != nil && parent == nil {
		return nil, err
	}
	if node != nil {
		if node.dir {
			return nil, &fs.PathError{Op: "create", Path: name, Err: syscall.EISDIR}
		}
		node.data = node.data[:0:0]
		return &memFile{fs: m, node: node, name: name, write: true}, nil
	}
	if parent == nil {
		return nil, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	node = &memNode{}
	parent.children[base] = node
	return &memFile{fs: m, node: node, name: name, write: true}, nil
}

func (m *MemFS) openFile(op, name string, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, _, _, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if node.dir {
		return nil, &fs.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	}
	return &memFile{fs: m, node: node, name: name, write: write}, nil
}

// OpenAppend implements FS.
func (m *MemFS) OpenAppend(name string) (File, error) { return m.openFile("open", name, true) }

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.openFile("open", name, false) }

// OpenDir implements FS.
func (m *MemFS) OpenDir(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, _, _, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if !node.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return &memFile{fs: m, node: node, name: name}, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node := m.root
	for _, p := range splitPath(dir) {
		child, ok := node.children[p]
		if !ok {
			child = newDir()
			node.children[p] = child
		} else if !child.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		node = child
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, oldParent, oldBase, err := m.lookup("rename", oldname)
	if err != nil {
		return err
	}
	if oldParent == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: syscall.EBUSY}
	}
	target, newParent, newBase, err := m.lookup("rename", newname)
	if err != nil && newParent == nil {
		return err
	}
	if target != nil && target.dir {
		return &fs.PathError{Op: "rename", Path: newname, Err: syscall.EISDIR}
	}
	delete(oldParent.children, oldBase)
	newParent.children[newBase] = node
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, parent, base, err := m.lookup("remove", name)
	if err != nil {
		return err
	}
	if parent == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	}
	if node.dir && len(node.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(parent.children, base)
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, _, _, err := m.lookup("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !node.dir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return slices.Sorted(maps.Keys(node.children)), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, _, _, err := m.lookup("stat", name)
	if err != nil {
		return 0, err
	}
	return int64(len(node.data)), nil
}

// Truncate implements FS.
func (m *MemFS) Truncate(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, _, _, err := m.lookup("truncate", name)
	if err != nil {
		return err
	}
	if node.dir {
		return &fs.PathError{Op: "truncate", Path: name, Err: syscall.EISDIR}
	}
	return node.truncate(name, size)
}

func (n *memNode) truncate(name string, size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: name, Err: syscall.EINVAL}
	}
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	return nil
}

// CrashOptions says how much of the data written since the last Sync
// survives a crash.
type CrashOptions struct {
	// KeepUnsynced, if not nil, is called for every file that has unsynced
	// bytes appended after its synced contents, with the file's path and
	// the number of such bytes; it returns how many of them (a prefix)
	// survive. Nil keeps none. A file whose unsynced change is not an
	// append (a truncation below its synced size, say) is always restored
	// to its synced contents.
	KeepUnsynced func(path string, unsynced int) int
	// LosePage, if not nil, is asked about every 4096-byte page of the
	// file (by index, from offset 0) that holds kept unsynced bytes; if it
	// returns true, those bytes read as zeros, as when the OS had written
	// back later pages of the file but not this one.
	LosePage func(path string, page int64) bool
}

// PageSize is the page size of CrashOptions.LosePage.
const PageSize = 4096

// Crash returns a new MemFS holding what would survive if the machine lost
// power now: each directory's entries as of its last Sync, each file's
// bytes as of its last Sync (plus the prefix of later appends that opts
// keeps). m itself is unchanged, and files open on m stay open on m.
func (m *MemFS) Crash(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode, path string) *memNode
	clone = func(n *memNode, path string) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		if n.dir {
			c := newDir()
			seen[n] = c
			for name, child := range n.syncedChildren {
				cc := clone(child, path+"/"+name)
				c.children[name] = cc
				c.syncedChildren[name] = cc
			}
			return c
		}
		data := slices.Clone(n.synced)
		if len(n.data) > len(n.synced) && string(n.data[:len(n.synced)]) == string(n.synced) && opts.KeepUnsynced != nil {
			extra := n.data[len(n.synced):]
			k := opts.KeepUnsynced(path, len(extra))
			k = max(0, min(k, len(extra)))
			data = append(data, extra[:k]...)
			if opts.LosePage != nil {
				for p := int64(len(n.synced)) / PageSize; p*PageSize < int64(len(data)); p++ {
					if opts.LosePage(path, p) {
						lo := max(p*PageSize, int64(len(n.synced)))
						hi := min((p+1)*PageSize, int64(len(data)))
						clear(data[lo:hi])
					}
				}
			}
		}
		c := &memNode{data: data, synced: slices.Clone(data)}
		seen[n] = c
		return c
	}
	return &MemFS{root: clone(m.root, "")}
}

// Lock implements FS.Lock. It creates no file: a lock is not part of what
// a crash leaves.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, parent, _, err := m.lookup("lock", name); err != nil && parent == nil {
		return nil, err
	}
	key := filepath.ToSlash(filepath.Clean(name))
	if m.locks[key] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrLocked}
	}
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	m.locks[key] = true
	return memLock{m, key}, nil
}

type memLock struct {
	m   *MemFS
	key string
}

func (l memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.locks, l.key)
	return nil
}

// Clone returns a copy of m as it is now, durable and not yet durable
// state alike (as if m's files were all closed).
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		c := &memNode{dir: n.dir, data: slices.Clone(n.data), synced: slices.Clone(n.synced)}
		seen[n] = c
		if n.dir {
			c.children = map[string]*memNode{}
			c.syncedChildren = map[string]*memNode{}
			for name, child := range n.children {
				c.children[name] = clone(child)
			}
			for name, child := range n.syncedChildren {
				c.syncedChildren[name] = clone(child)
			}
		}
		return c
	}
	return &MemFS{root: clone(m.root)}
}

// String lists every file with its size and synced size, and marks entries
// that are not durable, for test failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(n *memNode, path string)
	walk = func(n *memNode, path string) {
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			mark := ""
			if n.syncedChildren[name] != c {
				mark = " (entry not synced)"
			}
			if c.dir {
				fmt.Fprintf(&b, "%s/%s/%s\n", path, name, mark)
				walk(c, path+"/"+name)
			} else {
				fmt.Fprintf(&b, "%s/%s %d bytes, %d synced%s\n", path, name, len(c.data), len(c.synced), mark)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			if _, ok := n.children[name]; !ok {
				fmt.Fprintf(&b, "%s/%s (removed, removal not synced)\n", path, name)
			}
		}
	}
	walk(m.root, "")
	return b.String()
}

type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	write  bool
	closed bool
}

func (f *memFile) check(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.write || f.node.dir {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if f.node.dir {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EISDIR}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	if f.node.dir {
		f.node.syncedChildren = maps.Clone(f.node.children)
	} else {
		f.node.synced = slices.Clone(f.node.data)
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if !f.write || f.node.dir {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EBADF}
	}
	return f.node.truncate(f.name, size)
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}
