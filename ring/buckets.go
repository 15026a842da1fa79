package ring

import (
	"fmt"

	"github.com/timerlane/timerlane/internal/bitset"
)

// Buckets is a fixed array of buckets with a bitset of those holding a live
// entry: the storage of both the ring and the epoch tier, which differ only
// in how a height names its bucket.
type Buckets struct {
	b        []Bucket
	occupied bitset.Cyclic
	len      int
}

// NewBuckets returns n empty buckets.
func NewBuckets(n uint64) Buckets {
	return Buckets{b: make([]Bucket, n), occupied: bitset.New(n)}
}

// Len is the number of live entries in all buckets.
func (s *Buckets) Len() int { return s.len }

// At returns bucket i (read-only use).
func (s *Buckets) At(i uint64) *Bucket { return &s.b[i] }

// Push appends e to bucket i and returns its position.
func (s *Buckets) Push(c *Chunks, i uint64, e Entry) Pos {
	s.occupied.Set(i)
	s.len++
	return s.b[i].Push(c, e)
}

// Kill cancels the entry at p in bucket i. When the bucket's tombstones
// outnumber its live entries by more than a chunk it is compacted, and
// moved is told the new position of every entry that moved.
func (s *Buckets) Kill(c *Chunks, i uint64, p Pos, moved func(Entry, Pos)) {
	b := &s.b[i]
	b.Kill(c, p)
	s.len--
	switch {
	case b.Empty():
		s.occupied.Clear(i)
	case b.NeedsCompaction():
		b.Compact(c, moved)
	}
}

// Shift removes and returns the first live entry of bucket i (see
// Bucket.Shift).
func (s *Buckets) Shift(c *Chunks, i uint64) (Entry, bool) {
	e, ok := s.b[i].Shift(c)
	if ok {
		s.len--
		if s.b[i].Empty() {
			s.occupied.Clear(i)
		}
	}
	return e, ok
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

// Next returns the smallest k < n such that bucket (i+k) mod len holds a
// live entry.
func (s *Buckets) Next(i, n uint64) (uint64, bool) { return s.occupied.Next(i, n) }
