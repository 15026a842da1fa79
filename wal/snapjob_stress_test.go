package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
)

// stressConfigs are the logs the background snapshot stress tests run:
// each sync policy, one to three retained snapshots, with and without
// KeepRecords, each compression, and segments of a few blocks, so that
// most snapshots' cleanups have segments to remove.
var stressConfigs = []struct {
	name string
	opts Options
}{
	{"SyncEveryBlock/retain1", Options{SegmentSize: 700, RetainSnapshots: 1}},
	{"SyncEveryBlock/retain2/keep5/zstd", Options{SegmentSize: 900, RetainSnapshots: 2, KeepRecords: 5, Compression: CompressZstd}},
	{"SyncInterval/retain1/keep3", Options{SegmentSize: 600, RetainSnapshots: 1, KeepRecords: 3, Sync: SyncInterval(200 * time.Microsecond)}},
	{"SyncInterval/retain3/zstd", Options{SegmentSize: 1500, RetainSnapshots: 3, Sync: SyncInterval(100 * time.Microsecond), Compression: CompressZstd}},
	{"SyncNone/retain1", Options{SegmentSize: 500, RetainSnapshots: 1, Sync: SyncNone}},
	{"SyncNone/retain2/keep10/uncompressed", Options{SegmentSize: 800, RetainSnapshots: 2, KeepRecords: 10, Sync: SyncNone, Compression: CompressNone}},
}

// stressSeeds is how many runs of each configuration the stress tests
// make; each takes stressSteps steps.
func stressSeeds() int {
	if testing.Short() {
		return 1
	}
	return 2
}

const stressSteps = 150

// TestStartSnapshotStress drives logs through random runs of Appends,
// background snapshots (StartSnapshot), Truncates, Syncs, WaitSnapshots
// and reopens, with the snapshots' writers and cleanups racing the calls
// that follow, and crashes them before random filesystem operations of any
// goroutine (under each crash model): every crash image must recover
// exactly the state after a block between the lowest acknowledged and the
// highest attempted while it was taken, and take more blocks. The scripted
// matrices (TestCrashMatrix) cover every operation of one fixed run; this
// covers the orders of operations that runs of their own make, which the
// goroutines' interleaving varies from run to run.
func TestStartSnapshotStress(t *testing.T) {
	for _, cfg := range stressConfigs {
		for seed := range stressSeeds() {
			t.Run(fmt.Sprintf("%s/seed=%d", cfg.name, seed), func(t *testing.T) {
				stressRun{opts: cfg.opts, seed: uint64(seed)}.run(t)
			})
		}
	}
}

// TestStartSnapshotStressFaults is TestStartSnapshotStress with a fault at
// a random write operation (of whichever goroutine makes it): an EIO, an
// ENOSPC that stays (a full disk) or a torn write. The call that reports
// it must fail with ErrFailed naming the fault, the log must then refuse
// appends and close without reporting it again, and what the run left, as
// it is and after each crash model, must recover as above.
func TestStartSnapshotStressFaults(t *testing.T) {
	faults := []struct {
		name   string
		fault  errorfs.Fault
		sticky bool
	}{
		{"EIO", errorfs.Fault{Err: errorfs.EIO}, false},
		{"ENOSPC", errorfs.Fault{Err: errorfs.ENOSPC}, true},
		{"torn write", errorfs.Fault{Err: errorfs.ENOSPC, Torn: true, Keep: 17}, false},
	}
	for _, cfg := range stressConfigs {
		for seed := range stressSeeds() {
			for i, f := range faults {
				at := 1 + rand.New(rand.NewPCG(uint64(seed), uint64(i))).Int64N(4*stressSteps)
				t.Run(fmt.Sprintf("%s/seed=%d/%s@op%d", cfg.name, seed, f.name, at), func(t *testing.T) {
					stressRun{opts: cfg.opts, seed: uint64(seed), faultAt: at, fault: f.fault, sticky: f.sticky}.run(t)
				})
			}
		}
	}
}

// stressRun is one run of the stress tests: the log's options, the seed
// of its calls, and the fault, if any, injected at the faultAt-th write
// operation (and every later one if sticky).
type stressRun struct {
	opts    Options
	seed    uint64
	faultAt int64 // 0: no fault
	fault   errorfs.Fault
	sticky  bool
}

// crashPoint is a set of crash images taken at one point of a run, and
// the blocks they may recover: acked is the lowest acknowledged and
// attempted the highest attempted while they were taken.
type crashPoint struct {
	where  string
	tr     tracker
	images map[string]*vfs.MemFS
}

// run makes the run, crashing it now and then, and checks every crash
// image, and what a fault left.
func (s stressRun) run(t *testing.T) {
	opts := s.opts
	opts.Logf = quiet
	m := vfs.NewMem()
	var tr liveTracker
	var step atomic.Int64

	// The crash images are checked on a goroutine of their own while the
	// run goes on.
	points := make(chan crashPoint, 4)
	var failures []string
	checked := 0
	var checker sync.WaitGroup
	checker.Go(func() {
		for p := range points {
			for model, c := range p.images {
				checked++
				if err := verifyState(c, opts, p.tr); err != nil {
					failures = append(failures, fmt.Sprintf("crash %s, %s: %v", p.where, model, err))
				}
			}
		}
	})
	crash := func(where string, seed uint64) {
		before := tr.get()
		images := crashes(m, seed)
		after := tr.get()
		points <- crashPoint{
			where:  fmt.Sprintf("at step %d, %s", step.Load(), where),
			tr:     tracker{acked: min(before.acked, after.acked), attempted: max(before.attempted, after.attempted)},
			images: images,
		}
	}

	// Before a write operation, of the caller or of a snapshot's writer:
	// the fault, or now and then a crash, a pause or a yield, to vary the
	// interleaving.
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(s.seed, 1))
	var ops atomic.Int64
	inj := errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if !errorfs.Writes.Has(op.Kind) {
			return errorfs.Fault{}
		}
		n := ops.Add(1)
		if s.faultAt > 0 && (n == s.faultAt || s.sticky && n > s.faultAt) {
			return s.fault
		}
		mu.Lock()
		x, pause := r.IntN(100), time.Duration(r.IntN(200))*time.Microsecond
		mu.Unlock()
		switch {
		case x < 2:
			crash(fmt.Sprintf("before op %d (%v)", n, op), uint64(n))
		case x < 15:
			time.Sleep(pause)
		case x < 35:
			runtime.Gosched()
		}
		return errorfs.Fault{}
	})

	err := s.drive(t, errorfs.Wrap(m, inj), opts, &tr, &step)
	switch {
	case err == nil:
		if s.faultAt > 0 && ops.Load() >= s.faultAt {
			t.Errorf("the fault at op %d fired and no call reported it", s.faultAt)
		}
	case s.faultAt == 0:
		t.Error(err)
	case !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, s.fault.Err):
		t.Errorf("%v: not the fault injected at op %d", err, s.faultAt)
	default:
		points <- crashPoint{where: "after " + err.Error(), tr: tr.get(), images: map[string]*vfs.MemFS{"as left": m.Clone()}}
	}
	crash("at the end", 0)
	close(points)
	checker.Wait()
	t.Logf("%d write operations, %d crash images checked", ops.Load(), checked)
	for i, f := range failures {
		if i == 10 {
			t.Errorf("and %d more", len(failures)-i)
			break
		}
		t.Error(f)
	}
}

// drive makes the run's calls on a log in fsys, noting in tr the blocks
// each attempts and each acknowledges, and step the step it is at. It
// returns the first error a call returned, after checking what the log
// does next.
func (s stressRun) drive(t *testing.T, fsys vfs.FS, opts Options, tr *liveTracker, step *atomic.Int64) error {
	l, err := Open(fsys, "/wal", opts)
	if err != nil {
		return fmt.Errorf("Open: %w", err)
	}
	// failed checks a log after a call failed with err: the error is a
	// failure of the log, which refuses appends, and Close does not report
	// it again.
	failed := func(err error) error {
		if !errors.Is(err, ErrFailed) {
			t.Errorf("%v: not ErrFailed", err)
		}
		if err2 := l.Append(l.LastHeight()+1, nil); !errors.Is(err2, ErrFailed) {
			t.Errorf("%v; and then an Append returned %v, not ErrFailed", err, err2)
		}
		if err2 := l.Close(); err2 != nil {
			t.Errorf("%v; and then Close returned %v", err, err2)
		}
		return err
	}
	ack := func(h uint64) { tr.set(func(tk *tracker) { tk.acked = max(tk.acked, h) }) }
	r := rand.New(rand.NewPCG(s.seed, 0))
	lastSnap := uint64(0)
	for i := range stressSteps {
		step.Store(int64(i))
		h := l.LastHeight() + 1
		tr.set(func(tk *tracker) { tk.attempted = max(tk.attempted, h) })
		if err := l.Append(h, bodyFor(h)); err != nil {
			return failed(fmt.Errorf("step %d: Append %d: %w", i, h, err))
		}
		if opts.Sync == SyncEveryBlock {
			ack(h)
		}
		ack(l.DurableHeight())
		switch x := r.IntN(100); {
		case x < 25:
			// Fewer of the snapshots of 1 MiB (stateFor).
			if h <= lastSnap || h%5 == 0 && r.IntN(3) != 0 {
				break
			}
			if err := l.StartSnapshot(h, fillWith(stateFor(h))); err != nil {
				return failed(fmt.Errorf("step %d: StartSnapshot %d: %w", i, h, err))
			}
			lastSnap = h
			ack(h) // the log is synced first
		case x < 31:
			to := h - min(h-1, uint64(1+r.IntN(12)))
			if to == h {
				break
			}
			tr.set(func(tk *tracker) { tk.acked = min(tk.acked, to) })
			if err := l.Truncate(to, fillWith(stateFor(to))); err != nil {
				return failed(fmt.Errorf("step %d: Truncate %d: %w", i, to, err))
			}
			tr.set(func(tk *tracker) { tk.acked, tk.attempted = to, to })
			lastSnap = l.SnapshotHeight()
		case x < 35:
			if err := l.Sync(); err != nil {
				return failed(fmt.Errorf("step %d: Sync: %w", i, err))
			}
			ack(h)
		case x < 38:
			if err := l.WaitSnapshot(); err != nil {
				return failed(fmt.Errorf("step %d: WaitSnapshot: %w", i, err))
			}
		case x < 41:
			if err := l.Close(); err != nil {
				return fmt.Errorf("step %d: Close: %w", i, err)
			}
			ack(h)
			if l, err = Open(fsys, "/wal", opts); err != nil {
				return fmt.Errorf("step %d: reopen: %w", i, err)
			}
			if got, err := checkRecovered(l); err != nil || got.last != h {
				l.Close()
				return fmt.Errorf("step %d: reopened at %d (%v), closed at %d", i, got.last, err, h)
			}
			lastSnap = l.SnapshotHeight()
		}
	}
	last := l.LastHeight()
	if err := l.Close(); err != nil {
		return fmt.Errorf("final Close: %w", err)
	}
	ack(last)
	return nil
}
