package wal

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// newestLog builds a log of records 1 to 40 in segments of at most 500
// bytes, with a snapshot at snap (0: none).
func newestLog(t *testing.T, snap uint64) (*vfs.MemFS, []string) {
	t.Helper()
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 500})
	appendRange(t, l, 1, 40)
	if snap > 0 {
		snapshot(t, l, snap)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentsIn(t, m, "/wal")
	if len(segs) < 1 || snap == 0 && len(segs) < 2 {
		t.Fatalf("segments %v", segs)
	}
	return m, segs
}

func newestIn(t *testing.T, fsys vfs.FS) uint64 {
	t.Helper()
	n, err := readNewest(fsys, "/wal")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNewestSegmentDeleted: the newest segment deleted whole was, before
// NEWEST, a log that read as whole and recovered an older state in
// silence. Now Open (read-only too) and Check name it, and Repair accepts
// the loss by lowering the bound, after which the log opens at the state
// the files still hold.
func TestNewestSegmentDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap uint64
		want recovered // after the repair
	}{
		{"no snapshot", 0, recovered{last: 0}},
		{"a snapshot older than the newest segment", 30, recovered{snap: 30}},
		{"a snapshot at the last record, in the newest segment", 40, recovered{snap: 40, last: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, segs := newestLog(t, tc.snap)
			last := segs[len(segs)-1]
			first, _ := parseName(last, segSuffix)
			if got := newestIn(t, m); got != first {
				t.Fatalf("NEWEST %d, want %d (the newest segment's first record)", got, first)
			}
			if err := m.Remove("/wal/" + last); err != nil {
				t.Fatal(err)
			}
			var prev uint64 // the newest segment left (0: none)
			if len(segs) > 1 {
				prev, _ = parseName(segs[len(segs)-2], segSuffix)
			}
			want := tc.want
			if want.last == 0 {
				want.last = first - 1 // the records before the lost segment
			}
			for _, ro := range []bool{false, true} {
				_, err := Open(m, "/wal", Options{ReadOnly: ro, Logf: quiet})
				if ce := asCorrupt(err); ce == nil || ce.Segment != newestName || !strings.Contains(ce.Reason, last+" is missing") {
					t.Fatalf("Open (read-only %v): %v; want NEWEST naming %s missing", ro, err, last)
				}
			}
			bad, err := Check(m, "/wal", Options{})
			if err != nil || len(bad) != 1 || bad[0].Segment != newestName {
				t.Fatalf("Check: %v, %v; want NEWEST's", bad, err)
			}
			acts, err := Repair(m, "/wal", Options{Logf: quiet})
			if err != nil || len(acts) != 1 || acts[0].Action != "lowered" || acts[0].File != newestName {
				t.Fatalf("Repair: %q, %v; want NEWEST lowered", acts, err)
			}
			if got := newestIn(t, m); got != prev {
				t.Fatalf("NEWEST %d after the repair, want %d", got, prev)
			}
			l, got := openCheck(t, m, "/wal", Options{})
			if got != want {
				t.Fatalf("recovered %+v, want %+v", got, want)
			}
			// The log goes on, and its next segment raises the bound again.
			appendRange(t, l, want.last+1, want.last+30)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			segs = segmentsIn(t, m, "/wal")
			if first, _ := parseName(segs[len(segs)-1], segSuffix); newestIn(t, m) != first {
				t.Fatalf("NEWEST %d, newest segment %s", newestIn(t, m), segs[len(segs)-1])
			}
			if again, err := Repair(m, "/wal", Options{Logf: quiet}); err != nil || len(again) != 0 {
				t.Fatalf("second Repair: %q, %v; want nothing to do", again, err)
			}
		})
	}
}

// TestNewestFile: the file's own states. Each case changes a whole log of
// four segments and says what Open must then do.
func TestNewestFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, m *vfs.MemFS, segs []string)
		open   string // "" opens, "corrupt" fails naming NEWEST
		repair string // Repair's one action ("" none)
	}{
		{"absent (a log written before it existed)", func(t *testing.T, m *vfs.MemFS, _ []string) {
			if err := m.Remove("/wal/" + newestName); err != nil {
				t.Fatal(err)
			}
		}, "", ""},
		{"lower than the newest segment (a rotation cut short)", func(t *testing.T, m *vfs.MemFS, _ []string) {
			if err := writeNewest(m, "/wal", 5); err != nil {
				t.Fatal(err)
			}
		}, "", ""},
		{"a bit flipped", func(t *testing.T, m *vfs.MemFS, _ []string) {
			flipBit(t, m, "/wal/"+newestName, 9, 2)
		}, "corrupt", "rebuilt"},
		{"cut short", func(t *testing.T, m *vfs.MemFS, _ []string) {
			if err := m.Truncate("/wal/"+newestName, 10); err != nil {
				t.Fatal(err)
			}
		}, "corrupt", "rebuilt"},
		{"a leftover temporary file", func(t *testing.T, m *vfs.MemFS, _ []string) {
			overwrite(t, m, "/wal/"+newestTmpName, encodeNewest(99))
		}, "", "leftover"},
		{"an older segment deleted (a gap, as before)", func(t *testing.T, m *vfs.MemFS, segs []string) {
			if err := m.Remove("/wal/" + segs[1]); err != nil {
				t.Fatal(err)
			}
		}, "gap", "removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, segs := newestLog(t, 0)
			tc.change(t, m, segs)
			last, _ := parseName(segs[len(segs)-1], segSuffix)
			_, err := Open(m.Clone(), "/wal", Options{Logf: quiet})
			switch ce := asCorrupt(err); tc.open {
			case "":
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
			case "corrupt":
				if ce == nil || ce.Segment != newestName {
					t.Fatalf("Open: %v; want NEWEST's damage", err)
				}
			default:
				if ce == nil || !strings.Contains(ce.Reason, tc.open) {
					t.Fatalf("Open: %v; want %q", err, tc.open)
				}
			}
			acts, err := Repair(m, "/wal", Options{Logf: quiet})
			if err != nil || tc.repair == "" && len(acts) != 0 || tc.repair != "" && (len(acts) == 0 || acts[0].Action != tc.repair) {
				t.Fatalf("Repair: %q, %v; want %q", acts, err, tc.repair)
			}
			l, _ := openCheck(t, m, "/wal", Options{})
			l.Close()
			segs = segmentsIn(t, m, "/wal")
			if first, _ := parseName(segs[len(segs)-1], segSuffix); newestIn(t, m) != first {
				t.Fatalf("NEWEST %d, newest segment %s", newestIn(t, m), segs[len(segs)-1])
			}
			if tc.open == "" && newestIn(t, m) != last {
				t.Fatalf("NEWEST %d, want %d", newestIn(t, m), last)
			}
			if slices.Contains(listDir(t, m, "/wal"), newestTmpName) {
				t.Fatal("the temporary file is left")
			}
		})
	}
}

// TestNewestLoweredBeforeRemovals: every path that removes the newest
// segment lowers the bound first, so no crash after its removal leaves a
// log that reads as a lost segment.
func TestNewestLoweredBeforeRemovals(t *testing.T) {
	t.Run("Truncate below the newest segment", func(t *testing.T) {
		m, segs := newestLog(t, 0)
		var holds uint64 // the first record of the segment that holds 15
		for _, s := range segs {
			if first, _ := parseName(s, segSuffix); first <= 15 {
				holds = first
			}
		}
		l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 500})
		if err := l.Truncate(15, nil); err != nil {
			t.Fatal(err)
		}
		// A crash now: the state is what the directory holds.
		c := m.Crash(vfs.CrashOptions{})
		l.Close()
		if _, got := openCheck(t, c, "/wal", Options{}); got.last != 15 {
			t.Fatalf("recovered %+v, want last 15", got)
		}
		if got := newestIn(t, c); got != holds {
			t.Fatalf("NEWEST %d, want %d", got, holds)
		}
	})
	t.Run("Truncate to 0", func(t *testing.T) {
		m, _ := newestLog(t, 0)
		l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 500})
		if err := l.Truncate(0, nil); err != nil {
			t.Fatal(err)
		}
		l.Close()
		// ROLLBACKS stays, counting on for readers beside the writer.
		if names := listDir(t, m, "/wal"); !slices.Equal(names, []string{rollbacksName}) {
			t.Fatalf("files left: %v", names)
		}
	})
	// A newest segment whose header is torn, with no record in it: a crash
	// in its rotation leaves that before NEWEST is raised to it, and Open
	// removes it; after, its header was durable, and it is damage, which
	// only Repair removes, saying so (it had been cut as a torn tail, with
	// the blocks of a segment cut short: session 39's wal audit).
	for _, tc := range []struct {
		name   string
		raised bool
	}{{"a newest segment's torn header, before NEWEST names it", false}, {"a torn header that NEWEST names", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newestLog(t, 0)
			l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 500})
			appendRange(t, l, 41, 60) // into a fifth segment
			l.Close()
			segs := segmentsIn(t, m, "/wal")
			last := segs[len(segs)-1]
			first, _ := parseName(last, segSuffix)
			prev, _ := parseName(segs[len(segs)-2], segSuffix)
			overwrite(t, m, "/wal/"+last, appendSegmentHeader(nil, first, 0)[:20])
			if !tc.raised {
				if err := writeNewest(m, "/wal", prev); err != nil {
					t.Fatal(err)
				}
			} else {
				_, err := Open(m, "/wal", Options{Logf: quiet})
				if ce := asCorrupt(err); ce == nil || ce.Segment != last || !strings.Contains(ce.Reason, "not a crash's torn header") {
					t.Fatalf("Open: %v; want %s damaged", err, last)
				}
				if bad, err := Check(m, "/wal", Options{}); err != nil || len(bad) != 1 || bad[0].Segment != last {
					t.Fatalf("Check: %v, %v", bad, err)
				}
				acts, err := Repair(m, "/wal", Options{Logf: quiet})
				if err != nil || len(acts) != 1 || acts[0].Action != "removed" || acts[0].File != last {
					t.Fatalf("Repair: %q, %v; want %s removed", acts, err, last)
				}
			}
			l, got := openCheck(t, m, "/wal", Options{})
			if got.last != first-1 {
				t.Fatalf("recovered %+v, want last %d", got, first-1)
			}
			c := m.Crash(vfs.CrashOptions{})
			l.Close()
			if _, got := openCheck(t, c, "/wal", Options{}); got.last != first-1 {
				t.Fatalf("after a crash: recovered %+v, want last %d", got, first-1)
			}
			if got := newestIn(t, c); got != prev {
				t.Fatalf("NEWEST %d, want %d", got, prev)
			}
		})
	}
	t.Run("Repair cuts the log before the newest segment", func(t *testing.T) {
		m, segs := newestLog(t, 0)
		flipBit(t, m, "/wal/"+segs[1], segHeaderSize+3, 1) // the second segment's first record
		acts, err := Repair(m, "/wal", Options{Logf: quiet})
		if err != nil || len(acts) == 0 {
			t.Fatalf("Repair: %q, %v", acts, err)
		}
		first, _ := parseName(segs[1], segSuffix)
		if got := newestIn(t, m); got != first {
			t.Fatalf("NEWEST %d, want %d: the cut segment is the newest", got, first)
		}
		if _, got := openCheck(t, m, "/wal", Options{}); got.last != first-1 {
			t.Fatalf("recovered %+v, want last %d", got, first-1)
		}
	})
}

// TestNewestBesideAWriter: a reader beside a writer never takes the bound
// for a lost segment, whichever of the writer's changes falls between its
// reads: it reads the bound before and after its listing and keeps the
// lower. The writer's change runs from inside the reader's operation
// named. A truncation is a rollback, which fails the read with ErrChanged
// (the reader cannot tell what it read before it from what it read after:
// rollbacks.go); reading again succeeds.
func TestNewestBesideAWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     errorfs.OpKind // the reader's operation the change comes before
		nth    int            // its count among the reader's operations on that path
		path   string
		change func(l *Log) error
	}{
		// The bound is lowered and the newest segment removed after the
		// reader's first read: its listing lacks the segment.
		{"a truncation before the listing", errorfs.OpList, 1, "/wal", func(l *Log) error {
			return l.Truncate(30, nil)
		}},
		// A segment is begun and the bound raised after the listing: the
		// second read names a segment the listing lacks.
		{"a rotation after the listing", errorfs.OpOpen, 2, "/wal/" + newestName, func(l *Log) error {
			return l.Append(41, bodyFor(41))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 1}) // a segment a record
			appendRange(t, l, 1, 40)
			defer l.Close()
			seen, changed := 0, false
			var changeErr error
			r := errorfs.Wrap(m, errorfs.Func(func(op errorfs.Op) errorfs.Fault {
				if op.Kind == tc.at && op.Path == tc.path {
					if seen++; seen == tc.nth && !changed {
						changed, changeErr = true, tc.change(l)
					}
				}
				return errorfs.Fault{}
			}))
			ro, err := Open(r, "/wal", Options{ReadOnly: true, Logf: quiet})
			if changeErr != nil || !changed {
				t.Fatalf("the writer's change: ran %v, %v", changed, changeErr)
			}
			if tc.at == errorfs.OpList && errors.Is(err, ErrChanged) && !errors.Is(err, ErrCorrupt) {
				ro, err = Open(r, "/wal", Options{ReadOnly: true, Logf: quiet}) // again
			}
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			ro.Close()
		})
	}
}

func TestIsLogFile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		log, temp bool
	}{
		{segmentName(1), true, false},
		{snapshotName(1 << 40), true, false},
		{newestName, true, false},
		{rollbacksName, true, false},
		{lockName, true, false},
		{newestTmpName, false, true},
		{rollbacksTmpName, false, true},
		{tempName(7), false, true},
		{segmentName(7) + ".tmp", false, true},
		{snapshotName(7) + ".corrupt", false, false},
		{"1.wal", false, false},
		{"notes.txt", false, false},
		{"notes.tmp", false, false},
		{"", false, false},
	} {
		if got := IsLogFile(tc.name); got != tc.log {
			t.Errorf("IsLogFile(%q) = %v, want %v", tc.name, got, tc.log)
		}
		if got := IsTempFile(tc.name); got != tc.temp {
			t.Errorf("IsTempFile(%q) = %v, want %v", tc.name, got, tc.temp)
		}
	}
}

// TestCheckBesideAWriter: Check lists the directory, then reads each file;
// a writer beside it removes its oldest snapshot and segment in between
// (its cleanup after a snapshot). The files gone are skipped: they were
// not damage, and Check failed with "no such file" on a healthy log.
func TestCheckBesideAWriter(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{SegmentSize: 1, RetainSnapshots: 3}) // a segment a record
	defer l.Close()
	for _, h := range []uint64{10, 20, 30} {
		appendRange(t, l, h-9, h)
		snapshot(t, l, h)
	}
	snaps := slices.DeleteFunc(listDir(t, m, "/wal"), func(n string) bool { return !strings.HasSuffix(n, snapSuffix) })
	segs := segmentsIn(t, m, "/wal")
	if len(snaps) < 2 || len(segs) < 2 {
		t.Fatalf("want older files to remove: snapshots %q, segments %q", snaps, segs)
	}
	removed := false
	r := errorfs.Wrap(m, errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if op.Kind == errorfs.OpOpen && strings.HasSuffix(op.Path, snapSuffix) && !removed {
			removed = true
			for _, name := range []string{snaps[0], segs[0]} {
				if err := m.Remove("/wal/" + name); err != nil {
					t.Errorf("removing %s: %v", name, err)
				}
			}
		}
		return errorfs.Fault{}
	}))
	bad, err := Check(r, "/wal", Options{})
	if !removed {
		t.Fatal("Check opened no snapshot")
	}
	if err != nil || len(bad) != 0 {
		t.Fatalf("Check beside a writer's cleanup: %v, damage %v", err, bad)
	}
	// The rest was read: damage in a file still there is still found.
	seg := "/wal/" + segs[len(segs)/2]
	data, err := vfs.ReadFile(m, seg)
	if err != nil {
		t.Fatal(err)
	}
	flipBit(t, m, seg, int64(len(data)-3), 0)
	if bad, err := Check(m, "/wal", Options{}); err != nil || len(bad) != 1 || "/wal/"+bad[0].Segment != seg {
		t.Fatalf("a damaged segment after the removals: %v, %v", bad, err)
	}
}

// TestOpenFailsOnAnUnwritableDirectory: a writer's Open rewrites NEWEST,
// so a directory where no file can be made fails Open, naming the file;
// it opened, appended to the segment it found, and failed only at the
// first rotation or snapshot (an operations audit: up to SnapshotEvery
// blocks later, as a non-root node on a read-only directory).
func TestOpenFailsOnAnUnwritableDirectory(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{})
	appendRange(t, l, 1, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	denied := errorfs.Wrap(m, errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpRename || op.Kind == errorfs.OpRemove {
			return errorfs.Fault{Err: syscall.EACCES}
		}
		return errorfs.Fault{}
	}))
	if _, err := Open(denied, "/wal", Options{Logf: quiet}); !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), newestName) {
		t.Fatalf("Open of a directory it cannot write: %v, want EACCES naming %s", err, newestName)
	}
	// Readers need no write access.
	ro, err := Open(denied, "/wal", Options{ReadOnly: true, Logf: quiet})
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	if ro.LastHeight() != 3 {
		t.Fatalf("read-only Open recovered %d, want 3", ro.LastHeight())
	}
	ro.Close()
}
