package bitset

import (
	"math/rand/v2"
	"testing"
)

func TestNextMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []uint64{1, 2, 3, 63, 64, 65, 100, 128, 1000} {
		c := New(size)
		in := make([]bool, size)
		for round := range 300 {
			i := rng.Uint64N(size)
			if round%3 == 0 {
				c.Clear(i)
				in[i] = false
			} else {
				c.Set(i)
				in[i] = true
			}
			start, n := rng.Uint64N(size), rng.Uint64N(size+1)
			want, wantOK := uint64(0), false
			for k := range n {
				if in[(start+k)%size] {
					want, wantOK = k, true
					break
				}
			}
			got, ok := c.Next(start, n)
			if ok != wantOK || got != want {
				t.Fatalf("size %d start %d n %d: Next = %d, %v; want %d, %v", size, start, n, got, ok, want, wantOK)
			}
		}
	}
}
