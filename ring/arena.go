package ring

import "github.com/timerlane/timerlane/internal/slab"

// Nil is the index that refers to no node.
const Nil uint32 = 0

// Node is one slot of the arena: the due height and the insertion sequence
// that orders timers of the same height, plus the links of the list the node
// is on. It is 24 bytes.
type Node struct {
	Height uint64
	Seq    uint64
	next   uint32
	prev   uint32
}

// Arena hands out Node slots by index from slabs that never move, so
// growing the arena copies no node. Freed slots are reused first.
type Arena struct {
	nodes slab.Slab[Node]
	free  uint32 // head of the free list, threaded through next
	used  uint32 // slots handed out at least once; index 0 is reserved
	live  int
}

// NewArena returns an empty arena.
func NewArena() *Arena {
	a := &Arena{used: 1}
	a.nodes.Ensure(0)
	return a
}

// Alloc returns the index of a zeroed free node. It allocates memory only
// when every slab is full.
func (a *Arena) Alloc() uint32 {
	a.live++
	if i := a.free; i != Nil {
		n := a.At(i)
		a.free = n.next
		*n = Node{}
		return i
	}
	i := a.used
	if i == ^uint32(0) {
		panic("ring: arena exhausted (2^32-1 nodes)")
	}
	a.nodes.Ensure(i)
	a.used++
	return i
}

// Free returns node i to the free list. The caller must have unlinked it.
func (a *Arena) Free(i uint32) {
	*a.At(i) = Node{next: a.free}
	a.free = i
	a.live--
}

// At returns the node at index i.
func (a *Arena) At(i uint32) *Node { return a.nodes.At(i) }

// Next returns the node after i on its list, or Nil.
func (a *Arena) Next(i uint32) uint32 { return a.At(i).next }

// Live is the number of allocated nodes.
func (a *Arena) Live() int { return a.live }

// Bytes is the memory held by the arena's slabs.
func (a *Arena) Bytes() int { return a.nodes.Cap() * 24 }
