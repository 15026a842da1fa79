package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/timerlane/timerlane/internal/hugepage"
	"github.com/timerlane/timerlane/internal/prefetch"
)

// BenchmarkMemory is the floor of the engine rows at 1M pending, as
// BenchmarkKeccak is Schedule's: one op is one load from a random cache
// line of an array of the size named, whose address comes from the load
// before it, so no two overlap. At a million pending timers the id index
// spans 16 MiB and the records 64 MiB (BenchmarkPendingBytes reports
// both, as index-B/timer and arena-B/timer): Cancel reads the id's slot,
// then the record it names, one after the other; Schedule reads the slot
// only once the Keccak has produced the id. The smaller sizes show where
// the machine's caches end (docs/BENCHMARK_HISTORY.md, session 33). The
// arrays take the same huge-page hint as the engine's.
func BenchmarkMemory(b *testing.B) {
	for _, kib := range []int{256, 1 << 10, 4 << 10, 8 << 10, 16 << 10, 64 << 10} {
		name := fmt.Sprintf("chase=%dKiB", kib)
		if kib >= 1<<10 {
			name = fmt.Sprintf("chase=%dMiB", kib>>10)
		}
		b.Run(name, func(b *testing.B) {
			next := chain(kib << 10)
			b.ReportAllocs()
			var p uint32
			for b.Loop() {
				p = next[p]
			}
			sink += uint64(p)
		})
	}
}

// BenchmarkMemoryLines is the floor of end of block at 1M pending, whose
// loads do not depend on one another: one op reads 1,024 random cache
// lines of an array of the size named (a block's due timers' records, or
// their index slots), starting every load before reading any, as end of
// block's passes do; ns/line is the figure. Delivering a timer reads its
// record's line and one or two of the index's.
func BenchmarkMemoryLines(b *testing.B) {
	for _, mib := range []int{16, 64} {
		b.Run(fmt.Sprintf("size=%dMiB", mib), func(b *testing.B) {
			words := make([]uint32, mib<<20/4)
			hugepage.Advise(words)
			for i := range words { // touched, as the engine's arenas are
				words[i] = uint32(i)
			}
			lines := len(words) / lineWords
			r := rand.New(rand.NewPCG(13, 14))
			batch := make([]uint32, 1024)
			var sum uint32
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for k := range batch {
					batch[k] = uint32(r.IntN(lines)) * lineWords
				}
				b.StartTimer()
				for _, w := range batch {
					prefetch.Line(unsafe.Pointer(&words[w]))
				}
				for _, w := range batch {
					sum += words[w]
				}
			}
			sink += uint64(sum)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/line")
		})
	}
}

// lineWords is the number of uint32 words in a 64-byte cache line.
const lineWords = 16

// chain returns an array of size bytes in which the first word of each
// cache line holds the word index of the next line of one random cycle
// through all of them (Sattolo's algorithm: a single cycle, so a chase
// never settles in a short loop that the cache would hold).
func chain(size int) []uint32 {
	next := make([]uint32, size/4)
	hugepage.Advise(next)
	lines := len(next) / lineWords
	order := make([]uint32, lines)
	for i := range order {
		order[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for i := lines - 1; i > 0; i-- {
		j := r.IntN(i)
		order[i], order[j] = order[j], order[i]
	}
	for i, l := range order {
		next[int(l)*lineWords] = order[(i+1)%lines] * lineWords
	}
	return next
}

// TestChainIsOneCycle checks that a chase visits every line once before
// it returns to the first.
func TestChainIsOneCycle(t *testing.T) {
	next := chain(1 << 16)
	lines := len(next) / lineWords
	seen := make([]bool, lines)
	p := uint32(0)
	for k := range lines {
		if p%lineWords != 0 || seen[p/lineWords] {
			t.Fatalf("step %d: word %d (a line start not yet seen expected)", k, p)
		}
		seen[p/lineWords] = true
		p = next[p]
	}
	if p != 0 {
		t.Fatalf("after %d steps at word %d, want back at 0", lines, p)
	}
}
