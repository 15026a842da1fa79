package overflow_test

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/timerlane/timerlane/overflow"
	"github.com/timerlane/timerlane/ring"
)

func items(t *overflow.Tree) []ring.Entry {
	var out []ring.Entry
	t.Ascend(func(it ring.Entry) bool { out = append(out, it); return true })
	return out
}

func TestTree(t *testing.T) {
	it := func(h, seq uint64, val uint32) ring.Entry { return ring.Entry{Height: h, Seq: seq, Val: val} }
	type op struct {
		kind string // insert, delete, popmin
		it   ring.Entry
		ok   bool // delete, popmin
	}
	tests := []struct {
		name string
		ops  []op
		want []ring.Entry
	}{
		{"empty", nil, nil},
		{"order by height then seq", []op{
			{kind: "insert", it: it(9, 5, 1)}, {kind: "insert", it: it(3, 7, 2)}, {kind: "insert", it: it(9, 2, 3)}, {kind: "insert", it: it(3, 1, 4)},
		}, []ring.Entry{it(3, 1, 4), it(3, 7, 2), it(9, 2, 3), it(9, 5, 1)}},
		{"delete matches height and seq, not val", []op{
			{kind: "insert", it: it(5, 1, 1)}, {kind: "insert", it: it(5, 2, 2)},
			{kind: "delete", it: it(5, 1, 0), ok: true}, {kind: "delete", it: it(5, 1, 1), ok: false}, {kind: "delete", it: it(6, 2, 2), ok: false},
		}, []ring.Entry{it(5, 2, 2)}},
		{"pop min", []op{
			{kind: "insert", it: it(7, 2, 2)}, {kind: "insert", it: it(5, 1, 1)},
			{kind: "popmin", it: it(5, 1, 1), ok: true}, {kind: "popmin", it: it(7, 2, 2), ok: true}, {kind: "popmin", ok: false},
		}, nil},
		{"top heights", []op{
			{kind: "insert", it: it(1<<64-1, 2, 1)}, {kind: "insert", it: it(1<<64-1, 1, 2)}, {kind: "insert", it: it(0, 9, 3)},
			{kind: "popmin", it: it(0, 9, 3), ok: true},
		}, []ring.Entry{it(1<<64-1, 1, 2), it(1<<64-1, 2, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := overflow.New()
			for _, o := range tc.ops {
				switch o.kind {
				case "insert":
					tr.Insert(o.it)
				case "delete":
					if got := tr.Delete(o.it.Height, o.it.Seq); got != o.ok {
						t.Fatalf("Delete(%+v) = %v, want %v", o.it, got, o.ok)
					}
				case "popmin":
					got, ok := tr.PopMin()
					if ok != o.ok || (ok && got != o.it) {
						t.Fatalf("PopMin = %+v %v, want %+v %v", got, ok, o.it, o.ok)
					}
				}
			}
			got := items(tr)
			if !slices.Equal(got, tc.want) || tr.Len() != len(tc.want) {
				t.Fatalf("items %v (Len %d), want %v", got, tr.Len(), tc.want)
			}
			m, ok := tr.Min()
			if ok != (len(tc.want) > 0) || (ok && m != tc.want[0]) {
				t.Fatalf("Min = %+v %v", m, ok)
			}
		})
	}
}

func TestAscendStops(t *testing.T) {
	tr := overflow.New()
	for k := uint64(0); k < 10; k++ {
		tr.Insert(ring.Entry{Height: k, Seq: k})
	}
	n := 0
	tr.Ascend(func(ring.Entry) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("Ascend visited %d items after returning false at 3", n)
	}
}

// TestTreeRandom checks the tree against a sorted slice under random
// inserts, deletes and pops, and CountTo at every step.
func TestTreeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := overflow.New()
	var model []ring.Entry
	less := func(a, b ring.Entry) bool {
		if a.Height != b.Height {
			return a.Height < b.Height
		}
		return a.Seq < b.Seq
	}
	seq := uint64(0)
	for step := 0; step < 5000; step++ {
		switch r := rng.IntN(10); {
		case r < 5:
			seq++
			it := ring.Entry{Height: rng.Uint64N(50), Seq: seq, Val: uint32(seq)}
			tr.Insert(it)
			model = append(model, it)
			sort.Slice(model, func(i, j int) bool { return less(model[i], model[j]) })
		case r < 8 && len(model) > 0:
			k := rng.IntN(len(model))
			if !tr.Delete(model[k].Height, model[k].Seq) {
				t.Fatalf("Delete of a present item failed")
			}
			model = slices.Delete(model, k, k+1)
		default:
			it, ok := tr.PopMin()
			wantOK := len(model) > 0
			if ok != wantOK || (ok && it != model[0]) {
				t.Fatalf("PopMin = %+v %v", it, ok)
			}
			if ok {
				model = model[1:]
			}
		}
		if tr.Len() != len(model) {
			t.Fatalf("Len %d, want %d", tr.Len(), len(model))
		}
		h := rng.Uint64N(52) // 50 and 51: above every height
		want := 0
		for _, x := range model {
			if x.Height <= h {
				want++
			}
		}
		if got := tr.CountTo(h); got != want {
			t.Fatalf("CountTo(%d) = %d, want %d", h, got, want)
		}
	}
	if got := items(tr); !slices.Equal(got, model) {
		t.Fatalf("items differ from model")
	}
}

func TestPurge(t *testing.T) {
	it := func(h, seq uint64) ring.Entry { return ring.Entry{Height: h, Seq: seq, Val: uint32(seq)} }
	key := func(h, seq uint64) ring.Entry { return ring.Entry{Height: h, Seq: seq} } // no Val: Purge matches (height, seq)
	tests := []struct {
		name          string
		have, dead    []ring.Entry
		want, removed []ring.Entry
	}{
		{"nothing dead", []ring.Entry{it(1, 1), it(2, 2)}, nil, []ring.Entry{it(1, 1), it(2, 2)}, nil},
		{"all dead", []ring.Entry{it(1, 1), it(2, 2)}, []ring.Entry{key(1, 1), key(2, 2)}, nil, []ring.Entry{it(1, 1), it(2, 2)}},
		{"keys the tree lacks are skipped", []ring.Entry{it(5, 3), it(5, 7), it(9, 4)},
			[]ring.Entry{key(1, 1), key(5, 4), key(5, 7), key(6, 1), key(9, 5), key(10, 1)},
			[]ring.Entry{it(5, 3), it(9, 4)}, []ring.Entry{it(5, 7)}},
		{"same seq at another height stays", []ring.Entry{it(3, 8), it(4, 8)}, []ring.Entry{key(4, 8)}, []ring.Entry{it(3, 8)}, []ring.Entry{it(4, 8)}},
		{"empty tree", nil, []ring.Entry{key(1, 1)}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := overflow.New()
			for _, e := range tc.have {
				tr.Insert(e)
			}
			var removed []ring.Entry
			tr.Purge(tc.dead, func(x ring.Entry) { removed = append(removed, x) })
			if got := items(tr); !slices.Equal(got, tc.want) || tr.Len() != len(tc.want) {
				t.Fatalf("left %v (Len %d), want %v", got, tr.Len(), tc.want)
			}
			if !slices.Equal(removed, tc.removed) {
				t.Fatalf("removed %v, want %v", removed, tc.removed)
			}
			// The tree stays usable: inserts search it, and a replace is told.
			tr.Insert(it(7, 100))
			if !tr.Insert(it(7, 100)) {
				t.Fatal("Insert of an entry it holds did not report a replace")
			}
		})
	}
}
