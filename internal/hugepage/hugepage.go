// Package hugepage asks the kernel to back large, long-lived arrays with
// transparent huge pages where it offers them on request (Linux with
// transparent_hugepage set to madvise or always). The engine's arenas are
// read and written at random across tens of megabytes; with 4 KiB pages
// most such accesses also miss the TLB, with 2 MiB pages few do. It is a
// hint: the memory stays the Go heap's, counted and freed as any other,
// and nothing observable depends on whether the kernel takes it.
//
// Touch maps an array's pages ahead of its use, so that a reservation
// (engine.Reserve) pays for the page faults instead of the first calls
// that write there.
package hugepage

import (
	"sync/atomic"
	"unsafe"
)

// Size is the huge page size the hint aims at: only whole, aligned 2 MiB
// pages inside an array are advised.
const Size = 2 << 20

// off turns the hint off for the whole process (SetEnabled).
var off atomic.Bool

// hint is advise; a test records the ranges through it.
var hint = advise

// SetEnabled turns the hint on (the default) or off for the arrays advised
// from then on. Where the kernel, or a virtual machine's host, takes long
// to map a huge page on its first touch, the call that touches it waits
// that long (BenchmarkGrowth); where huge pages gain nothing, off is better.
func SetEnabled(on bool) { off.Store(!on) }

// Advise hints that the memory of s should be backed by huge pages: the
// aligned 2 MiB pages that lie wholly inside it (none for an array below
// 2 MiB, about half of one of 4 MiB, most of a larger one).
func Advise[T any](s []T) {
	if len(s) == 0 || off.Load() {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(s[0]))
	if p := pages(b); len(p) > 0 {
		hint(p)
	}
}

// pages is the part of b made of whole, aligned huge pages.
func pages(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	from := (p + Size - 1) &^ (Size - 1)
	to := (p + uintptr(len(b))) &^ (Size - 1)
	if to <= from {
		return nil
	}
	return b[from-p : to-p]
}

// pageSize is the smallest page a kernel maps on a fault; touching once
// per pageSize bytes maps every page of an array, huge or not.
const pageSize = 4096

// Touch makes the kernel map every page of s now, as a write would, so
// that the first real write there does not wait for a page fault (on a
// virtual machine, for its host too: milliseconds per huge page on some).
// It changes no byte: each page gets an atomic add of 0 to a 32-bit word
// of s that it holds (a page holding fewer than 4 bytes of s is left).
func Touch[T any](s []T) {
	n := uintptr(len(s)) * unsafe.Sizeof(*new(T))
	if n == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s))
	p := uintptr(base)
	// The first page from s's first aligned word, then each page from its start.
	for a := (p + 3) &^ 3; a+4 <= p+n; a = (a + pageSize) &^ (pageSize - 1) {
		atomic.AddUint32((*uint32)(unsafe.Add(base, a-p)), 0)
	}
}

// Make returns a new array of n elements, advised (Advise).
func Make[T any](n int) []T {
	s := make([]T, n)
	Advise(s)
	return s
}

// MakeAhead makes the array of Make on another goroutine and maps its
// pages (Touch), and delivers it on the channel: an array the caller will
// need soon, whose zeroing and page faults (milliseconds for each huge
// page on a virtual machine, whose host maps it too) then fall on no call
// that waits for them.
func MakeAhead[T any](n int) <-chan []T {
	ready := make(chan []T, 1)
	go func() {
		s := Make[T](n)
		Touch(s)
		ready <- s
	}()
	return ready
}
