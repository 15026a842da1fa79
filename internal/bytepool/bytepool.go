// Package bytepool stores variable-length byte strings (timer payloads) in
// power-of-two size classes carved from large chunks, with a free list per
// class, so that storing and freeing payloads allocates nothing in steady
// state. A string is named by a uint32 reference; 0 names the empty string.
package bytepool

import (
	"math/bits"
	"unsafe"
)

const (
	minShift   = 4  // smallest class: 16 bytes
	maxShift   = 20 // largest class: 1 MiB
	chunkBytes = 64 << 10
	idxBits    = 27 // item index bits of a reference; the class is above
)

// MaxLen is the longest string the pool stores.
const MaxLen = 1 << maxShift

type class struct {
	size    int
	perChk  int  // items per chunk, a power of two, as size is
	chkBits uint // log2(perChk): an item's chunk is its index >> chkBits
	chunks  [][]byte
	free    []uint32 // freed item indices
	next    uint32   // items handed out at least once
	inUse   int
	byteCap int
}

// Pool is a set of size classes. The zero Pool is ready to use.
type Pool struct {
	classes [maxShift - minShift + 1]class
}

func classOf(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minShift
}

// Alloc reserves room for n bytes (0 < n <= MaxLen) and returns its
// reference and the n-byte buffer to fill.
func (p *Pool) Alloc(n int) (uint32, []byte) {
	c := classOf(n)
	cl := &p.classes[c]
	if cl.size == 0 {
		cl.size = 1 << (c + minShift)
		cl.perChk = max(1, chunkBytes/cl.size)
		// A shift and a mask where a division was, on every Alloc, Get
		// and NextAddr (Schedule and end of block, per payload):
		// Schedule with a 32-byte payload, 0.299 -> 0.275 of its Keccak
		// (BenchmarkScheduleOverKeccak, README).
		cl.chkBits = uint(bits.TrailingZeros(uint(cl.perChk)))
	}
	var it uint32
	if k := len(cl.free); k > 0 {
		it = cl.free[k-1]
		cl.free = cl.free[:k-1]
	} else {
		it = cl.next
		if it >= 1<<idxBits-1 {
			panic("bytepool: class full")
		}
		if int(it>>cl.chkBits) == len(cl.chunks) {
			cl.chunks = append(cl.chunks, make([]byte, cl.perChk*cl.size))
			cl.byteCap += cl.perChk * cl.size
		}
		cl.next++
	}
	cl.inUse++
	ref := uint32(c)<<idxBits | (it + 1)
	return ref, p.Get(ref, n)
}

// NextAddr is where the buffer of the next Alloc(n) starts, if its
// memory exists yet, else nil (0 < n <= MaxLen): the address to prefetch.
func (p *Pool) NextAddr(n int) unsafe.Pointer {
	cl := &p.classes[classOf(n)]
	it := int(cl.next)
	if k := len(cl.free); k > 0 {
		it = int(cl.free[k-1])
	}
	if cl.size == 0 || it>>cl.chkBits >= len(cl.chunks) {
		return nil
	}
	return unsafe.Pointer(&cl.chunks[it>>cl.chkBits][(it&(cl.perChk-1))*cl.size])
}

// Get returns the n bytes stored under ref.
func (p *Pool) Get(ref uint32, n int) []byte {
	if ref == 0 {
		return nil
	}
	cl := &p.classes[ref>>idxBits]
	it := int(ref&(1<<idxBits-1)) - 1
	off := (it & (cl.perChk - 1)) * cl.size
	return cl.chunks[it>>cl.chkBits][off : off+n : off+n]
}

// Free releases ref for reuse. Free(0) does nothing.
func (p *Pool) Free(ref uint32) {
	if ref == 0 {
		return
	}
	cl := &p.classes[ref>>idxBits]
	cl.free = append(cl.free, ref&(1<<idxBits-1)-1)
	cl.inUse--
}

// Bytes is the memory the pool holds in chunks.
func (p *Pool) Bytes() int {
	n := 0
	for i := range p.classes {
		n += p.classes[i].byteCap
	}
	return n
}
