package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/wal"
)

// BenchmarkRecover: one op is engine.Open of a directory holding 1,040,000
// pending timers (empty payloads, 100 per actor): a snapshot taken after
// the 100th block of 10,000 schedules and 20 records of 2,000 after it.
func BenchmarkRecover(b *testing.B) {
	for _, root := range []bool{false, true} {
		b.Run(fmt.Sprintf("root=%v", root), func(b *testing.B) {
			dir := b.TempDir()
			cfg := engine.DefaultConfig()
			cfg.StateRoot, cfg.SnapshotEvery = root, 100
			// Recovery replays 2 x RollbackDepth records at least: a
			// shallow depth keeps this log's shape, a snapshot and the 20
			// records after it.
			cfg.RollbackDepth = benchRollbackDepth
			e, err := engine.Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			n := uint64(0)
			at := func(_, n uint64) uint64 { return 1_000_000 + n%500_000 }
			scheduleBlocks(b, e, 1, 100, 10_000, &n, at)
			scheduleBlocks(b, e, 101, 120, 2_000, &n, at) // 20 records after the snapshot
			reopen(b, e, dir, cfg)
		})
	}
}

// BenchmarkDurableCommit: one op is the Commit of a block of 10,000 new
// timers (empty payloads) on an engine logging to a directory, fsync per
// block: the record's encoding, compression, write and fsync (and the
// root, with root=true). Scheduling the block is out of the time.
func BenchmarkDurableCommit(b *testing.B) {
	for _, root := range []bool{false, true} {
		b.Run(fmt.Sprintf("root=%v", root), func(b *testing.B) {
			cfg := engine.DefaultConfig()
			cfg.StateRoot, cfg.SnapshotEvery = root, 1<<40 // no snapshot in the time
			e, err := engine.Open(b.TempDir(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const perBlock = 10_000
			n, h := uint64(0), uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				h++
				if err := e.BeginBlock(h); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < perBlock; k += 100 {
					tx, _ := e.Begin(actors[(n/100)%nActors], 0)
					for range 100 {
						n++
						tx.SetNonce(n)
						if _, _, err := tx.Schedule(h+1_000_000+n%100_000, nil); err != nil {
							b.Fatal(err)
						}
					}
					tx.Commit()
				}
				if _, err := e.EndBlock(nop); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := e.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(perBlock*b.N)/b.Elapsed().Seconds(), "changes/s")
		})
	}
}

// BenchmarkSnapshotCommit: one op is the Commit of an empty block that
// writes a snapshot (SnapshotEvery 1) of `pending` timers with empty
// payloads, fsync per block, state root on: the pause a node sees once
// every SnapshotEvery blocks. Inline, that is the encoding, compression,
// write, fsync and rename of the snapshot file, and the record before it;
// in the background (the default), the record and the encoding into
// memory, while the rest goes on beside the next blocks: the previous
// snapshot's write is waited for out of the time, and its duration from
// the Commit's return is reported as bg-ms.
func BenchmarkSnapshotCommit(b *testing.B) {
	for _, n := range []int{100_000, 1 << 20} {
		for _, inline := range []bool{true, false} {
			name := map[bool]string{true: "inline", false: "background"}[inline]
			b.Run(fmt.Sprintf("pending=%d/write=%s", n, name), func(b *testing.B) {
				snapshotCommit(b, n, inline)
			})
		}
	}
}

func snapshotCommit(b *testing.B, n int, inline bool) {
	cfg := engine.DefaultConfig()
	cfg.StateRoot, cfg.SnapshotEvery = true, 1<<40
	dir := b.TempDir()
	e, err := engine.Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.BeginBlock(1); err != nil {
		b.Fatal(err)
	}
	for k := 0; k < n; k += 100 {
		tx, _ := e.Begin(actors[(k/100)%nActors], uint64(k))
		for j := range 100 {
			if _, _, err := tx.Schedule(uint64(1_000_000+(k+j)%100_000), nil); err != nil {
				b.Fatal(err)
			}
		}
		tx.Commit()
	}
	if _, err := e.EndBlock(nop); err != nil {
		b.Fatal(err)
	}
	if err := e.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	cfg.SnapshotEvery, cfg.SnapshotInline = 1, inline
	if e, err = engine.Open(dir, cfg); err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var bg time.Duration
	var committed time.Time
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := e.WaitSnapshot(); err != nil {
			b.Fatal(err)
		}
		if !committed.IsZero() {
			bg += time.Since(committed)
		}
		if err := e.BeginBlock(e.Height() + 1); err != nil {
			b.Fatal(err)
		}
		if _, err := e.EndBlock(nop); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := e.Commit(); err != nil {
			b.Fatal(err)
		}
		committed = time.Now()
	}
	if err := e.WaitSnapshot(); err != nil {
		b.Fatal(err)
	}
	bg += time.Since(committed)
	if !inline {
		b.ReportMetric(bg.Seconds()*1000/float64(b.N), "bg-ms/op")
	}
}

// BenchmarkSnapshotEncode: one op is WriteSnapshot of the steady load's
// state (`pending` timers after blocks of schedules and fires, so that
// their records lie at random in insertion order) into a writer that
// keeps nothing: the encoding, which is what remains of the pause of a
// Commit that writes a snapshot in the background.
func BenchmarkSnapshotEncode(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			s := newSteady(b, n, nil)
			s.fill()
			if _, err := s.e.EndBlock(nop); err != nil {
				b.Fatal(err)
			}
			if err := s.e.Commit(); err != nil {
				b.Fatal(err)
			}
			var w countingWriter
			b.ReportAllocs()
			for b.Loop() {
				if err := s.e.WriteSnapshot(&w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w.n)/float64(b.N), "bytes/op")
		})
	}
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkRecoverTail: one op is engine.Open of a directory where the
// snapshot is followed by the longest tail the default settings leave:
// SnapshotEvery-1 records (999) of a steady load, 2,000 timers scheduled
// and about as many delivered per block, about 200,000 pending (empty
// payloads). Recovery replays every record of the tail; with the state
// root on, it checks the last record's root.
func BenchmarkRecoverTail(b *testing.B) {
	for _, root := range []bool{false, true} {
		b.Run(fmt.Sprintf("root=%v", root), func(b *testing.B) {
			e, dir, cfg := openToRecover(b, root)
			rng := rand.New(rand.NewPCG(1, 2))
			n := uint64(0)
			scheduleBlocks(b, e, 1, 2*engine.DefaultSnapshotEvery-1, 2_000, &n,
				func(h, _ uint64) uint64 { return h + 1 + rng.Uint64N(200) })
			reopen(b, e, dir, cfg)
		})
	}
}

// BenchmarkRecoverBulk: one op is engine.Open of a directory holding 20
// records of 100,000 new timers each (empty payloads, 2,000,000 pending)
// and no snapshot yet, as in a chain's first SnapshotEvery blocks after a
// bulk load: recovery replays every record and, with the state root on,
// builds the tree of all of them for the last record's root.
func BenchmarkRecoverBulk(b *testing.B) {
	for _, root := range []bool{false, true} {
		b.Run(fmt.Sprintf("root=%v", root), func(b *testing.B) {
			e, dir, cfg := openToRecover(b, root)
			n := uint64(0)
			scheduleBlocks(b, e, 1, 20, 100_000, &n, func(_, n uint64) uint64 { return 1_000_000 + n%500_000 })
			reopen(b, e, dir, cfg)
		})
	}
}

// openToRecover opens an engine on a new directory, for a benchmark of
// its recovery: the state root on or off, a shallow rollback depth, and
// an fsync a second (the setup's pace, not the recovery's).
func openToRecover(b *testing.B, root bool) (*engine.Engine, string, engine.Config) {
	dir := b.TempDir()
	cfg := engine.DefaultConfig()
	cfg.StateRoot, cfg.RollbackDepth = root, benchRollbackDepth
	cfg.Sync = wal.SyncInterval(time.Second)
	e, err := engine.Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return e, dir, cfg
}

// reopen closes e, then times engine.Open of its directory: it checks
// that the recovered engine has e's pending count and root.
func reopen(b *testing.B, e *engine.Engine, dir string, cfg engine.Config) {
	pending, want := e.Pending(), e.Root()
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		// As in a fresh process: no garbage of an earlier engine for the
		// collector to trace in this one's time.
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		r, err := engine.Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if r.Pending() != pending || r.Root() != want {
			b.Fatalf("recovered %d pending, root %x; want %d, %x", r.Pending(), r.Root(), pending, want)
		}
		r.Close()
	}
	b.ReportMetric(float64(pending), "timers")
}

// scheduleBlocks runs blocks from..to on e: each schedules perBlock
// timers with empty payloads, 100 per actor and transaction, the timer of
// nonce n in block h at height(h, n), and delivers what is due. n is the
// last nonce used.
func scheduleBlocks(b *testing.B, e *engine.Engine, from, to uint64, perBlock int, n *uint64, height func(h, n uint64) uint64) {
	for h := from; h <= to; h++ {
		if err := e.BeginBlock(h); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < perBlock; k += 100 {
			tx, err := e.Begin(actors[(*n/100)%nActors], 0)
			if err != nil {
				b.Fatal(err)
			}
			for range 100 {
				*n++
				tx.SetNonce(*n)
				if _, _, err := tx.Schedule(height(h, *n), nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.EndBlock(nop); err != nil {
			b.Fatal(err)
		}
		if err := e.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
