package overflow

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/ring"
)

// BenchmarkInsert inserts into a tree of a million far timers, one op
// being one insert and one PopMin (the tree stays at its size), with the
// heights of the inserts drawn three ways: at random over 90M blocks (far
// timers set at random), runs of 100 at one height (many timers set in a
// block with one delay), and one height a block with ten timers each.
func BenchmarkInsert(b *testing.B) {
	const n = 1_000_000
	patterns := []struct {
		name   string
		height func(r *rand.Rand, k uint64) uint64
	}{
		{"random", func(r *rand.Rand, k uint64) uint64 { return 200_000_000 + r.Uint64N(90_000_000) }},
		{"runs", func(r *rand.Rand, k uint64) uint64 { return 200_000_000 + k/100*1000 }},
		{"ascending", func(r *rand.Rand, k uint64) uint64 { return 200_000_000 + k/10 }},
	}
	for _, p := range patterns {
		b.Run(fmt.Sprintf("pattern=%s", p.name), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			t := New()
			seq := uint64(0)
			for range n {
				seq++
				t.Insert(ring.Entry{Height: 10_000_000 + r.Uint64N(90_000_000), Seq: seq})
			}
			k := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				t.PopMin()
				seq++
				k++
				t.Insert(ring.Entry{Height: p.height(r, k), Seq: seq})
			}
		})
	}
}
