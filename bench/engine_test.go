package bench

import (
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/calendar"
)

var (
	payloadSizes = []int{0, 32}
	pendingSizes = []int{10_000, 1_000_000}
)

// payload returns n bytes that are not a routing payload.
func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

// idKeccak is Schedule's Keccak alone: keccak256 of a timer id's preimage,
// actor[20] || height[8] || payload || nonce[8], computed as the engine
// does, the sponge read in place, not Sum, which copies its state. Its
// users write the three calls in their loops: a method around them would
// not inline, and its call would count in the baseline.
type idKeccak struct {
	h        hash.Hash
	squeeze  io.Reader
	pre, out []byte
}

func newIDKeccak(tb testing.TB, payload int) idKeccak {
	h := sha3.NewLegacyKeccak256()
	squeeze, ok := h.(io.Reader)
	if !ok {
		tb.Fatal("x/crypto's keccak256 no longer reads in place: the engine falls back to Sum, and so must this baseline")
	}
	return idKeccak{h: h, squeeze: squeeze, pre: make([]byte, 20+8+payload+8), out: make([]byte, 32)}
}

// BenchmarkKeccak is the baseline of Schedule: one idKeccak.
func BenchmarkKeccak(b *testing.B) {
	for _, n := range payloadSizes {
		b.Run(fmt.Sprintf("payload=%d", n), func(b *testing.B) {
			k := newIDKeccak(b, n)
			b.ReportAllocs()
			for b.Loop() {
				k.h.Reset()
				k.h.Write(k.pre)
				k.squeeze.Read(k.out)
			}
		})
	}
}

// BenchmarkSchedule: one op is one successful Schedule call with about
// `pending` timers pending, perTx calls per transaction (Begin and Commit
// are in the time, 1/64th each per op). Ending the block, which fires as
// many timers as the block scheduled, is out of the time.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range pendingSizes {
		for _, p := range payloadSizes {
			b.Run(fmt.Sprintf("pending=%d/payload=%d", n, p), func(b *testing.B) {
				s := newSteady(b, n, payload(p))
				b.ReportAllocs()
				for b.Loop() {
					if s.inBlock == perBlock {
						b.StopTimer()
						s.closeTx()
						s.next()
						b.StartTimer()
					}
					s.schedule()
				}
			})
		}
	}
}

// BenchmarkScheduleOverKeccak measures Schedule's target as one figure:
// Schedule's time less its Keccak's (over-keccak-ns/op). One op is one
// Schedule, as in BenchmarkSchedule, and one keccak256 of a preimage as
// long, as in BenchmarkKeccak, run in alternating batches of 256, each
// timed. Both halves of a difference then run on the same machine: on a
// shared one, two benchmarks run one after the other differ by as much
// as the figure (session 23: BenchmarkKeccak/payload=0 took 323.8 to
// 451.2 ns over 12 runs of one binary in a quarter hour, -test.benchtime
// 1000000x). Ending the block is out of the time.
func BenchmarkScheduleOverKeccak(b *testing.B) {
	const batch = perBlock / 4 // a block ends between two batches
	for _, n := range pendingSizes {
		for _, p := range payloadSizes {
			b.Run(fmt.Sprintf("pending=%d/payload=%d", n, p), func(b *testing.B) {
				s := newSteady(b, n, payload(p))
				k := newIDKeccak(b, p)
				var keccak, sched time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += batch {
					m := min(batch, b.N-done)
					if s.inBlock == perBlock {
						b.StopTimer()
						s.closeTx()
						s.next()
						b.StartTimer()
					}
					t0 := time.Now()
					for range m {
						k.h.Reset()
						k.h.Write(k.pre)
						k.squeeze.Read(k.out)
					}
					t1 := time.Now()
					for range m {
						s.schedule()
					}
					t2 := time.Now()
					keccak += t1.Sub(t0)
					sched += t2.Sub(t1)
				}
				b.ReportMetric(float64(keccak.Nanoseconds())/float64(b.N), "keccak-ns/op")
				b.ReportMetric(float64(sched.Nanoseconds())/float64(b.N), "schedule-ns/op")
				b.ReportMetric(float64((sched-keccak).Nanoseconds())/float64(b.N), "over-keccak-ns/op")
			})
		}
	}
}

// BenchmarkCancel: one op is one Cancel call and its share of the Commit
// that unlinks the timer from its tier, with `pending` timers pending in the
// tier named, cancelled oldest first (at 1M their memory is cold).
// Scheduling the replacements is out of the time.
func BenchmarkCancel(b *testing.B) {
	tiers := []struct {
		name string
		t    calendar.Tier
	}{{"ring", calendar.TierRing}, {"epoch", calendar.TierEpoch}, {"overflow", calendar.TierOverflow}}
	for _, n := range []int{10 * perBlock, 1 << 20} { // multiples of perBlock
		for _, tr := range tiers {
			b.Run(fmt.Sprintf("pending=%d/tier=%s", n, tr.name), func(b *testing.B) {
				c := newCanceller(b, tierHeights(tr.t, n))
				b.ReportAllocs()
				for b.Loop() {
					if c.k%perBlock == 0 && c.k > 0 {
						b.StopTimer()
						c.closeTx()
						c.refill(perBlock)
						b.StartTimer()
					}
					c.cancel()
				}
			})
		}
	}
}

// BenchmarkEndBlock: one op is one block's EndBlock with a no-op Executor,
// Commit and the next BeginBlock, delivering about perBlock due timers with
// about `pending` timers pending; ns/timer is the cost per delivered timer.
// Scheduling the block's timers is out of the time.
func BenchmarkEndBlock(b *testing.B) {
	for _, n := range pendingSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			s := newSteady(b, n, nil)
			fired := s.fired
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s.fill()
				b.StartTimer()
				s.next()
			}
			fired = s.fired - fired
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fired), "ns/timer")
			b.ReportMetric(float64(fired)/float64(b.N), "timers/op")
		})
	}
}

// BenchmarkPendingBytes measures the live heap that 1M pending timers with
// empty payloads hold, without and with the state root's tree: actors with
// 100 each, their heights a third in each tier. One op builds the engine;
// B/timer is the figure. 16M runs when the -bench pattern names it
// ("pending=16000000": about 6 GB and a minute or more), to show the
// figure does not grow with the count.
func BenchmarkPendingBytes(b *testing.B) {
	for _, n := range withNamed([]int{1_000_000}, 16_000_000) {
		for _, root := range []bool{false, true} {
			b.Run(fmt.Sprintf("pending=%d/root=%v", n, root), func(b *testing.B) { pendingBytes(b, n, root) })
		}
	}
}

func pendingBytes(b *testing.B, total int, root bool) {
	const each = 100
	actorCount := total / each
	r := rand.New(rand.NewPCG(8, 9))
	tiers := [][]uint64{
		tierHeights(calendar.TierRing, total/3),
		tierHeights(calendar.TierEpoch, total/3),
		tierHeights(calendar.TierOverflow, total-2*(total/3)),
	}
	heights := make([]uint64, 0, total)
	for _, t := range tiers {
		heights = append(heights, t...)
	}
	r.Shuffle(len(heights), func(i, j int) { heights[i], heights[j] = heights[j], heights[i] })
	addrs := make([]engine.Address, actorCount)
	for i := range addrs {
		addrs[i][0] = 0xbe
		addrs[i][1], addrs[i][2], addrs[i][3] = byte(i>>16), byte(i>>8), byte(i)
	}

	var perTimer, arena, index float64
	var before, after runtime.MemStats
	b.ReportAllocs()
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		cfg := engine.DefaultConfig()
		cfg.StateRoot = root
		e, err := engine.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.BeginBlock(1); err != nil {
			b.Fatal(err)
		}
		for a := range actorCount {
			tx, err := e.Begin(addrs[a], 0)
			if err != nil {
				b.Fatal(err)
			}
			for k := range each {
				tx.SetNonce(uint64(k)) // two timers of an actor may share a height
				if _, _, err := tx.Schedule(heights[a*each+k], nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		e.Root() // the tree holds every timer's leaf
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := e.Stats()
		if st.Pending != total {
			b.Fatalf("%d pending, want %d", st.Pending, total)
		}
		perTimer = float64(after.HeapAlloc-before.HeapAlloc) / float64(total)
		arena = float64(st.ArenaBytes) / float64(total)
		index = float64(st.IndexBytes) / float64(total)
		runtime.KeepAlive(e)
	}
	b.ReportMetric(perTimer, "B/timer")
	b.ReportMetric(arena, "arena-B/timer")
	b.ReportMetric(index, "index-B/timer")
}
