// Package slab is an array of fixed-size values addressed by uint32 index and
// grown in chunks that never move: growing copies nothing, and a pointer to
// an element stays valid for the life of the slab.
package slab

import (
	"unsafe"

	"github.com/timerlane/timerlane/internal/hugepage"
)

// Shift is log2 of the elements per chunk.
const Shift = 12

const chunk = 1 << Shift

// A slab past bigFrom bytes takes its chunks out of blocks of several
// chunks at once, each advised to huge pages (a million timers' records
// are accessed at random over 64 MiB, whose 4 KiB pages the TLB cannot
// hold). A block is an eighth of the slab so far, at least blockMin, at
// most blockMax bytes: memory taken ahead is at most an eighth of what
// is used past blockMin, and small slabs take none.
const (
	bigFrom  = 4 << 20
	blockMin = 8 << 20
	blockMax = 32 << 20
)

// Slab holds values of type T. The zero Slab is empty.
type Slab[T any] struct {
	chunks [][]T
	spare  []T // the untaken rest of the current block: whole chunks
}

// At returns the element at index i, which must be < Cap().
func (s *Slab[T]) At(i uint32) *T { return &s.chunks[i>>Shift][i&(chunk-1)] }

// Ensure grows the slab so that index i is valid.
func (s *Slab[T]) Ensure(i uint32) {
	for int(i>>Shift) >= len(s.chunks) {
		s.chunks = append(s.chunks, s.newChunk())
	}
}

// Grow gives the slab room for n elements (indices 0 .. n-1) and maps the
// memory of the chunks it adds now (hugepage.Touch), so that the writes
// that fill them later wait for no page fault.
func (s *Slab[T]) Grow(n int) {
	if n <= s.Cap() {
		return
	}
	had := len(s.chunks)
	s.Ensure(uint32(n - 1))
	for _, c := range s.chunks[had:] {
		hugepage.Touch(c)
	}
}

func (s *Slab[T]) newChunk() []T {
	size := int(unsafe.Sizeof(*new(T))) * chunk
	have := len(s.chunks) * size
	if size == 0 || have < bigFrom {
		return make([]T, chunk)
	}
	if len(s.spare) == 0 {
		n := max(blockMin, min(have/8, blockMax)) / size // chunks in the block
		s.spare = make([]T, max(n, 1)*chunk)
		hugepage.Advise(s.spare)
	}
	c := s.spare[:chunk:chunk]
	s.spare = s.spare[chunk:]
	return c
}

// Cap is the number of elements the slab holds without growing.
func (s *Slab[T]) Cap() int { return len(s.chunks) * chunk }

// Bytes is the memory the slab holds: its chunks, and the rest of a block
// it has taken ahead for the next ones.
func (s *Slab[T]) Bytes() int { return (s.Cap() + len(s.spare)) * int(unsafe.Sizeof(*new(T))) }
