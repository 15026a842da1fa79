package radix

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSort: sorted by key, equal keys in input order, whether vdiff is
// exact or all ones, and nothing lost.
func TestSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 0)).Uint64
	var spare []Item
	for _, n := range []int{0, 1, 2, 255, 256, 1000} {
		for _, mask := range []uint64{0, 0xff, 0xff00ff, ^uint64(0)} {
			a := make([]Item, n)
			for i := range a {
				a[i] = Item{r() & mask, uint32(i)}
			}
			want := slices.Clone(a)
			slices.SortStableFunc(want, func(x, y Item) int { return cmp.Compare(x.Key, y.Key) })
			for _, d := range []uint64{Diff(a), ^uint64(0)} {
				var got []Item
				got, spare = Sort(slices.Clone(a), spare, d)
				require.Equal(t, want, got, "n=%d mask=%#x vdiff=%#x", n, mask, d)
			}
		}
	}
}

func TestSortHigh(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 0)).Uint64
	var spare []uint64
	for _, n := range []int{0, 1, 2, 100, 5000} {
		for _, mask := range []uint64{0, 0xfff << 52, 0xff00ff << 30, ^uint64(0)} {
			for passes := 1; passes <= MaxHighPasses; passes++ {
				a := make([]uint64, n)
				for i := range a {
					a[i] = r() & mask
				}
				top := func(v uint64) uint64 { return v >> (64 - HighDigitBits*passes) }
				want := slices.Clone(a)
				slices.SortStableFunc(want, func(x, y uint64) int { return cmp.Compare(top(x), top(y)) })
				var got []uint64
				got, spare = SortHigh(slices.Clone(a), spare, passes)
				require.Equal(t, want, got, "n=%d mask=%#x passes=%d", n, mask, passes)
			}
		}
	}
}
