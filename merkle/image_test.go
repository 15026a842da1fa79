package merkle

import (
	"bufio"
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
		got, err := ReadImage(bufio.NewReader(bytes.NewReader(img.Bytes())))
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
		if _, err := ReadImage(bufio.NewReader(bytes.NewReader(b[:n]))); !errors.Is(err, ErrImage) {
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
		got, err := ReadImage(bufio.NewReader(bytes.NewReader(c)))
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
		var back bytes.Buffer
		if err := got.WriteImage(&back); err != nil {
			t.Fatal(err)
		}
		checkCritBit(t, back.Bytes())
	}
	if refused == 0 {
		t.Fatal("no damage refused")
	}
}

// FuzzReadImage: arbitrary input loads or is refused, never panics; what
// loads writes back the same image and has the shape of the tree its
// leaves make when set one by one, so the reader's O(1) shape checks
// accept only true crit-bit trees.
func FuzzReadImage(f *testing.F) {
	for _, n := range []int{0, 1, 2, 5, 17} {
		var img bytes.Buffer
		randomTree(rand.New(rand.NewPCG(uint64(n), 9)), n).WriteImage(&img)
		f.Add(img.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tree, err := ReadImage(bufio.NewReader(bytes.NewReader(b)))
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
		checkCritBit(t, img.Bytes())
	})
}

// checkCritBit fails unless the loadable image img has the shape of the
// tree its leaves make when set one by one.
func checkCritBit(t *testing.T, img []byte) {
	t.Helper()
	rebuilt := New()
	for _, l := range imageLeaves(t, img) {
		rebuilt.Set(l[0], l[1])
	}
	var want bytes.Buffer
	if err := rebuilt.WriteImage(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(imageShape(t, img), imageShape(t, want.Bytes())) {
		t.Fatalf("loaded a tree that is not the crit-bit tree of its leaves")
	}
}

// imageLeaves lists the (key, value hash) of an image's leaves.
func imageLeaves(t *testing.T, img []byte) [][2][32]byte {
	var out [][2][32]byte
	for off := len(imageMagic) + 8; off < len(img); {
		if img[off] == 1 {
			out = append(out, [2][32]byte{[32]byte(img[off+1 : off+33]), [32]byte(img[off+33 : off+leafLen])})
			off += leafLen
			continue
		}
		off += innerLen
	}
	return out
}

// imageShape is an image without its internal nodes' cached hashes.
func imageShape(t *testing.T, img []byte) []byte {
	out := bytes.Clone(img)
	for off := len(imageMagic) + 8; off < len(out); {
		if out[off] == 1 {
			off += leafLen
			continue
		}
		clear(out[off+2 : off+innerLen])
		off += innerLen
	}
	return out
}
