package ring

import (
	"fmt"
	"math/bits"

	"github.com/timerlane/timerlane/internal/bitset"
)

// MaxSize is the largest ring: 2^24 buckets of 16 bytes.
const MaxSize = 1 << 24

// Ring is the block ring buffer: Size buckets, bucket = height & (Size-1).
type Ring struct {
	buckets  []List
	occupied bitset.Cyclic // the non-empty buckets
	mask     uint64
	len      int
}

// New returns a ring of size buckets, a power of two in [1, MaxSize].
func New(size uint64) (*Ring, error) {
	if size == 0 || bits.OnesCount64(size) != 1 || size > MaxSize {
		return nil, fmt.Errorf("ring: size %d is not a power of two in [1, 2^24]", size)
	}
	return &Ring{buckets: make([]List, size), occupied: bitset.New(size), mask: size - 1}, nil
}

// Size is the number of buckets.
func (r *Ring) Size() uint64 { return r.mask + 1 }

// Len is the number of nodes in all buckets.
func (r *Ring) Len() int { return r.len }

// Push appends node i to the bucket of its height.
func (r *Ring) Push(a *Arena, i uint32) {
	b := a.At(i).Height & r.mask
	r.buckets[b].PushBack(a, i)
	r.occupied.Set(b)
	r.len++
}

// Remove unlinks node i from the bucket of its height.
func (r *Ring) Remove(a *Arena, i uint32) {
	b := a.At(i).Height & r.mask
	r.buckets[b].Remove(a, i)
	if r.buckets[b].Head == Nil {
		r.occupied.Clear(b)
	}
	r.len--
}

// Take detaches and returns the whole bucket of height h, in FIFO order.
func (r *Ring) Take(h uint64) List {
	b := &r.buckets[h&r.mask]
	l := *b
	*b = List{}
	r.occupied.Clear(h & r.mask)
	r.len -= l.Len
	return l
}

// NextOccupied returns the first height in [from, to] whose bucket is not
// empty; the range must span at most Size heights.
func (r *Ring) NextOccupied(from, to uint64) (uint64, bool) {
	if to < from {
		return 0, false
	}
	k, ok := r.occupied.Next(from&r.mask, min(to-from, r.mask)+1)
	return from + k, ok
}

// Bucket returns the bucket of height h (read-only use).
func (r *Ring) Bucket(h uint64) *List { return &r.buckets[h&r.mask] }
