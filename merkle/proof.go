package merkle

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind says what a Proof proves.
type Kind uint8

const (
	// Present proves that the key is in the tree with the value hash given
	// to Verify.
	Present Kind = 0
	// Absent proves that the key is not in the tree: the search for it
	// (following its bits from the root) ends at another leaf, whose key
	// and value hash the proof carries.
	Absent Kind = 1
	// Empty proves that the tree is empty (its root is 32 zero bytes), so
	// that no key is in it.
	Empty Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Present:
		return "present"
	case Absent:
		return "absent"
	case Empty:
		return "empty"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Step is one internal node on the path from the root to a leaf: the key
// bit it branches on and the hash of its child off the path.
type Step struct {
	Bit     uint8
	Sibling [32]byte
}

// Proof proves that a key is in a tree with a given value hash, or that it
// is not. Path lists the internal nodes from the root down to the leaf the
// search for the key ends at.
type Proof struct {
	Kind Kind
	Path []Step
	// For Kind Absent: the leaf the search ends at (its key differs from the
	// one proved absent). Zero for the other kinds.
	LeafKey, LeafValue [32]byte
}

// Errors returned by Verify and UnmarshalBinary, wrapped with details.
var (
	// ErrMalformed: the proof cannot be decoded, or cannot have been
	// produced by any tree (kind, branch bits, leaf off the path).
	ErrMalformed = errors.New("merkle: malformed proof")
	// ErrWrongKind: a proof of absence given for a value, or of presence
	// given for an absence (nil value).
	ErrWrongKind = errors.New("merkle: proof of the wrong kind")
	// ErrRootMismatch: the proof does not hash to the root.
	ErrRootMismatch = errors.New("merkle: proof does not match the root")
)

// Prove returns a proof that key is in the tree with its current value
// hash, or that it is absent. It first brings the root up to date (as Root).
func (t *Tree) Prove(key [32]byte) Proof {
	var p Proof
	t.ProveInto(key, &p)
	return p
}

// ProveInto is Prove writing into p, reusing the capacity of p.Path.
func (t *Tree) ProveInto(key [32]byte, p *Proof) {
	t.Root()
	*p = Proof{Path: p.Path[:0]}
	if t.root == 0 {
		p.Kind = Empty
		return
	}
	r := t.root
	for r&leafBit == 0 {
		n := t.inner(r)
		b := bitAt(&key, n.bit)
		p.Path = append(p.Path, Step{Bit: n.bit, Sibling: n.hash[1-b]})
		r = n.child[b]
	}
	l := t.leaf(r)
	if l.key == key {
		p.Kind = Present
		return
	}
	p.Kind, p.LeafKey, p.LeafValue = Absent, l.key, l.value
}

// Verify checks proof p against root: with value non-nil, that key is in
// the tree with value hash *value; with value nil, that key is not in the
// tree. It needs nothing but its arguments. It returns nil if the proof
// holds, else an error wrapping ErrMalformed, ErrWrongKind or
// ErrRootMismatch.
//
// A proof of absence is also a valid proof of absence for every other
// absent key whose search follows the same path (same bits at the path's
// branch positions): it proves exactly what it claims for each of them.
func Verify(root, key [32]byte, value *[32]byte, p Proof) error {
	if len(p.Path) > 256 {
		return fmt.Errorf("%w: %d steps (at most 256)", ErrMalformed, len(p.Path))
	}
	for i := 1; i < len(p.Path); i++ {
		if p.Path[i].Bit <= p.Path[i-1].Bit {
			return fmt.Errorf("%w: step %d branches on bit %d, not after bit %d", ErrMalformed, i, p.Path[i].Bit, p.Path[i-1].Bit)
		}
	}
	h := hashers.Get().(*hasher)
	defer hashers.Put(h)
	var acc [32]byte
	switch p.Kind {
	case Empty:
		if value != nil {
			return fmt.Errorf("%w: a proof that the tree is empty cannot prove a value", ErrWrongKind)
		}
		if len(p.Path) != 0 || p.LeafKey != ([32]byte{}) || p.LeafValue != ([32]byte{}) {
			return fmt.Errorf("%w: a proof of the empty tree has no path and no leaf", ErrMalformed)
		}
		if root != ([32]byte{}) {
			return fmt.Errorf("%w: the tree is not empty", ErrRootMismatch)
		}
		return nil
	case Present:
		if value == nil {
			return fmt.Errorf("%w: a proof of presence cannot prove absence", ErrWrongKind)
		}
		if p.LeafKey != ([32]byte{}) || p.LeafValue != ([32]byte{}) {
			return fmt.Errorf("%w: a proof of presence carries no other leaf", ErrMalformed)
		}
		h.leaf(&key, value, &acc)
	case Absent:
		if value != nil {
			return fmt.Errorf("%w: a proof of absence cannot prove a value", ErrWrongKind)
		}
		if p.LeafKey == key {
			return fmt.Errorf("%w: the leaf the search ends at has the key proved absent", ErrMalformed)
		}
		for i, s := range p.Path {
			if bitAt(&p.LeafKey, s.Bit) != bitAt(&key, s.Bit) {
				return fmt.Errorf("%w: step %d: the leaf is not on the key's path (bit %d)", ErrMalformed, i, s.Bit)
			}
		}
		h.leaf(&p.LeafKey, &p.LeafValue, &acc)
	default:
		return fmt.Errorf("%w: kind %d", ErrMalformed, p.Kind)
	}
	for i := len(p.Path) - 1; i >= 0; i-- {
		s := &p.Path[i]
		if bitAt(&key, s.Bit) == 0 {
			h.inner(s.Bit, &acc, &s.Sibling, &acc)
		} else {
			h.inner(s.Bit, &s.Sibling, &acc, &acc)
		}
	}
	if acc != root {
		return ErrRootMismatch
	}
	return nil
}

// ProofVersion is the first byte of an encoded proof.
const ProofVersion = 1

// MaxProofSize is the size of the largest encoded proof (256 steps, Absent).
const MaxProofSize = 4 + 256*33 + 64

// MarshalBinary encodes p (TREE.md, "Proof encoding"):
//
//	version[1]=1 kind[1] depth[2, big-endian] depth×(bit[1] sibling[32]) [leafKey[32] leafValue[32] if kind is Absent]
func (p Proof) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(make([]byte, 0, p.sizeFor(len(p.Path))))
}

// AppendBinary appends the encoding of p to b (see MarshalBinary).
func (p Proof) AppendBinary(b []byte) ([]byte, error) {
	if p.Kind > Empty || len(p.Path) > 256 || (p.Kind == Empty && len(p.Path) != 0) {
		return nil, fmt.Errorf("%w: cannot encode kind %d with %d steps", ErrMalformed, p.Kind, len(p.Path))
	}
	b = append(b, ProofVersion, byte(p.Kind))
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Path)))
	for i := range p.Path {
		b = append(b, p.Path[i].Bit)
		b = append(b, p.Path[i].Sibling[:]...)
	}
	if p.Kind == Absent {
		b = append(b, p.LeafKey[:]...)
		b = append(b, p.LeafValue[:]...)
	}
	return b, nil
}

// UnmarshalBinary decodes an encoding made by MarshalBinary. It checks the
// version, the kind, the depth (at most 256, 0 for Empty) and the exact
// length; it returns an error wrapping ErrMalformed for anything else and
// never panics. It does not check the branch bits: Verify does. It reuses
// the capacity of p.Path, and leaves p unchanged on error.
func (p *Proof) UnmarshalBinary(b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("%w: %d bytes, shorter than the 4-byte header", ErrMalformed, len(b))
	}
	if b[0] != ProofVersion {
		return fmt.Errorf("%w: version %d (want %d)", ErrMalformed, b[0], ProofVersion)
	}
	kind := Kind(b[1])
	if kind > Empty {
		return fmt.Errorf("%w: kind %d", ErrMalformed, b[1])
	}
	depth := int(binary.BigEndian.Uint16(b[2:4]))
	if depth > 256 || (kind == Empty && depth != 0) {
		return fmt.Errorf("%w: depth %d for kind %v", ErrMalformed, depth, kind)
	}
	q := Proof{Kind: kind, Path: p.Path[:0]}
	if want := q.sizeFor(depth); len(b) != want {
		return fmt.Errorf("%w: %d bytes, want %d for kind %v and depth %d", ErrMalformed, len(b), want, kind, depth)
	}
	b = b[4:]
	for range depth {
		var s Step
		s.Bit = b[0]
		copy(s.Sibling[:], b[1:33])
		q.Path = append(q.Path, s)
		b = b[33:]
	}
	if kind == Absent {
		copy(q.LeafKey[:], b[:32])
		copy(q.LeafValue[:], b[32:64])
	}
	*p = q
	return nil
}

// sizeFor is the encoded size of a proof of p's kind with depth steps.
func (p *Proof) sizeFor(depth int) int {
	n := 4 + 33*depth
	if p.Kind == Absent {
		n += 64
	}
	return n
}
