package ring

import (
	"fmt"
	"math/bits"

	"github.com/timerlane/timerlane/internal/bitset"
)

// MaxSize is the largest ring: 2^24 buckets.
const MaxSize = 1 << 24

// Ring is the block ring buffer: Size buckets, bucket = height & (Size-1).
type Ring struct {
	buckets  []Bucket
	occupied bitset.Cyclic // the buckets with a live entry
	mask     uint64
	len      int
}

// New returns a ring of size buckets, a power of two in [1, MaxSize].
func New(size uint64) (*Ring, error) {
	if size == 0 || bits.OnesCount64(size) != 1 || size > MaxSize {
		return nil, fmt.Errorf("ring: size %d is not a power of two in [1, 2^24]", size)
	}
	return &Ring{buckets: make([]Bucket, size), occupied: bitset.New(size), mask: size - 1}, nil
}

// Size is the number of buckets.
func (r *Ring) Size() uint64 { return r.mask + 1 }

// Len is the number of live entries in all buckets.
func (r *Ring) Len() int { return r.len }

// Push appends e to the bucket of its height and returns its position.
func (r *Ring) Push(c *Chunks, e Entry) Pos {
	b := e.Height & r.mask
	r.occupied.Set(b)
	r.len++
	return r.buckets[b].Push(c, e)
}

// Kill cancels the entry at p, which is in the bucket of height h.
func (r *Ring) Kill(c *Chunks, h uint64, p Pos) {
	b := h & r.mask
	r.buckets[b].Kill(c, p)
	if r.buckets[b].Empty() {
		r.occupied.Clear(b)
	}
	r.len--
}

// Take detaches the whole bucket of height h and returns an iterator over
// it, in FIFO order.
func (r *Ring) Take(h uint64) Iter {
	b := &r.buckets[h&r.mask]
	r.len -= b.Live
	r.occupied.Clear(h & r.mask)
	return b.Drain()
}

// Bucket returns the bucket of height h (read-only use).
func (r *Ring) Bucket(h uint64) *Bucket { return &r.buckets[h&r.mask] }

// NextOccupied returns the first height in [from, to] whose bucket holds a
// live entry; the range must span at most Size heights.
func (r *Ring) NextOccupied(from, to uint64) (uint64, bool) {
	if to < from {
		return 0, false
	}
	k, ok := r.occupied.Next(from&r.mask, min(to-from, r.mask)+1)
	return from + k, ok
}
