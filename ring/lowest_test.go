package ring

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLowestRandom checks Lowest against the live heights of each bucket
// under random pushes, kills (with the compactions they trigger), shifts,
// takes and moves out to another Buckets and back, and counts the walks:
// the bucket whose lowest height is known (the last one asked about, or
// one pushed into empty while that one was empty) is read only after the
// last entry of its lowest height left it.
func TestLowestRandom(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := NewChunks()
		const n = 3
		s, plain := NewLowBuckets(n), NewBuckets(1)
		type live struct {
			e Entry
			p Pos
		}
		model := make([][]live, n) // per bucket, in FIFO order
		base := [n]uint64{}
		var seq uint64
		spread := 1 + rng.Uint64N(40)
		// Whether a bucket may be walked: since the last entry of its
		// lowest height left it, or it came through a bucket that keeps no
		// bound, no walk happened and no push went below the bound left
		// (bound: the lowest height when last known).
		var stale [n]bool
		var bound [n]uint64
		known, knownSet := uint64(0), false // the bucket s keeps a height for
		walks := 0
		lowest := func(i uint64) (uint64, int) {
			m, k := ^uint64(0), 0
			for _, x := range model[i] {
				switch {
				case x.e.Height < m:
					m, k = x.e.Height, 1
				case x.e.Height == m:
					k++
				}
			}
			return m, k
		}
		for step := range 4000 {
			i := rng.Uint64N(n)
			switch r := rng.IntN(100); {
			case r < 45:
				if len(model[i]) == 0 {
					base[i] = 1000 * (1 + rng.Uint64N(1<<20))
				}
				seq++
				e := Entry{Height: base[i] + rng.Uint64N(spread), Seq: seq, Val: uint32(seq)}
				if len(model[i]) == 0 || e.Height < bound[i] {
					stale[i], bound[i] = false, e.Height
				}
				if len(model[i]) == 0 && (!knownSet || len(model[known]) == 0) {
					known, knownSet = i, true
				}
				model[i] = append(model[i], live{e, s.Push(c, i, e)})
			case r < 70 && len(model[i]) > 0:
				k := rng.IntN(len(model[i]))
				x := model[i][k]
				if m, cnt := lowest(i); x.e.Height == m && cnt == 1 {
					stale[i] = true
				}
				model[i] = slices.Delete(model[i], k, k+1)
				s.Kill(c, i, x.p, func(e Entry, p Pos) {
					for j := range model[i] {
						if model[i][j].e.Seq == e.Seq {
							model[i][j].p = p
						}
					}
				})
			case r < 85 && len(model[i]) > 0:
				if m, cnt := lowest(i); model[i][0].e.Height == m && cnt == 1 {
					stale[i] = true
				}
				e, ok := s.Shift(c, i)
				if !ok || e != model[i][0].e {
					t.Fatalf("seed %d step %d: Shift = %v %v, want %v", seed, step, e, ok, model[i][0].e)
				}
				model[i] = model[i][1:]
			case r < 88:
				seqs(c, s.Take(i))
				model[i] = nil
			case r < 91 && len(model[i]) == 0:
				// Through a bucket that keeps no bound, and back.
				j := (i + 1) % n
				if len(model[j]) > 0 {
					stale[i], bound[i] = true, 0
					switch {
					case knownSet && known == j:
						known = i // the height goes with the bucket
					case knownSet && known == i:
						knownSet = false
					}
					s.MoveTo(j, &plain, 0)
					plain.MoveTo(0, &s, i)
					model[i], model[j], base[i] = model[j], nil, base[j]
				}
			default:
				walked := s.Walked()
				m, _ := lowest(i)
				upTo := ^uint64(0)
				if rng.IntN(2) == 0 && len(model[i]) > 0 {
					upTo = base[i] + rng.Uint64N(spread) // as staging's lowest height
				}
				if got, want := s.Lowest(c, i, upTo), min(m, upTo); got != want {
					t.Fatalf("seed %d step %d: Lowest(%d, %d) = %d, want %d", seed, step, i, upTo, got, want)
				}
				mayWalk := stale[i] || !knownSet || known != i
				if d := s.Walked() - walked; d != 0 {
					if d != uint64(len(model[i])) || !mayWalk {
						t.Fatalf("seed %d step %d: Lowest read %d entries of %d (may walk: %v)", seed, step, d, len(model[i]), mayWalk)
					}
					stale[i], bound[i] = false, m
					walks++
				}
				if len(model[i]) > 0 {
					known, knownSet = i, true
				}
			}
		}
		if walks == 0 {
			t.Fatalf("seed %d: no walk: the test exercised too little", seed)
		}
	}
}
