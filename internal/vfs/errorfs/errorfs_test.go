package errorfs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
)

func TestOnIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		kinds  Kinds
		fault  Fault
		sticky bool
		// want[i]: whether the i-th of five writes fails
		want [5]bool
	}{
		{"never", -1, Writes, Fault{Err: EIO}, false, [5]bool{}},
		{"first write", 0, Of(OpWrite), Fault{Err: EIO}, false, [5]bool{true}},
		{"third write", 2, Of(OpWrite), Fault{Err: ENOSPC}, false, [5]bool{false, false, true}},
		{"third write, sticky", 2, Of(OpWrite), Fault{Err: ENOSPC}, true, [5]bool{false, false, true, true, true}},
		{"syncs only", 0, Syncs, Fault{Err: EIO}, false, [5]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ii := OnIndex(tc.n, tc.kinds, tc.fault)
			if tc.sticky {
				ii.Sticky()
			}
			fsys := Wrap(vfs.NewMem(), ii)
			f, err := fsys.Create("/f")
			if tc.kinds.Has(OpCreate) && tc.n == 0 {
				if err == nil {
					t.Fatal("create did not fail")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				_, err := f.Write([]byte("abc"))
				if got := err != nil; got != tc.want[i] {
					t.Fatalf("write %d: err %v, want failure %v", i, err, tc.want[i])
				}
				if err != nil {
					if !errors.Is(err, tc.fault.Err) || !errors.Is(err, ErrInjected) {
						t.Fatalf("error %v does not match %v and ErrInjected", err, tc.fault.Err)
					}
					var e *Error
					if !errors.As(err, &e) || e.Op.Kind != OpWrite || e.Op.Path != "/f" || e.Op.Len != 3 {
						t.Fatalf("error %#v", err)
					}
				}
			}
		})
	}
}

func TestTornWrite(t *testing.T) {
	mem := vfs.NewMem()
	ii := OnIndex(1, Of(OpWrite), Fault{Err: EIO, Torn: true, Keep: 2})
	fsys := Wrap(mem, ii)
	f, err := fsys.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	n, err := f.Write([]byte("second"))
	if n != 2 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("torn write: %d, %v", n, err)
	}
	b, _ := vfs.ReadFile(mem, "/f")
	if string(b) != "firstse" {
		t.Fatalf("content %q", b)
	}
	if op, ok := ii.Fired(); !ok || op.Kind != OpWrite || op.Len != 6 {
		t.Fatalf("fired %v %v", op, ok)
	}
	// Keep is capped below the write's length: a torn write never writes
	// everything.
	ii = OnIndex(0, Of(OpWrite), Fault{Err: ENOSPC, Torn: true, Keep: 100})
	f, _ = Wrap(mem, ii).Create("/g")
	if n, err := f.Write([]byte("xyz")); n != 2 || err == nil {
		t.Fatalf("capped torn write: %d %v", n, err)
	}
}

func TestCountAndEveryKind(t *testing.T) {
	ii := OnIndex(-1, All, Fault{})
	fsys := Wrap(vfs.NewMem(), ii)
	var kinds []OpKind
	rec := Func(func(op Op) Fault { kinds = append(kinds, op.Kind); return ii.Inject(op) })
	fsys = Wrap(vfs.NewMem(), rec)
	steps := []func() error{
		func() error { return fsys.MkdirAll("/d") },
		func() error {
			f, err := fsys.Create("/d/a")
			if err != nil {
				return err
			}
			if _, err := f.Write([]byte("x")); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			if err := f.Truncate(0); err != nil {
				return err
			}
			if _, err := f.Size(); err != nil {
				return err
			}
			if _, err := f.ReadAt(make([]byte, 1), 0); err == nil {
				return errors.New("read past the end succeeded")
			}
			return f.Close()
		},
		func() error { return vfs.SyncDir(fsys, "/d") },
		func() error { return fsys.Rename("/d/a", "/d/b") },
		func() error { _, err := fsys.List("/d"); return err },
		func() error { _, err := fsys.Stat("/d/b"); return err },
		func() error { return fsys.Truncate("/d/b", 0) },
		func() error { f, err := fsys.OpenAppend("/d/b"); f.Close(); return err },
		func() error { f, err := fsys.Open("/d/b"); f.Close(); return err },
		func() error { return fsys.Remove("/d/b") },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []OpKind{OpMkdirAll, OpCreate, OpWrite, OpSync, OpFileTruncate, OpSize, OpRead, OpClose,
		OpOpenDir, OpSyncDir, OpClose, OpRename, OpList, OpStat, OpTruncate, OpOpenAppend, OpClose, OpOpen, OpClose, OpRemove}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	if got := ii.Count(); got != len(want)-4 { // Close is not in All
		t.Fatalf("count %d", got)
	}
}
