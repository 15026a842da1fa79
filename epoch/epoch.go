// Package epoch is tier 2 of the calendar queue: epoch slabs.
//
// An epoch is Length consecutive heights; epoch e covers heights
// [e*Length, (e+1)*Length). Slabs holds Count buckets (unrolled lists of
// entries, as in package ring), one per epoch in its window, bucket =
// e mod Count. Its owner keeps at most Count consecutive epochs resident,
// so a bucket never mixes two epochs, and hands an epoch on towards the ring
// in bucket order (per height, the order in which the timers were
// inserted): a few entries per block with Shift, the rest at once with Take.
package epoch

import (
	"fmt"
	"math/bits"

	"github.com/timerlane/timerlane/ring"
)

// MaxCount is the largest number of epoch buckets.
const MaxCount = 1 << 20

// MaxLength is the longest epoch: a bucket stores its heights as 32-bit
// offsets from one of them.
const MaxLength = 1 << 31

// Slabs is the epoch tier.
type Slabs struct {
	ring.Buckets
	length, count uint64
	// Of and Index shift and mask when length and count are powers of two
	// (as in the default layout): a 64-bit division costs tens of cycles,
	// on every insert into the tier and every cancel in it.
	shift, mask uint64
	pow2Length  bool
	pow2Count   bool
}

// New returns an epoch tier of count epochs of length blocks.
func New(length, count uint64) (*Slabs, error) {
	if length == 0 || length > MaxLength || count == 0 || count > MaxCount {
		return nil, fmt.Errorf("epoch: length %d and count %d must be >= 1 (length <= 2^31, count <= 2^20)", length, count)
	}
	return &Slabs{
		Buckets: ring.NewLowBuckets(count), length: length, count: count,
		shift: uint64(bits.TrailingZeros64(length)), mask: count - 1,
		pow2Length: length&(length-1) == 0, pow2Count: count&(count-1) == 0,
	}, nil
}

// Of returns the epoch of height h.
func (s *Slabs) Of(h uint64) uint64 {
	if s.pow2Length {
		return h >> s.shift
	}
	return h / s.length
}

// Length is the number of heights per epoch.
func (s *Slabs) Length() uint64 { return s.length }

// Count is the number of epoch buckets.
func (s *Slabs) Count() uint64 { return s.count }

// Index is the bucket of epoch e, for callers that keep it instead of
// dividing on every call.
func (s *Slabs) Index(e uint64) uint64 {
	if s.pow2Count {
		return e & s.mask
	}
	return e % s.count
}

// Bucket returns the bucket of epoch e (read-only use).
func (s *Slabs) Bucket(e uint64) *ring.Bucket { return s.At(s.Index(e)) }

// Push appends e to the bucket of its height's epoch and returns its position.
func (s *Slabs) Push(c *ring.Chunks, e ring.Entry) ring.Pos {
	return s.Buckets.Push(c, s.Index(s.Of(e.Height)), e)
}

// Kill cancels the entry at p, which is in the bucket of height h's epoch
// (see ring.Buckets.Kill for moved).
func (s *Slabs) Kill(c *ring.Chunks, h uint64, p ring.Pos, moved func(ring.Entry, ring.Pos)) {
	s.Buckets.Kill(c, s.Index(s.Of(h)), p, moved)
}

// Take detaches the whole bucket of epoch e and returns an iterator over it.
func (s *Slabs) Take(e uint64) ring.Iter { return s.Buckets.Take(s.Index(e)) }

// NextOccupied returns the first epoch in [from, to] whose bucket holds a
// live entry; the range must span at most Count epochs.
func (s *Slabs) NextOccupied(from, to uint64) (uint64, bool) {
	if to < from {
		return 0, false
	}
	k, ok := s.Next(s.Index(from), min(to-from, s.count-1)+1)
	return from + k, ok
}

// MinHeight returns the lowest height in epoch e's bucket, which must hold
// a live entry (see ring.Buckets.Lowest for its cost).
func (s *Slabs) MinHeight(c *ring.Chunks, e uint64) uint64 {
	return s.Lowest(c, s.Index(e), ^uint64(0))
}
