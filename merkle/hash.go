package merkle

import (
	"hash"
	"io"
	"sync"

	"golang.org/x/crypto/sha3"
)

// Domain-separation tags: the first byte of every hashed preimage.
const (
	tagLeaf  = 0x00 // keccak256(0x00 || key[32] || valueHash[32]), 65 bytes
	tagInner = 0x01 // keccak256(0x01 || bit[1] || left[32] || right[32]), 66 bytes
)

// keccak is a legacy Keccak-256 state that can also be squeezed with Read,
// which, unlike Sum, copies nothing.
type keccak interface {
	hash.Hash
	io.Reader
}

// hasher computes node hashes with one reusable Keccak-256 state and counts
// its calls. The preimage and the output go through its own buffers, so
// hashing allocates nothing.
type hasher struct {
	st    keccak
	in    [66]byte
	out   [32]byte
	count uint64
}

func newHasher() hasher { return hasher{st: sha3.NewLegacyKeccak256().(keccak)} }

func (h *hasher) sum(n int, dst *[32]byte) {
	h.st.Reset()
	h.st.Write(h.in[:n])
	h.st.Read(h.out[:])
	*dst = h.out
	h.count++
}

// leaf sets dst to keccak256(0x00 || key || value).
func (h *hasher) leaf(key, value, dst *[32]byte) {
	h.in[0] = tagLeaf
	copy(h.in[1:33], key[:])
	copy(h.in[33:65], value[:])
	h.sum(65, dst)
}

// inner sets dst to keccak256(0x01 || bit || left || right).
func (h *hasher) inner(bit uint8, left, right, dst *[32]byte) {
	h.in[0] = tagInner
	h.in[1] = bit
	copy(h.in[2:34], left[:])
	copy(h.in[34:66], right[:])
	h.sum(66, dst)
}

var hashers = sync.Pool{New: func() any { h := newHasher(); return &h }}

// LeafHash is the hash of the leaf for key with value hash value:
// keccak256(0x00 || key || value).
func LeafHash(key, value [32]byte) [32]byte {
	h := hashers.Get().(*hasher)
	var out [32]byte
	h.leaf(&key, &value, &out)
	hashers.Put(h)
	return out
}

// InnerHash is the hash of an internal node that branches on key bit bit
// (0 is the most significant bit of the key's first byte) with children
// hashes left (bit 0) and right (bit 1): keccak256(0x01 || bit || left || right).
func InnerHash(bit uint8, left, right [32]byte) [32]byte {
	h := hashers.Get().(*hasher)
	var out [32]byte
	h.inner(bit, &left, &right, &out)
	hashers.Put(h)
	return out
}
