package ring

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/timerlane/timerlane/internal/prefetch"
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
				pos[s] = b.Push(c, Entry{Height: 9, Seq: s, Val: uint32(s * 10)})
				if seq, val := c.At(pos[s]); seq != s || uint64(val) != s*10 {
					t.Fatalf("At(Push(seq %d)) = seq %d val %d", s, seq, val)
				}
			}
			for _, s := range tt.kill {
				b.Kill(c, pos[s])
			}
			if int(b.Live) != len(tt.want) || b.Empty() != (len(tt.want) == 0) {
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

// TestTailNextIsNeverRead: a chunk's next index is undefined until a
// bucket links a chunk after it (alloc leaves what the chunk's last use
// wrote there), so nothing may follow the tail's. Each way of reading or
// emptying a bucket runs with the tail's next poisoned: following it would
// index past the slab and panic.
func TestTailNextIsNeverRead(t *testing.T) {
	ops := []struct {
		name string
		run  func(c *Chunks, b *Bucket) int // entries seen
	}{
		{"Walk", func(c *Chunks, b *Bucket) int {
			n := 0
			b.Walk(c, func(Entry) { n++ })
			b.Release(c)
			return n
		}},
		{"Drain", func(c *Chunks, b *Bucket) int { return len(seqs(c, b.Drain())) }},
		{"Shift", func(c *Chunks, b *Bucket) int {
			n := 0
			for _, ok := b.Shift(c); ok; _, ok = b.Shift(c) {
				n++
			}
			return n
		}},
		{"Kill", func(c *Chunks, b *Bucket) int {
			var ps []Pos
			b.WalkPos(c, func(_ Entry, p Pos) { ps = append(ps, p) })
			for _, p := range ps {
				b.Kill(c, p) // the last frees every chunk
			}
			return len(ps)
		}},
		{"Kill, compacting", func(c *Chunks, b *Bucket) int {
			pos := map[uint64]Pos{}
			b.WalkPos(c, func(e Entry, p Pos) { pos[e.Seq] = p })
			for s := range uint64(len(pos)) {
				b.Kill(c, pos[s+1])
				if !b.Empty() {
					b.Compact(c, func(e Entry, p Pos) { pos[e.Seq] = p })
				}
			}
			return len(pos)
		}},
	}
	for _, op := range ops {
		for _, n := range []int{1, ChunkLen - 1, ChunkLen, ChunkLen + 1, 3*ChunkLen + 2} {
			c := NewChunks()
			var b Bucket
			for s := range uint64(n) {
				b.Push(c, Entry{Height: 9, Seq: s + 1})
			}
			*c.next.At(b.tail) = MaxChunks - 1
			if got := op.run(c, &b); got != n {
				t.Errorf("%s of %d entries saw %d", op.name, n, got)
			}
			if c.Live() != 0 || b != (Bucket{}) {
				t.Errorf("%s of %d entries left %d chunks live, bucket %+v", op.name, n, c.Live(), b)
			}
		}
	}
}

// TestChunksAreLineAligned: every chunk starts a cache line, so that no
// slot straddles two (the slab's arrays are page-aligned, and a chunk is
// 512 bytes).
func TestChunksAreLineAligned(t *testing.T) {
	c := NewChunks()
	for range 3 * 4096 {
		c.alloc()
	}
	for i := uint32(1); i < c.used; i++ {
		if a := uintptr(unsafe.Pointer(c.slab.At(i))); a%64 != 0 {
			t.Fatalf("chunk %d at %#x, %d bytes into a line", i, a, a%64)
		}
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

// compactAll runs a whole compaction of b, as Kills would a share at a
// time.
func compactAll(c *Chunks, b *Bucket, moved func(Entry, Pos)) {
	b.Compact(c, moved)
	for b.Compacting() {
		b.Compact(c, moved)
	}
}

func TestKillAndCompact(t *testing.T) {
	c := NewChunks()
	var b Bucket
	pos := map[uint64]Pos{}
	for s := uint64(1); s <= 3*ChunkLen; s++ {
		pos[s] = b.Push(c, Entry{Height: 1, Seq: s, Val: uint32(s)})
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
	moved := 0
	compactAll(c, &b, func(e Entry, p Pos) { pos[uint64(e.Val)] = p; moved++ })
	var want []uint64
	b.WalkPos(c, func(e Entry, p Pos) {
		if pos[e.Seq] != p {
			t.Fatalf("seq %d at %d, reported %d", e.Seq, p, pos[e.Seq])
		}
		want = append(want, e.Seq)
	})
	// In place: seq 1, before the first tombstone, stays where it is.
	if moved != int(b.Live)-1 || b.Dead != 0 || c.Live() != 1 || before != 3 {
		t.Fatalf("compaction: %d moved, Live %d, Dead %d, chunks %d -> %d", moved, b.Live, b.Dead, before, c.Live())
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

// TestShift takes entries from the front while the tail grows and entries
// anywhere are killed: FIFO order, Live and Dead stay right, every other
// entry keeps its position, and the chunks read past go back to the arena.
func TestShift(t *testing.T) {
	c := NewChunks()
	var b Bucket
	pos := map[uint64]Pos{}
	var want []uint64 // live seqs in order
	next := uint64(1)
	push := func(n int) {
		for range n {
			pos[next] = b.Push(c, Entry{Height: 1, Seq: next, Val: uint32(next)})
			want = append(want, next)
			next++
		}
	}
	kill := func(s uint64) {
		b.Kill(c, pos[s])
		want = slices.DeleteFunc(want, func(x uint64) bool { return x == s })
	}
	check := func(what string) {
		t.Helper()
		var got []uint64
		b.WalkPos(c, func(e Entry, p Pos) {
			if p != pos[e.Seq] || !holds(c, p, e) {
				t.Fatalf("%s: seq %d at %d, pushed at %d", what, e.Seq, p, pos[e.Seq])
			}
			got = append(got, e.Seq)
		})
		if !slices.Equal(got, want) || int(b.Live) != len(want) {
			t.Fatalf("%s: walk %v (Live %d), want %v", what, got, b.Live, want)
		}
	}
	shift := func(n int) {
		t.Helper()
		for range n {
			e, ok := b.Shift(c)
			if !ok || e.Seq != want[0] {
				t.Fatalf("Shift = %+v, %v; want seq %d", e, ok, want[0])
			}
			want = want[1:]
		}
	}
	push(3*ChunkLen + 5)
	shift(5)
	check("after 5 shifts")
	kill(7)            // a tombstone right at the front
	kill(ChunkLen)     // the last slot of the first chunk
	kill(ChunkLen + 3) // in the second chunk
	shift(1)           // 6; 7 is skipped and dropped from Dead
	check("after killing near the front")
	shift(ChunkLen - 8) // up to seq 31; seq 32, the first chunk's last, is dead
	check("first chunk read")
	if c.Live() != 4 {
		t.Fatalf("%d chunks live before reading past the first, want 4", c.Live())
	}
	shift(1) // 33: past the tombstone of 32, into the second chunk
	if c.Live() != 3 || b.Dead != 1 {
		t.Fatalf("%d chunks live, Dead %d after reading past the first, want 3, 1", c.Live(), b.Dead)
	}
	push(10)
	kill(next - 1) // a take-back at the tail
	shift(ChunkLen)
	check("after shifting into the third chunk")
	for len(want) > 1 {
		shift(1)
	}
	kill(want[0]) // the last live entry: the bucket is released
	if b != (Bucket{}) || c.Live() != 0 {
		t.Fatalf("emptied bucket %+v, %d chunks live", b, c.Live())
	}
	if _, ok := b.Shift(c); ok {
		t.Fatal("Shift of an empty bucket found an entry")
	}
	// Shifting the last live entry releases the chunks even with
	// tombstones behind it.
	push(ChunkLen + 2)
	kill(want[1])
	kill(want[len(want)-2])
	for len(want) > 0 {
		shift(1)
	}
	if b != (Bucket{}) || c.Live() != 0 || b.Dead != 0 {
		t.Fatalf("shifted-out bucket %+v, %d chunks live", b, c.Live())
	}
}

// TestShiftThenCompact: compaction of a bucket whose front was shifted
// keeps the order and reports each new position.
func TestShiftThenCompact(t *testing.T) {
	c := NewChunks()
	var b Bucket
	pos := map[uint64]Pos{}
	for s := uint64(1); s <= 4*ChunkLen; s++ {
		pos[s] = b.Push(c, Entry{Height: 1, Seq: s, Val: uint32(s)})
	}
	for range 10 {
		b.Shift(c)
	}
	for s := uint64(12); s < 4*ChunkLen; s += 4 { // keep a few
		for d := range uint64(3) {
			if !b.NeedsCompaction() {
				b.Kill(c, pos[s+d])
			}
		}
	}
	if !b.NeedsCompaction() {
		t.Fatalf("Live %d Dead %d: no compaction asked for", b.Live, b.Dead)
	}
	var before []uint64
	b.Walk(c, func(e Entry) { before = append(before, e.Seq) })
	compactAll(c, &b, func(e Entry, p Pos) { pos[uint64(e.Val)] = p })
	var after []uint64
	b.WalkPos(c, func(e Entry, p Pos) {
		if pos[e.Seq] != p {
			t.Fatalf("seq %d at %d, reported %d", e.Seq, p, pos[e.Seq])
		}
		after = append(after, e.Seq)
	})
	if !slices.Equal(before, after) || before[0] != 11 || b.Dead != 0 {
		t.Fatalf("compaction changed %v into %v (Dead %d)", before, after, b.Dead)
	}
	if got := seqs(c, b.Drain()); !slices.Equal(got, after) || c.Live() != 0 {
		t.Fatalf("drained %v, %d chunks live", got, c.Live())
	}
}

// TestMoveTo hands a whole bucket over: the entries keep their positions,
// the counts and occupied bits follow, and a move into a bucket that holds
// something panics.
func TestMoveTo(t *testing.T) {
	c := NewChunks()
	src, dst := NewBuckets(4), NewBuckets(8)
	var ps []Pos
	for s := uint64(1); s <= ChunkLen+3; s++ {
		ps = append(ps, src.Push(c, 2, Entry{Height: 5, Seq: s}))
	}
	src.Shift(c, 2)
	src.Push(c, 3, Entry{Height: 6, Seq: 1})
	src.MoveTo(2, &dst, 5)
	if src.Len() != 1 || dst.Len() != ChunkLen+2 {
		t.Fatalf("Len %d and %d after the move", src.Len(), dst.Len())
	}
	if k, ok := src.Next(0, 4); !ok || k != 3 {
		t.Fatalf("source Next = %d, %v", k, ok)
	}
	if k, ok := dst.Next(0, 8); !ok || k != 5 {
		t.Fatalf("destination Next = %d, %v", k, ok)
	}
	i := 1
	dst.At(5).WalkPos(c, func(e Entry, p Pos) {
		if p != ps[i] || e.Seq != uint64(i+1) {
			t.Fatalf("entry %d: seq %d at %d, pushed at %d", i, e.Seq, p, ps[i])
		}
		i++
	})
	dst.Kill(c, 5, ps[4], func(Entry, Pos) {}) // still killable where it was
	if dst.Len() != ChunkLen+1 {
		t.Fatalf("Len %d", dst.Len())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a move into a bucket that is not empty did not panic")
		}
	}()
	src.MoveTo(3, &dst, 5)
}

// TestPrefetchAnyPos: an entry's address to prefetch is nil for position
// 0 (no position) and positions past the arena, and prefetching it changes
// nothing; and a bucket's tail address is where its next Push writes, or
// nil when that Push takes a new chunk.
func TestPrefetchAnyPos(t *testing.T) {
	c := NewChunks()
	var b Bucket
	if a := b.TailAddr(c); a != nil {
		t.Fatalf("empty bucket: tail address %p, want nil", a)
	}
	p := b.Push(c, Entry{Height: 7, Seq: 1, Val: 9})
	if a := c.Addr(p); a != unsafe.Pointer(c.at(p)) {
		t.Fatalf("Addr(%d) = %p, want the entry's %p", p, a, c.at(p))
	}
	for _, tc := range []struct {
		q     Pos
		valid bool
	}{{0, false}, {1, false}, {p, true}, {p + 1, true}, {ChunkLen * 4095, true}, {ChunkLen * 4096, false}, {1<<31 - 1, false}, {1<<32 - 1, false}} {
		a := c.Addr(tc.q)
		if (a != nil) != tc.valid {
			t.Fatalf("Addr(%d) = %p; want an address: %v", tc.q, a, tc.valid)
		}
		prefetch.Lines(a, nil, nil, nil)
	}
	next := b.TailAddr(c)
	full := Bucket{}
	for k := range ChunkLen {
		full.Push(c, Entry{Height: 8, Seq: uint64(k + 1)})
	}
	if a := full.TailAddr(c); a != nil {
		t.Fatalf("full tail chunk: tail address %p, want nil", a)
	}
	if !holds(c, p, Entry{Height: 7, Seq: 1, Val: 9}) {
		t.Fatalf("entry at %d changed by prefetches", p)
	}
	var got []Entry
	b.Walk(c, func(e Entry) { got = append(got, e) })
	if len(got) != 1 || b.Live != 1 || full.Live != ChunkLen {
		t.Fatalf("buckets changed by prefetches: %v, live %d and %d", got, b.Live, full.Live)
	}
	if q := b.Push(c, Entry{Height: 7, Seq: 2, Val: 10}); unsafe.Pointer(c.at(q)) != next {
		t.Fatalf("second push wrote %p, tail address was %p", c.at(q), next)
	}
}

// holds reports whether position p holds e's seq and val (a chunk stores
// heights as offsets from its bucket's base, which the walks check).
func holds(c *Chunks, p Pos, e Entry) bool {
	seq, val := c.At(p)
	return seq == e.Seq && val == e.Val
}

// TestBucketHeights: a bucket stores heights as offsets from the first one
// pushed into it empty, so entries below it, near 2^64 and up to 2^31 away
// come back whole, in every read; one further away is refused.
func TestBucketHeights(t *testing.T) {
	tests := []struct {
		name      string
		heights   []uint64
		releaseAt int // empty the bucket before pushing heights[releaseAt]; 0: never
	}{
		{"one height", []uint64{9, 9, 9}, 0},
		{"below the first", []uint64{100, 3, 99, 1 << 20}, 0},
		{"near 2^64", []uint64{1<<64 - 1, 1<<64 - 1<<31, 1<<64 - 2}, 0},
		{"2^31 either way", []uint64{1 << 40, 1<<40 - 1<<31, 1<<40 + 1<<31 - 1}, 0},
		{"after emptying, a new base", []uint64{5, 0, 1 << 50, 1<<50 + 7}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChunks()
			var b Bucket
			var want []Entry
			for k, h := range tc.heights {
				if k > 0 && k == tc.releaseAt {
					b.Release(c)
					want = nil
				}
				e := Entry{Height: h, Seq: uint64(k + 1), Val: uint32(10 * k)}
				b.Push(c, e)
				want = append(want, e)
			}
			var walked []Entry
			b.Walk(c, func(e Entry) { walked = append(walked, e) })
			if !slices.Equal(walked, want) {
				t.Fatalf("Walk %v, want %v", walked, want)
			}
			first, _ := b.Shift(c)
			var rest []Entry
			it := b.Drain()
			for e, ok := it.Next(c); ok; e, ok = it.Next(c) {
				rest = append(rest, e)
			}
			if got := append([]Entry{first}, rest...); !slices.Equal(got, want) {
				t.Fatalf("Shift then Drain %v, want %v", got, want)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a height 2^31 above the bucket's base was accepted")
		}
	}()
	var b Bucket
	c := NewChunks()
	b.Push(c, Entry{Height: 1 << 40, Seq: 1})
	b.Push(c, Entry{Height: 1<<40 + 1<<31, Seq: 2})
}

// Iter's comment promises at most 32 bytes (28 on 32-bit platforms): a
// larger Iter fails to compile here.
var _ [32 - unsafe.Sizeof(Iter{})]byte

// TestReserveAndReset: Reserve makes room for n chunks that alloc takes
// without growing the arena; Reset frees them all and keeps the memory.
func TestReserveAndReset(t *testing.T) {
	c := NewChunks()
	c.Reserve(3 * 4096)
	bytes := c.Bytes()
	var b Bucket
	for round := range 2 {
		for s := range uint64(3 * 4096 * ChunkLen) {
			b.Push(c, Entry{Height: 9, Seq: s + 1})
		}
		if c.Bytes() != bytes || c.Live() != 3*4096 {
			t.Fatalf("round %d: %d chunks live in %d bytes; reserved %d", round, c.Live(), c.Bytes(), bytes)
		}
		c.Reset()
		b = Bucket{}
		if c.Live() != 0 || c.Bytes() != bytes {
			t.Fatalf("round %d: after Reset %d live, %d bytes", round, c.Live(), c.Bytes())
		}
	}
}

// TestAppendVals checks AppendVals against Walk: the Vals of the same live
// entries in the same order, after any number taken by Next, or by Shift
// before the bucket was drained, appended behind what dst held, nothing
// written past them (no tombstone's stale Val), and every chunk back in
// the arena.
func TestAppendVals(t *testing.T) {
	// drained builds a bucket of n entries, kills some, takes skip of the
	// live ones by Next or Shift, and returns the arena, the iterator over
	// the rest and the rest.
	drained := func(n int, kill string, skip int, by string) (*Chunks, Iter, []Entry) {
		c := NewChunks()
		var b Bucket
		var pos []Pos
		for s := 1; s <= n; s++ {
			pos = append(pos, b.Push(c, Entry{Height: 1 << 40, Seq: uint64(s), Val: uint32(10 * s)}))
		}
		for k := range pos {
			// "last two" leaves a tombstone at the end: the last kill is
			// taken back, the one before it stays.
			if kill == "odd" && k%2 == 1 || kill == "first chunk" && k < ChunkLen || kill == "all but last" && k < n-1 || kill == "last two" && k >= n-2 {
				b.Kill(c, pos[k])
			}
		}
		var live []Entry
		b.Walk(c, func(e Entry) { live = append(live, e) })
		skip = min(skip, len(live))
		if by == "Shift" {
			for range skip {
				b.Shift(c)
			}
			return c, b.Drain(), live[skip:]
		}
		it := b.Drain()
		for range skip {
			it.Next(c)
		}
		return c, it, live[skip:]
	}
	for _, n := range []int{0, 1, ChunkLen - 1, ChunkLen, ChunkLen + 1, 3*ChunkLen + 5} {
		for _, kill := range []string{"none", "odd", "first chunk", "all but last", "last two"} {
			for _, skip := range []int{0, 1, ChunkLen - 1, ChunkLen, ChunkLen + 2} {
				for _, by := range []string{"Next", "Shift"} {
					name := fmt.Sprintf("n %d, kill %s, %d by %s", n, kill, skip, by)
					c, it, want := drained(n, kill, skip, by)
					wantVals := []uint32{7}
					for _, e := range want {
						wantVals = append(wantVals, e.Val)
					}
					dst := make([]uint32, 1, 4*ChunkLen) // room for all: no growth
					dst[0] = 7
					got := it.AppendVals(c, dst)
					if !slices.Equal(got, wantVals) {
						t.Fatalf("%s: AppendVals = %v, want %v after the 7", name, got, wantVals)
					}
					if stale := slices.IndexFunc(got[len(got):cap(got)], func(v uint32) bool { return v != 0 }); stale >= 0 {
						t.Fatalf("%s: AppendVals wrote %d past the entries it returned", name, got[len(got)+stale])
					}
					if _, ok := it.Next(c); ok || c.Live() != 0 {
						t.Fatalf("%s: after AppendVals, Next finds an entry (%v) or %d chunks are live", name, ok, c.Live())
					}
				}
			}
		}
	}
}
