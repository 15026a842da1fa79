package ring

import (
	"fmt"
	"slices"
	"testing"
)

// TestPrependTo: bucket i of s, put in front of bucket j of d, is read
// first, then d's own entries, each where it was pushed; the counts,
// occupancy and every later Kill, Compact and Push stay right, whatever
// the two held: empty, partial or full tail chunks, tombstones, and a
// compaction running in either.
func TestPrependTo(t *testing.T) {
	tests := []struct {
		front, back            int      // entries pushed: front seqs 1..front, back seqs 1001..
		killFront, killBack    []uint64 // seqs killed before the move
		compactFront, compBack bool     // leave a compaction running in that bucket
	}{
		{front: 0, back: 5},
		{front: 5, back: 0},
		{front: 3, back: 4},
		{front: ChunkLen, back: 1},
		{front: ChunkLen + 1, back: 2*ChunkLen + 5},
		{front: 2*ChunkLen + 7, back: 3, killFront: []uint64{1, 2, 40}, killBack: []uint64{1002}},
		// More slots than CompactWhole, so that the compactions the kills
		// start run a few slots a Kill and are still running.
		{front: 3 * ChunkLen, back: 10 * ChunkLen, killBack: seqRange(1001, 1200), compBack: true},
		{front: 10 * ChunkLen, back: 10, killFront: seqRange(1, 200), compactFront: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d+%d", tc.front, tc.back), func(t *testing.T) {
			c := NewChunks()
			s, d := NewBuckets(2), NewBuckets(4)
			pos := map[uint64]Pos{}
			moved := func(e Entry, p Pos) { pos[e.Seq] = p }
			var want []uint64
			push := func(b *Buckets, i uint64, seqs []uint64, kill []uint64) {
				for _, q := range seqs {
					pos[q] = b.Push(c, i, Entry{Height: 7, Seq: q, Val: uint32(q)})
				}
				for _, q := range kill {
					b.Kill(c, i, pos[q], moved)
					delete(pos, q)
				}
				for _, q := range seqs {
					if _, ok := pos[q]; ok {
						want = append(want, q)
					}
				}
			}
			push(&s, 1, seqRange(1, uint64(tc.front)), tc.killFront)
			push(&d, 3, seqRange(1001, 1000+uint64(tc.back)), tc.killBack)
			if (tc.compactFront && !s.At(1).Compacting()) || (tc.compBack && !d.At(3).Compacting()) {
				t.Fatal("the case leaves no compaction running")
			}
			s.PrependTo(c, 1, &d, 3, moved)
			if s.Len() != 0 || !s.At(1).Empty() || d.Len() != len(want) || int(d.At(3).Live) != len(want) {
				t.Fatalf("lens %d and %d (bucket %d), want 0 and %d", s.Len(), d.Len(), d.At(3).Live, len(want))
			}
			if _, ok := s.Next(0, 2); ok {
				t.Fatal("the source is still marked occupied")
			}
			if k, ok := d.Next(0, 4); (len(want) > 0) != ok || ok && k != 3 {
				t.Fatalf("destination Next = %d, %v", k, ok)
			}
			var got []uint64
			d.At(3).WalkPos(c, func(e Entry, p Pos) {
				got = append(got, e.Seq)
				if p != pos[e.Seq] {
					t.Fatalf("seq %d at %d, told %d", e.Seq, p, pos[e.Seq])
				}
			})
			if !slices.Equal(got, want) {
				t.Fatalf("walk %v, want %v", got, want)
			}
			// Kill every other one (compacting as it goes), push more,
			// and read it all.
			var left []uint64
			for k, q := range want {
				if k%2 == 0 {
					d.Kill(c, 3, pos[q], moved)
					delete(pos, q)
					continue
				}
				left = append(left, q)
			}
			for q := uint64(5001); q < 5001+ChunkLen; q++ {
				pos[q] = d.Push(c, 3, Entry{Height: 7, Seq: q})
				left = append(left, q)
			}
			b := d.At(3)
			if b.Dead > uint32(len(left))+4*ChunkLen {
				t.Fatalf("%d tombstones counted for %d entries", b.Dead, len(left))
			}
			if got := seqs(c, d.Take(3)); !slices.Equal(got, left) {
				t.Fatalf("after kills and pushes: %v, want %v", got, left)
			}
			if c.Live() != 0 {
				t.Fatalf("%d chunks in use after the take", c.Live())
			}
		})
	}
}

// TestRingFirst: the ring keeps the seq of each bucket's first push since
// it was empty, and only that one.
func TestRingFirst(t *testing.T) {
	c := NewChunks()
	r, _ := New(4)
	p5 := r.Push(c, Entry{Height: 5, Seq: 10})
	r.Push(c, Entry{Height: 5, Seq: 11})
	if r.First(5) != 10 {
		t.Fatalf("First(5) = %d, want 10", r.First(5))
	}
	for q := uint64(12); q < 12+2*ChunkLen; q++ { // across chunks: slow paths too
		r.Push(c, Entry{Height: 5, Seq: q})
	}
	if r.First(5) != 10 {
		t.Fatalf("First(5) = %d after more pushes, want 10", r.First(5))
	}
	r.Kill(c, 5, p5, func(Entry, Pos) {})
	if r.First(5) != 10 {
		t.Fatalf("First(5) = %d after a kill, want 10 still", r.First(5))
	}
	seqs(c, r.Take(5))
	r.Push(c, Entry{Height: 9, Seq: 3}) // the same bucket, emptied: a new first
	if r.First(9) != 3 {
		t.Fatalf("First(9) = %d, want 3", r.First(9))
	}
}
