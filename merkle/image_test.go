package merkle

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// randomTree is a tree after random Sets and Deletes, some of keys that
// share long prefixes.
func randomTree(r *rand.Rand, n int) *Tree {
	t := New()
	var keys [][32]byte
	for range n {
		var k [32]byte
		for i := range k {
			k[i] = byte(r.IntN(256))
		}
		if len(keys) > 0 && r.IntN(4) == 0 {
			k = keys[r.IntN(len(keys))]
			k[31-r.IntN(3)] ^= byte(1 + r.IntN(255)) // a near neighbour
		}
		keys = append(keys, k)
		t.Set(k, keyOf(byte(r.IntN(256))))
		if r.IntN(5) == 0 {
			t.Delete(keys[r.IntN(len(keys))])
		}
	}
	return t
}

// TestImageRoundTrip: a loaded image has the tree's root, keys and
// proofs, and goes on changing like the original.
func TestImageRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 50, 3000} {
		tree := randomTree(r, n)
		var img bytes.Buffer
		if err := tree.WriteImage(&img); err != nil {
			t.Fatal(err)
		}
		got, err := ReadImage(bytes.NewReader(img.Bytes()))
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if got.Root() != tree.Root() || got.Len() != tree.Len() {
			t.Fatalf("n=%d: root %x len %d, want %x %d", n, got.Root(), got.Len(), tree.Root(), tree.Len())
		}
		if hashes := got.Hashes(); hashes > 1 {
			t.Fatalf("n=%d: loading hashed %d times", n, hashes)
		}
		// The same changes to both.
		for k := range 200 {
			key := keyOf(byte(k), byte(k>>8), 7)
			tree.Set(key, keyOf(byte(k)))
			got.Set(key, keyOf(byte(k)))
			if k%3 == 0 {
				tree.Delete(key)
				got.Delete(key)
			}
		}
		if got.Root() != tree.Root() {
			t.Fatalf("n=%d: roots differ after the same changes", n)
		}
		p := got.Prove(keyOf(4, 0, 7))
		v := keyOf(4)
		if err := Verify(got.Root(), keyOf(4, 0, 7), &v, p); err != nil {
			t.Fatalf("n=%d: proof from a loaded tree: %v", n, err)
		}
	}
}

// fullRoot is the root computed from the leaves up, ignoring every cached
// hash.
func (t *Tree) fullRoot() [32]byte {
	if t.n == 0 {
		return [32]byte{}
	}
	h := newHasher()
	var hash func(r ref) [32]byte
	hash = func(r ref) (out [32]byte) {
		if r&leafBit != 0 {
			l := t.leaf(r)
			h.leaf(&l.key, &l.value, &out)
			return out
		}
		n := t.inner(r)
		a, b := hash(n.child[0]), hash(n.child[1])
		h.inner(n.bit, &a, &b, &out)
		return out
	}
	return hash(t.root)
}

// TestImageDamage: every truncation of an image is refused; every flipped
// byte other than an internal node's cached hash is refused or loads a
// tree whose root, from its caches or from its leaves, is not the
// original's. (Cached hashes are what an image saves recomputing: trusted,
// guarded by the file's checksum.) Never a panic.
func TestImageDamage(t *testing.T) {
	tree := randomTree(rand.New(rand.NewPCG(3, 4)), 40)
	var img bytes.Buffer
	if err := tree.WriteImage(&img); err != nil {
		t.Fatal(err)
	}
	b := img.Bytes()
	for n := range len(b) {
		if _, err := ReadImage(bytes.NewReader(b[:n])); !errors.Is(err, ErrImage) {
			t.Fatalf("truncated at %d of %d: %v", n, len(b), err)
		}
	}
	want := tree.Root()
	cached := map[int]bool{} // offsets of internal nodes' cached hashes
	for off := len(imageMagic) + 8; off < len(b); {
		if b[off] == 1 {
			off += leafLen
			continue
		}
		for k := off + 2; k < off+innerLen; k++ {
			cached[k] = true
		}
		off += innerLen
	}
	refused := 0
	for i := range b {
		if cached[i] {
			continue
		}
		c := bytes.Clone(b)
		c[i] ^= 0x10
		got, err := ReadImage(bytes.NewReader(c))
		if err != nil {
			if !errors.Is(err, ErrImage) {
				t.Fatalf("byte %d: %v", i, err)
			}
			refused++
			continue
		}
		if got.Root() == want && got.fullRoot() == want {
			t.Fatalf("byte %d flipped: same root", i)
		}
	}
	if refused == 0 {
		t.Fatal("no damage refused")
	}
}

// FuzzReadImage: arbitrary input loads or is refused, never panics, and
// what loads writes back the same image.
func FuzzReadImage(f *testing.F) {
	for _, n := range []int{0, 1, 5} {
		var img bytes.Buffer
		randomTree(rand.New(rand.NewPCG(uint64(n), 9)), n).WriteImage(&img)
		f.Add(img.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tree, err := ReadImage(bytes.NewReader(b))
		if err != nil {
			return
		}
		var img bytes.Buffer
		if err := tree.WriteImage(&img); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, img.Bytes()) {
			t.Fatalf("image does not write back the same")
		}
	})
}
