package ring

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/timerlane/timerlane/internal/prefetch"
)

// Bucket is an unrolled FIFO list of entries. The zero Bucket is empty.
// Its entries' heights are stored as offsets from base, the height of the
// first entry pushed into it empty, so they must all lie within 2^31 of
// that one (a ring bucket holds one height, an epoch bucket one epoch).
//
// A bucket is compacted in place, a few slots per Kill (see Compact): a
// write cursor (cw, cwOff) and a read cursor, crOff slots from the start
// of chunk cw, so in cw or in the chunk after it, never further: each
// chunk the read cursor leaves behind that the write cursor is not in
// holds only tombstones and goes back to the arena at once. Between the
// cursors there are only tombstones, so every reader sees the bucket as
// it is, in order, without knowing of the compaction. It is 32 bytes, two
// to a cache line: hence the 8-bit offsets.
type Bucket struct {
	head, tail uint32 // chunks
	Live       uint32 // entries that are not tombstones
	Dead       uint32 // tombstones
	base       uint64
	cw         uint32 // the chunk the compaction writes to; nilChunk when none runs
	headOff    uint8  // slots of the head chunk already shifted out
	tailLen    uint8  // entries written in the tail chunk
	cwOff      uint8  // the slot of cw the compaction writes next
	crOff      uint8  // the slot it reads next, counted from cw's first
}

var _ [32]byte = [unsafe.Sizeof(Bucket{})]byte{}

// Empty reports whether the bucket holds no live entry.
func (b *Bucket) Empty() bool { return b.Live == 0 }

// Push appends e (e.Seq must not be 0) and returns its position.
func (b *Bucket) Push(c *Chunks, e Entry) Pos {
	if b.tail == nilChunk || b.tailLen == ChunkLen {
		b.newTail(c, e.Height)
	}
	off := int64(e.Height - b.base)
	if off != int64(int32(off)) {
		b.tooFar(e.Height)
	}
	c.slab.At(b.tail).e[b.tailLen] = slot{Seq: e.Seq, Val: e.Val, Off: int32(off)}
	p := Pos(b.tail*ChunkLen + uint32(b.tailLen))
	b.tailLen++
	b.Live++
	return p
}

// tooFar refuses height h, more than 2^31 away from b's base: a caller
// broke the calendar's layout bounds.
func (b *Bucket) tooFar(h uint64) {
	panic(fmt.Sprintf("ring: height %d in a bucket of height %d", h, b.base))
}

// newTail links a new, empty chunk at the tail: Push's slow path, once per
// ChunkLen pushes, kept out of its common path. The first chunk of an
// empty bucket sets its base to the height h about to be pushed.
func (b *Bucket) newTail(c *Chunks, h uint64) {
	n := c.alloc()
	if b.tail == nilChunk {
		b.head, b.base = n, h
	} else {
		*c.next.At(b.tail) = n
	}
	b.tail, b.tailLen = n, 0
}

// TailAddr is where the next Push writes when the tail chunk has room,
// else nil (the Push takes a new chunk): a caller that knows the height of
// a timer before it can insert it (Schedule, before the id's Keccak)
// prefetches it to overlap the miss.
func (b *Bucket) TailAddr(c *Chunks) unsafe.Pointer {
	if b.tail != nilChunk && b.tailLen < ChunkLen {
		return unsafe.Pointer(&c.slab.At(b.tail).e[b.tailLen])
	}
	return nil
}

// PrefetchHead starts loading the first lines of b, the first of which
// Drain or Shift will read.
func (b *Bucket) PrefetchHead(c *Chunks) {
	if b.tail != nilChunk {
		ch := unsafe.Pointer(c.slab.At(b.head))
		off := uint32(b.headOff)
		prefetch.Lines(unsafe.Add(ch, off*uint32(unsafe.Sizeof(slot{}))), unsafe.Add(ch, 64*((off/4+1)%8)), nil, nil)
	}
}

// Kill makes the entry at p a tombstone; the last entry written is simply
// taken back, unless a compaction runs (its read cursor may be at that
// slot, and the next Push would write behind it). When no live entry is
// left the bucket's chunks go back to the arena. Callers call Compact
// after each Kill, so that tombstones never outgrow the live entries.
func (b *Bucket) Kill(c *Chunks, p Pos) {
	c.at(p).Seq = 0
	b.Live--
	if b.cw == nilChunk && b.tailLen > 0 && p == Pos(b.tail*ChunkLen+uint32(b.tailLen)-1) {
		b.tailLen--
	} else {
		b.Dead++
	}
	if b.Live == 0 {
		b.Release(c)
	}
}

// NeedsCompaction reports whether the tombstones outnumber the live
// entries by more than a chunk.
func (b *Bucket) NeedsCompaction() bool { return b.Dead > b.Live+ChunkLen }

// Compacting reports whether a compaction runs (Compact has more to do).
func (b *Bucket) Compacting() bool { return b.cw != nilChunk }

// CompactStep is how many slots a call of Compact reads at most, so how
// many entries it moves. A compaction starts with more tombstones than
// live entries and reads every slot once, so it ends within about
// 2*(Live+ChunkLen)/CompactStep Kills: the tombstones made meanwhile stay
// a fraction of the live entries, and the bucket holds at most about
// 2.7 slots per live entry (TestCompactionIsIncremental,
// TestCompactionBoundsChurn). A compaction in one go rewrote the whole
// bucket in one Cancel: 45 ms at a million timers.
const CompactStep = 8

// CompactWhole is the most slots (live entries and tombstones) a
// compaction may start with and still run to its end in the Kill that
// starts it: a pause bounded by this many slots, and per slot cheaper than
// in steps (BenchmarkCancel at 10k pending, where buckets are small: 85 ->
// 77 ns in the ring). No Kill reads more slots than this.
const CompactWhole = 256

// Compact does a share of the bucket's compaction, starting one when
// NeedsCompaction says so (and doing all of it when the bucket holds at
// most CompactWhole slots): it reads up to CompactStep slots from the
// read cursor, moves each live one to the write cursor, and tells moved
// its new position. It keeps the order of the entries; those behind the
// write cursor are compacted, and a Kill among them is a tombstone a
// later compaction drops.
func (b *Bucket) Compact(c *Chunks, moved func(Entry, Pos)) {
	step := CompactStep
	if b.cw == nilChunk {
		if !b.NeedsCompaction() {
			return
		}
		b.cw, b.cwOff, b.crOff = b.head, b.headOff, b.headOff
		if b.Live+b.Dead <= CompactWhole {
			step = CompactWhole
		}
	}
	for n := step; ; n-- {
		if b.cwOff == ChunkLen && b.cw != b.tail {
			// cw is full: the read cursor is in the chunk after it.
			b.cw, b.cwOff, b.crOff = *c.next.At(b.cw), 0, b.crOff-ChunkLen
		}
		rc, ro := b.cw, b.crOff
		if ro >= ChunkLen && rc != b.tail {
			rc, ro = *c.next.At(rc), ro-ChunkLen
		}
		if rc == b.tail && ro == b.tailLen {
			b.endCompaction(c)
			return
		}
		if n == 0 {
			return
		}
		if ro == ChunkLen {
			// Read past rc, which is not cw: its live entries were
			// moved behind the write cursor, the rest are tombstones.
			next := *c.next.At(rc)
			*c.next.At(b.cw) = next
			c.release(rc)
			b.Dead -= ChunkLen
			b.crOff = ChunkLen
			n++ // a release reads no slot: it takes no step
			continue
		}
		if s := &c.slab.At(rc).e[ro]; s.Seq != 0 {
			if b.crOff != b.cwOff {
				w := &c.slab.At(b.cw).e[b.cwOff]
				*w = *s
				s.Seq = 0
				moved(w.entry(b.base), Pos(b.cw*ChunkLen+uint32(b.cwOff)))
			}
			b.cwOff++
		}
		b.crOff++
	}
}

// endCompaction ends a compaction whose read cursor has reached the end
// of the bucket: the write cursor becomes the end, and the chunk after
// cw, if any, holds only tombstones.
func (b *Bucket) endCompaction(c *Chunks) {
	if b.cw != b.tail {
		b.Dead -= uint32(b.tailLen)
		c.release(b.tail)
		b.tail, b.tailLen = b.cw, ChunkLen
	}
	b.Dead -= uint32(b.tailLen - b.cwOff)
	b.tailLen = b.cwOff
	b.cw, b.cwOff, b.crOff = nilChunk, 0, 0
}

// skipGap ends a compaction whose compacted entries have all been shifted
// out, the head being at the write cursor: the head jumps over the
// tombstones between the cursors to the read cursor, and a Kill starts
// the compaction of the rest anew if it still needs one.
func (b *Bucket) skipGap(c *Chunks) {
	if b.crOff >= ChunkLen {
		next := *c.next.At(b.head)
		c.release(b.head)
		b.Dead -= uint32(ChunkLen - b.headOff)
		b.head, b.headOff, b.crOff = next, 0, b.crOff-ChunkLen
	}
	b.Dead -= uint32(b.crOff - b.headOff)
	b.headOff = b.crOff
	b.cw, b.cwOff, b.crOff = nilChunk, 0, 0
}

// Shift removes and returns the first live entry, or false when there is
// none (see ShiftTo).
func (b *Bucket) Shift(c *Chunks) (Entry, bool) {
	var e [1]Entry
	if b.ShiftTo(c, e[:]) == 0 {
		return Entry{}, false
	}
	return e[0], true
}

// ShiftTo removes the first live entries, as many as dst holds or the
// bucket has, into dst, and returns how many. It drops the tombstones it
// passes and gives each chunk it has read past back to the arena; every
// other entry keeps its position, so a bucket can be handed on a few
// entries at a time, while its owner still pushes to its tail and kills
// entries anywhere in it (which may compact it meanwhile: ShiftTo reads
// up to the write cursor, then jumps to the read cursor).
func (b *Bucket) ShiftTo(c *Chunks, dst []Entry) int { return b.shiftBelow(c, math.MaxUint64, dst) }

// shiftBelow is ShiftTo stopping before the first live entry whose Seq is
// bound or more, which stays.
func (b *Bucket) shiftBelow(c *Chunks, bound uint64, dst []Entry) int {
	k := 0
	for k < len(dst) && b.Live > 0 {
		if b.head == b.cw && b.headOff == b.cwOff {
			b.skipGap(c)
		}
		ch := c.slab.At(b.head)
		n := uint8(ChunkLen)
		switch {
		case b.head == b.cw:
			n = b.cwOff
		case b.head == b.tail:
			n = b.tailLen
		case b.headOff == 0:
			// Staging shifts a few entries a block out of an epoch
			// written long ago: load the chunk at once, as Iter does.
			c.prefetchFull(b.head)
		}
		for ; b.headOff < n && k < len(dst); b.headOff++ {
			s := &ch.e[b.headOff]
			if s.Seq == 0 {
				b.Dead--
				continue
			}
			if s.Seq >= bound {
				return k
			}
			dst[k] = s.entry(b.base)
			k++
			if b.Live--; b.Live == 0 {
				b.Release(c) // only tombstones can follow
				return k
			}
		}
		if k == len(dst) || b.head == b.cw {
			continue // done, or at the write cursor: skipGap
		}
		if b.head == b.tail {
			panic("ring: bucket counts a live entry it does not hold")
		}
		next := *c.next.At(b.head)
		c.release(b.head)
		b.head, b.headOff = next, 0
	}
	return k
}

// Detach returns the bucket's content and leaves it empty.
func (b *Bucket) Detach() Bucket {
	d := *b
	*b = Bucket{}
	return d
}

// Release returns every chunk of b to the arena and empties it.
func (b *Bucket) Release(c *Chunks) {
	if b.tail != nilChunk {
		for i := b.head; i != b.tail; {
			next := *c.next.At(i)
			c.release(i)
			i = next
		}
		c.release(b.tail) // without reading its next: undefined, see alloc
	}
	*b = Bucket{}
}

// Drain returns an iterator over b's live entries in FIFO order that gives
// each chunk back to the arena once it has read past it. It takes b's
// content: b is left empty.
func (b *Bucket) Drain() Iter {
	d := b.Detach()
	return Iter{chunk: d.head, tail: d.tail, tailLen: uint16(d.tailLen), i: uint16(d.headOff), base: d.base}
}

// Iter reads a detached bucket. The zero Iter is exhausted. It is 32
// bytes: owners keep one in their structs, and a larger one is copied
// there through a call (it holds a pointer, so copies take write
// barriers).
type Iter struct {
	chunk, tail   uint32
	tailLen, i, n uint16 // n: entries written in ch
	ch            *chunk // chunk's memory, once Next has been there
	base          uint64 // the bucket's base height
}

// Next returns the next live entry, or false when none is left. Its common
// path reads the next entry of the chunk at hand, whose memory the
// iterator keeps, instead of looking the chunk up in the slab each time.
func (it *Iter) Next(c *Chunks) (Entry, bool) {
	if it.i < it.n { // n is 0 until next has loaded ch
		s := &it.ch.e[it.i%ChunkLen]
		it.i++
		if s.Seq != 0 {
			return s.entry(it.base), true
		}
	}
	return it.next(c)
}

// next is Next past tombstones and chunk ends.
func (it *Iter) next(c *Chunks) (Entry, bool) {
	for it.chunk != nilChunk { // tested here: most buckets a block takes are empty
		it.load(c)
		for it.i < it.n {
			s := &it.ch.e[it.i]
			it.i++
			if s.Seq != 0 {
				return s.entry(it.base), true
			}
		}
		it.advance(c)
	}
	return Entry{}, false
}

// load makes the iterator's chunk, which must not be nilChunk, the one
// at hand, if it has not been loaded yet.
func (it *Iter) load(c *Chunks) {
	if it.ch == nil {
		it.ch, it.n = c.slab.At(it.chunk), ChunkLen
		if it.chunk == it.tail {
			it.n = it.tailLen
		} else {
			// A full chunk: load the rest of it and the head of the
			// next at once, rather than a line at a time as the loop
			// gets there (at 1M pending, delivery reads them from
			// memory: 10.0 -> 7.9 ns per timer in pass timers).
			c.prefetchFull(it.chunk)
		}
	}
}

// advance gives the chunk at hand, read to its end, back to the arena and
// moves to the next.
func (it *Iter) advance(c *Chunks) {
	next := nilChunk
	if it.chunk != it.tail {
		next = *c.next.At(it.chunk)
	}
	c.release(it.chunk)
	it.chunk, it.i, it.ch, it.n = next, 0, nil, 0
}

// AppendVals appends the Vals of the live entries left, in order, to dst
// and returns the extended slice; the iterator is then exhausted. It is
// Next in a loop without a call per entry, for a caller that takes a
// whole bucket and needs only the Vals (end of block: the records).
func (it *Iter) AppendVals(c *Chunks, dst []uint32) []uint32 {
	for it.chunk != nilChunk {
		it.load(c)
		src := it.ch.e[it.i:it.n]
		n := len(dst)
		dst = slices.Grow(dst, len(src))[:n+len(src)]
		for k := range src {
			if s := &src[k]; s.Seq != 0 { // a tombstone's Val is stale: never written
				dst[n] = s.Val
				n++
			}
		}
		dst = dst[:n]
		it.advance(c)
	}
	return dst
}

// Walk calls f for each live entry of b in order, without changing b.
func (b *Bucket) Walk(c *Chunks, f func(Entry)) {
	b.WalkPos(c, func(e Entry, _ Pos) { f(e) })
}

// WalkPos calls f for each live entry of b and its position, in order,
// without changing b.
func (b *Bucket) WalkPos(c *Chunks, f func(Entry, Pos)) {
	if b.tail == nilChunk {
		return
	}
	from := uint32(b.headOff)
	for i := b.head; ; i, from = *c.next.At(i), 0 {
		ch := c.slab.At(i)
		n := uint32(ChunkLen)
		if i == b.tail {
			n = uint32(b.tailLen)
		}
		for j := from; j < n; j++ {
			if s := &ch.e[j]; s.Seq != 0 {
				f(s.entry(b.base), Pos(i*ChunkLen+j))
			}
		}
		if i == b.tail {
			return
		}
	}
}
