package merkle

import (
	"encoding/binary"
	"math/bits"
	"runtime"
	"sync"
)

// ref names a node: 0 is no node, a leaf's ref has leafBit set over its
// index in the leaf slab, any other value is an index in the internal-node
// slab (whose index 0 is never used).
type ref uint32

const (
	leafBit ref = 1 << 31
	maxIdx      = uint32(leafBit) - 1
)

// leafNode is a (key, value hash) pair: 64 bytes, one cache line. Its hash
// is cached in its parent (or in the tree, for a root leaf). A free leaf
// keeps the next free index + 1 in key[0:4].
type leafNode struct {
	key, value [32]byte
}

// innerNode branches on key bit `bit`: keys with that bit 0 are under
// child[0], with it 1 under child[1]. It caches its children's hashes, not
// its own (which is cached in its parent, or in the tree for the root), so
// that rehashing it reads nothing but itself for a child that did not
// change, and a proof step is read from it alone. 76 bytes. A free node
// keeps the next free index in child[0].
type innerNode struct {
	child [2]ref
	bit   uint8
	stale uint8 // bit i set: hash[i] is stale (child i's subtree changed)
	hash  [2][32]byte
}

// Tree is an authenticated map from 32-byte keys to 32-byte value hashes:
// a binary Patricia Merkle trie (see the package documentation and TREE.md).
// The zero Tree is an empty tree ready to use. A Tree is not safe for
// concurrent use: even Root and Prove write (they rehash what changed).
type Tree struct {
	root      ref
	rootHash  [32]byte // the root node's hash, if !rootStale
	rootStale bool
	n         int
	leaves    chunked[leafNode]
	inners    chunked[innerNode]
	leafTop   uint32 // leaf indices ever used
	innerTop  uint32 // internal indices ever used (index 0 excluded)
	leafFree  uint32 // head of the free leaves, index + 1 (0: none)
	innerFree uint32 // head of the free internal nodes (0: none)
	h         hasher
	h2        hasher        // the second goroutine's, in rehashHalves
	halfDone  chan struct{} // rehashWorker's word that h2's half is done
	// staleSlots counts the slots marked stale since the last Root: about
	// the hashes the next Root makes.
	staleSlots int
	path       [257]ref // the internal nodes from the root to the last leaf searched for
}

// New returns an empty tree.
func New() *Tree { return new(Tree) }

// Len is the number of keys in the tree.
func (t *Tree) Len() int { return t.n }

// Hashes is the number of Keccak-256 computations the tree has made since it
// was created (a Clone starts at 0).
func (t *Tree) Hashes() uint64 { return t.h.count }

func (t *Tree) leaf(r ref) *leafNode   { return t.leaves.at(uint32(r &^ leafBit)) }
func (t *Tree) inner(r ref) *innerNode { return t.inners.at(uint32(r)) }

// bitAt is bit i of k, bit 0 being the most significant bit of k[0].
func bitAt(k *[32]byte, i uint8) int { return int(k[i>>3]>>(7-(i&7))) & 1 }

// firstDiff is the index of the first bit where a and b differ; ok is false
// if they are equal.
func firstDiff(a, b *[32]byte) (i uint8, ok bool) {
	for w := 0; w < 32; w += 8 {
		if x := binary.BigEndian.Uint64(a[w:]) ^ binary.BigEndian.Uint64(b[w:]); x != 0 {
			return uint8(w*8 + bits.LeadingZeros64(x)), true
		}
	}
	return 0, false
}

// search follows key's bits from the root to a leaf (the root must not be
// 0), records the internal nodes passed in t.path and returns the leaf and
// the number of internal nodes passed.
func (t *Tree) search(key *[32]byte) (ref, int) {
	r, d := t.root, 0
	for r&leafBit == 0 {
		t.path[d] = r
		d++
		n := t.inner(r)
		r = n.child[bitAt(key, n.bit)]
	}
	return r, d
}

// markStale marks stale the hash slots that lead from the root to
// t.path[d] (or to the leaf, if d is the search depth): the tree's root
// slot and, for i < d, the slot of t.path[i] on key's side. It goes from
// the bottom up and stops at the first slot already stale: a stale slot's
// ancestors are all stale.
func (t *Tree) markStale(key *[32]byte, d int) {
	for i := d - 1; i >= 0; i-- {
		n := t.inner(t.path[i])
		m := uint8(1) << bitAt(key, n.bit)
		if n.stale&m != 0 {
			return
		}
		n.stale |= m
		t.staleSlots++
	}
	t.rootStale = true
}

// Get returns the value hash stored for key.
func (t *Tree) Get(key [32]byte) ([32]byte, bool) {
	if t.root == 0 {
		return [32]byte{}, false
	}
	r := t.root
	for r&leafBit == 0 {
		n := t.inner(r)
		r = n.child[bitAt(&key, n.bit)]
	}
	if l := t.leaf(r); l.key == key {
		return l.value, true
	}
	return [32]byte{}, false
}

// Set stores value for key, inserting the key or replacing its value. It
// hashes nothing: the next Root rehashes the leaf and its ancestors.
func (t *Tree) Set(key, value [32]byte) {
	if t.root == 0 {
		t.root = t.newLeaf(&key, &value)
		t.rootStale = true
		t.n++
		return
	}
	r, d := t.search(&key)
	l := t.leaf(r)
	diff, ok := firstDiff(&key, &l.key)
	if !ok {
		if l.value != value {
			l.value = value
			t.markStale(&key, d)
		}
		return
	}
	// The new branch goes above the first node on the path that branches
	// on a later bit (the leaf agrees with key on every bit the path
	// branched on, so no node on it branches on diff).
	i := 0
	for i < d && t.inner(t.path[i]).bit < diff {
		i++
	}
	old := r
	if i < d {
		old = t.path[i]
	}
	nl := t.newLeaf(&key, &value) // allocations first: they may move nodes
	ni := t.newInner()
	n := t.inner(ni)
	b := bitAt(&key, diff)
	n.bit = diff
	n.child[b], n.child[1-b] = nl, old
	// the old subtree's hash and staleness move from its slot to n's
	var oldStale bool
	if i == 0 {
		n.hash[1-b], oldStale = t.rootHash, t.rootStale
	} else {
		p := t.inner(t.path[i-1])
		s := bitAt(&key, p.bit)
		n.hash[1-b], oldStale = p.hash[s], p.stale&(1<<s) != 0
	}
	n.stale = 1 << b
	if oldStale {
		n.stale |= 1 << (1 - b)
	}
	t.staleSlots += 2 // the new leaf's hash and the new node's
	t.link(i, &key, ni)
	t.markStale(&key, i)
	t.n++
}

// link makes r the node below t.path[i-1] on key's side (or the root).
func (t *Tree) link(i int, key *[32]byte, r ref) {
	if i == 0 {
		t.root = r
		return
	}
	p := t.inner(t.path[i-1])
	p.child[bitAt(key, p.bit)] = r
}

// Delete removes key and reports whether it was present.
func (t *Tree) Delete(key [32]byte) bool {
	if t.root == 0 {
		return false
	}
	r, d := t.search(&key)
	if t.leaf(r).key != key {
		return false
	}
	t.freeLeaf(r)
	t.n--
	if d == 0 {
		t.root, t.rootHash, t.rootStale = 0, [32]byte{}, false
		return true
	}
	// The parent goes; the sibling, its hash and its staleness take the
	// parent's place.
	p := t.path[d-1]
	pn := t.inner(p)
	s := 1 - bitAt(&key, pn.bit)
	sibling, sibHash, sibStale := pn.child[s], pn.hash[s], pn.stale&(1<<s) != 0
	t.freeInner(p)
	if d == 1 {
		t.root, t.rootHash, t.rootStale = sibling, sibHash, sibStale
		return true
	}
	g := t.inner(t.path[d-2])
	gs := bitAt(&key, g.bit)
	g.child[gs], g.hash[gs] = sibling, sibHash
	g.stale &^= 1 << gs
	if sibStale {
		g.stale |= 1 << gs
	}
	t.markStale(&key, d-2)
	return true
}

// Root returns the root hash, first rehashing the nodes changed since the
// last Root (one Keccak-256 per changed node). The empty tree's root is 32
// zero bytes.
func (t *Tree) Root() [32]byte {
	if t.rootStale {
		if t.h.st == nil {
			t.h = newHasher()
		}
		if t.staleSlots >= parallelMin && t.root&leafBit == 0 && runtime.GOMAXPROCS(0) > 1 {
			t.rehashHalves()
		} else {
			t.rehash(&t.h, t.root, &t.rootHash)
		}
		t.rootStale, t.staleSlots = false, 0
	}
	return t.rootHash
}

// parallelMin is how many hash slots must be stale for Root to rehash
// the root's two subtrees at once, the left one on a worker goroutine: a
// large batch, as a block of thousands of changes or a restore makes,
// where it nearly halves the time. Below it, handing the half over costs
// more than it saves. The subtrees share no node, and each side has its
// own hasher, so the hashes are those of one goroutine.
const parallelMin = 4096

func (t *Tree) rehashHalves() {
	n := t.inner(t.root)
	if t.h2.st == nil {
		t.h2 = newHasher()
		t.halfDone = make(chan struct{})
	}
	if n.stale&1 != 0 {
		t.rehashBoth(n)
	} else if n.stale&2 != 0 {
		t.rehash(&t.h, n.child[1], &n.hash[1])
	}
	n.stale = 0
	t.h.inner(n.bit, &n.hash[0], &n.hash[1], &t.rootHash)
	t.h.count += t.h2.count
	t.h2.count = 0
}

// rehashBoth rehashes n's left subtree on a worker and its right one, if
// stale, here, and returns when both are done: also when the right half
// panics, so that no worker is left blocked on halfDone, nor h2 in use,
// should the caller recover.
func (t *Tree) rehashBoth(n *innerNode) {
	startRehashWorkers.Do(func() {
		rehashJobs = make(chan rehashJob)
		for range runtime.GOMAXPROCS(0) {
			go rehashWorker()
		}
	})
	rehashJobs <- rehashJob{t, n.child[0], &n.hash[0]}
	defer func() { <-t.halfDone }()
	if n.stale&2 != 0 {
		t.rehash(&t.h, n.child[1], &n.hash[1])
	}
}

// rehashJob is the left half of a Root's rehash: node r of tree t, into
// dst, with t.h2.
type rehashJob struct {
	t   *Tree
	r   ref
	dst *[32]byte
}

// Workers for the whole process, as many as GOMAXPROCS, rehash the left
// halves, started by the first Root that needs them: a goroutine started
// per Root allocated its closure, once a block in a node whose blocks
// change thousands of timers (bench.TestNodeBlockAllocs, session 45),
// while a send on a channel allocates nothing.
var (
	rehashJobs         chan rehashJob
	startRehashWorkers sync.Once
)

func rehashWorker() {
	for j := range rehashJobs {
		j.t.rehash(&j.t.h2, j.r, j.dst)
		j.t.halfDone <- struct{}{}
	}
}

// rehash computes with h the hash of node r, whose slot is stale, into
// dst, rehashing first its children whose slots are stale.
func (t *Tree) rehash(h *hasher, r ref, dst *[32]byte) {
	if r&leafBit != 0 {
		l := t.leaf(r)
		h.leaf(&l.key, &l.value, dst)
		return
	}
	n := t.inner(r)
	if n.stale&1 != 0 {
		t.rehash(h, n.child[0], &n.hash[0])
	}
	if n.stale&2 != 0 {
		t.rehash(h, n.child[1], &n.hash[1])
	}
	n.stale = 0
	h.inner(n.bit, &n.hash[0], &n.hash[1], dst)
}

// Clone returns an independent deep copy of t: a memory copy of its node
// slabs (O(N), no hashing). Its Hashes counter starts at 0.
func (t *Tree) Clone() *Tree {
	c := &Tree{
		root: t.root, rootHash: t.rootHash, rootStale: t.rootStale, n: t.n,
		leaves: t.leaves.clone(), inners: t.inners.clone(),
		leafTop: t.leafTop, innerTop: t.innerTop,
		leafFree: t.leafFree, innerFree: t.innerFree,
	}
	return c
}

func (t *Tree) newLeaf(key, value *[32]byte) ref {
	var i uint32
	if t.leafFree != 0 {
		i = t.leafFree - 1
		t.leafFree = binary.LittleEndian.Uint32(t.leaves.at(i).key[:4])
	} else {
		if t.leafTop > maxIdx {
			panic("merkle: too many leaves")
		}
		i = t.leafTop
		t.leafTop++
		t.leaves.ensure(i)
	}
	*t.leaves.at(i) = leafNode{key: *key, value: *value}
	return leafBit | ref(i)
}

func (t *Tree) freeLeaf(r ref) {
	i := uint32(r &^ leafBit)
	l := t.leaves.at(i)
	binary.LittleEndian.PutUint32(l.key[:4], t.leafFree)
	t.leafFree = i + 1
}

func (t *Tree) newInner() ref {
	var i uint32
	if t.innerFree != 0 {
		i = t.innerFree
		t.innerFree = uint32(t.inners.at(i).child[0])
	} else {
		if t.innerTop >= maxIdx {
			panic("merkle: too many internal nodes")
		}
		t.innerTop++
		i = t.innerTop
		t.inners.ensure(i)
	}
	*t.inners.at(i) = innerNode{}
	return ref(i)
}

func (t *Tree) freeInner(r ref) {
	n := t.inner(r)
	n.child[0] = ref(t.innerFree)
	t.innerFree = uint32(r)
}

// chunked is an array of T addressed by uint32 index, in chunks of
// chunkLen elements so that growing copies nothing, except the first chunk,
// which starts small and doubles (moving its elements) until it is full:
// a pointer to an element is valid until the next ensure.
type chunked[T any] struct {
	chunks [][]T
}

const (
	chunkShift = 12
	chunkLen   = 1 << chunkShift
	firstLen   = 16
)

func (c *chunked[T]) at(i uint32) *T { return &c.chunks[i>>chunkShift][i&(chunkLen-1)] }

// ensure makes index i valid.
func (c *chunked[T]) ensure(i uint32) {
	ci := int(i >> chunkShift)
	for ci >= len(c.chunks) || int(i&(chunkLen-1)) >= len(c.chunks[ci]) {
		switch last := len(c.chunks) - 1; {
		case last < 0:
			c.chunks = append(c.chunks, make([]T, firstLen))
		case len(c.chunks[last]) < chunkLen:
			grown := make([]T, 2*len(c.chunks[last]))
			copy(grown, c.chunks[last])
			c.chunks[last] = grown
		default:
			c.chunks = append(c.chunks, make([]T, chunkLen))
		}
	}
}

func (c *chunked[T]) clone() chunked[T] {
	out := chunked[T]{chunks: make([][]T, len(c.chunks))}
	for i, ch := range c.chunks {
		out.chunks[i] = append([]T(nil), ch...)
	}
	return out
}
