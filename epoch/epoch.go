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

	"github.com/timerlane/timerlane/internal/bitset"
	"github.com/timerlane/timerlane/ring"
)

// MaxCount is the largest number of epoch buckets.
const MaxCount = 1 << 20

// Slabs is the epoch tier.
type Slabs struct {
	buckets  []ring.List
	occupied bitset.Cyclic // the non-empty buckets
	length   uint64
	len      int
}

// New returns an epoch tier of count epochs of length blocks.
func New(length, count uint64) (*Slabs, error) {
	if length == 0 || count == 0 || count > MaxCount {
		return nil, fmt.Errorf("epoch: length %d and count %d must be >= 1 (count <= 2^20)", length, count)
	}
	return &Slabs{buckets: make([]ring.List, count), occupied: bitset.New(count), length: length}, nil
}

// Of returns the epoch of height h.
func (s *Slabs) Of(h uint64) uint64 { return h / s.length }

// Length is the number of heights per epoch.
func (s *Slabs) Length() uint64 { return s.length }

// Count is the number of epoch buckets.
func (s *Slabs) Count() uint64 { return uint64(len(s.buckets)) }

// Len is the number of nodes in all buckets.
func (s *Slabs) Len() int { return s.len }

func (s *Slabs) index(e uint64) uint64 { return e % uint64(len(s.buckets)) }

func (s *Slabs) bucket(e uint64) *ring.List { return &s.buckets[s.index(e)] }

// Push appends node i to the bucket of its height's epoch.
func (s *Slabs) Push(a *ring.Arena, i uint32) {
	b := s.index(s.Of(a.At(i).Height))
	s.buckets[b].PushBack(a, i)
	s.occupied.Set(b)
	s.len++
}

// Remove unlinks node i from the bucket of its height's epoch.
func (s *Slabs) Remove(a *ring.Arena, i uint32) {
	b := s.index(s.Of(a.At(i).Height))
	s.buckets[b].Remove(a, i)
	if s.buckets[b].Head == ring.Nil {
		s.occupied.Clear(b)
	}
	s.len--
}

// Take detaches and returns the whole bucket of epoch e.
func (s *Slabs) Take(e uint64) ring.List {
	b := s.bucket(e)
	l := *b
	*b = ring.List{}
	s.occupied.Clear(s.index(e))
	s.len -= l.Len
	return l
}

// NextOccupied returns the first epoch in [from, to] whose bucket is not
// empty; the range must span at most Count epochs.
func (s *Slabs) NextOccupied(from, to uint64) (uint64, bool) {
	if to < from {
		return 0, false
	}
	k, ok := s.occupied.Next(s.index(from), min(to-from, s.Count()-1)+1)
	return from + k, ok
}

// MinHeight returns the lowest height in epoch e's bucket (which must not
// be empty): a walk of the bucket.
func (s *Slabs) MinHeight(a *ring.Arena, e uint64) uint64 {
	l := s.bucket(e)
	m := a.At(l.Head).Height
	for i := a.Next(l.Head); i != ring.Nil; i = a.Next(i) {
		m = min(m, a.At(i).Height)
	}
	return m
}

// Empty reports whether epoch e's bucket is empty.
func (s *Slabs) Empty(e uint64) bool { return s.bucket(e).Head == ring.Nil }

// Bucket returns the bucket of epoch e (read-only use).
func (s *Slabs) Bucket(e uint64) *ring.List { return s.bucket(e) }
