package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// writeState is a Truncate snapshot function writing stateFor(h).
func writeState(h uint64) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(stateFor(h))
		return err
	}
}

// segInfo is a segment file and the heights of its records.
type segInfo struct {
	name        string
	first, last uint64 // last < first: no record
	size        int64
}

func segLayout(t testing.TB, fsys vfs.FS, dir string) []segInfo {
	t.Helper()
	var out []segInfo
	for _, name := range segmentsIn(t, fsys, dir) {
		data, err := vfs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := parseName(name, segSuffix)
		s := segInfo{name: name, first: first, last: first - 1, size: int64(len(data))}
		for off := int64(segHeaderSize); off < int64(len(data)); {
			r, ferr := decodeRecord(data[off:], 1<<30)
			if ferr != nil {
				t.Fatalf("%s@%d: %v", name, off, ferr)
			}
			s.last = r.height
			off += int64(r.size)
		}
		out = append(out, s)
	}
	return out
}

// snapshotsIn returns the heights of the snapshot files in dir.
func snapshotsIn(t testing.TB, fsys vfs.FS, dir string) []uint64 {
	var hs []uint64
	for _, n := range listDir(t, fsys, dir) {
		if h, ok := parseName(n, snapSuffix); ok {
			hs = append(hs, h)
		}
	}
	return hs
}

// buildLog appends blocks 1..last to a log in /wal, with a snapshot at each
// of snaps (ascending, each at most last) once its block is appended.
func buildLog(t testing.TB, fsys vfs.FS, opts Options, last uint64, snaps ...uint64) *Log {
	t.Helper()
	l, _ := openCheck(t, fsys, "/wal", opts)
	next := uint64(1)
	for _, s := range snaps {
		appendRange(t, l, next, s)
		snapshot(t, l, s)
		next = s + 1
	}
	appendRange(t, l, next, last)
	return l
}

// checkTruncated checks a log just truncated to h: its heights, its files
// (nothing above h), that a crash now recovers exactly h, and that it goes
// on: blocks h+1..h+5, closed, reopened.
func checkTruncated(t *testing.T, m *vfs.MemFS, l *Log, opts Options, h, wantSnap uint64) {
	t.Helper()
	if l.LastHeight() != h || l.DurableHeight() != h || l.SnapshotHeight() != wantSnap {
		t.Fatalf("last %d durable %d snapshot %d, want %d %d %d", l.LastHeight(), l.DurableHeight(), l.SnapshotHeight(), h, h, wantSnap)
	}
	for _, s := range snapshotsIn(t, m, "/wal") {
		if s > h {
			t.Fatalf("snapshot %d left above %d: %v", s, h, listDir(t, m, "/wal"))
		}
	}
	for _, s := range segLayout(t, m, "/wal") {
		if s.first > h || s.last > h {
			t.Fatalf("segment %s (records %d..%d) left above %d", s.name, s.first, s.last, h)
		}
	}
	c, got := openCheck(t, m.Crash(vfs.CrashOptions{}), "/wal", opts)
	c.Close()
	if got.last != h {
		t.Fatalf("a crash right after Truncate(%d) recovered %+v", h, got)
	}
	appendRange(t, l, h+1, h+5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, got := openCheck(t, m, "/wal", opts)
	defer l2.Close()
	if got.last != h+5 {
		t.Fatalf("reopened after Truncate(%d) and 5 blocks: %+v", h, got)
	}
}

// TestTruncate truncates a log of blocks 1..60 with snapshots at 19 and 41
// (small segments) to heights in a segment, at a segment's end, between and
// below the snapshots, to 0, under each sync policy, on the log as written
// and reopened. The snapshot it writes at 10 is a large one (several
// chunks).
func TestTruncate(t *testing.T) {
	// Heights that depend on where segments end.
	probe := vfs.NewMem()
	buildLog(t, probe, Options{SegmentSize: 700}, 60, 19, 41).Close()
	var mid, end uint64
	for _, s := range segLayout(t, probe, "/wal") {
		if s.first > 41 && s.last < 60 {
			end = s.last // the last record of a sealed segment
		}
		if s.first > 41 && s.last > s.first+1 && mid == 0 {
			mid = s.first + 1 // neither the first nor the last of its segment
		}
	}
	if mid == 0 || end == 0 {
		t.Fatalf("layout %+v", segLayout(t, probe, "/wal"))
	}
	for _, tc := range []struct {
		name     string
		h        uint64
		snap     bool   // give a snapshot function
		wantSnap uint64 // SnapshotHeight after
		wantErr  error
	}{
		{"in a segment", mid, false, 41, nil},
		{"at a segment's end", end, false, 41, nil},
		{"last block but one", 59, false, 41, nil},
		{"at the newest snapshot", 41, false, 41, nil},
		{"below the newest snapshot, the older one covers it", 30, false, 19, nil},
		{"at the older snapshot", 19, false, 19, nil},
		{"below every snapshot, written", 10, true, 10, nil},
		{"below every snapshot, none given", 10, false, 0, ErrNeedSnapshot},
		{"to 0", 0, false, 0, nil},
		{"no-op", 60, false, 41, nil},
		{"above the last height", 61, true, 0, ErrHeight},
	} {
		for _, pol := range []struct {
			name string
			opts Options
		}{
			{"every block", Options{SegmentSize: 700}},
			{"none", Options{SegmentSize: 700, Sync: SyncNone}},
			{"interval", Options{SegmentSize: 700, Sync: SyncInterval(50 * time.Microsecond)}},
		} {
			for _, reopen := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/reopen=%v", tc.name, pol.name, reopen), func(t *testing.T) {
					m := vfs.NewMem()
					opts := pol.opts
					opts.Logf = quiet
					l := buildLog(t, m, opts, 60, 19, 41)
					if reopen {
						l.Close()
						l, _ = openCheck(t, m, "/wal", opts)
					}
					var fn func(io.Writer) error
					if tc.snap {
						fn = writeState(tc.h)
					}
					before := listDir(t, m, "/wal")
					h, wantSnap := tc.h, tc.wantSnap
					err := l.Truncate(tc.h, fn)
					if tc.wantErr != nil {
						if !errors.Is(err, tc.wantErr) || errors.Is(err, ErrFailed) {
							t.Fatalf("Truncate(%d): %v, want %v", tc.h, err, tc.wantErr)
						}
						// Nothing changed, and the log goes on.
						if after := listDir(t, m, "/wal"); !slices.Equal(before, after) || l.LastHeight() != 60 {
							t.Fatalf("files %v, were %v; last %d", after, before, l.LastHeight())
						}
						h, wantSnap = 60, 41
					} else if err != nil {
						t.Fatalf("Truncate(%d): %v", tc.h, err)
					}
					if h == 60 {
						// Nothing truncated, so nothing synced either.
						if err := l.Sync(); err != nil {
							t.Fatal(err)
						}
					}
					if h == 0 {
						if names := listDir(t, m, "/wal"); !slices.Equal(names, []string{rollbacksName}) { // which counts on
							t.Fatalf("files left: %v", names)
						}
					}
					checkTruncated(t, m, l, opts, h, wantSnap)
				})
			}
		}
	}
}

// TestTruncateFromLogStart: a log whose first segment starts it holds the
// state at any of its heights without a snapshot.
func TestTruncateFromLogStart(t *testing.T) {
	m := vfs.NewMem()
	l := buildLog(t, m, Options{}, 30, 25) // one big segment, from block 1
	if err := l.Truncate(10, nil); err != nil {
		t.Fatal(err)
	}
	checkTruncated(t, m, l, Options{}, 10, 0)

	// A log that began at height 100 holds no state below it.
	m = vfs.NewMem()
	l, _ = openCheck(t, m, "/wal", Options{})
	appendRange(t, l, 100, 110)
	if err := l.Truncate(99, nil); !errors.Is(err, ErrNeedSnapshot) {
		t.Fatalf("truncate below the first record: %v", err)
	}
	if err := l.Truncate(99, writeState(99)); err != nil {
		t.Fatal(err)
	}
	checkTruncated(t, m, l, Options{}, 99, 99)
}

func TestTruncateErrors(t *testing.T) {
	m := vfs.NewMem()
	l := buildLog(t, m, Options{SegmentSize: 700}, 30, 20)
	boom := errors.New("boom")
	err := l.Truncate(5, func(w io.Writer) error {
		w.Write(make([]byte, 3000))
		return boom
	})
	if !errors.Is(err, boom) || errors.Is(err, ErrFailed) {
		t.Fatalf("failing snapshot function: %v", err)
	}
	if l.LastHeight() != 30 || slices.ContainsFunc(listDir(t, m, "/wal"), func(n string) bool { return strings.HasSuffix(n, tmpSuffix) }) {
		t.Fatalf("last %d, files %v", l.LastHeight(), listDir(t, m, "/wal"))
	}
	appendRange(t, l, 31, 31) // still usable
	l.Close()
	if err := l.Truncate(5, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}

	// A filesystem failure fails the log.
	ii := errorfs.OnIndex(0, errorfs.Of(errorfs.OpRemove), errorfs.Fault{Err: errorfs.EIO})
	l, _ = openCheck(t, errorfs.Wrap(m, ii), "/wal", Options{})
	err = l.Truncate(15, writeState(15))
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.EIO) {
		t.Fatalf("failed remove: %v", err)
	}
	if err := l.Append(l.LastHeight()+1, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed Truncate: %v", err)
	}
	l.Close()
}

// A truncation scenario for the crash and fault sweeps: a log, closed, to
// be opened with opts and truncated to h.
type truncScenario struct {
	name string
	opts Options
	// build makes the log and returns h and whether to give a snapshot
	// function.
	build func(t *testing.T, m *vfs.MemFS) (h uint64, snap bool)
	// before runs on the reopened log before Truncate (nil: nothing).
	before func(t *testing.T, l *Log)
	// rollbackable: the records from h+1 on are in the log, so a crash
	// that leaves a block above h recovers it by a replay from a snapshot
	// at or below h (the caller can roll it back), unless it is the whole
	// old log.
	rollbackable bool
}

// options are the scenario's log options, with quiet logging.
func (sc truncScenario) options() Options {
	opts := sc.opts
	opts.Logf = quiet
	return opts
}

// open opens the scenario's log on fsys and runs its before.
func (sc truncScenario) open(t *testing.T, fsys vfs.FS) *Log {
	l, _ := openCheck(t, fsys, "/wal", sc.options())
	if sc.before != nil {
		sc.before(t, l)
	}
	return l
}

// snapshotFn is what Truncate(h) is given: the state at h when the
// scenario needs a snapshot, else nil.
func snapshotFn(h uint64, snap bool) func(io.Writer) error {
	if snap {
		return writeState(h)
	}
	return nil
}

// The scenarios' snapshots are at heights whose states (stateFor) are
// small, to keep the sweeps fast; TestTruncate writes a large one.
var truncScenarios = []truncScenario{
	{
		name: "in the last segments", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			return 51, false
		},
		rollbackable: true,
	},
	{
		name: "below the newest snapshot", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			return 31, false
		},
		rollbackable: true,
	},
	{
		name: "below every snapshot", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			return segLayout(t, m, "/wal")[0].first + 1, true
		},
		rollbackable: true,
	},
	{
		// The log starts at a segment boundary: the segment the older
		// snapshot needed starts right after it, and the truncation
		// height is below that. The new snapshot cannot join any segment.
		name: "below the first segment", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			p := vfs.NewMem()
			buildLog(t, p, Options{SegmentSize: 700}, 60).Close()
			var b uint64
			for _, s := range segLayout(t, p, "/wal") {
				if s.first > 12 && b == 0 {
					b = s.first - 1
				}
			}
			buildLog(t, m, Options{SegmentSize: 700}, 60, b, 51).Close()
			if first := segLayout(t, m, "/wal")[0].first; first != b+1 {
				t.Fatalf("first segment starts at %d, want %d", first, b+1)
			}
			return b - 3, true
		},
	},
	{
		name: "to 0", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			return 0, false
		},
	},
	{
		name: "to 0 from the log's start", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 30).Close()
			return 0, false
		},
	},
	{
		name: "damaged snapshot above", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			flipBit(t, m, "/wal/"+snapshotName(41), 40, 2)
			return 31, false
		},
		rollbackable: true,
	},
	{
		// The segment holding the target runs on to the snapshot Open
		// starts from, and a checksum in it is damaged: it goes whole,
		// the state at the target is a new snapshot, and the records
		// after the target are gone, so the segments above go before the
		// snapshots above (a crash between them left a gap).
		name: "damaged segment past the target", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			p := vfs.NewMem()
			buildLog(t, p, Options{SegmentSize: 700}, 60).Close()
			var seg segInfo
			for _, s := range segLayout(t, p, "/wal") {
				if s.first > 21 && s.last-s.first >= 2 && s.last < 55 && seg.name == "" {
					seg = s
				}
			}
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, seg.last).Close()
			flipBit(t, m, "/wal/"+seg.name, segHeaderSize+5, 0)
			return seg.first + 1, true
		},
	},
	{
		// Below every segment, with the older snapshot above the target
		// damaged (Open read only the newer one): the damaged one goes
		// first, so that no crash leaves it the newest snapshot, which the
		// log no longer covers.
		name: "damaged unread snapshot above, below every segment", opts: Options{SegmentSize: 700},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			flipBit(t, m, "/wal/"+snapshotName(19), 40, 2)
			return segLayout(t, m, "/wal")[0].first - 2, true
		},
	},
	{
		name: "unsynced blocks", opts: Options{SegmentSize: 700, Sync: SyncNone},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700}, 60, 19, 41).Close()
			return 67, false // in the last segment, which holds 66..68 unsynced
		},
		before:       func(t *testing.T, l *Log) { appendRange(t, l, 61, 68) },
		rollbackable: true,
	},
	{
		name: "KeepRecords", opts: Options{SegmentSize: 700, KeepRecords: 15},
		build: func(t *testing.T, m *vfs.MemFS) (uint64, bool) {
			buildLog(t, m, Options{SegmentSize: 700, KeepRecords: 15}, 65, 11, 21, 31, 41, 51, 61).Close()
			return 65 - 13, false // within KeepRecords: no snapshot needed
		},
		rollbackable: true,
	},
}

// verifyTruncation opens what a Truncate(h) of a log at oldLast left and
// checks that it is exactly the state after a block in [lo, oldLast] (lo
// is h, or the durable height before Truncate if the crash came before
// Truncate's first sync); then that the caller can finish the job:
// truncate to h again (with a snapshot function), append, reopen.
func verifyTruncation(fsys vfs.FS, sc truncScenario, lo, h, oldLast uint64) error {
	opts := sc.options()
	l, err := Open(fsys, "/wal", opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer func() { l.Close() }()
	got, err := checkRecovered(l)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if got.last < lo || got.last > oldLast {
		return fmt.Errorf("recovered the state after block %d (snapshot %d), want one in [%d, %d]", got.last, got.snap, lo, oldLast)
	}
	if sc.rollbackable && got.last != h && got.last != oldLast && got.snap > h {
		return fmt.Errorf("recovered block %d from snapshot %d, above the truncation height %d", got.last, got.snap, h)
	}
	if got.last < h {
		// Blocks never synced, lost: the caller appends them again.
		for b := got.last + 1; b <= h; b++ {
			if err := l.Append(b, bodyFor(b)); err != nil {
				return fmt.Errorf("append %d: %w", b, err)
			}
		}
	}
	if err := l.Truncate(h, writeState(h)); err != nil {
		return fmt.Errorf("truncating again: %w", err)
	}
	if got.last = l.LastHeight(); got.last != h {
		return fmt.Errorf("truncated again, last %d", got.last)
	}
	for b := h + 1; b <= h+3; b++ {
		if err := l.Append(b, bodyFor(b)); err != nil {
			return fmt.Errorf("append %d: %w", b, err)
		}
	}
	l.Close()
	if l, err = Open(fsys, "/wal", opts); err != nil {
		return fmt.Errorf("second reopen: %w", err)
	}
	if got, err = checkRecovered(l); err != nil || got.last != h+3 {
		return fmt.Errorf("second reopen: %+v %v, want last %d", got, err, h+3)
	}
	return nil
}

// armed is an injector that sees only the operations after it is armed
// (those of the Truncate under test).
type armed struct {
	on  bool
	inj errorfs.Injector
}

func (a *armed) Inject(op errorfs.Op) errorfs.Fault {
	if !a.on {
		return errorfs.Fault{}
	}
	return a.inj.Inject(op)
}

// lowest is the lowest block a crash at (or a failure of) the i-th
// filesystem write of a Truncate(h) may leave: h, once Truncate's first
// operation, the sync of the blocks not yet durable, has returned; before,
// the durable height, as for any crash.
func lowest(i int, op errorfs.Op, h, durable uint64) uint64 {
	if i == 0 && op.Kind == errorfs.OpSync {
		return min(h, durable)
	}
	return h
}

// TestTruncateCrashPoints crashes a Truncate before each of its operations
// that change the filesystem (and after its end), under each crash model,
// and reopens what survived: always exactly the state after a block
// between the truncation height and the old last one.
func TestTruncateCrashPoints(t *testing.T) {
	for _, sc := range truncScenarios {
		t.Run(sc.name, func(t *testing.T) {
			m := vfs.NewMem()
			h, snap := sc.build(t, m)
			type point struct {
				op errorfs.Op
				fs map[string]*vfs.MemFS
			}
			var points []point
			a := &armed{inj: errorfs.Func(func(op errorfs.Op) errorfs.Fault {
				if errorfs.Writes.Has(op.Kind) {
					points = append(points, point{op, crashes(m, uint64(len(points)))})
				}
				return errorfs.Fault{}
			})}
			l := sc.open(t, errorfs.Wrap(m, a))
			oldLast, durable := l.LastHeight(), l.DurableHeight()
			// The scenario's premise: a snapshot is needed, or not.
			c := m.Clone()
			lc, _ := openCheck(t, c, "/wal", sc.options())
			if err := lc.Truncate(h, nil); errors.Is(err, ErrNeedSnapshot) != snap || (err != nil && !snap) {
				t.Fatalf("Truncate(%d, nil) on a copy: %v", h, err)
			}
			lc.Close()
			a.on = true
			if err := l.Truncate(h, snapshotFn(h, snap)); err != nil {
				t.Fatal(err)
			}
			a.on = false
			points = append(points, point{errorfs.Op{Path: "(end)"}, crashes(m, 0)})
			l.Close()
			for i, p := range points {
				for name, c := range p.fs {
					if err := verifyTruncation(c, sc, lowest(i, p.op, h, durable), h, oldLast); err != nil {
						t.Fatalf("crash before op %d (%v), %s: %v", i, p.op, name, err)
					}
				}
			}
			t.Logf("%d crash points x 4 crash models", len(points))
		})
	}
}

// TestTruncateFaults fails each filesystem write operation of a Truncate
// in turn (EIO once, or ENOSPC from then on): Truncate fails with the
// fault and fails the log, and the files, as left and after each crash
// model, reopen to the state after a block between the truncation height
// and the old last one.
func TestTruncateFaults(t *testing.T) {
	for _, sc := range truncScenarios {
		for _, fc := range []struct {
			name   string
			err    error
			sticky bool
		}{{"EIO", errorfs.EIO, false}, {"ENOSPC", errorfs.ENOSPC, true}} {
			t.Run(sc.name+"/"+fc.name, func(t *testing.T) {
				built := vfs.NewMem()
				h, snap := sc.build(t, built)
				for i := 0; ; i++ {
					m := built.Clone()
					ii := errorfs.OnIndex(i, errorfs.Writes, errorfs.Fault{Err: fc.err})
					if fc.sticky {
						ii.Sticky()
					}
					a := &armed{inj: ii}
					l := sc.open(t, errorfs.Wrap(m, a))
					oldLast, durable := l.LastHeight(), l.DurableHeight()
					a.on = true
					err := l.Truncate(h, snapshotFn(h, snap))
					op, fired := ii.Fired()
					if !fired {
						if err != nil {
							t.Fatal(err)
						}
						l.Close()
						t.Logf("%d fault points", i)
						return
					}
					if !errors.Is(err, ErrFailed) || !errors.Is(err, fc.err) {
						t.Fatalf("fault %d (%v): Truncate returned %v", i, op, err)
					}
					if err := l.Append(l.LastHeight()+1, nil); !errors.Is(err, ErrFailed) {
						t.Fatalf("fault %d (%v): append after it: %v", i, op, err)
					}
					l.Close()
					lo := lowest(i, op, h, durable)
					if err := verifyTruncation(m.Clone(), sc, lo, h, oldLast); err != nil {
						t.Fatalf("fault %d (%v), as left: %v\n%s", i, op, err, m)
					}
					for name, c := range crashes(m, uint64(i)) {
						if err := verifyTruncation(c, sc, lo, h, oldLast); err != nil {
							t.Fatalf("fault %d (%v), crash %s: %v\n%s", i, op, name, err, m)
						}
					}
				}
			})
		}
	}
}

// TestTruncateWhileSyncing truncates and appends under a group-commit
// policy whose background syncs run all the while (run it with -race).
func TestTruncateWhileSyncing(t *testing.T) {
	m := vfs.NewMem()
	opts := Options{SegmentSize: 900, Sync: SyncInterval(20 * time.Microsecond), Logf: quiet}
	l, _ := openCheck(t, m, "/wal", opts)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		last := l.LastHeight()
		appendRange(t, l, last+1, last+1+uint64(r.IntN(8)))
		if round%25 == 24 {
			snapshot(t, l, l.LastHeight())
		}
		h := l.LastHeight() - min(l.LastHeight(), 1+uint64(r.IntN(6)))
		if err := l.Truncate(h, writeState(h)); err != nil {
			t.Fatalf("round %d: Truncate(%d): %v", round, h, err)
		}
		if l.LastHeight() != h || l.DurableHeight() != h {
			t.Fatalf("round %d: last %d durable %d, want %d", round, l.LastHeight(), l.DurableHeight(), h)
		}
	}
	want := l.LastHeight()
	l.Close()
	if _, got := openCheck(t, m, "/wal", opts); got.last != want {
		t.Fatalf("reopened %+v, want last %d", got, want)
	}
}

// every10 is 10, 20, ... up to last.
func every10(last uint64) []uint64 {
	var hs []uint64
	for h := uint64(10); h <= last; h += 10 {
		hs = append(hs, h)
	}
	return hs
}

// keepLog is a log of blocks 1..last with a snapshot every 10 blocks,
// small segments and the given options.
func keepLog(t *testing.T, opts Options, last uint64) *vfs.MemFS {
	m := vfs.NewMem()
	opts.SegmentSize = 600
	buildLog(t, m, opts, last, every10(last)...).Close()
	return m
}

// TestKeepRecords: with KeepRecords, WriteSnapshot keeps the snapshot that
// is at least K blocks old and every newer one, with the segments after
// it; Open replays from it, at least K records and at most K plus a
// snapshot interval.
func TestKeepRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		last      uint64
		wantSnaps []uint64 // snapshot files kept
		wantBase  uint64   // Recovery().SnapshotHeight
	}{
		{"K 25", Options{KeepRecords: 25}, 205, []uint64{170, 180, 190, 200}, 180},
		{"K 25, at a snapshot", Options{KeepRecords: 25}, 200, []uint64{170, 180, 190, 200}, 170},
		{"K 25, just before one", Options{KeepRecords: 25}, 209, []uint64{170, 180, 190, 200}, 180},
		{"K 5", Options{KeepRecords: 5}, 207, []uint64{190, 200}, 200},
		{"K 5, too few records since the newest", Options{KeepRecords: 5}, 203, []uint64{190, 200}, 190},
		{"K 35, retain 1", Options{KeepRecords: 35, RetainSnapshots: 1}, 203, []uint64{160, 170, 180, 190, 200}, 160},
		{"K 5, retain 4", Options{KeepRecords: 5, RetainSnapshots: 4}, 203, []uint64{170, 180, 190, 200}, 190},
		// No snapshot K below the newest at its writing: every snapshot
		// is kept, and the log's start (nil: 10, 20, ..., 200).
		{"K above the history", Options{KeepRecords: 500}, 203, nil, 0},
		{"K just above the oldest snapshot", Options{KeepRecords: 191}, 203, nil, 10}, // Open: 10 <= 203-191
		{"K at the oldest snapshot", Options{KeepRecords: 190}, 203, every10(200), 10},
		{"K 0", Options{}, 203, []uint64{190, 200}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := keepLog(t, tc.opts, tc.last)
			snaps := snapshotsIn(t, m, "/wal")
			fromStart := tc.wantSnaps == nil
			if fromStart {
				tc.wantSnaps = every10(tc.last)
			}
			if !slices.Equal(snaps, tc.wantSnaps) {
				t.Fatalf("snapshots %v, want %v", snaps, tc.wantSnaps)
			}
			// The segments reach back to the oldest base kept (the oldest
			// snapshot, or the log's start), no further.
			segs := segLayout(t, m, "/wal")
			oldest := snaps[0]
			if fromStart {
				oldest = 0
			}
			if segs[0].first > oldest+1 || (len(segs) > 1 && segs[1].first <= oldest+1) {
				t.Fatalf("oldest base %d, segments %+v", oldest, segs)
			}
			l, got := openCheck(t, m, "/wal", tc.opts)
			defer l.Close()
			rec := l.Recovery()
			if rec.SnapshotHeight != tc.wantBase || got.last != tc.last || l.SnapshotHeight() != 200 {
				t.Fatalf("recovered %+v (%+v), SnapshotHeight %d; want base %d", got, rec, l.SnapshotHeight(), tc.wantBase)
			}
			if k := tc.opts.KeepRecords; k > 0 && k < 100 && (uint64(rec.Records) < k || uint64(rec.Records) > k+10) {
				t.Fatalf("replays %d records, want %d to %d", rec.Records, k, k+10)
			}
			// The log goes on, and the next snapshot still takes heights
			// above the newest.
			appendRange(t, l, tc.last+1, 215)
			if err := l.WriteSnapshot(200, bytes.NewReader(nil)); !errors.Is(err, ErrHeight) {
				t.Fatalf("snapshot at the newest height: %v", err)
			}
			snapshot(t, l, 215)
		})
	}
}

// TestKeepRecordsFallback: Open under KeepRecords takes an older snapshot
// if the one K blocks back is damaged, and the oldest snapshot whose
// records are all there and valid if those after the one K back are not.
func TestKeepRecordsFallback(t *testing.T) {
	opts := Options{KeepRecords: 25}
	// A segment that only recovery from 180 (K back) reads, not recovery
	// from the newest snapshot, 200.
	between := func(t *testing.T, m *vfs.MemFS) segInfo {
		for _, s := range segLayout(t, m, "/wal") {
			if s.first > 181 && s.last < 200 {
				return s
			}
		}
		t.Fatalf("no segment between 181 and 200: %+v", segLayout(t, m, "/wal"))
		return segInfo{}
	}
	// afterDamage is the oldest snapshot (of 170..200, every 10) that the
	// damaged segment s does not precede.
	afterDamage := func(s segInfo) uint64 { return max(170, (s.last+9)/10*10) }
	var damaged segInfo
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T, m *vfs.MemFS)
		wantBase uint64 // 0: afterDamage(damaged)
		skipped  int
	}{
		{"intact", func(*testing.T, *vfs.MemFS) {}, 180, 0},
		{"snapshot K back damaged", func(t *testing.T, m *vfs.MemFS) {
			flipBit(t, m, "/wal/"+snapshotName(180), snapHeaderSize+3, 0)
		}, 170, 1},
		{"newest snapshot damaged", func(t *testing.T, m *vfs.MemFS) {
			flipBit(t, m, "/wal/"+snapshotName(200), snapHeaderSize+3, 0)
		}, 180, 0},
		{"a record after it damaged", func(t *testing.T, m *vfs.MemFS) {
			damaged = between(t, m)
			flipBit(t, m, "/wal/"+damaged.name, segHeaderSize+recHeaderSize-3, 4) // its first record's height
		}, 0, 0},
		{"a segment after it missing", func(t *testing.T, m *vfs.MemFS) {
			damaged = between(t, m)
			if err := m.Remove("/wal/" + damaged.name); err != nil {
				t.Fatal(err)
			}
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := keepLog(t, opts, 205)
			tc.damage(t, m)
			if tc.wantBase == 0 {
				tc.wantBase = afterDamage(damaged)
			}
			l, got := openCheck(t, m, "/wal", opts)
			defer l.Close()
			rec := l.Recovery()
			if rec.SnapshotHeight != tc.wantBase || got.last != 205 || len(rec.SkippedSnapshots) != tc.skipped {
				t.Fatalf("recovered %+v, %+v; want base %d, %d skipped", got, rec, tc.wantBase, tc.skipped)
			}
		})
	}
}

// TestKeepRecordsEmptyTail: a crash as the segment after the newest
// snapshot began leaves it a header alone (or a torn first record, which
// Open cuts to that): Open still starts K records back, though no record
// follows the snapshot (found by the session 20 review: it started from
// the newest snapshot, and a restarted node could roll nothing back).
func TestKeepRecordsEmptyTail(t *testing.T) {
	opts := Options{KeepRecords: 25}
	for _, torn := range []int{0, 5} { // bytes of a first record after the header
		m := keepLog(t, opts, 200)
		f, err := m.Create("/wal/" + segmentName(201))
		if err != nil {
			t.Fatal(err)
		}
		b := appendSegmentHeader(nil, 201, 0)
		b = append(b, make([]byte, torn)...)
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Sync()
		f.Close()
		vfs.SyncDir(m, "/wal")
		l, got := openCheck(t, m, "/wal", opts)
		rec := l.Recovery()
		if got.last != 200 || rec.SnapshotHeight != 170 || rec.Records != 30 {
			t.Fatalf("torn %d: recovered %+v, %+v; want base 170, 30 records to 200", torn, got, rec)
		}
		appendRange(t, l, 201, 203) // the log goes on in that segment
		l.Close()
		if _, got := openCheck(t, m.Crash(vfs.CrashOptions{}), "/wal", opts); got.last != 203 {
			t.Fatalf("torn %d: after blocks 201..203, recovered %+v", torn, got)
		}
	}
}

// TestKeepRecordsTruncate: after a restart, a log kept with KeepRecords
// rolls back up to K blocks from its own history, without a snapshot
// function.
func TestKeepRecordsTruncate(t *testing.T) {
	opts := Options{KeepRecords: 25}
	for _, depth := range []uint64{1, 9, 10, 11, 24, 25} {
		m := keepLog(t, opts, 205)
		l, _ := openCheck(t, m, "/wal", opts)
		h := 205 - depth
		if err := l.Truncate(h, nil); err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		checkTruncated(t, m, l, opts, h, h/10*10)
	}
}

// TestTruncatePastDamagedSegment: a rollback to the snapshot Open started
// from, whose segment (ending at that height) Open did not read and holds
// damage, removes that segment whole instead of failing (it could not
// walk it to find the cut); the snapshot gives the state, and the log goes
// on from there.
func TestTruncatePastDamagedSegment(t *testing.T) {
	opts := Options{SegmentSize: 800, Logf: quiet}
	probe := vfs.NewMem()
	l, _ := openCheck(t, probe, "/wal", opts)
	appendRange(t, l, 1, 60)
	l.Close()
	// A segment of two records or more, not the last: its last height is
	// where the snapshot goes, so that Open starts after it.
	var seg string
	var first, h uint64
	var off int64 // of its first record
	segs := segmentsIn(t, probe, "/wal")
	for _, s := range segs[:len(segs)-1] {
		data, _ := vfs.ReadFile(probe, "/wal/"+s)
		f, _, _ := decodeSegmentHeader(data)
		n := uint64(0)
		for o := int64(segHeaderSize); o < int64(len(data)); n++ {
			r, _ := decodeRecord(data[o:], 1<<30)
			o += int64(r.size)
		}
		if n >= 2 && f > 1 {
			seg, first, h, off = s, f, f+n-1, segHeaderSize
			break
		}
	}
	if seg == "" {
		t.Fatalf("no segment of two records among %v", segs)
	}
	base := vfs.NewMem()
	l, _ = openCheck(t, base, "/wal", opts)
	appendRange(t, l, 1, h)
	snapshot(t, l, h)
	appendRange(t, l, h+1, 60)
	l.Close()
	// Damage that walking the record headers finds (a height), and damage
	// only a whole read finds (a checksum, the segment header).
	for _, at := range []int64{off + 20, off + 5, 10} {
		m := base.Clone()
		flipBit(t, m, "/wal/"+seg, at, 0) // record `first`, below h, or the header
		l, got := openCheck(t, m, "/wal", opts)
		if got.snap != h || got.last != 60 {
			t.Fatalf("flip at %d: opened %+v, want the snapshot at %d (record %d damaged)", at, got, h, first)
		}
		if err := l.Truncate(h, nil); err != nil {
			t.Fatalf("flip at %d: Truncate(%d): %v", at, h, err)
		}
		l.Close() // recovery reads what the truncation kept
		if slices.Contains(segmentsIn(t, m, "/wal"), seg) {
			t.Fatalf("flip at %d: %s is still there", at, seg)
		}
		l, got = openCheck(t, m, "/wal", opts)
		if got.snap != h || got.last != h {
			t.Fatalf("flip at %d: reopened %+v, want the snapshot at %d", at, got, h)
		}
		appendRange(t, l, h+1, h+2)
		l.Close()
		if l, got := openCheck(t, m, "/wal", opts); got.last != h+2 {
			t.Fatalf("flip at %d: reopened %+v, want last %d", at, got, h+2)
		} else {
			l.Close()
		}
	}
}

// TestTruncateReadsWhatItKeeps: a rollback below the snapshot Open
// started from relies on an older snapshot and the records after it,
// which Open did not read; damaged there, they are not relied on (a
// snapshot at the target is written), and a damaged segment above the
// target goes before anything that would make recovery read it.
func TestTruncateReadsWhatItKeeps(t *testing.T) {
	opts := Options{SegmentSize: 700, Logf: quiet}
	base := vfs.NewMem()
	buildLog(t, base, opts, 60, 19, 41).Close()
	segs := segLayout(t, base, "/wal")
	for _, tc := range []struct {
		name   string
		height uint64 // a record in the damaged segment
		at     int64  // the byte flipped in it
	}{
		{"below the target", 25, segHeaderSize + 5}, // its first record's checksum
		{"above it", 35, segHeaderSize + 5},
		{"the oldest segment's header", segs[0].first, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base.Clone()
			var seg string
			for _, s := range segs {
				if s.first <= tc.height {
					seg = "/wal/" + s.name
				}
			}
			flipBit(t, m, seg, tc.at, 0)
			l, got := openCheck(t, m, "/wal", opts)
			if got.snap != 41 {
				t.Fatalf("opened %+v", got)
			}
			if err := l.Truncate(31, writeState(31)); err != nil {
				t.Fatalf("Truncate(31): %v", err)
			}
			l.Close()
			l, got = openCheck(t, m, "/wal", opts)
			l.Close()
			if got.last != 31 {
				t.Fatalf("reopened %+v, want last 31", got)
			}
		})
	}
}

// TestTruncateChecksTheSnapshotItRelies: a rollback that would leave an
// older snapshot as the only way to the state at its height reads it
// whole first (Open did not: it started from a newer one); a damaged one
// it does not rely on, and writes a snapshot at the height instead.
func TestTruncateChecksTheSnapshotItRelies(t *testing.T) {
	m := vfs.NewMem()
	opts := damagedOlderSnapshot(t, m, m)
	l, got := openCheck(t, m, "/wal", opts)
	if got.snap != 100 {
		t.Fatalf("opened %+v", got)
	}
	wrote := false
	err := l.Truncate(90, func(w io.Writer) error {
		wrote = true
		_, err := w.Write(stateFor(90))
		return err
	})
	if err != nil || !wrote {
		t.Fatalf("Truncate(90): %v; snapshot written: %v", err, wrote)
	}
	l.Close()
	if l, got := openCheck(t, m, "/wal", opts); got.snap != 90 || got.last != 90 {
		t.Fatalf("reopened %+v, want the snapshot at 90", got)
	} else {
		l.Close()
	}
}

// TestTruncateReplacesDamagedSnapshot: a rollback to the height of a
// damaged snapshot writes a new one there, which counts once (it once
// stayed listed twice, and the next snapshot's cleanup removed its file as
// the older of the two, leaving nothing to fall back to) and as read whole
// (a later rollback relying on it does not read it again).
func TestTruncateReplacesDamagedSnapshot(t *testing.T) {
	m := vfs.NewMem()
	var counting atomic.Bool
	var opens atomic.Int32
	fsys := errorfs.Wrap(m, errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if counting.Load() && op.Kind == errorfs.OpOpen && strings.HasSuffix(op.Path, snapshotName(80)) {
			opens.Add(1)
		}
		return errorfs.Fault{}
	}))
	opts := damagedOlderSnapshot(t, m, fsys)
	l, _ := openCheck(t, fsys, "/wal", opts)
	if err := l.Truncate(80, writeState(80)); err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 81, 85)
	counting.Store(true)
	if err := l.Truncate(82, nil); err != nil { // the snapshot at 80 and the records after it will do
		t.Fatal(err)
	}
	counting.Store(false)
	if n := opens.Load(); n != 0 {
		t.Fatalf("the rollback to 82 read the snapshot at 80 again (%d opens): it was written here", n)
	}
	appendRange(t, l, 83, 90)
	snapshot(t, l, 90) // RetainSnapshots 2: the snapshot at 80 stays
	if got := snapshotsIn(t, m, "/wal"); !slices.Equal(got, []uint64{80, 90}) {
		t.Fatalf("snapshots %v, want 80 and 90", got)
	}
	l.Close()
	flipBit(t, m, "/wal/"+snapshotName(90), 40, 0)
	if l, got := openCheck(t, m, "/wal", opts); got.snap != 80 || got.last != 90 {
		t.Fatalf("reopened %+v, want the snapshot at 80 and blocks to 90", got)
	} else {
		l.Close()
	}
}

// damagedOlderSnapshot writes through fsys, over m, a closed log of 105
// records with snapshots at 80 and 100, the one at 80 damaged, and returns
// its Options.
func damagedOlderSnapshot(t *testing.T, m *vfs.MemFS, fsys vfs.FS) Options {
	t.Helper()
	opts := Options{SegmentSize: 800, Logf: quiet} // the log's start goes with the snapshots
	l, _ := openCheck(t, fsys, "/wal", opts)
	appendRange(t, l, 1, 80)
	snapshot(t, l, 80)
	appendRange(t, l, 81, 100)
	snapshot(t, l, 100)
	appendRange(t, l, 101, 105)
	l.Close()
	flipBit(t, m, "/wal/"+snapshotName(80), 40, 0)
	return opts
}
