package merkle

import (
	"bytes"
	"testing"
)

// FuzzProofDecode: decoding any bytes returns an error or a proof that
// encodes back to the same bytes, and verifying that proof never panics.
func FuzzProofDecode(f *testing.F) {
	tr := buildTree([]kv{{keyOf(), keyOf(1)}, {keyBit(3), keyOf(2)}, {keyBit(9), keyOf(3)}, {keyBit(255), keyOf(4)}})
	for _, k := range [][32]byte{keyOf(), keyBit(9), keyBit(200), keyBit(254)} {
		b, _ := tr.Prove(k).MarshalBinary()
		f.Add(b)
	}
	empty, _ := New().Prove(keyOf()).MarshalBinary()
	f.Add(empty)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 0, 1, 0})
	f.Add([]byte{1, 1, 0, 0})
	f.Add([]byte{2, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Proof
		if err := p.UnmarshalBinary(b); err != nil {
			return
		}
		out, err := p.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("decoded proof re-encodes to %x, %v", out, err)
		}
		var k [32]byte
		copy(k[:], b)
		v := k
		_ = Verify(tr.Root(), k, nil, p)
		_ = Verify(tr.Root(), k, &v, p)
		_ = Verify([32]byte{}, k, nil, p)
	})
}

// FuzzTree runs a program of Set and Delete operations on keys that share
// long prefixes, comparing the tree with a map and the reference root after
// every operation, and checking a proof for the key of each.
//
// Each operation takes 3 bytes: op (even: Set, odd: Delete; bit 1: skip
// the root check, letting changes pile up), the key (its top 2 bits choose
// one of 4 bases, its low 6 bits flip 6 fixed bit positions), the value.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 2, 1, 0, 0})
	f.Add([]byte{0, 0x3f, 1, 0, 0x3e, 2, 0, 0x3d, 3, 1, 0x3e, 0, 2, 0x80, 4, 0, 0xc1, 5, 1, 0x3f, 0})
	f.Add([]byte{0, 1, 1, 0, 2, 2, 0, 4, 3, 0, 8, 4, 0, 16, 5, 0, 32, 6, 3, 4, 0, 1, 1, 0, 0, 1, 9})
	bases := [4][32]byte{keyOf(), keyBit(0), k256("base 2"), k256("base 3")}
	flips := [6]int{1, 9, 100, 200, 254, 255}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 3*300 {
			prog = prog[:3*300]
		}
		tr := New()
		m := map[[32]byte][32]byte{}
		for i := 0; i+3 <= len(prog); i += 3 {
			op, kb, vb := prog[i], prog[i+1], prog[i+2]
			k := bases[kb>>6]
			for j, pos := range flips {
				if kb>>j&1 != 0 {
					k[pos/8] ^= 0x80 >> (pos % 8)
				}
			}
			if op&1 == 0 {
				v := keyOf(vb, 1)
				tr.Set(k, v)
				m[k] = v
			} else {
				_, had := m[k]
				if tr.Delete(k) != had {
					t.Fatalf("op %d: Delete = %v, want %v", i/3, !had, had)
				}
				delete(m, k)
			}
			if tr.Len() != len(m) {
				t.Fatalf("op %d: Len %d, want %d", i/3, tr.Len(), len(m))
			}
			if op&2 != 0 {
				continue
			}
			root := tr.Root()
			if want := refRoot(m); root != want {
				t.Fatalf("op %d: root %x, reference %x", i/3, root, want)
			}
			var vp *[32]byte
			if v, ok := m[k]; ok {
				vp = &v
			}
			if err := Verify(root, k, vp, tr.Prove(k)); err != nil {
				t.Fatalf("op %d: %v", i/3, err)
			}
		}
		if err := tr.check(); err != nil {
			t.Fatal(err)
		}
		if want := refRoot(m); tr.Root() != want {
			t.Fatalf("final root %x, reference %x", tr.Root(), want)
		}
	})
}
