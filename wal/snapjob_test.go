package wal

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// fillWith is a StartSnapshot fill that writes b.
func fillWith(b []byte) func(w io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

// onSnapshotTemp injects fault, or runs hold, at the first operation of a
// kind on the temporary file of the snapshot at height; every other
// operation passes.
func onSnapshotTemp(height uint64, kind errorfs.OpKind, fault errorfs.Fault, hold func()) errorfs.Injector {
	done := false
	return errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if done || op.Kind != kind || !strings.HasSuffix(op.Path, tempName(height)) {
			return errorfs.Fault{}
		}
		done = true
		if hold != nil {
			hold()
		}
		return fault
	})
}

// heldSnapshot is a filesystem over a Mem whose snapshot at one height
// waits at one of its operations (which then fails with a given fault)
// until release is closed, having closed held; once armed, the segments'
// operations of one kind fail with EIO.
type heldSnapshot struct {
	fs            vfs.FS
	armed         atomic.Bool
	held, release chan struct{}
}

func holdSnapshot(m vfs.FS, height uint64, holdAt errorfs.OpKind, fault errorfs.Fault, segKind errorfs.OpKind) *heldSnapshot {
	h := &heldSnapshot{held: make(chan struct{}), release: make(chan struct{})}
	hold := onSnapshotTemp(height, holdAt, fault, func() {
		close(h.held)
		<-h.release
	})
	h.fs = errorfs.Wrap(m, errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		switch {
		case strings.HasSuffix(op.Path, tempName(height)): // the job's goroutine only
			return hold.Inject(op)
		case h.armed.Load() && op.Kind == segKind && strings.HasSuffix(op.Path, segSuffix):
			return errorfs.Fault{Err: errorfs.EIO}
		}
		return errorfs.Fault{}
	}))
	return h
}

// TestStartSnapshotGoesOnInBackground: StartSnapshot returns while the
// snapshot's file is still being written (its fsync held here), blocks
// are appended meanwhile, and once the file is in place the snapshot
// counts: SnapshotHeight, cleanup of what it makes unneeded, and recovery
// from it.
func TestStartSnapshotGoesOnInBackground(t *testing.T) {
	m := vfs.NewMem()
	release, held := make(chan struct{}), make(chan struct{})
	fsys := errorfs.Wrap(m, onSnapshotTemp(20, errorfs.OpSync, errorfs.Fault{}, func() {
		close(held)
		<-release
	}))
	l, _ := openCheck(t, fsys, "/wal", Options{SegmentSize: 900, RetainSnapshots: 1})
	appendRange(t, l, 1, 20)
	snapshot(t, l, 10)
	segsBefore := len(segmentsIn(t, m, "/wal"))
	if err := l.StartSnapshot(20, fillWith(stateFor(20))); err != nil {
		t.Fatal(err)
	}
	<-held // the file is written; its fsync waits for release
	appendRange(t, l, 21, 40)
	if h := l.SnapshotHeight(); h != 10 {
		t.Fatalf("SnapshotHeight %d before the snapshot at 20 is in place", h)
	}
	if l.LastHeight() != 40 || l.DurableHeight() != 40 {
		t.Fatalf("last %d durable %d, want 40", l.LastHeight(), l.DurableHeight())
	}
	close(release)
	if err := l.WaitSnapshot(); err != nil {
		t.Fatal(err)
	}
	if h := l.SnapshotHeight(); h != 20 {
		t.Fatalf("SnapshotHeight %d after the wait, want 20", h)
	}
	if slices.Contains(listDir(t, m, "/wal"), snapshotName(10)) {
		t.Fatal("the snapshot at 10 is still there: RetainSnapshots is 1")
	}
	if n := len(segmentsIn(t, m, "/wal")); n >= segsBefore+segsFor(t, m) {
		t.Fatalf("%d segments, %d before: none removed", n, segsBefore)
	}
	if err := l.StartSnapshot(20, fillWith(stateFor(20))); !errors.Is(err, ErrHeight) {
		t.Fatalf("a second snapshot at 20: %v, want ErrHeight", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitSnapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitSnapshot after Close: %v, want ErrClosed", err)
	}
	if _, got := openCheck(t, m, "/wal", Options{}); got != (recovered{snap: 20, last: 40}) {
		t.Fatalf("recovered %+v, want snapshot 20 and blocks to 40", got)
	}
}

// segsFor is how many segments blocks 21-40 took: appended after the
// count above, they are no evidence of removal.
func segsFor(t *testing.T, m *vfs.MemFS) int {
	n := 0
	for _, name := range segmentsIn(t, m, "/wal") {
		if h, _ := parseName(name, segSuffix); h > 20 {
			n++
		}
	}
	return n
}

// TestStartSnapshotSourceError: fill's own error fails StartSnapshot, not
// the log, and leaves no file; the next snapshot at that height works.
func TestStartSnapshotSourceError(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{})
	appendRange(t, l, 1, 3)
	boom := errors.New("boom")
	for _, size := range []int{0, 100, snapChunkSize, 3*snapChunkSize + 5} {
		err := l.StartSnapshot(3, func(w io.Writer) error {
			if _, err := w.Write(make([]byte, size)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || errors.Is(err, ErrFailed) {
			t.Fatalf("after %d bytes: %v, want boom and not ErrFailed", size, err)
		}
		if names := listDir(t, m, "/wal"); slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, tmpSuffix) }) {
			t.Fatalf("after %d bytes: a temporary file is left: %v", size, names)
		}
	}
	appendRange(t, l, 4, 4)
	if err := l.StartSnapshot(4, fillWith(stateFor(4))); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, got := openCheck(t, m, "/wal", Options{}); got != (recovered{snap: 4, last: 4}) {
		t.Fatalf("%+v", got)
	}
}

// TestStartSnapshotFailure: a filesystem failure of the background write
// fails the log and is reported once: by the first call after it
// (WaitSnapshot, Append), or by Close if none came. If fill is still
// running it stops with the failure, also when the file could not even be
// created. The blocks appended stay.
func TestStartSnapshotFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   errorfs.OpKind
		report string // the call that reports the failure
	}{
		{"write/WaitSnapshot", errorfs.OpWrite, "wait"},
		{"sync/Append", errorfs.OpSync, "append"},
		{"rename/Close", errorfs.OpRename, "close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := openCheck(t, errorfs.Wrap(m, onSnapshotTemp(5, tc.kind, errorfs.Fault{Err: errorfs.EIO}, nil)), "/wal", Options{})
			appendRange(t, l, 1, 5)
			if err := l.StartSnapshot(5, fillWith(stateFor(5))); err != nil && !errors.Is(err, errorfs.EIO) {
				t.Fatalf("StartSnapshot: %v", err)
			}
			var err error
			switch tc.report {
			case "wait":
				err = l.WaitSnapshot()
			case "append":
				for l.Err() == nil { // the Append below must follow the failure
					runtime.Gosched()
				}
				err = l.Append(6, bodyFor(6))
			}
			closeErr := l.Close()
			if tc.report == "close" {
				err, closeErr = closeErr, nil
			}
			if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.EIO) {
				t.Fatalf("%s returned %v, want the snapshot's failure", tc.report, err)
			}
			if closeErr != nil {
				t.Fatalf("Close reported it again: %v", closeErr)
			}
			if _, got := openCheck(t, m, "/wal", Options{}); got != (recovered{last: 5}) {
				t.Fatalf("recovered %+v, want blocks 1-5 and no snapshot", got)
			}
		})
	}

	// The writer fails while fill still runs: fill's next write fails, and
	// StartSnapshot returns the log's failure.
	m := vfs.NewMem()
	l, _ := openCheck(t, errorfs.Wrap(m, onSnapshotTemp(5, errorfs.OpWrite, errorfs.Fault{Err: errorfs.ENOSPC}, nil)), "/wal", Options{})
	appendRange(t, l, 1, 5)
	chunk := bytes.Repeat([]byte{7}, snapChunkSize)
	writes := 0
	err := l.StartSnapshot(5, func(w io.Writer) error {
		for ; writes < 1000; writes++ { // the writer takes a chunk and fails
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			runtime.Gosched()
		}
		return nil
	})
	if writes == 1000 {
		t.Fatal("fill went on to its end: the writer's failure did not stop it")
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ENOSPC) {
		t.Fatalf("StartSnapshot: %v, want the writer's failure", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v (StartSnapshot reported the failure)", err)
	}
}

// TestStartSnapshotCreateFailure: the snapshot's file cannot even be
// created: fill stops at its next write (it once went on, and past 512
// queued chunks waited for good on a writer that had given up), and
// StartSnapshot returns the failure.
func TestStartSnapshotCreateFailure(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, errorfs.Wrap(m, onSnapshotTemp(5, errorfs.OpCreate, errorfs.Fault{Err: errorfs.EIO}, nil)), "/wal", Options{})
	appendRange(t, l, 1, 5)
	chunk := make([]byte, snapChunkSize)
	const most = snapQueueChunks + 8
	writes := 0
	err := l.StartSnapshot(5, func(w io.Writer) error {
		for ; writes < most; writes++ {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			if l.Err() != nil {
				runtime.Gosched() // let the writer drain
			}
		}
		return nil
	})
	if writes == most {
		t.Fatal("fill went on to its end: the failure to create the file did not stop it")
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.EIO) {
		t.Fatalf("StartSnapshot: %v, want the failure to create the file", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v (StartSnapshot reported the failure)", err)
	}
	if _, got := openCheck(t, m, "/wal", Options{}); got != (recovered{last: 5}) {
		t.Fatalf("recovered %+v, want blocks 1-5 and no snapshot", got)
	}
}

// TestStartSnapshotFillPanics: a panic in fill goes on up, after the
// write in the background has ended and its file is gone; the log is not
// failed and goes on (it once waited for good on the job).
func TestStartSnapshotFillPanics(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, m, "/wal", Options{})
	appendRange(t, l, 1, 5)
	func() {
		defer func() {
			if r := recover(); r != "encoder bug" {
				t.Fatalf("recovered %v, want the fill's panic", r)
			}
		}()
		l.StartSnapshot(5, func(w io.Writer) error {
			w.Write(make([]byte, 3*snapChunkSize))
			panic("encoder bug")
		})
	}()
	if names := listDir(t, m, "/wal"); slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, tmpSuffix) }) {
		t.Fatalf("a temporary file is left: %v", names)
	}
	appendRange(t, l, 6, 6)
	if err := l.StartSnapshot(6, fillWith(stateFor(6))); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, got := openCheck(t, m, "/wal", Options{}); got != (recovered{snap: 6, last: 6}) {
		t.Fatalf("%+v", got)
	}
}

// TestStartSnapshotFailureDuringAppend: the background write fails while
// an Append is past its first check: that Append reports the failure,
// and Close does not report it again.
func TestStartSnapshotFailureDuringAppend(t *testing.T) {
	m := vfs.NewMem()
	var l *Log
	var armed atomic.Bool
	appending := make(chan struct{})
	inj := errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		switch {
		case op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, tempName(5)):
			<-appending // the job starts once Append 6 is past its check
		case op.Kind == errorfs.OpWrite && strings.HasSuffix(op.Path, tempName(5)):
			return errorfs.Fault{Err: errorfs.EIO}
		case op.Kind == errorfs.OpWrite && strings.HasSuffix(op.Path, segSuffix) && armed.CompareAndSwap(true, false):
			close(appending)
			for l.Err() == nil { // the job fails while Append 6 writes
				runtime.Gosched()
			}
		}
		return errorfs.Fault{}
	})
	l, _ = openCheck(t, errorfs.Wrap(m, inj), "/wal", Options{})
	appendRange(t, l, 1, 5)
	armed.Store(true)
	if err := l.StartSnapshot(5, fillWith(stateFor(5))); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(6, bodyFor(6)); !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.EIO) {
		t.Fatalf("Append: %v, want the snapshot's failure", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close reported the failure again: %v", err)
	}
}

// TestFailedLogInstallsNoSnapshot: the log fails while a snapshot is
// written in the background (an Append's write, a background sync): the
// snapshot is not renamed into place, or if its rename had begun, its
// cleanup removes nothing (it once went in, and its cleanup removed the
// older snapshot and segments from a log that refuses writes).
func TestFailedLogInstallsNoSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sync      SyncPolicy
		kind      errorfs.OpKind // what fails on the segments once armed
		holdAt    errorfs.OpKind // the snapshot's operation that waits for the failure
		installed bool           // the snapshot's file is in place all the same
	}{
		{"append", SyncEveryBlock, errorfs.OpWrite, errorfs.OpSync, false},
		{"background sync", SyncInterval(time.Millisecond), errorfs.OpSync, errorfs.OpSync, false},
		{"append during the rename", SyncEveryBlock, errorfs.OpWrite, errorfs.OpRename, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			h := holdSnapshot(m, 20, tc.holdAt, errorfs.Fault{}, tc.kind)
			l, _ := openCheck(t, h.fs, "/wal", Options{SegmentSize: 900, RetainSnapshots: 1, Sync: tc.sync})
			appendRange(t, l, 1, 20)
			snapshot(t, l, 10)
			before := listDir(t, m, "/wal")
			if err := l.StartSnapshot(20, fillWith(stateFor(20))); err != nil {
				t.Fatal(err)
			}
			<-h.held
			h.armed.Store(true)
			err := l.Append(21, bodyFor(21))
			for err == nil && l.Err() == nil { // the background sync fails
				time.Sleep(time.Millisecond)
			}
			close(h.release)
			if err := l.WaitSnapshot(); !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.EIO) {
				t.Fatalf("WaitSnapshot: %v, want the log's failure", err)
			}
			if tc.installed {
				before = append(before, snapshotName(20))
				slices.Sort(before)
			}
			after := slices.DeleteFunc(listDir(t, m, "/wal"), func(n string) bool { return n == segmentName(21) })
			if !slices.Equal(after, before) {
				t.Fatalf("files %v after the failure, %v before: the failed log wrote", after, before)
			}
			l.Close()
		})
	}
}

// TestCloseReportsFailure: Close returns the log's failure (the first) if
// no call has returned it, and nil if one has: a background sync's
// failure with no call after it (it once returned nil), also while a
// snapshot was written (it once returned nil if the snapshot went well,
// the sync's failure as the snapshot's if not), or reported by an Append
// or WaitSnapshot. An Append on the failed log returns at once, while the
// snapshot is still being written (it once waited for it).
func TestCloseReportsFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot bool  // a snapshot is being written when the sync fails
		snapErr  error // and then its fsync fails with this
		call     string
	}{
		{"sync/Close", false, nil, ""},
		{"sync/Append", false, nil, "append"},
		{"sync during a snapshot/Close", true, nil, ""},
		{"sync then the snapshot/Close", true, errorfs.ENOSPC, ""},
		{"sync then the snapshot/WaitSnapshot", true, errorfs.ENOSPC, "wait"},
		{"sync then the snapshot/Append", true, errorfs.ENOSPC, "append"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			h := holdSnapshot(m, 5, errorfs.OpSync, errorfs.Fault{Err: tc.snapErr}, errorfs.OpSync)
			l, _ := openCheck(t, h.fs, "/wal", Options{Sync: SyncInterval(time.Millisecond)})
			appendRange(t, l, 1, 5)
			if tc.snapshot {
				if err := l.StartSnapshot(5, fillWith(stateFor(5))); err != nil {
					t.Fatal(err)
				}
				<-h.held
			}
			h.armed.Store(true)
			appendRange(t, l, 6, 6)
			for deadline := time.Now().Add(5 * time.Second); l.Err() == nil; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the background sync did not fail")
				}
			}
			// The failure each call returns: the background sync's, the first.
			isSyncs := func(err error) bool {
				var fe *FailedError
				return errors.As(err, &fe) && fe.Op == "sync" && errors.Is(err, errorfs.EIO)
			}
			if tc.call == "append" {
				returned := make(chan error, 1)
				go func() { returned <- l.Append(7, bodyFor(7)) }()
				select {
				case err := <-returned:
					if !isSyncs(err) {
						t.Fatalf("Append: %v, want the sync's failure", err)
					}
				case <-time.After(time.Minute):
					t.Fatal("Append on the failed log waits for the snapshot")
				}
			}
			if tc.snapshot {
				close(h.release)
			}
			if tc.call == "wait" {
				if err := l.WaitSnapshot(); !isSyncs(err) {
					t.Fatalf("WaitSnapshot: %v, want the sync's failure", err)
				}
			}
			err := l.Close()
			if tc.call == "" && !isSyncs(err) {
				t.Fatalf("Close: %v, want the sync's failure", err)
			}
			if tc.call != "" && err != nil {
				t.Fatalf("Close: %v, want nil (%s returned the failure)", err, tc.call)
			}
			if _, got := openCheck(t, m, "/wal", Options{}); got.snap != 0 {
				t.Fatalf("recovered %+v: the failed log installed the snapshot", got)
			}
		})
	}
}

// TestSnapshotWriteStopsAtFailure: once the snapshot's writer has failed,
// a Write in progress fails at its next chunk instead of cutting the rest
// into chunks for nobody (it once went on to its end: here 64 MiB, with a
// queue of one chunk that the writer drained); the chunks it queued are
// released when the job ends.
func TestSnapshotWriteStopsAtFailure(t *testing.T) {
	m := vfs.NewMem()
	l, _ := openCheck(t, errorfs.Wrap(m, onSnapshotTemp(5, errorfs.OpWrite, errorfs.Fault{Err: errorfs.EIO}, nil)), "/wal", Options{})
	appendRange(t, l, 1, 5)
	j := newSnapJob(5)
	j.chunks = make(chan []byte, 1) // the Write waits for the writer at the second chunk
	go l.run(j)
	f := &snapFeeder{j: j}
	n, err := f.Write(make([]byte, 64*snapChunkSize))
	f.end(err)
	<-j.done
	// One chunk taken by the writer, one queued, one in hand, and one
	// sent as the writer failed.
	if !errors.Is(err, errWriterFailed) || n > 4*snapChunkSize {
		t.Fatalf("Write took %d bytes (%d chunks) and returned %v, want errWriterFailed within 4 chunks", n, n/snapChunkSize, err)
	}
	if !errors.Is(j.err, ErrFailed) || !errors.Is(j.err, errorfs.EIO) {
		t.Fatalf("the job's result: %v, want the writer's failure", j.err)
	}
	if len(j.chunks) != 0 || len(j.free) != 0 {
		t.Fatalf("the ended job holds %d queued and %d free chunks", len(j.chunks), len(j.free))
	}
	l.Close()
}

// TestStartSnapshotReleasesChunks: a job that has written its snapshot
// holds no chunk of the payload (it once kept those written for reuse
// until a call waited for it).
func TestStartSnapshotReleasesChunks(t *testing.T) {
	l, _ := openCheck(t, vfs.NewMem(), "/wal", Options{})
	appendRange(t, l, 1, 5)
	if err := l.StartSnapshot(5, fillWith(make([]byte, 6*snapChunkSize+5))); err != nil {
		t.Fatal(err)
	}
	j := l.job
	<-j.done
	if len(j.chunks) != 0 || len(j.free) != 0 {
		t.Fatalf("the ended job holds %d queued and %d free chunks", len(j.chunks), len(j.free))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
