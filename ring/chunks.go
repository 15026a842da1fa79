package ring

import (
	"unsafe"

	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/slab"
)

// Entry is one timer in a tier: its due height, its insertion sequence
// (FIFO order among timers of one height; 0 marks a cancelled entry) and a
// value its owner chose, such as the index of its record.
type Entry struct {
	Height uint64
	Seq    uint64
	Val    uint32
}

// slot is an entry as a chunk stores it, in 16 bytes: its height as an
// offset from its bucket's base height. A bucket's heights lie within an
// epoch (in the ring, a bucket holds one height), so the offset fits. A
// third fewer bytes than the whole entry means a third fewer cache lines
// for the inserts to fill and the deliveries to read.
type slot struct {
	Seq uint64
	Val uint32
	Off int32
}

// entry is the entry s holds in a bucket whose base height is base.
func (s *slot) entry(base uint64) Entry {
	return Entry{Height: base + uint64(int64(s.Off)), Seq: s.Seq, Val: s.Val}
}

// ChunkLen is the number of entries per chunk.
const ChunkLen = 32

// Pos is where an entry lives: chunk index * ChunkLen + slot. It is below
// 2^31, so an owner may use the top bit of a uint32 holding one as a flag.
type Pos uint32

// MaxChunks bounds the arena: 2^26 chunks, 2^31 entries (32 GiB of them).
const MaxChunks = 1 << 26

// nilChunk is the chunk index that names no chunk.
const nilChunk uint32 = 0

// A chunk is 512 bytes, so that the slab's chunks lie on cache-line
// boundaries (a slab's arrays are page-aligned): with its next index
// inside, a chunk took 520 bytes and one slot in eight straddled two
// lines. The next indices live in an array of their own.
type chunk struct {
	e [ChunkLen]slot
}

var (
	_ [unsafe.Sizeof(chunk{}) - 512]struct{}
	_ [512 - unsafe.Sizeof(chunk{})]struct{}
)

// Chunks is the arena the buckets' chunks come from: slabs that never move,
// the chunks' next indices, and a stack of free chunks. Freeing a bucket's
// last chunk, as a Cancel of its last timer does, touches no line of the
// chunk, which may well have left the cache.
type Chunks struct {
	slab slab.Slab[chunk]
	next slab.Slab[uint32] // chunk i's successor in its bucket
	free slab.Stack
	used uint32 // chunks handed out at least once; index 0 is reserved
	live int
}

// NewChunks returns an empty arena.
func NewChunks() *Chunks {
	c := &Chunks{used: 1}
	c.slab.Ensure(0)
	c.next.Ensure(0)
	return c
}

// alloc returns a chunk whose next index is undefined: a bucket reads a
// chunk's next only once it has linked one after it.
func (c *Chunks) alloc() uint32 {
	c.live++
	if i, ok := c.free.Pop(); ok {
		return i
	}
	i := c.used
	if i >= MaxChunks {
		panic("ring: chunk arena exhausted (2^26 chunks)")
	}
	c.slab.Ensure(i)
	c.next.Ensure(i)
	c.free.Reserve(int(i)) // room to free every chunk handed out
	c.used++
	return i
}

// Reserve makes room for n chunks in use at once, their memory mapped now
// (slab.Slab.Grow): alloc then takes none from the Go heap or the kernel.
func (c *Chunks) Reserve(n int) {
	n++ // index 0 is reserved
	c.slab.Grow(n)
	c.next.Grow(n)
	c.free.Grow(n)
}

// Reset frees every chunk at once, keeping the arena's memory for reuse.
// Nothing may use a bucket of its chunks afterwards.
func (c *Chunks) Reset() {
	c.used, c.live = 1, 0
	c.free.Clear()
}

func (c *Chunks) release(i uint32) {
	c.free.Push(i)
	c.live--
}

// Addr is the address of the entry at p, to prefetch, or nil if p names
// none (chunk 0 is reserved: an owner's 0 says "no position").
func (c *Chunks) Addr(p Pos) unsafe.Pointer {
	if k := uint32(p) / ChunkLen; k != nilChunk && int(k) < c.slab.Cap() {
		return unsafe.Pointer(c.at(p))
	}
	return nil
}

// prefetchFull starts loading the lines of full chunk i past its first,
// and the first of the chunk after it.
func (c *Chunks) prefetchFull(i uint32) {
	b := unsafe.Pointer(c.slab.At(i))
	prefetch.Lines(unsafe.Add(b, 64), unsafe.Add(b, 128), unsafe.Add(b, 192), unsafe.Add(b, 256))
	prefetch.Lines(unsafe.Add(b, 320), unsafe.Add(b, 384), unsafe.Add(b, 448), unsafe.Pointer(c.slab.At(*c.next.At(i))))
}

func (c *Chunks) at(p Pos) *slot { return &c.slab.At(uint32(p) / ChunkLen).e[p%ChunkLen] }

// At returns the sequence and value of the entry at p (a sequence of 0: a
// cancelled entry). Its height is its bucket's.
func (c *Chunks) At(p Pos) (seq uint64, val uint32) {
	s := c.at(p)
	return s.Seq, s.Val
}

// Live is the number of chunks in use.
func (c *Chunks) Live() int { return c.live }

// Bytes is the memory held by the arena's slabs.
func (c *Chunks) Bytes() int { return c.slab.Bytes() + c.next.Bytes() + c.free.Bytes() }
