package ring

import (
	"slices"
	"testing"
)

func TestNewSizes(t *testing.T) {
	for _, tc := range []struct {
		size uint64
		ok   bool
	}{
		{0, false}, {1, true}, {2, true}, {3, false}, {4096, true}, {1 << 24, true}, {1 << 25, false}, {1 << 63, false},
	} {
		if _, err := New(tc.size); (err == nil) != tc.ok {
			t.Errorf("New(%d): err %v, want ok=%v", tc.size, err, tc.ok)
		}
	}
}

// seqs drains it and returns the seqs it yields.
func seqs(c *Chunks, it Iter) []uint64 {
	var out []uint64
	for e, ok := it.Next(c); ok; e, ok = it.Next(c) {
		out = append(out, e.Seq)
	}
	return out
}

func TestBucket(t *testing.T) {
	tests := []struct {
		name string
		n    int      // entries pushed, seqs 1..n
		kill []uint64 // seqs cancelled
		want []uint64
	}{
		{"empty", 0, nil, nil},
		{"one", 1, nil, []uint64{1}},
		{"a full chunk", ChunkLen, nil, seqRange(1, ChunkLen)},
		{"a chunk and one", ChunkLen + 1, nil, seqRange(1, ChunkLen+1)},
		{"kill first and last", 3*ChunkLen + 5, []uint64{1, 3*ChunkLen + 5}, seqRange(2, 3*ChunkLen+4)},
		{"kill a whole middle chunk", 3 * ChunkLen, seqRange(ChunkLen+1, 2*ChunkLen), append(seqRange(1, ChunkLen), seqRange(2*ChunkLen+1, 3*ChunkLen)...)},
		{"kill everything", 70, seqRange(1, 70), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChunks()
			var b Bucket
			pos := map[uint64]Pos{}
			for s := uint64(1); s <= uint64(tt.n); s++ {
				pos[s] = b.Push(c, Entry{Height: 9, Seq: s, Val: s * 10})
				if got := *c.At(pos[s]); got != (Entry{9, s, s * 10}) {
					t.Fatalf("At(Push(seq %d)) = %+v", s, got)
				}
			}
			for _, s := range tt.kill {
				b.Kill(c, pos[s])
			}
			if b.Live != len(tt.want) || b.Empty() != (len(tt.want) == 0) {
				t.Fatalf("Live %d, Empty %v; want %d live", b.Live, b.Empty(), len(tt.want))
			}
			var walked []uint64
			b.Walk(c, func(e Entry) { walked = append(walked, e.Seq) })
			if !slices.Equal(walked, tt.want) {
				t.Fatalf("Walk = %v, want %v", walked, tt.want)
			}
			if got := seqs(c, b.Drain()); !slices.Equal(got, tt.want) {
				t.Fatalf("Drain = %v, want %v", got, tt.want)
			}
			if c.Live() != 0 || !b.Empty() {
				t.Fatalf("after Drain: %d chunks live, bucket %+v", c.Live(), b)
			}
		})
	}
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestChunksAreReused(t *testing.T) {
	c := NewChunks()
	var b Bucket
	for round := range 5 {
		for s := range uint64(10 * ChunkLen) {
			b.Push(c, Entry{Height: 1, Seq: s + 1})
		}
		if got := len(seqs(c, b.Drain())); got != 10*ChunkLen {
			t.Fatalf("round %d: drained %d", round, got)
		}
	}
	if c.used > 11 {
		t.Fatalf("%d chunks handed out for 10 in use at a time", c.used-1)
	}
}

func TestRing(t *testing.T) {
	c := NewChunks()
	r, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	// Heights 100..107 fill every bucket once; 103 gets three timers.
	pos := map[uint64]Pos{}
	seq := uint64(0)
	for h := uint64(100); h < 108; h++ {
		for range 1 + 2*btoi(h == 103) {
			seq++
			pos[seq] = r.Push(c, Entry{Height: h, Seq: seq})
		}
	}
	if r.Len() != 10 {
		t.Fatalf("Len %d, want 10", r.Len())
	}
	for _, tc := range []struct {
		from, to, want uint64
		ok             bool
	}{
		{100, 107, 100, true}, {101, 107, 101, true}, {104, 107, 104, true}, {107, 107, 107, true},
	} {
		if got, ok := r.NextOccupied(tc.from, tc.to); ok != tc.ok || ok && got != tc.want {
			t.Errorf("NextOccupied(%d, %d) = %d, %v; want %d, %v", tc.from, tc.to, got, ok, tc.want, tc.ok)
		}
	}
	// Cancel all of 101: its bucket is no longer occupied.
	r.Kill(c, 101, pos[2], func(Entry, Pos) {})
	if got, _ := r.NextOccupied(101, 107); got != 102 {
		t.Errorf("after the cancel NextOccupied(101, 107) = %d, want 102", got)
	}
	// Cancel the middle timer of 103.
	r.Kill(c, 103, pos[5], func(Entry, Pos) {})
	if got := seqs(c, r.Take(103)); !slices.Equal(got, []uint64{4, 6}) {
		t.Errorf("Take(103) = %v, want [4 6]", got)
	}
	if _, ok := r.NextOccupied(103, 103); ok {
		t.Error("bucket of 103 still occupied after Take")
	}
	if r.Len() != 6 {
		t.Errorf("Len %d, want 6", r.Len())
	}
	// Wrap around: 108 shares bucket 0 with 100 once 100 is taken.
	if got := seqs(c, r.Take(100)); !slices.Equal(got, []uint64{1}) {
		t.Errorf("Take(100) = %v", got)
	}
	r.Push(c, Entry{Height: 108, Seq: 99})
	if got, ok := r.NextOccupied(107, 108); !ok || got != 107 {
		t.Errorf("NextOccupied(107, 108) = %d, %v; want 107", got, ok)
	}
	if got, ok := r.NextOccupied(108, 115); !ok || got != 108 {
		t.Errorf("NextOccupied(108, 115) = %d, %v; want 108", got, ok)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestKillAndCompact(t *testing.T) {
	c := NewChunks()
	var b Bucket
	pos := map[uint64]Pos{}
	for s := uint64(1); s <= 3*ChunkLen; s++ {
		pos[s] = b.Push(c, Entry{Height: 1, Seq: s, Val: s})
	}
	// The last entry written is taken back, not left as a tombstone.
	b.Kill(c, pos[3*ChunkLen])
	if b.Dead != 0 || b.Live != 3*ChunkLen-1 {
		t.Fatalf("after killing the tail: Live %d Dead %d", b.Live, b.Dead)
	}
	// Kill every odd seq but the first: more dead than live + a chunk.
	for s := uint64(3); s < 3*ChunkLen; s += 2 {
		b.Kill(c, pos[s])
	}
	for s := uint64(2); s <= 40; s += 2 {
		b.Kill(c, pos[s])
	}
	if !b.NeedsCompaction() {
		t.Fatalf("Live %d Dead %d: compaction not asked for", b.Live, b.Dead)
	}
	before := c.Live()
	moved := map[uint64]Pos{}
	b.Compact(c, func(e Entry, p Pos) { moved[e.Val] = p })
	var want []uint64
	b.Walk(c, func(e Entry) { want = append(want, e.Seq) })
	if len(moved) != b.Live || b.Dead != 0 || c.Live() >= before {
		t.Fatalf("compaction: %d moved, Live %d, Dead %d, chunks %d -> %d", len(moved), b.Live, b.Dead, before, c.Live())
	}
	for val, p := range moved {
		if c.At(p).Val != val {
			t.Fatalf("moved reported %d at %d, which holds %+v", val, p, *c.At(p))
		}
	}
	if got := seqs(c, b.Drain()); !slices.Equal(got, want) || !slices.IsSorted(got) || got[0] != 1 {
		t.Fatalf("after compaction drained %v", got)
	}
}

// TestKillAfterTailEmptied: once take-backs have emptied the tail chunk,
// killing the last slot of the chunk before it (adjacent in the arena) is
// an ordinary tombstone, not another take-back.
func TestKillAfterTailEmptied(t *testing.T) {
	c := NewChunks()
	var b Bucket
	var pos []Pos
	for s := uint64(1); s <= ChunkLen+1; s++ {
		pos = append(pos, b.Push(c, Entry{Height: 1, Seq: s}))
	}
	b.Kill(c, pos[ChunkLen])   // the only entry of the second chunk: taken back
	b.Kill(c, pos[ChunkLen-1]) // the last slot of the first chunk
	b.Push(c, Entry{Height: 1, Seq: 99})
	want := append(seqRange(1, ChunkLen-1), 99)
	if got := seqs(c, b.Drain()); !slices.Equal(got, want) {
		t.Fatalf("drained %v, want %v", got, want)
	}
}
