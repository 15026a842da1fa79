package ring

import (
	"fmt"
	"math/bits"
)

// Ring is the block ring buffer: Size buckets, bucket = height & (Size-1).
type Ring struct {
	buckets []List
	mask    uint64
	len     int
}

// New returns a ring of size buckets; size must be a power of two >= 1.
func New(size uint64) (*Ring, error) {
	if size == 0 || bits.OnesCount64(size) != 1 || size > 1<<30 {
		return nil, fmt.Errorf("ring: size %d is not a power of two in [1, 2^30]", size)
	}
	return &Ring{buckets: make([]List, size), mask: size - 1}, nil
}

// Size is the number of buckets.
func (r *Ring) Size() uint64 { return r.mask + 1 }

// Len is the number of nodes in all buckets.
func (r *Ring) Len() int { return r.len }

// Push appends node i to the bucket of its height.
func (r *Ring) Push(a *Arena, i uint32) {
	r.buckets[a.At(i).Height&r.mask].PushBack(a, i)
	r.len++
}

// Remove unlinks node i from the bucket of its height.
func (r *Ring) Remove(a *Arena, i uint32) {
	r.buckets[a.At(i).Height&r.mask].Remove(a, i)
	r.len--
}

// Take detaches and returns the whole bucket of height h, in FIFO order.
func (r *Ring) Take(h uint64) List {
	b := &r.buckets[h&r.mask]
	l := *b
	*b = List{}
	r.len -= l.Len
	return l
}

// Bucket returns the bucket of height h (read-only use).
func (r *Ring) Bucket(h uint64) *List { return &r.buckets[h&r.mask] }
