// Package bytepool stores variable-length byte strings (timer payloads) in
// power-of-two size classes carved from large chunks, with a free list per
// class, so that storing and freeing payloads allocates nothing in steady
// state. A string is named by a uint32 reference; 0 names the empty string.
// The classes of 64 KiB and more, whose chunks hold one string each, give
// the memory of freed strings back to the Go heap past what they may soon
// need again (see keep), so that a burst of large payloads does not hold
// its memory for the life of the process; the smaller classes keep their
// peak.
// Each string carries a 64-bit tag its owner chooses, kept beside its
// class's items: the engine keeps there the split of a timer's bytes into
// handler and payload, which a timer without bytes then does not pay for.
package bytepool

import (
	"math/bits"
	"unsafe"

	"github.com/timerlane/timerlane/internal/slab"
)

const (
	minShift   = 4  // smallest class: 16 bytes
	maxShift   = 20 // largest class: 1 MiB
	chunkBytes = 64 << 10
	idxBits    = 27      // item index bits of a reference; the class is above
	keepBytes  = 8 << 20 // freed large items always kept with their memory (keep)
)

// MaxLen is the longest string the pool stores.
const MaxLen = 1 << maxShift

type class struct {
	size    int
	perChk  int  // items per chunk, a power of two, as size is
	chkBits uint // log2(perChk): an item's chunk is its index >> chkBits
	chunks  [][]byte
	tags    [][]uint64 // tags[k][j]: the tag of item k<<chkBits | j
	free    slab.Stack // freed item indices, with room for every item handed out
	// bare holds freed items whose chunk was given back (one-item chunks
	// only): an Alloc that finds free empty makes one anew for them.
	bare    slab.Stack
	next    uint32 // items handed out at least once
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

// Alloc reserves room for n bytes (0 < n <= MaxLen) tagged with tag and
// returns its reference and the n-byte buffer to fill.
func (p *Pool) Alloc(n int, tag uint64) (uint32, []byte) {
	c := classOf(n)
	cl := &p.classes[c]
	if cl.size == 0 {
		cl.size = 1 << (c + minShift)
		cl.perChk = max(1, chunkBytes/cl.size)
		// A shift and a mask where a division was, on every Alloc, Load
		// and NextAddr (Schedule and end of block, per payload):
		// Schedule with a 32-byte payload, 0.299 -> 0.275 of its Keccak
		// (BenchmarkScheduleOverKeccak, docs/BENCHMARK_HISTORY.md).
		cl.chkBits = uint(bits.TrailingZeros(uint(cl.perChk)))
	}
	it, ok := cl.free.Pop()
	if !ok {
		it, ok = cl.bare.Pop()
		if ok { // one item a chunk: the item's index is its chunk's
			cl.chunks[it] = make([]byte, cl.size)
			cl.byteCap += cl.size
		}
	}
	if !ok {
		it = cl.next
		if it >= 1<<idxBits-1 {
			panic("bytepool: class full")
		}
		if int(it>>cl.chkBits) == len(cl.chunks) {
			cl.chunks = append(cl.chunks, make([]byte, cl.perChk*cl.size))
			cl.tags = append(cl.tags, make([]uint64, cl.perChk))
			cl.byteCap += cl.perChk * (cl.size + 8)
			// Free pushes without growing. A slice grown by append
			// copied the whole list when it doubled: with hundreds of
			// thousands of payloads freed, an end of block that
			// released a few records waited milliseconds for the copy
			// (the demo's drain, session 32).
			cl.free.Grow(len(cl.chunks) * cl.perChk)
			if cl.perChk == 1 {
				cl.bare.Grow(len(cl.chunks))
			}
		}
		cl.next++
	}
	cl.inUse++
	k, off := it>>cl.chkBits, int(it&uint32(cl.perChk-1))
	cl.tags[k][off] = tag
	off *= cl.size
	return uint32(c)<<idxBits | (it + 1), cl.chunks[k][off : off+n : off+n]
}

// NextAddr is where the buffer of the next Alloc(n) starts and where its
// tag is, if their memory exists yet, else nil (0 < n <= MaxLen): the
// addresses to prefetch.
func (p *Pool) NextAddr(n int) (buf, tag unsafe.Pointer) {
	cl := &p.classes[classOf(n)]
	it := int(cl.next)
	if v, ok := cl.free.Top(); ok {
		it = int(v)
	} else if cl.bare.Len() > 0 {
		return nil, nil // its chunk is made by the Alloc
	}
	if cl.size == 0 || it>>cl.chkBits >= len(cl.chunks) {
		return nil, nil
	}
	k, j := it>>cl.chkBits, it&(cl.perChk-1)
	return unsafe.Pointer(&cl.chunks[k][j*cl.size]), unsafe.Pointer(&cl.tags[k][j])
}

// Load returns the tag of ref and its item's whole room, the class's
// size, of which the string is a prefix: for an owner whose tag says the
// string's length. The empty string's tag is 0 and its room empty.
func (p *Pool) Load(ref uint32) (tag uint64, room []byte) {
	if ref == 0 {
		return 0, nil
	}
	cl := &p.classes[ref>>idxBits]
	it := int(ref&(1<<idxBits-1)) - 1
	k, j := it>>cl.chkBits, it&(cl.perChk-1)
	off := j * cl.size
	return cl.tags[k][j], cl.chunks[k][off : off+cl.size : off+cl.size]
}

// SizeOf is the room of ref's item, the size of its class: the memory it
// holds, read from the reference alone. SizeOf(0) is 0.
func SizeOf(ref uint32) int {
	if ref == 0 {
		return 0
	}
	return 1 << (ref>>idxBits + minShift)
}

// Free releases ref for reuse. Free(0) does nothing.
func (p *Pool) Free(ref uint32) {
	if ref == 0 {
		return
	}
	cl := &p.classes[ref>>idxBits]
	cl.free.Push(ref&(1<<idxBits-1) - 1)
	cl.inUse--
	if cl.perChk == 1 {
		// Two out for each one in past the bound: the freed items held
		// fall with the items in use, to the floor once none is.
		for range 2 {
			if cl.free.Len() <= cl.keep() {
				break
			}
			it, _ := cl.free.Pop()
			cl.chunks[it] = nil
			cl.byteCap -= cl.size
			cl.bare.Push(it)
		}
	}
}

// keep is how many freed items a class of one-item chunks holds on to
// with their memory: as many as it has in use, which a block that
// delivers and schedules as many large payloads as it did before reuses
// without an allocation, and at least keepBytes' worth.
func (cl *class) keep() int { return max(cl.inUse, keepBytes/cl.size) }

// Bytes is the memory the pool holds in chunks, their items' tags
// included.
func (p *Pool) Bytes() int {
	n := 0
	for i := range p.classes {
		n += p.classes[i].byteCap + p.classes[i].free.Bytes() + p.classes[i].bare.Bytes()
	}
	return n
}
