package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"sync"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// tracker follows a scripted run: the highest height whose Append was
// called, and the highest known durable (its Append under SyncEveryBlock,
// or a later Sync, returned nil).
type tracker struct {
	attempted uint64
	acked     uint64
}

// liveTracker is the tracker of a run in progress, which a fault
// injector reads from the goroutine of a background snapshot.
type liveTracker struct {
	mu sync.Mutex
	t  tracker
}

func (lt *liveTracker) get() tracker {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.t
}

func (lt *liveTracker) set(f func(t *tracker)) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	f(&lt.t)
}

// The scripted run of the fault matrix: open, blocks, a snapshot, more
// blocks, two more snapshots (the third removes the first and the segments
// only it needed), more blocks, close. Segments are small so that it
// rotates often; the snapshot at 20 is more than one chunk.
const scriptLast = 30

func runScript(fsys vfs.FS, opts Options, background bool, tr *liveTracker) (err error) {
	l, err := Open(fsys, "/wal", opts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		// After a failure, the log refuses everything until reopened.
		if err2 := l.Append(l.LastHeight()+1, nil); !errors.Is(err2, ErrFailed) {
			err = fmt.Errorf("%w; and then an Append returned %v, not ErrFailed", err, err2)
		}
		if err2 := l.Close(); err2 != nil {
			err = fmt.Errorf("%w; and then Close returned %v", err, err2)
		}
	}()
	blocks := func(from, to uint64) error {
		for h := from; h <= to; h++ {
			tr.set(func(t *tracker) { t.attempted = h })
			if err := l.Append(h, bodyFor(h)); err != nil {
				return fmt.Errorf("append %d: %w", h, err)
			}
			if opts.Sync == SyncEveryBlock {
				tr.set(func(t *tracker) { t.acked = h })
			} else if h%3 == 0 {
				if err := l.Sync(); err != nil {
					return fmt.Errorf("sync at %d: %w", h, err)
				}
				tr.set(func(t *tracker) { t.acked = h })
			}
		}
		return nil
	}
	snap := func(h uint64) error {
		write := l.WriteSnapshot
		if background {
			write = func(h uint64, r io.Reader) error {
				return l.StartSnapshot(h, func(w io.Writer) error { _, err := io.Copy(w, r); return err })
			}
		}
		if err := write(h, bytes.NewReader(stateFor(h))); err != nil {
			return fmt.Errorf("snapshot %d: %w", h, err)
		}
		tr.set(func(t *tracker) { t.acked = max(t.acked, h) }) // both sync the log first
		return nil
	}
	for _, step := range []func() error{
		func() error { return blocks(1, 12) },
		func() error { return snap(12) },
		func() error { return blocks(13, 20) },
		func() error { return snap(20) },
		func() error { return blocks(21, 26) },
		func() error { return snap(26) },
		func() error { return blocks(27, scriptLast) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	tr.set(func(t *tracker) { t.acked = t.attempted })
	return nil
}

// The script's variants: the sync policy, and whether its snapshots are
// written in the background (StartSnapshot) while blocks go on.
var scriptOpts = []struct {
	name       string
	opts       Options
	background bool
}{
	{"SyncEveryBlock", Options{SegmentSize: 1024, Logf: quiet}, false},
	{"SyncNone+Sync", Options{SegmentSize: 1024, Sync: SyncNone, Logf: quiet}, false},
	{"SyncEveryBlock+background", Options{SegmentSize: 1024, Logf: quiet}, true},
	{"SyncNone+Sync+background", Options{SegmentSize: 1024, Sync: SyncNone, Logf: quiet}, true},
}

// verifyState opens what survived and checks that it is the state after a
// block between the last acknowledged one and the last attempted, exactly
// (snapshot payload and every record); then that the log goes on: three
// more blocks, closed, reopened. It opens the log with opts (those it was
// written with, or the defaults), quiet.
func verifyState(fsys vfs.FS, opts Options, tr tracker) error {
	opts.Logf = quiet
	l, err := Open(fsys, "/wal", opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	got, err := checkRecovered(l)
	if err != nil {
		l.Close()
		return fmt.Errorf("reopen: %w", err)
	}
	if got.last < tr.acked || got.last > tr.attempted {
		l.Close()
		return fmt.Errorf("reopen: recovered the state after block %d (snapshot %d); acknowledged %d, attempted %d", got.last, got.snap, tr.acked, tr.attempted)
	}
	for h := got.last + 1; h <= got.last+3; h++ {
		if err := l.Append(h, bodyFor(h)); err != nil {
			l.Close()
			return fmt.Errorf("append %d after recovery: %w", h, err)
		}
	}
	if err := l.Close(); err != nil {
		return err
	}
	l, err = Open(fsys, "/wal", opts)
	if err != nil {
		return fmt.Errorf("second reopen: %w", err)
	}
	defer l.Close()
	got2, err := checkRecovered(l)
	if err != nil {
		return fmt.Errorf("second reopen: %w", err)
	}
	if got2.last != got.last+3 {
		return fmt.Errorf("second reopen: last %d, want %d", got2.last, got.last+3)
	}
	return nil
}

// crashes are the crash models applied to a state: unsynced data lost,
// a random prefix of it kept (a torn write), all of it kept, all of it kept
// but random pages lost (written back out of order).
func crashes(m *vfs.MemFS, seed uint64) map[string]*vfs.MemFS {
	r := rand.New(rand.NewPCG(seed, 5))
	return map[string]*vfs.MemFS{
		"lose unsynced": m.Crash(vfs.CrashOptions{}),
		"torn":          m.Crash(vfs.CrashOptions{KeepUnsynced: func(_ string, n int) int { return r.IntN(n + 1) }}),
		"keep unsynced": m.Crash(vfs.CrashOptions{KeepUnsynced: func(_ string, n int) int { return n }}),
		"lose pages": m.Crash(vfs.CrashOptions{
			KeepUnsynced: func(_ string, n int) int { return n },
			LosePage:     func(string, int64) bool { return r.IntN(3) == 0 },
		}),
	}
}

// TestFaultMatrix injects, into the scripted run, an EIO, an ENOSPC (which
// stays: the disk is full) and a torn write at every write and sync point
// (every create, write, sync of a file or directory, rename, remove,
// truncate and mkdir). Each run must either finish or fail with an error
// that names the injected fault (and, once the log is open, matches
// ErrFailed, after which the log refuses further appends). Then the
// surviving files, as they are and after each crash model, must reopen to
// exactly the state after some block at or past every acknowledged one,
// and take more blocks.
func TestFaultMatrix(t *testing.T) {
	for _, so := range scriptOpts {
		for _, fc := range []struct {
			name   string
			kinds  errorfs.Kinds
			fault  func(i int) errorfs.Fault
			sticky bool
		}{
			{"EIO", errorfs.Writes, func(int) errorfs.Fault { return errorfs.Fault{Err: errorfs.EIO} }, false},
			{"ENOSPC", errorfs.Writes, func(int) errorfs.Fault { return errorfs.Fault{Err: errorfs.ENOSPC} }, true},
			{"torn write", errorfs.Of(errorfs.OpWrite), func(i int) errorfs.Fault {
				return errorfs.Fault{Err: errorfs.ENOSPC, Torn: true, Keep: 1 + i*37%600}
			}, false},
		} {
			t.Run(so.name+"/"+fc.name, func(t *testing.T) {
				clean := errorfs.OnIndex(-1, fc.kinds, errorfs.Fault{})
				var tr liveTracker
				if err := runScript(errorfs.Wrap(vfs.NewMem(), clean), so.opts, so.background, &tr); err != nil {
					t.Fatal(err)
				}
				points := clean.Count()
				stride := 1
				if testing.Short() {
					stride = 3
				}
				failed := 0
				for i := 0; i < points; i += stride {
					m := vfs.NewMem()
					ii := errorfs.OnIndex(i, fc.kinds, fc.fault(i))
					if fc.sticky {
						ii.Sticky()
					}
					var live liveTracker
					err := runScript(errorfs.Wrap(m, ii), so.opts, so.background, &live)
					tr := live.get()
					op, fired := ii.Fired()
					if !fired {
						t.Fatalf("point %d: no fault fired", i)
					}
					if err == nil {
						// A fault the log could shrug off: none can be, here.
						t.Fatalf("point %d (%v): the run succeeded", i, op)
					}
					if !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, fc.fault(i).Err) {
						t.Fatalf("point %d (%v): error %v does not name the fault", i, op, err)
					}
					failed++
					if err := verifyState(m.Clone(), Options{}, tr); err != nil {
						t.Fatalf("point %d (%v), run failed with %v; as left: %v\n%s", i, op, err, err, m)
					}
					for name, c := range crashes(m, uint64(i)) {
						if err := verifyState(c, Options{}, tr); err != nil {
							t.Fatalf("point %d (%v), run failed with %v; after a crash (%s): %v\n%s", i, op, err, name, err, m)
						}
					}
				}
				t.Logf("%d fault points, %d runs checked (each reopened as left and after 4 crash models)", points, failed)
			})
		}
	}
}

// TestCrashMatrix crashes the scripted run before every operation that
// changes the filesystem (and at its end), under each crash model, and
// reopens what survived.
func TestCrashMatrix(t *testing.T) {
	for _, so := range scriptOpts {
		t.Run(so.name, func(t *testing.T) {
			m := vfs.NewMem()
			var tr liveTracker
			var mu sync.Mutex // a background snapshot's operations come from its goroutine
			type point struct {
				op    errorfs.Op
				tr    tracker
				fs    map[string]*vfs.MemFS
				index int
			}
			var points []point
			n := 0
			stride := 1
			if testing.Short() {
				stride = 2
			}
			inj := errorfs.Func(func(op errorfs.Op) errorfs.Fault {
				if errorfs.Writes.Has(op.Kind) {
					mu.Lock()
					defer mu.Unlock()
					if n%stride == 0 {
						// The tracker first: what it says was done is in the image.
						tr := tr.get()
						points = append(points, point{op: op, tr: tr, fs: crashes(m, uint64(n)), index: n})
					}
					n++
				}
				return errorfs.Fault{}
			})
			if err := runScript(errorfs.Wrap(m, inj), so.opts, so.background, &tr); err != nil {
				t.Fatal(err)
			}
			points = append(points, point{op: errorfs.Op{Path: "(end)"}, tr: tr.get(), fs: crashes(m, 0), index: n})
			for _, p := range points {
				for name, c := range p.fs {
					if err := verifyState(c, Options{}, p.tr); err != nil {
						t.Fatalf("crash before op %d (%v), %s: %v", p.index, p.op, name, err)
					}
				}
			}
			t.Logf("%d crash points x 4 crash models checked", len(points))
		})
	}
}

// TestRecoveryReadFaults fails every read Open and the replay make of a
// finished log with EIO: recovery must fail with that error (never
// ErrCorrupt, never a wrong state) or succeed, and must not change the
// files (a clean open afterwards recovers everything).
func TestRecoveryReadFaults(t *testing.T) {
	m := vfs.NewMem()
	var tr liveTracker
	if err := runScript(m, scriptOpts[0].opts, false, &tr); err != nil {
		t.Fatal(err)
	}
	count := errorfs.OnIndex(-1, errorfs.Reads, errorfs.Fault{})
	l, err := Open(errorfs.Wrap(m, count), "/wal", Options{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkRecovered(l); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for i := range count.Count() {
		c := m.Clone()
		ii := errorfs.OnIndex(i, errorfs.Reads, errorfs.Fault{Err: errorfs.EIO})
		l, err := Open(errorfs.Wrap(c, ii), "/wal", Options{Logf: quiet})
		if err == nil {
			_, err = checkRecovered(l)
			l.Close()
		}
		if err != nil && (!errors.Is(err, errorfs.EIO) || errors.Is(err, ErrCorrupt)) {
			op, _ := ii.Fired()
			t.Fatalf("read fault %d (%v): %v", i, op, err)
		}
		l, got := openCheck(t, c, "/wal", Options{})
		if got.last != scriptLast {
			t.Fatalf("read fault %d changed the log: recovered %+v", i, got)
		}
		l.Close()
	}
	t.Logf("%d read points checked", count.Count())
}

// TestLostPages: under SyncNone many blocks sit unsynced in the page cache;
// a crash can lose any of their pages while later ones were written back,
// leaving zeros in the middle of the last segment with valid records after
// them. That is a torn tail (no sync covered those blocks), not corruption:
// Open under that policy cuts at the first damaged record and keeps every
// synced block. Under SyncEveryBlock, where only the record being written
// can be unsynced, the same zeros followed by valid records are damage to
// synced data: Open reports them (a CorruptError naming the segment and
// offset) and cuts nothing.
func TestLostPages(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{Sync: SyncNone, Compression: CompressNone})
	appendRange(t, l, 1, 20)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 21, 200) // tens of KiB, unsynced
	seg := segmentFile(t, m, "/wal", -1)
	size, _ := m.Stat(seg)
	pages := size / vfs.PageSize
	// Where the segment's last record starts.
	data, _ := vfs.ReadFile(m, seg)
	var lastStart int64
	for off := int64(segHeaderSize); off < int64(len(data)); {
		r, err := decodeRecord(data[off:], 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		lastStart = off
		off += int64(r.size)
	}
	strictChecked := 0
	if pages < 5 {
		t.Fatalf("only %d pages", pages)
	}
	for lost := int64(0); lost <= pages; lost++ {
		c := m.Crash(vfs.CrashOptions{
			KeepUnsynced: func(_ string, n int) int { return n },
			LosePage:     func(_ string, p int64) bool { return p == lost },
		})
		strict := c.Clone()
		l2, got := openCheck(t, c, "/wal", Options{Sync: SyncNone})
		if got.last < 20 {
			t.Fatalf("lost page %d: recovered %+v", lost, got)
		}
		l2.Close()
		if (lost+1)*vfs.PageSize > lastStart {
			continue // no whole record after the lost page: a plain torn tail
		}
		var ce *CorruptError
		if _, err := Open(strict, "/wal", Options{Logf: quiet}); !errors.As(err, &ce) || ce.Segment != path.Base(seg) {
			t.Fatalf("lost page %d, reopened under SyncEveryBlock: %v, want a CorruptError", lost, err)
		}
		if after, _ := strict.Stat(seg); after != size {
			t.Fatalf("lost page %d: the strict open changed the segment: %d bytes, was %d", lost, after, size)
		}
		strictChecked++
	}
	if strictChecked == 0 {
		t.Fatal("no lost page had whole records after it")
	}
	l.Close()
}
