package merkle

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// proofTrees are the trees the proof tests run on, with keys to prove:
// present ones and absent ones (neighbours that share long prefixes, keys
// below the smallest and above the largest).
func proofTrees() []struct {
	name string
	kvs  []kv
	keys [][32]byte
} {
	rng := rand.New(rand.NewPCG(11, 11))
	v := func() [32]byte { return randKey(rng) }
	last := keyBit(255)
	ff := [32]byte{}
	for i := range ff {
		ff[i] = 0xff
	}
	// a chain 256 deep: keys 0…0 and bit i set after i zero bits, i < 256
	var chain []kv
	chain = append(chain, kv{keyOf(), v()})
	for i := range 256 {
		chain = append(chain, kv{keyBit(i), v()})
	}
	var random []kv
	g := newKeyGen(rng)
	seen := map[[32]byte]bool{}
	for len(random) < 1000 {
		k := g.key()
		if !seen[k] {
			seen[k] = true
			random = append(random, kv{k, v()})
		}
	}
	var randomKeys [][32]byte
	for range 300 {
		randomKeys = append(randomKeys, g.key())
	}
	near := keyOf(0x12, 0x34)
	return []struct {
		name string
		kvs  []kv
		keys [][32]byte
	}{
		{"empty", nil, [][32]byte{keyOf(), ff, keyOf(1)}},
		{"one leaf", []kv{{keyOf(5), v()}}, [][32]byte{keyOf(5), keyOf(4), keyOf(), ff, keyOf(5, 1)}},
		{"two, last bit", []kv{{keyOf(), v()}, {last, v()}},
			[][32]byte{keyOf(), last, keyBit(254), keyBit(0), ff}},
		{"long shared prefixes", []kv{{near, v()}, {keyOf(0x12, 0x35), v()}, {keyOf(0x12, 0x34, 0, 0, 0, 0, 0, 0, 1), v()}},
			[][32]byte{near, keyOf(0x12, 0x34, 0, 0, 0, 0, 0, 0, 2), keyOf(0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 1), keyOf(0x12, 0x36), keyOf(), ff}},
		{"chain 256 deep", chain, [][32]byte{keyOf(), last, keyBit(128), keyBit(0), ff, keyOf(0, 0, 0, 3)}},
		{"random 1000", random, randomKeys},
	}
}

func buildTree(kvs []kv) *Tree {
	tr := New()
	for _, p := range kvs {
		tr.Set(p.k, p.v)
	}
	return tr
}

func TestProofs(t *testing.T) {
	for _, tc := range proofTrees() {
		t.Run(tc.name, func(t *testing.T) {
			tr := buildTree(tc.kvs)
			root := tr.Root()
			maxDepth := 0
			for _, k := range tc.keys {
				p := tr.Prove(k)
				maxDepth = max(maxDepth, len(p.Path))
				v, ok := tr.Get(k)
				switch {
				case tr.Len() == 0 && p.Kind != Empty, tr.Len() > 0 && ok && p.Kind != Present, tr.Len() > 0 && !ok && p.Kind != Absent:
					t.Fatalf("key %x: proof of kind %v (present %v, len %d)", k[:4], p.Kind, ok, tr.Len())
				}
				var err error
				if ok {
					err = Verify(root, k, &v, p)
					other := v
					other[31] ^= 1
					if e := Verify(root, k, &other, p); !errors.Is(e, ErrRootMismatch) {
						t.Fatalf("key %x: the proof verified another value: %v", k[:4], e)
					}
					if e := Verify(root, k, nil, p); !errors.Is(e, ErrWrongKind) {
						t.Fatalf("key %x: a proof of presence proved absence: %v", k[:4], e)
					}
				} else {
					err = Verify(root, k, nil, p)
					if e := Verify(root, k, &v, p); !errors.Is(e, ErrWrongKind) {
						t.Fatalf("key %x: a proof of absence proved a value: %v", k[:4], e)
					}
				}
				if err != nil {
					t.Fatalf("key %x (present %v): %v", k[:4], ok, err)
				}
				b, err := p.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var q Proof
				if err := q.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(normalize(p), normalize(q)) {
					t.Fatalf("key %x: the proof changed through its encoding", k[:4])
				}
				if len(b) != q.sizeFor(len(q.Path)) || len(b) > MaxProofSize {
					t.Fatalf("key %x: %d bytes", k[:4], len(b))
				}
			}
			if tc.name == "chain 256 deep" && maxDepth != 256 {
				t.Fatalf("deepest proof %d steps, want 256", maxDepth)
			}
		})
	}
}

// normalize makes an empty Path nil, for DeepEqual.
func normalize(p Proof) Proof {
	if len(p.Path) == 0 {
		p.Path = nil
	}
	return p
}

// TestProofTampering: every byte of an encoded proof flipped (three ways;
// one way, in turn, for the 256-step proofs),
// every byte of the root, and every byte of the value makes decoding or
// Verify fail; so does every byte of the key for a proof of presence. For
// a proof of absence a changed key may still verify, but only if it is
// absent too and its own proof is this one (the proof proves exactly what
// it claims). Every truncation and extension of an encoding fails to
// decode.
func TestProofTampering(t *testing.T) {
	for _, tc := range proofTrees() {
		t.Run(tc.name, func(t *testing.T) {
			tr := buildTree(tc.kvs)
			root := tr.Root()
			keys := tc.keys
			if len(keys) > 20 {
				keys = keys[:20]
			}
			for _, k := range keys {
				p := tr.Prove(k)
				v, ok := tr.Get(k)
				var vp *[32]byte
				if ok {
					vp = &v
				}
				if err := Verify(root, k, vp, p); err != nil {
					t.Fatal(err)
				}
				enc, _ := p.MarshalBinary()
				flips := []byte{0x01, 0x80, 0xff}
				for i := range enc {
					xs := flips
					if len(enc) > 2000 { // the 256-deep chain: one flip a byte, in turn
						xs = flips[i%3 : i%3+1]
					}
					for _, x := range xs {
						bad := bytes.Clone(enc)
						bad[i] ^= x
						var q Proof
						if q.UnmarshalBinary(bad) == nil && Verify(root, k, vp, q) == nil {
							t.Fatalf("key %x: encoding with byte %d ^ %#x verifies", k[:4], i, x)
						}
					}
				}
				for n := range len(enc) {
					var q Proof
					if err := q.UnmarshalBinary(enc[:n]); !errors.Is(err, ErrMalformed) {
						t.Fatalf("key %x: truncated to %d bytes: %v", k[:4], n, err)
					}
				}
				var q Proof
				if err := q.UnmarshalBinary(append(bytes.Clone(enc), 0)); !errors.Is(err, ErrMalformed) {
					t.Fatalf("key %x: extended: %v", k[:4], err)
				}
				for i := range 32 {
					for _, x := range []byte{0x01, 0x80} {
						badRoot := root
						badRoot[i] ^= x
						if Verify(badRoot, k, vp, p) == nil {
							t.Fatalf("key %x: verifies with root byte %d ^ %#x", k[:4], i, x)
						}
						if ok {
							badV := v
							badV[i] ^= x
							if Verify(root, k, &badV, p) == nil {
								t.Fatalf("key %x: verifies with value byte %d ^ %#x", k[:4], i, x)
							}
						}
						badK := k
						badK[i] ^= x
						if Verify(root, badK, vp, p) == nil {
							_, present := tr.Get(badK)
							if ok || present || !reflect.DeepEqual(normalize(tr.Prove(badK)), normalize(p)) {
								t.Fatalf("key %x: verifies for key byte %d ^ %#x", k[:4], i, x)
							}
						}
					}
				}
			}
		})
	}
}

// TestVerifyRejectsMalformed: proofs no tree can produce fail, whatever the
// root.
func TestVerifyRejectsMalformed(t *testing.T) {
	tr := buildTree([]kv{{keyOf(), keyOf(1)}, {keyBit(3), keyOf(2)}, {keyBit(9), keyOf(3)}})
	root := tr.Root()
	k := keyBit(9)
	v := keyOf(3)
	good := tr.Prove(k)
	if err := Verify(root, k, &v, good); err != nil || len(good.Path) != 2 {
		t.Fatalf("%v, %d steps", err, len(good.Path))
	}
	absent := tr.Prove(keyBit(200))
	if absent.Kind != Absent {
		t.Fatal(absent.Kind)
	}
	mod := func(p Proof, f func(*Proof)) Proof {
		p.Path = append([]Step(nil), p.Path...)
		f(&p)
		return p
	}
	tests := []struct {
		name  string
		root  [32]byte
		key   [32]byte
		value *[32]byte
		p     Proof
		want  error
	}{
		{"bits not increasing", root, k, &v, mod(good, func(p *Proof) { p.Path[1].Bit = p.Path[0].Bit }), ErrMalformed},
		{"bits swapped", root, k, &v, mod(good, func(p *Proof) { p.Path[0], p.Path[1] = p.Path[1], p.Path[0] }), ErrMalformed},
		{"257 steps", root, k, &v, mod(good, func(p *Proof) { p.Path = make([]Step, 257) }), ErrMalformed},
		{"unknown kind", root, k, &v, mod(good, func(p *Proof) { p.Kind = 3 }), ErrMalformed},
		{"presence with a leaf", root, k, &v, mod(good, func(p *Proof) { p.LeafKey[0] = 1 }), ErrMalformed},
		{"absence, leaf is the key", root, absent.LeafKey, nil, absent, ErrMalformed},
		{"absence, leaf off the path", root, keyBit(200), nil, mod(absent, func(p *Proof) { p.LeafKey = keyBit(3) }), ErrMalformed},
		{"absence of a present key", root, k, nil, mod(absent, func(*Proof) {}), ErrMalformed},
		{"empty with a path", [32]byte{}, k, nil, Proof{Kind: Empty, Path: []Step{{}}}, ErrMalformed},
		{"empty with a leaf", [32]byte{}, k, nil, Proof{Kind: Empty, LeafValue: keyOf(1)}, ErrMalformed},
		{"empty, root not zero", root, k, nil, Proof{Kind: Empty}, ErrRootMismatch},
		{"presence in the empty tree", [32]byte{}, k, &v, Proof{Kind: Present}, ErrRootMismatch},
		{"empty proving a value", [32]byte{}, k, &v, Proof{Kind: Empty}, ErrWrongKind},
	}
	for _, tc := range tests {
		if err := Verify(tc.root, tc.key, tc.value, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, p := range []Proof{{Kind: 3}, {Kind: Empty, Path: []Step{{}}}, {Path: make([]Step, 257)}} {
		if _, err := p.MarshalBinary(); !errors.Is(err, ErrMalformed) {
			t.Errorf("MarshalBinary(%v, %d steps): %v", p.Kind, len(p.Path), err)
		}
	}
}

func TestProofDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"short header", []byte{1, 0, 0}},
		{"version 0", []byte{0, 0, 0, 0}},
		{"version 2", []byte{2, 0, 0, 0}},
		{"kind 3", []byte{1, 3, 0, 0}},
		{"depth 257", append([]byte{1, 0, 1, 1}, make([]byte, 257*33)...)},
		{"empty with depth 1", append([]byte{1, 2, 0, 1}, make([]byte, 33)...)},
		{"absent without leaf", []byte{1, 1, 0, 0}},
		{"present with a leaf", append([]byte{1, 0, 0, 0}, make([]byte, 64)...)},
		{"depth 1, no step", []byte{1, 0, 0, 1}},
		{"max depth", []byte{1, 0, 0xff, 0xff}},
	}
	for _, tc := range tests {
		var p Proof
		if err := p.UnmarshalBinary(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	var p Proof
	if err := p.UnmarshalBinary([]byte{1, 0, 0, 0}); err != nil || p.Kind != Present || len(p.Path) != 0 {
		t.Errorf("present, depth 0: %v %+v", err, p)
	}
}
