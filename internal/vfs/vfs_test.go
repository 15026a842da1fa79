package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

func write(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

// TestFSBasics runs the same checks on the OS filesystem and on MemFS.
func TestFSBasics(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		dir  func(t *testing.T) string
	}{
		{"os", OS, func(t *testing.T) string { return t.TempDir() }},
		{"mem", NewMem(), func(*testing.T) string { return "/data" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := tc.fs, filepath.Join(tc.dir(t), "log")
			must(t, fsys.MkdirAll(dir))
			a := filepath.Join(dir, "a")
			f, err := fsys.Create(a)
			must(t, err)
			write(t, f, "hello ")
			write(t, f, "world")
			must(t, f.Sync())
			if n, err := f.Size(); err != nil || n != 11 {
				t.Fatalf("size %d %v", n, err)
			}
			buf := make([]byte, 5)
			if n, err := f.ReadAt(buf, 6); n != 5 || string(buf) != "world" || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt: %d %q %v", n, buf, err)
			}
			if n, err := f.ReadAt(buf, 9); n != 2 || err != io.EOF {
				t.Fatalf("ReadAt past the end: %d %v", n, err)
			}
			must(t, f.Truncate(5))
			write(t, f, "!")
			must(t, f.Close())
			if got := content(t, fsys, a); got != "hello!" {
				t.Fatalf("content %q", got)
			}
			f, err = fsys.OpenAppend(a)
			must(t, err)
			write(t, f, "?")
			must(t, f.Close())
			if got := content(t, fsys, a); got != "hello!?" {
				t.Fatalf("content after append %q", got)
			}
			must(t, fsys.Truncate(a, 2))
			if n, err := fsys.Stat(a); err != nil || n != 2 {
				t.Fatalf("stat %d %v", n, err)
			}
			b := filepath.Join(dir, "b")
			must(t, fsys.Rename(a, b))
			if _, err := fsys.Stat(a); !IsNotExist(err) {
				t.Fatalf("stat of renamed file: %v", err)
			}
			f, err = fsys.Create(filepath.Join(dir, "c"))
			must(t, err)
			must(t, f.Close())
			names, err := fsys.List(dir)
			must(t, err)
			if !slices.Equal(names, []string{"b", "c"}) {
				t.Fatalf("list %v", names)
			}
			must(t, SyncDir(fsys, dir))
			must(t, fsys.Remove(b))
			if _, err := fsys.Open(b); !IsNotExist(err) {
				t.Fatalf("open of removed file: %v", err)
			}
			if _, err := fsys.OpenAppend(b); !IsNotExist(err) {
				t.Fatalf("open-append of removed file: %v", err)
			}
			r, err := fsys.Open(filepath.Join(dir, "c"))
			must(t, err)
			if _, err := r.Write([]byte("x")); err == nil {
				t.Fatal("write to a read-only file succeeded")
			}
			must(t, r.Close())
		})
	}
}

func TestMemCrashDropsUnsyncedData(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d"))
	must(t, SyncDir(m, "/"))
	f, err := m.Create("/d/f")
	must(t, err)
	must(t, SyncDir(m, "/d"))
	write(t, f, "synced")
	must(t, f.Sync())
	write(t, f, "+lost")
	if got := content(t, m, "/d/f"); got != "synced+lost" {
		t.Fatalf("before crash %q", got)
	}
	c := m.Crash(CrashOptions{})
	if got := content(t, c, "/d/f"); got != "synced" {
		t.Fatalf("after crash %q", got)
	}
	// A torn write: a prefix of the unsynced bytes survives.
	c = m.Crash(CrashOptions{KeepUnsynced: func(path string, n int) int {
		if path != "/d/f" || n != 5 {
			t.Errorf("KeepUnsynced(%q, %d)", path, n)
		}
		return 2
	}})
	if got := content(t, c, "/d/f"); got != "synced+l" {
		t.Fatalf("torn %q", got)
	}
	// The original is untouched and usable.
	write(t, f, "!")
	must(t, f.Sync())
	if got := content(t, m.Crash(CrashOptions{}), "/d/f"); got != "synced+lost!" {
		t.Fatalf("after a later sync %q", got)
	}
	// A truncation that was not synced is undone.
	must(t, f.Truncate(3))
	if got := content(t, m.Crash(CrashOptions{KeepUnsynced: func(string, int) int { return 100 }}), "/d/f"); got != "synced+lost!" {
		t.Fatalf("unsynced truncation %q", got)
	}
}

func TestMemCrashLosePage(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/f")
	must(t, err)
	must(t, SyncDir(m, "/"))
	data := make([]byte, 3*PageSize)
	for i := range data {
		data[i] = 0xff
	}
	_, err = f.Write(data[:100])
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write(data[100:])
	must(t, err)
	c := m.Crash(CrashOptions{
		KeepUnsynced: func(_ string, n int) int { return n },
		LosePage:     func(_ string, p int64) bool { return p != 1 },
	})
	got, err := ReadFile(c, "/f")
	must(t, err)
	if len(got) != len(data) {
		t.Fatalf("length %d", len(got))
	}
	for i, b := range got {
		want := byte(0)
		if i < 100 || (i >= PageSize && i < 2*PageSize) {
			want = 0xff
		}
		if b != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b, want)
		}
	}
}

func TestMemCrashDirectoryEntries(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d"))
	// The directory itself is not durable until its parent is synced.
	if _, err := m.Crash(CrashOptions{}).List("/d"); !IsNotExist(err) {
		t.Fatalf("unsynced mkdir survived: %v", err)
	}
	must(t, SyncDir(m, "/"))

	f, err := m.Create("/d/a")
	must(t, err)
	write(t, f, "A")
	must(t, f.Sync())
	if _, err := m.Crash(CrashOptions{}).Stat("/d/a"); !IsNotExist(err) {
		t.Fatalf("file created in an unsynced directory survived: %v", err)
	}
	must(t, SyncDir(m, "/d"))
	if got := content(t, m.Crash(CrashOptions{}), "/d/a"); got != "A" {
		t.Fatalf("synced file %q", got)
	}

	// Rename: the old name until the directory is synced.
	must(t, m.Rename("/d/a", "/d/b"))
	c := m.Crash(CrashOptions{})
	if got := content(t, c, "/d/a"); got != "A" {
		t.Fatalf("unsynced rename: old name holds %q", got)
	}
	if _, err := c.Stat("/d/b"); !IsNotExist(err) {
		t.Fatalf("unsynced rename: new name exists: %v", err)
	}
	must(t, SyncDir(m, "/d"))
	c = m.Crash(CrashOptions{})
	if names, _ := c.List("/d"); !slices.Equal(names, []string{"b"}) {
		t.Fatalf("after synced rename: %v", names)
	}

	// Remove: back until the directory is synced.
	must(t, m.Remove("/d/b"))
	if got := content(t, m.Crash(CrashOptions{}), "/d/b"); got != "A" {
		t.Fatalf("unsynced remove: %q", got)
	}
	must(t, SyncDir(m, "/d"))
	if _, err := m.Crash(CrashOptions{}).Stat("/d/b"); !IsNotExist(err) {
		t.Fatalf("synced remove: %v", err)
	}
}

func TestMemErrors(t *testing.T) {
	m := NewMem()
	if _, err := m.Create("/missing/f"); !IsNotExist(err) {
		t.Fatalf("create in a missing directory: %v", err)
	}
	must(t, m.MkdirAll("/d"))
	f, err := m.Create("/d/f")
	must(t, err)
	must(t, f.Close())
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("write after close")
	}
	if err := m.Remove("/d"); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	if err := m.MkdirAll("/d/f/g"); err == nil {
		t.Fatal("mkdir under a file")
	}
	if _, err := m.Stat("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat: %v", err)
	}
}

// TestLock: a held lock refuses a second Lock of the name (ErrLocked)
// until it is closed, on the OS filesystem (flock, which also refuses the
// same process) and on MemFS, whose Crash and Clone copies hold none.
func TestLock(t *testing.T) {
	mem := NewMem()
	must(t, mem.MkdirAll("/d"))
	must(t, SyncDir(mem, "/")) // /d survives a crash
	for _, tc := range []struct {
		name string
		fs   FS
		dir  string
	}{
		{"os", OS, t.TempDir()},
		{"mem", mem, "/d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(tc.dir, "LOCK")
			l, err := tc.fs.Lock(name)
			must(t, err)
			if _, err := tc.fs.Lock(name); !errors.Is(err, ErrLocked) {
				t.Fatalf("second Lock: %v, want ErrLocked", err)
			}
			other, err := tc.fs.Lock(filepath.Join(tc.dir, "OTHER"))
			must(t, err) // another name is another lock
			must(t, other.Close())
			must(t, l.Close())
			l, err = tc.fs.Lock(name)
			must(t, err) // free again once closed
			defer l.Close()
			if _, err := tc.fs.Lock(filepath.Join(tc.dir, "missing", "LOCK")); !IsNotExist(err) {
				t.Fatalf("Lock in a missing directory: %v, want not-exist", err)
			}
			// A directory is a name too, locked apart from the files in it.
			d, err := tc.fs.Lock(tc.dir)
			must(t, err)
			if _, err := tc.fs.Lock(tc.dir); !errors.Is(err, ErrLocked) {
				t.Fatalf("second Lock of the directory: %v, want ErrLocked", err)
			}
			must(t, d.Close())
			d, err = tc.fs.Lock(tc.dir)
			must(t, err)
			must(t, d.Close())
		})
	}
	// A crash or a copy starts with no lock held: the locks were the
	// process's.
	for name, fs := range map[string]*MemFS{"crash": mem.Crash(CrashOptions{}), "clone": mem.Clone()} {
		l, err := fs.Lock("/d/LOCK")
		if err != nil {
			t.Fatalf("%s: Lock: %v", name, err)
		}
		l.Close()
	}
}

// TestReplaceFile: the new contents survive a crash whole, in place of
// the old, on both file systems; the temporary file is gone.
func TestReplaceFile(t *testing.T) {
	for name, fsys := range map[string]FS{"mem": NewMem(), "os": OS} {
		t.Run(name, func(t *testing.T) {
			dir := "/d"
			if name == "os" {
				dir = t.TempDir()
			} else {
				must(t, fsys.MkdirAll(dir))
				must(t, SyncDir(fsys, "/")) // the directory's own entry survives
			}
			path, tmp := filepath.Join(dir, "f"), filepath.Join(dir, "f.tmp")
			for _, data := range []string{"old", "new contents"} {
				if err := ReplaceFile(fsys, dir, path, tmp, []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			if m, ok := fsys.(*MemFS); ok {
				fsys = m.Crash(CrashOptions{})
			}
			got, err := ReadFile(fsys, path)
			if err != nil || string(got) != "new contents" {
				t.Fatalf("read %q, %v", got, err)
			}
			if _, err := fsys.Stat(tmp); !IsNotExist(err) {
				t.Fatalf("the temporary file: %v", err)
			}
		})
	}
}

// TestReadFileInto reads files into one buffer: a file that fits takes the
// buffer's array, a larger one a new array, and every read gives exactly
// the file's bytes, none of a longer file read before.
func TestReadFileInto(t *testing.T) {
	fsys := NewMem()
	must(t, fsys.MkdirAll("/d"))
	put := func(name, s string) string {
		p := filepath.Join("/d", name)
		f, err := fsys.Create(p)
		must(t, err)
		write(t, f, s)
		must(t, f.Close())
		return p
	}
	long, short, empty := put("long", "0123456789"), put("short", "abc"), put("empty", "")
	buf := make([]byte, 0, 10)
	for _, tc := range []struct {
		path, want string
		inBuf      bool
	}{
		{long, "0123456789", true},
		{short, "abc", true},
		{empty, "", true},
		{put("longer", "0123456789A"), "0123456789A", false},
	} {
		got, err := ReadFileInto(fsys, tc.path, buf)
		must(t, err)
		if string(got) != tc.want {
			t.Fatalf("%s: read %q, want %q", tc.path, got, tc.want)
		}
		if same := cap(got) > 0 && &got[:1][0] == &buf[:1][0]; same != tc.inBuf {
			t.Fatalf("%s: in the buffer's array %v, want %v", tc.path, same, tc.inBuf)
		}
	}
	if _, err := ReadFileInto(fsys, "/d/none", buf); !IsNotExist(err) {
		t.Fatalf("a missing file: %v", err)
	}
}
