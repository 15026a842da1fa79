package merkle

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"

	"golang.org/x/crypto/sha3"
)

// This file holds the test oracle: a deliberately simple reference that
// computes the canonical root from scratch, recursively, from the sorted
// set of (key, value hash) pairs, sharing no code with the tree.

type kv struct{ k, v [32]byte }

func refKeccak(parts ...[]byte) (out [32]byte) {
	h := sha3.NewLegacyKeccak256()
	for _, p := range parts {
		h.Write(p)
	}
	h.Sum(out[:0])
	return out
}

// refBit is bit i of k, counting from the most significant bit of k[0].
func refBit(k [32]byte, i int) int {
	return int(k[i/8]>>(7-i%8)) & 1
}

// refRoot is the canonical root of the map m.
func refRoot(m map[[32]byte][32]byte) [32]byte {
	s := make([]kv, 0, len(m))
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	slices.SortFunc(s, func(a, b kv) int { return bytes.Compare(a.k[:], b.k[:]) })
	return refHash(s)
}

// refHash hashes the subtree of the sorted pairs s: nothing is the zero
// hash, one pair is a leaf, more branch on the first bit where the smallest
// and the largest key differ (every key agrees before it, being between
// them), the 0 side on the left.
func refHash(s []kv) [32]byte {
	switch len(s) {
	case 0:
		return [32]byte{}
	case 1:
		return refKeccak([]byte{0x00}, s[0].k[:], s[0].v[:])
	}
	first, last := s[0].k, s[len(s)-1].k
	b := 0
	for refBit(first, b) == refBit(last, b) {
		b++
	}
	i := 0
	for refBit(s[i].k, b) == 0 {
		i++
	}
	l, r := refHash(s[:i]), refHash(s[i:])
	return refKeccak([]byte{0x01, byte(b)}, l[:], r[:])
}

// keyGen draws keys that often collide and share long prefixes: one of a
// few random bases with some of a few fixed bit positions flipped (among
// them the first and the last bits), or, sometimes, a fresh random key.
type keyGen struct {
	rng   *rand.Rand
	bases [][32]byte
	flips []int
}

func newKeyGen(rng *rand.Rand) *keyGen {
	g := &keyGen{rng: rng, flips: []int{0, 1, 7, 8, 63, 64, 128, 200, 254, 255}}
	for range 3 {
		g.bases = append(g.bases, randKey(rng))
	}
	g.flips = append(g.flips, rng.IntN(256))
	return g
}

func (g *keyGen) key() [32]byte {
	if g.rng.IntN(8) == 0 {
		return randKey(g.rng)
	}
	k := g.bases[g.rng.IntN(len(g.bases))]
	for _, f := range g.flips {
		if g.rng.IntN(2) == 0 {
			k[f/8] ^= 0x80 >> (f % 8)
		}
	}
	return k
}

// randTree is a tree of n random keys with random values, and its keys in
// the order they were set.
func randTree(rng *rand.Rand, n int) (*Tree, [][32]byte) {
	tr := New()
	keys := make([][32]byte, 0, n)
	for range n {
		k := randKey(rng)
		keys = append(keys, k)
		tr.Set(k, randKey(rng))
	}
	return tr, keys
}

func randKey(rng *rand.Rand) (k [32]byte) {
	for i := 0; i < 32; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			k[i+j] = byte(v >> (8 * j))
		}
	}
	return k
}

// check verifies the tree's structural invariants: branch bits strictly
// increase downwards; every key under a node agrees with the others before
// the node's bit and has the bit of its side at it (so the shape is the
// canonical one); every hash slot not marked stale holds the subtree's true
// hash (recomputed here with the reference's hashing), and no slot below a
// clean one is stale; the counts and the free lists add up.
func (t *Tree) check() error {
	if t.root == 0 && (t.n != 0 || t.rootStale || t.rootHash != [32]byte{}) {
		return fmt.Errorf("empty root, Len %d, stale %v, hash %x", t.n, t.rootStale, t.rootHash[:4])
	}
	leaves, inners := 0, 0
	// walk checks the subtree r held in a slot with the given hash and
	// staleness, and returns its leftmost key and its true hash.
	var walk func(r ref, minBit int, slot [32]byte, stale, underClean bool) ([32]byte, [32]byte, error)
	walk = func(r ref, minBit int, slot [32]byte, stale, underClean bool) (leftmost, fresh [32]byte, err error) {
		if stale && underClean {
			return leftmost, fresh, fmt.Errorf("a stale slot under a clean one")
		}
		if r&leafBit != 0 {
			leaves++
			l := t.leaf(r)
			leftmost, fresh = l.key, refKeccak([]byte{0}, l.key[:], l.value[:])
		} else {
			inners++
			n := t.inner(r)
			if int(n.bit) < minBit {
				return leftmost, fresh, fmt.Errorf("node branches on bit %d under a node on bit %d", n.bit, minBit-1)
			}
			if n.stale > 3 {
				return leftmost, fresh, fmt.Errorf("stale bits %b", n.stale)
			}
			var keys, hashes [2][32]byte
			for side := range 2 {
				k, h, err := walk(n.child[side], int(n.bit)+1, n.hash[side], n.stale>>side&1 != 0, !stale)
				if err != nil {
					return k, h, err
				}
				if refBit(k, int(n.bit)) != side {
					return k, h, fmt.Errorf("key %x on side %d of bit %d", k[:4], side, n.bit)
				}
				keys[side], hashes[side] = k, h
			}
			// walk returns a subtree's leftmost key. Inductively, all
			// keys under a child agree before the child's (later) bit,
			// so comparing the two sides' leftmost keys before the
			// node's bit, with the side checks, makes that bit the first
			// at which the node's keys differ: the canonical shape.
			for b := 0; b < int(n.bit); b++ {
				if refBit(keys[0], b) != refBit(keys[1], b) {
					return leftmost, fresh, fmt.Errorf("node on bit %d: its sides differ at bit %d", n.bit, b)
				}
			}
			leftmost = keys[0]
			fresh = refKeccak([]byte{0x01, n.bit}, hashes[0][:], hashes[1][:])
		}
		if !stale && slot != fresh {
			return leftmost, fresh, fmt.Errorf("a clean slot holds %x, the subtree's hash is %x", slot[:4], fresh[:4])
		}
		return leftmost, fresh, nil
	}
	if t.root != 0 {
		if _, _, err := walk(t.root, 0, t.rootHash, t.rootStale, false); err != nil {
			return err
		}
	}
	if leaves != t.n {
		return fmt.Errorf("%d leaves, Len %d", leaves, t.n)
	}
	if t.n > 0 && inners != t.n-1 {
		return fmt.Errorf("%d internal nodes for %d leaves", inners, t.n)
	}
	freeLeaves := 0
	for i := t.leafFree; i != 0; {
		freeLeaves++
		i = leUint32(t.leaves.at(i - 1).key[:4])
	}
	freeInners := 0
	for i := t.innerFree; i != 0; i = uint32(t.inners.at(i).child[0]) {
		freeInners++
	}
	if int(t.leafTop)-freeLeaves != leaves || int(t.innerTop)-freeInners != inners {
		return fmt.Errorf("slabs: %d-%d leaves, %d-%d internal nodes in use, want %d and %d",
			t.leafTop, freeLeaves, t.innerTop, freeInners, leaves, inners)
	}
	return nil
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
