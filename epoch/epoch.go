// Package epoch is tier 2 of the calendar queue: epoch slabs.
//
// An epoch is Length consecutive heights; epoch e covers heights
// [e*Length, (e+1)*Length). Slabs holds Count buckets, one FIFO list of
// arena nodes per epoch in its window, bucket = e mod Count. Its owner keeps
// at most Count consecutive epochs resident, so a bucket never mixes two
// epochs, and moves a whole epoch into the ring when the epoch comes into
// the ring's range, in list order: per height, the order in which the
// timers were inserted.
package epoch

import (
	"fmt"

	"github.com/timerlane/timerlane/ring"
)

// Slabs is the epoch tier.
type Slabs struct {
	buckets []ring.List
	length  uint64
	len     int
}

// New returns an epoch tier of count epochs of length blocks.
func New(length, count uint64) (*Slabs, error) {
	if length == 0 || count == 0 || count > 1<<24 {
		return nil, fmt.Errorf("epoch: length %d and count %d must be >= 1 (count <= 2^24)", length, count)
	}
	return &Slabs{buckets: make([]ring.List, count), length: length}, nil
}

// Of returns the epoch of height h.
func (s *Slabs) Of(h uint64) uint64 { return h / s.length }

// Length is the number of heights per epoch.
func (s *Slabs) Length() uint64 { return s.length }

// Count is the number of epoch buckets.
func (s *Slabs) Count() uint64 { return uint64(len(s.buckets)) }

// Len is the number of nodes in all buckets.
func (s *Slabs) Len() int { return s.len }

func (s *Slabs) bucket(e uint64) *ring.List { return &s.buckets[e%uint64(len(s.buckets))] }

// Push appends node i to the bucket of its height's epoch.
func (s *Slabs) Push(a *ring.Arena, i uint32) {
	s.bucket(s.Of(a.At(i).Height)).PushBack(a, i)
	s.len++
}

// Remove unlinks node i from the bucket of its height's epoch.
func (s *Slabs) Remove(a *ring.Arena, i uint32) {
	s.bucket(s.Of(a.At(i).Height)).Remove(a, i)
	s.len--
}

// Take detaches and returns the whole bucket of epoch e.
func (s *Slabs) Take(e uint64) ring.List {
	b := s.bucket(e)
	l := *b
	*b = ring.List{}
	s.len -= l.Len
	return l
}

// Empty reports whether epoch e's bucket is empty.
func (s *Slabs) Empty(e uint64) bool { return s.bucket(e).Head == ring.Nil }

// Bucket returns the bucket of epoch e (read-only use).
func (s *Slabs) Bucket(e uint64) *ring.List { return s.bucket(e) }
