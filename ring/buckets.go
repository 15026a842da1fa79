package ring

import (
	"fmt"
	"math"

	"github.com/timerlane/timerlane/internal/bitset"
)

// Buckets is a fixed array of buckets with a bitset of those holding a live
// entry: the storage of both the ring and the epoch tier, which differ only
// in how a height names its bucket.
type Buckets struct {
	b        []Bucket
	occupied bitset.Cyclic
	len      int
	low      low      // the lowest height of one bucket (see Lowest)
	adopt    bool     // a push into empty may take low (NewLowBuckets)
	walked   uint64   // entries Lowest has read
	first    []uint64 // per bucket, the Seq of its first push since it was empty (the ring's); nil: not kept
}

// low is what is known of the lowest height of one bucket, i: while n > 0,
// h is its lowest height and n its live entries of that height; once they
// are gone (n = 0), h is only a bound below its heights, until Lowest
// walks the bucket again. A push lowers h or counts in n, and only the
// death of the last entry of height h makes a walk necessary, so a bucket
// of many timers is not read whole each time its lowest height is asked
// for. It is kept for one bucket: the one Lowest was last asked about
// (SkipEmpty asks about the same one call after call, as a chain passes a
// quiet stretch), or, in buckets made by NewLowBuckets, one pushed into
// empty while that one is empty (so that a bucket filled from empty, as
// the overflow stage is, is known before it is asked about); the first
// question about another bucket reads it (once per busy epoch). Push
// and Kill on every other bucket pay one comparison (a per-bucket array
// cost a cancel in the epoch tier 11 ns, one more line to load).
type low struct {
	i, h uint64
	n    uint32
	set  bool
}

// NewBuckets returns n empty buckets.
func NewBuckets(n uint64) Buckets {
	return Buckets{b: make([]Bucket, n), occupied: bitset.New(n)}
}

// NewLowBuckets returns n empty buckets whose lowest heights Lowest is
// asked for (the epoch tier's, the overflow stage): a push into an empty
// bucket keeps its height while the bucket kept before is empty. The ring
// and staging never ask, and their pushes skip that.
func NewLowBuckets(n uint64) Buckets {
	s := NewBuckets(n)
	s.adopt = true
	return s
}

// Len is the number of live entries in all buckets.
func (s *Buckets) Len() int { return s.len }

// At returns bucket i (read-only use).
func (s *Buckets) At(i uint64) *Bucket { return &s.b[i] }

// Push appends e to bucket i and returns its position.
func (s *Buckets) Push(c *Chunks, i uint64, e Entry) Pos {
	// The common case, without a call: a tail chunk with room (so the
	// bucket holds a live entry and is in occupied already), a height at
	// most 2^31 above the base, and no lowest height to keep for this
	// bucket.
	b := &s.b[i]
	if off := e.Height - b.base; b.tail != nilChunk && b.tailLen < ChunkLen && off < 1<<31 && (!s.low.set || s.low.i != i) {
		c.slab.At(b.tail).e[b.tailLen] = slot{Seq: e.Seq, Val: e.Val, Off: int32(off)}
		p := Pos(b.tail*ChunkLen + uint32(b.tailLen))
		b.tailLen++
		b.Live++
		s.len++
		return p
	}
	return s.push(c, i, e)
}

// push is Push's general case.
func (s *Buckets) push(c *Chunks, i uint64, e Entry) Pos {
	if s.first != nil && s.b[i].Live == 0 {
		s.first[i] = e.Seq
	}
	s.occupied.Set(i)
	s.len++
	switch l := &s.low; {
	case l.set && l.i == i:
		switch h := e.Height; {
		case s.b[i].Live == 0 || h < l.h:
			l.h, l.n = h, 1
		case h == l.h && l.n > 0:
			l.n++
		}
	case s.adopt && s.b[i].Live == 0 && (!l.set || s.b[l.i].Live == 0):
		*l = low{i: i, h: e.Height, n: 1, set: true}
	}
	return s.b[i].Push(c, e)
}

// gone counts out of bucket i's lowest height, if known, an entry of
// height h that leaves it.
func (s *Buckets) gone(i, h uint64) {
	if l := &s.low; l.set && l.i == i && l.h == h && l.n > 0 {
		l.n--
	}
}

// Lowest returns the lowest height in bucket i, or bound when that is
// lower or the bucket is empty. It reads the bucket only when that height
// is not known (another bucket's was asked for last) or the entries of
// its lowest height are gone and the bound left below them is below
// bound: a caller with a bound at hand (a lower height known elsewhere)
// spares the walk.
func (s *Buckets) Lowest(c *Chunks, i, bound uint64) uint64 {
	b, l := &s.b[i], &s.low
	if b.Live == 0 {
		return bound
	}
	if !l.set || l.i != i || l.n == 0 && l.h < bound {
		*l = low{i: i, h: ^uint64(0), set: true}
		b.Walk(c, func(x Entry) {
			s.walked++
			switch {
			case x.Height < l.h:
				l.h, l.n = x.Height, 1
			case x.Height == l.h:
				l.n++
			}
		})
	}
	return min(l.h, bound)
}

// Walked is the number of entries Lowest has read, for tests.
func (s *Buckets) Walked() uint64 { return s.walked }

// Kill cancels the entry at p in bucket i. Once the bucket's tombstones
// outnumber its live entries by more than a chunk it is compacted, a few
// entries per Kill (Bucket.Compact), and moved is told the new position
// of every entry that moved.
func (s *Buckets) Kill(c *Chunks, i uint64, p Pos, moved func(Entry, Pos)) {
	b := &s.b[i]
	if l := &s.low; l.set && l.i == i {
		s.gone(i, c.at(p).entry(b.base).Height)
	}
	b.Kill(c, p)
	s.len--
	switch {
	case b.Empty():
		s.occupied.Clear(i)
	case b.Compacting() || b.NeedsCompaction():
		b.Compact(c, moved)
	}
}

// Shift removes and returns the first live entry of bucket i (see
// Bucket.Shift).
func (s *Buckets) Shift(c *Chunks, i uint64) (Entry, bool) {
	var e [1]Entry
	if s.ShiftTo(c, i, e[:]) == 0 {
		return Entry{}, false
	}
	return e[0], true
}

// ShiftTo removes the first live entries of bucket i into dst and returns
// how many (see Bucket.ShiftTo).
func (s *Buckets) ShiftTo(c *Chunks, i uint64, dst []Entry) int {
	return s.ShiftBelow(c, i, math.MaxUint64, dst)
}

// ShiftBelow is ShiftTo stopping before the first live entry whose Seq is
// bound or more: it takes the prefix of bucket i below bound.
func (s *Buckets) ShiftBelow(c *Chunks, i, bound uint64, dst []Entry) int {
	k := s.b[i].shiftBelow(c, bound, dst)
	if l := &s.low; l.set && l.i == i {
		for _, e := range dst[:k] {
			s.gone(i, e.Height)
		}
	}
	s.len -= k
	if k > 0 && s.b[i].Empty() {
		s.occupied.Clear(i)
	}
	return k
}

// MoveTo hands bucket i's whole content to bucket j of d, which must be
// empty (it panics otherwise: two lists cannot be joined in O(1) without
// losing their order). It costs O(1) whatever the bucket holds, and every
// entry keeps its position, so no owner needs to be told anything.
func (s *Buckets) MoveTo(i uint64, d *Buckets, j uint64) {
	if d.b[j] != (Bucket{}) {
		panic(fmt.Sprintf("ring: move of bucket %d into bucket %d, which is not empty", i, j))
	}
	b := s.b[i].Detach()
	s.len -= int(b.Live)
	s.occupied.Clear(i)
	if d.low.set && d.low.i == j {
		d.low.set = false // j was empty; what it held is gone
	}
	if s.low.set && s.low.i == i {
		s.low.set = false
		d.low = low{i: j, h: s.low.h, n: s.low.n, set: true}
	}
	if b.Live > 0 {
		d.b[j] = b
		d.len += int(b.Live)
		d.occupied.Set(j)
	}
}

// Take detaches bucket i and returns an iterator over it, in FIFO order.
func (s *Buckets) Take(i uint64) Iter {
	b := &s.b[i]
	if b.tail == nilChunk {
		return Iter{} // empty, as most are when blocks outnumber timers
	}
	s.len -= int(b.Live)
	s.occupied.Clear(i)
	return b.Drain()
}

// PrependTo moves bucket i of s in front of bucket j of d, both of one
// and the same height: d's entries then follow s's, in FIFO order, and no
// entry moves. The slots of s's tail chunk past its last entry become
// tombstones of d. A compaction of s in progress is finished first (its
// cursors would not survive the move); one of d goes on, behind the new
// front. An empty d takes s whole, as MoveTo.
func (s *Buckets) PrependTo(c *Chunks, i uint64, d *Buckets, j uint64, moved func(Entry, Pos)) {
	a, b := &s.b[i], &d.b[j]
	if b.tail == nilChunk {
		s.MoveTo(i, d, j)
		return
	}
	if a.tail == nilChunk {
		return
	}
	if a.base != b.base {
		panic(fmt.Sprintf("ring: bucket of height %d put in front of one of height %d", a.base, b.base))
	}
	for a.Compacting() {
		a.Compact(c, moved)
	}
	if a.tail == nilChunk { // the compaction released it all: no live entry was left
		return
	}
	clear(c.slab.At(a.tail).e[a.tailLen:])
	clear(c.slab.At(b.head).e[:b.headOff])
	*c.next.At(a.tail) = b.head
	b.Dead += a.Dead + uint32(ChunkLen-a.tailLen) + uint32(b.headOff)
	b.head, b.headOff = a.head, a.headOff
	b.Live += a.Live
	d.len += int(a.Live)
	s.len -= int(a.Live)
	s.occupied.Clear(i)
	*a = Bucket{}
}

// Next returns the smallest k < n such that bucket (i+k) mod len holds a
// live entry.
func (s *Buckets) Next(i, n uint64) (uint64, bool) {
	if s.len == 0 {
		return 0, false // no scan: NextAfter asks the stage and the older buckets, mostly empty
	}
	return s.occupied.Next(i, n)
}
