package ring

import (
	"fmt"
	"math/bits"
	"unsafe"
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
	b := NewBuckets(size)
	b.first = make([]uint64, size)
	return &Ring{Buckets: b, mask: size - 1}, nil
}

// First is the Seq of the first entry pushed into the bucket of height h
// since it was last empty; meaningless while it is empty. The calendar
// tells a height's ring entries from its older ones by it, at no cost to
// a push: only a push into an empty bucket, the slow path, records it.
func (r *Ring) First(h uint64) uint64 { return r.first[h&r.mask] }

// SetFirst sets First(h), for a bucket filled other than by Push (a
// bucket moved in whole).
func (r *Ring) SetFirst(h, seq uint64) { r.first[h&r.mask] = seq }

// FirstAddr is where First(h) is kept: the address to prefetch.
func (r *Ring) FirstAddr(h uint64) unsafe.Pointer { return unsafe.Pointer(&r.first[h&r.mask]) }

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

// Index is the bucket of height h: h & (Size()-1).
func (r *Ring) Index(h uint64) uint64 { return h & r.mask }

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
