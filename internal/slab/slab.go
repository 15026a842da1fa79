// Package slab is an array of fixed-size values addressed by uint32 index and
// grown in chunks that never move: growing copies nothing, and a pointer to
// an element stays valid for the life of the slab.
package slab

// Shift is log2 of the elements per chunk.
const Shift = 12

const chunk = 1 << Shift

// Slab holds values of type T. The zero Slab is empty.
type Slab[T any] struct {
	chunks [][]T
}

// At returns the element at index i, which must be < Cap().
func (s *Slab[T]) At(i uint32) *T { return &s.chunks[i>>Shift][i&(chunk-1)] }

// Ensure grows the slab so that index i is valid.
func (s *Slab[T]) Ensure(i uint32) {
	for int(i>>Shift) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]T, chunk))
	}
}

// Cap is the number of elements the slab holds without growing.
func (s *Slab[T]) Cap() int { return len(s.chunks) * chunk }
