package ring

import (
	"fmt"
	"math/bits"
)

// MaxSize is the largest ring: 2^24 buckets.
const MaxSize = 1 << 24

// Ring is the block ring buffer: Size buckets, bucket = height & (Size-1).
type Ring struct {
	Buckets
	mask uint64
}

// New returns a ring of size buckets, a power of two in [1, MaxSize].
func New(size uint64) (*Ring, error) {
	if size == 0 || bits.OnesCount64(size) != 1 || size > MaxSize {
		return nil, fmt.Errorf("ring: size %d is not a power of two in [1, 2^24]", size)
	}
	return &Ring{Buckets: NewBuckets(size), mask: size - 1}, nil
}

// Size is the number of buckets.
func (r *Ring) Size() uint64 { return r.mask + 1 }

// Push appends e to the bucket of its height and returns its position.
func (r *Ring) Push(c *Chunks, e Entry) Pos { return r.Buckets.Push(c, e.Height&r.mask, e) }

// Kill cancels the entry at p, which is in the bucket of height h (see
// Buckets.Kill for moved).
func (r *Ring) Kill(c *Chunks, h uint64, p Pos, moved func(Entry, Pos)) {
	r.Buckets.Kill(c, h&r.mask, p, moved)
}

// Take detaches the whole bucket of height h and returns an iterator over
// it, in FIFO order.
func (r *Ring) Take(h uint64) Iter { return r.Buckets.Take(h & r.mask) }

// MoveIn hands bucket i of s, whose entries are all of height h, to the
// bucket of height h, which must be empty (see Buckets.MoveTo).
func (r *Ring) MoveIn(h uint64, s *Buckets, i uint64) { s.MoveTo(i, &r.Buckets, h&r.mask) }

// Bucket returns the bucket of height h (read-only use).
func (r *Ring) Bucket(h uint64) *Bucket { return r.At(h & r.mask) }

// NextOccupied returns the first height in [from, to] whose bucket holds a
// live entry; the range must span at most Size heights.
func (r *Ring) NextOccupied(from, to uint64) (uint64, bool) {
	if to < from {
		return 0, false
	}
	k, ok := r.Next(from&r.mask, min(to-from, r.mask)+1)
	return from + k, ok
}
