package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/timerlane/timerlane/engine"
)

// The latency benchmarks time each call of an operation whose cost once
// grew with the number of timers at one height: a node's block pauses for
// its slowest call, not for the mean. Each reports the mean (ns/call), the
// 99.9th percentile (p99.9-ns) and the slowest call (max-ns); the clock
// read around every call adds a few tens of nanoseconds to each.

// latency keeps the timed calls.
type latency struct{ calls []time.Duration }

func (l *latency) add(d time.Duration) { l.calls = append(l.calls, d) }

// report gives the mean, the 99.9th percentile and the slowest call. On a
// shared machine the slowest of a million calls is a preemption (a loop of
// additions timed the same way has its own of tens of microseconds), which
// the percentile leaves out.
func (l *latency) report(b *testing.B) {
	var sum time.Duration
	for _, d := range l.calls {
		sum += d
	}
	slices.Sort(l.calls)
	n := len(l.calls)
	b.ReportMetric(float64(sum.Nanoseconds())/float64(n), "ns/call")
	b.ReportMetric(float64(l.calls[n-1-n/1000].Nanoseconds()), "p99.9-ns")
	b.ReportMetric(float64(l.calls[n-1].Nanoseconds()), "max-ns")
}

// crowd returns an engine in block 1, with rollback off, holding n timers
// whose heights height gives, and their ids: timer k is actor k/1024's.
func crowd(tb testing.TB, n int, height func(k int) uint64) (*engine.Engine, []engine.TimerID) {
	e := newEngineDepth(tb, 0)
	if err := e.BeginBlock(1); err != nil {
		tb.Fatal(err)
	}
	ids := make([]engine.TimerID, n)
	var tx engine.Tx
	for k := range n {
		if k%1024 == 0 {
			if k > 0 {
				if err := tx.Commit(); err != nil {
					tb.Fatal(err)
				}
			}
			var err error
			if tx, err = e.Begin(actors[k/1024], 0); err != nil {
				tb.Fatal(err)
			}
		}
		tx.SetNonce(uint64(k))
		id, _, err := tx.Schedule(height(k), nil)
		if err != nil {
			tb.Fatal(err)
		}
		ids[k] = id
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return e, ids
}

// endBlock ends and commits the open block (a no-op Executor).
func endBlock(tb testing.TB, e *engine.Engine) {
	if _, err := e.EndBlock(nop); err != nil {
		tb.Fatal(err)
	}
	if err := e.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkLatencyCancel: one op cancels, one call a transaction in a
// random order, every one of a million timers due at one height of the
// ring: the bucket's compaction, spread over later cancels, must not make
// any one of them long (a cancel that rewrote the bucket whole took tens
// of milliseconds; SPEC §9).
func BenchmarkLatencyCancel(b *testing.B) {
	const n = 1 << 20
	var l latency
	for b.Loop() {
		b.StopTimer()
		e, ids := crowd(b, n, func(int) uint64 { return 3000 })
		order := rand.New(rand.NewPCG(1, 2)).Perm(n)
		b.StartTimer()
		for _, k := range order {
			start := time.Now()
			tx, err := e.Begin(actors[k/1024], 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Cancel(ids[k]); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			l.add(time.Since(start))
		}
	}
	l.report(b)
}

// BenchmarkLatencySkipEmpty: one op is a SkipEmpty of one block, with a
// million timers due within one epoch of the epoch tier ahead: finding
// the next due height must not read that epoch's bucket at every call
// (SPEC §9).
func BenchmarkLatencySkipEmpty(b *testing.B) {
	const n, epochStart = 1 << 20, 16 * 1024 // beyond the ring's 4,096 blocks
	for _, spread := range []uint64{1, 1024} {
		b.Run(fmt.Sprintf("heights=%d", spread), func(b *testing.B) {
			var e *engine.Engine
			var l latency
			for b.Loop() {
				// The epoch stays in the epoch tier while the ring's window
				// ends before it.
				if e == nil || e.Height()+1+4096 >= epochStart {
					b.StopTimer()
					if e != nil {
						e.Close()
					}
					e, _ = crowd(b, n, func(k int) uint64 { return epochStart + uint64(k)%spread })
					endBlock(b, e)
					b.StartTimer()
				}
				start := time.Now()
				to := e.Height() + 1
				if got, err := e.SkipEmpty(to); err != nil || got != to {
					b.Fatalf("SkipEmpty(%d) = %d, %v", to, got, err)
				}
				l.add(time.Since(start))
			}
			l.report(b)
		})
	}
}

// BenchmarkLatencyEpochStage: one op runs, one by one and each timed,
// the 1,040 empty blocks around the epoch (1,024 blocks) in which a
// million timers of one far epoch move from the overflow tier to the
// epoch tier, a share at every block: no block may pay for the whole
// epoch (counting it once took a scan of the B-tree; SPEC §9). The timers
// move into chunks of the arena, which grows; with reserved=true the
// engine made room for them ahead (Engine.Reserve), and no block waits
// for the kernel to map new memory.
func BenchmarkLatencyEpochStage(b *testing.B) {
	const n = 1 << 20
	// Under the default layout (ring 4,096 = 4 epochs of 1,024, 8,192
	// epochs in the epoch tier), epoch 8,199 is staged during window 3,
	// the blocks 3,072 to 4,095.
	const epoch, from, to = 8199, 3064, 4104
	for _, reserved := range []bool{false, true} {
		b.Run(fmt.Sprintf("reserved=%v", reserved), func(b *testing.B) {
			var l latency
			for b.Loop() {
				b.StopTimer()
				e, _ := crowd(b, n, func(k int) uint64 { return epoch*1024 + uint64(k)%1024 })
				if reserved {
					if err := e.Reserve(n); err != nil {
						b.Fatal(err)
					}
				}
				endBlock(b, e)
				if _, err := e.SkipEmpty(from - 1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for h := uint64(from); h <= to; h++ {
					start := time.Now()
					if err := e.BeginBlock(h); err != nil {
						b.Fatal(err)
					}
					endBlock(b, e)
					l.add(time.Since(start))
				}
				b.StopTimer()
				if got := e.Pending(); got != n {
					b.Fatalf("%d pending, want %d", got, n)
				}
				b.StartTimer()
			}
			l.report(b)
		})
	}
}
