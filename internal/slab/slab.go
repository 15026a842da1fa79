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
// most blockMax bytes: small slabs take none.
//
// Once seven eighths of a block are taken, the next block is allocated
// and its pages mapped on another goroutine, so that the call that needs
// it finds it ready instead of waiting for the zeroing of megabytes or
// for the kernel's faults on their first touch (milliseconds for each
// huge page on a virtual machine, whose host maps it too). Memory taken
// ahead is then at most an eighth of a block and the next block; asked
// for at half a block, the next block sat unused for longer (the demo's
// engine held 16 MiB more at its peak than without, against 8 MiB).
const (
	bigFrom  = 4 << 20
	blockMin = 8 << 20
	blockMax = 32 << 20
)

// Slab holds values of type T. The zero Slab is empty.
type Slab[T any] struct {
	chunks []*[chunk]T // arrays, not slices: At loads no length and checks one bound
	spare  []T         // the untaken rest of the current block: whole chunks
	askAt  int         // the next block is asked for when len(spare) <= askAt

	// The next block, on its way from another goroutine, and its length;
	// nil when not asked for.
	next    <-chan []T
	nextLen int
}

// At returns the element at index i, which must be < Cap().
func (s *Slab[T]) At(i uint32) *T { return &s.chunks[i>>Shift][i&(chunk-1)] }

// Ensure grows the slab so that index i is valid.
func (s *Slab[T]) Ensure(i uint32) {
	for int(i>>Shift) >= len(s.chunks) {
		s.chunks = append(s.chunks, (*[chunk]T)(s.newChunk()))
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
		hugepage.Touch(c[:])
	}
}

func (s *Slab[T]) newChunk() []T {
	size := int(unsafe.Sizeof(*new(T))) * chunk
	have := len(s.chunks) * size
	if size == 0 {
		return make([]T, chunk)
	}
	var c []T
	if have < bigFrom {
		c = make([]T, chunk)
	} else {
		if len(s.spare) == 0 {
			var b []T
			if s.next != nil {
				select {
				case b = <-s.next:
					s.next, s.nextLen = nil, 0
				default:
					// Still being mapped: a chunk of its own now, whose
					// small pages fault a few at a time, rather than a
					// wait for the whole block.
					return make([]T, chunk)
				}
			} else {
				b = hugepage.Make[T](blockLen(have, size))
			}
			s.spare, s.askAt = b, len(b)/8
		}
		c = s.spare[:chunk:chunk]
		s.spare = s.spare[chunk:]
	}
	// The next block is asked for from the chunk before the first block
	// on, so that the first block is made ready ahead too.
	if s.next == nil && have+size >= bigFrom && len(s.spare) <= s.askAt {
		s.nextLen = blockLen(have+size, size)
		s.next = hugepage.MakeAhead[T](s.nextLen)
	}
	return c
}

// blockLen is the elements of the block a slab of have bytes in chunks of
// size bytes takes next.
func blockLen(have, size int) int {
	return max(1, max(blockMin, min(have/8, blockMax))/size) * chunk
}

// Cap is the number of elements the slab holds without growing.
func (s *Slab[T]) Cap() int { return len(s.chunks) * chunk }

// Bytes is the memory the slab holds: its chunks, and the blocks it has
// taken ahead for the next ones.
func (s *Slab[T]) Bytes() int {
	return (s.Cap() + len(s.spare) + s.nextLen) * int(unsafe.Sizeof(*new(T)))
}
