package merkle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the implementation")

const vectorsFile = "testdata/vectors.json"

// hexBytes is a byte string written as 0x-prefixed lower-case hex.
type hexBytes []byte

func (h hexBytes) MarshalJSON() ([]byte, error) {
	if h == nil {
		return []byte("null"), nil
	}
	return json.Marshal("0x" + hex.EncodeToString(h))
}

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*h = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if !strings.HasPrefix(s, "0x") {
		return fmt.Errorf("%q: no 0x prefix", s)
	}
	d, err := hex.DecodeString(s[2:])
	*h = d
	return err
}

func hx(b [32]byte) hexBytes { return b[:] }

func h32(b hexBytes) (out [32]byte, err error) {
	if len(b) != 32 {
		return out, fmt.Errorf("%d bytes, want 32", len(b))
	}
	copy(out[:], b)
	return out, nil
}

type vectorFile struct {
	Comment []string `json:"comment"`
	Leaves  []struct {
		Key   hexBytes `json:"key"`
		Value hexBytes `json:"value"`
		Hash  hexBytes `json:"hash"`
	} `json:"leaf_hashes"`
	Inners []struct {
		Bit   int      `json:"bit"`
		Left  hexBytes `json:"left"`
		Right hexBytes `json:"right"`
		Hash  hexBytes `json:"hash"`
	} `json:"internal_hashes"`
	Trees  []vectorTree  `json:"trees"`
	Proofs []vectorProof `json:"proofs"`
}

type vectorEntry struct {
	Key   hexBytes `json:"key"`
	Value hexBytes `json:"value"`
}

type vectorTree struct {
	Name    string        `json:"name"`
	Entries []vectorEntry `json:"entries"`
	Root    hexBytes      `json:"root"`
}

type vectorProof struct {
	Name  string   `json:"name"`
	Tree  string   `json:"tree"`
	Key   hexBytes `json:"key"`
	Value hexBytes `json:"value"` // null: a proof of absence
	Proof hexBytes `json:"proof"`
	Valid bool     `json:"valid"`
}

// k256 is keccak256(s), for readable vector inputs.
func k256(s string) [32]byte { return refKeccak([]byte(s)) }

func vectorInputs() (trees []vectorTree, proofs []vectorProof) {
	e := func(k, v [32]byte) vectorEntry { return vectorEntry{k[:], v[:]} }
	ff := [32]byte{}
	for i := range ff {
		ff[i] = 0xff
	}
	a := keyOf(0x12, 0x34)                         // these three share 14 or more bits
	b := keyOf(0x12, 0x35)                         // a and b differ at bit 15
	c := keyOf(0x12, 0x34, 0, 0, 0, 0, 0, 0, 0x01) // a and c differ at bit 71
	trees = []vectorTree{
		{Name: "empty", Entries: []vectorEntry{}},
		{Name: "one entry", Entries: []vectorEntry{e(k256("key 0"), k256("value 0"))}},
		{Name: "two entries, split at bit 0", Entries: []vectorEntry{e(keyOf(), k256("value 0")), e(ff, k256("value 1"))}},
		{Name: "two entries, split at bit 255", Entries: []vectorEntry{e(keyOf(), k256("value 2")), e(keyBit(255), k256("value 3"))}},
		{Name: "shared prefixes", Entries: []vectorEntry{
			e(a, k256("a")), e(b, k256("b")), e(c, k256("c")), e(keyOf(), k256("zero")), e(ff, k256("ones"))}},
	}
	var many []vectorEntry
	for i := range 16 {
		many = append(many, e(k256(fmt.Sprintf("key %d", i)), k256(fmt.Sprintf("value %d", i))))
	}
	trees = append(trees, vectorTree{Name: "sixteen entries", Entries: many})
	va := k256("a")
	proofs = []vectorProof{
		{Name: "empty tree, absent", Tree: "empty", Key: a[:]},
		{Name: "one entry, present (no steps)", Tree: "one entry", Key: many[0].Key, Value: many[0].Value},
		{Name: "one entry, absent", Tree: "one entry", Key: a[:]},
		{Name: "shared prefixes, present", Tree: "shared prefixes", Key: a[:], Value: va[:]},
		{Name: "shared prefixes, absent, search ends at a sibling leaf", Tree: "shared prefixes", Key: hx(keyOf(0x12, 0x34, 0, 0, 0, 0, 0, 0, 0x02))},
		{Name: "shared prefixes, absent, search leaves the common prefix", Tree: "shared prefixes", Key: hx(keyOf(0x13))},
		{Name: "sixteen entries, present", Tree: "sixteen entries", Key: many[7].Key, Value: many[7].Value},
		{Name: "sixteen entries, absent", Tree: "sixteen entries", Key: a[:]},
	}
	return trees, proofs
}

func buildVectorTree(vt vectorTree) (*Tree, map[[32]byte][32]byte, error) {
	tr := New()
	m := map[[32]byte][32]byte{}
	for _, en := range vt.Entries {
		k, err := h32(en.Key)
		if err != nil {
			return nil, nil, err
		}
		v, err := h32(en.Value)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := m[k]; dup {
			return nil, nil, fmt.Errorf("key %x twice", k)
		}
		tr.Set(k, v)
		m[k] = v
	}
	return tr, m, nil
}

func writeVectors(t *testing.T) {
	var f vectorFile
	f.Comment = []string{
		"Test vectors for the merkle package's tree: see merkle/TREE.md. All byte strings are 0x-prefixed hex.",
		"leaf_hashes: keccak256(0x00 || key || value). internal_hashes: keccak256(0x01 || bit || left || right).",
		"trees: a set of (key, value hash) entries (in no particular order) and its root; the empty tree's root is 32 zero bytes.",
		"proofs: the encoded proof (TREE.md, Proof encoding) for key in the named tree; value null asks for a proof of absence; valid says whether Verify(root, key, value, proof) accepts it.",
	}
	trees, proofs := vectorInputs()
	roots := map[string][32]byte{}
	built := map[string]*Tree{}
	for i := range trees {
		tr, _, err := buildVectorTree(trees[i])
		if err != nil {
			t.Fatal(err)
		}
		r := tr.Root()
		trees[i].Root = r[:]
		roots[trees[i].Name] = r
		built[trees[i].Name] = tr
	}
	f.Trees = trees
	// the hashes of the two-entry trees, spelled out
	for _, name := range []string{"two entries, split at bit 0", "two entries, split at bit 255"} {
		vt := trees[slicesIndex(trees, name)]
		var hs [2][32]byte
		for i, en := range vt.Entries {
			k, _ := h32(en.Key)
			v, _ := h32(en.Value)
			hs[i] = LeafHash(k, v)
			f.Leaves = append(f.Leaves, struct {
				Key   hexBytes `json:"key"`
				Value hexBytes `json:"value"`
				Hash  hexBytes `json:"hash"`
			}{en.Key, en.Value, hs[i][:]})
		}
		bit := 0
		if strings.HasSuffix(name, "255") {
			bit = 255
		}
		r := roots[name]
		f.Inners = append(f.Inners, struct {
			Bit   int      `json:"bit"`
			Left  hexBytes `json:"left"`
			Right hexBytes `json:"right"`
			Hash  hexBytes `json:"hash"`
		}{bit, hs[0][:], hs[1][:], r[:]})
	}
	for _, vp := range proofs {
		k, _ := h32(vp.Key)
		b, err := built[vp.Tree].Prove(k).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		vp.Proof, vp.Valid = b, true
		f.Proofs = append(f.Proofs, vp)
	}
	// and two invalid ones: a sibling byte changed, and a value changed
	bad := f.Proofs[3]
	bad.Name, bad.Valid = "shared prefixes, present, a sibling hash byte changed", false
	bad.Proof = bytes.Clone(bad.Proof)
	bad.Proof[4+1] ^= 1
	f.Proofs = append(f.Proofs, bad)
	bad = f.Proofs[6]
	bad.Name, bad.Valid = "sixteen entries, present, with another value", false
	bad.Value = bytes.Clone(bad.Value)
	bad.Value[31] ^= 1
	f.Proofs = append(f.Proofs, bad)

	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func slicesIndex(trees []vectorTree, name string) int {
	for i := range trees {
		if trees[i].Name == name {
			return i
		}
	}
	panic(name)
}

// TestVectors checks testdata/vectors.json against the tree, the reference
// and Verify; go test ./merkle -run TestVectors -update rewrites it.
func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if len(f.Trees) == 0 || len(f.Proofs) == 0 || len(f.Leaves) == 0 || len(f.Inners) == 0 {
		t.Fatal("missing vectors")
	}
	for _, l := range f.Leaves {
		k, _ := h32(l.Key)
		v, _ := h32(l.Value)
		want, _ := h32(l.Hash)
		if got := LeafHash(k, v); got != want || refKeccak([]byte{0}, k[:], v[:]) != want {
			t.Errorf("leaf hash %x, want %x", got, want)
		}
	}
	for _, n := range f.Inners {
		l, _ := h32(n.Left)
		r, _ := h32(n.Right)
		want, _ := h32(n.Hash)
		if got := InnerHash(uint8(n.Bit), l, r); got != want || refKeccak([]byte{1, byte(n.Bit)}, l[:], r[:]) != want {
			t.Errorf("internal hash %x, want %x", got, want)
		}
	}
	trees := map[string]*Tree{}
	for _, vt := range f.Trees {
		tr, m, err := buildVectorTree(vt)
		if err != nil {
			t.Fatalf("%s: %v", vt.Name, err)
		}
		want, err := h32(vt.Root)
		if err != nil {
			t.Fatalf("%s: root: %v", vt.Name, err)
		}
		if got := tr.Root(); got != want {
			t.Errorf("%s: root %x, want %x", vt.Name, got, want)
		}
		if ref := refRoot(m); ref != want {
			t.Errorf("%s: reference root %x, want %x", vt.Name, ref, want)
		}
		trees[vt.Name] = tr
	}
	for _, vp := range f.Proofs {
		tr := trees[vp.Tree]
		if tr == nil {
			t.Fatalf("%s: no tree %q", vp.Name, vp.Tree)
		}
		k, err := h32(vp.Key)
		if err != nil {
			t.Fatal(err)
		}
		var value *[32]byte
		if vp.Value != nil {
			v, err := h32(vp.Value)
			if err != nil {
				t.Fatal(err)
			}
			value = &v
		}
		var p Proof
		err = p.UnmarshalBinary(vp.Proof)
		if err == nil {
			err = Verify(tr.Root(), k, value, p)
		}
		if (err == nil) != vp.Valid {
			t.Errorf("%s: valid %v, Verify: %v", vp.Name, vp.Valid, err)
		}
		if vp.Valid {
			b, _ := tr.Prove(k).MarshalBinary()
			if !bytes.Equal(b, vp.Proof) {
				t.Errorf("%s: Prove encodes %x, want %x", vp.Name, b, []byte(vp.Proof))
			}
		} else if err != nil && !errors.Is(err, ErrRootMismatch) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", vp.Name, err)
		}
	}
}
