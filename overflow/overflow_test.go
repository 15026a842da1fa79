package overflow_test

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/timerlane/timerlane/overflow"
)

func items(t *overflow.Tree) []overflow.Item {
	var out []overflow.Item
	t.Ascend(func(it overflow.Item) bool { out = append(out, it); return true })
	return out
}

func TestTree(t *testing.T) {
	it := func(h, seq uint64, node uint32) overflow.Item { return overflow.Item{Height: h, Seq: seq, Node: node} }
	type op struct {
		kind string // insert, delete, popbelow
		it   overflow.Item
		h    uint64 // popbelow
		ok   bool   // delete, popbelow
	}
	tests := []struct {
		name string
		ops  []op
		want []overflow.Item
	}{
		{"empty", nil, nil},
		{"order by height then seq", []op{
			{kind: "insert", it: it(9, 5, 1)}, {kind: "insert", it: it(3, 7, 2)}, {kind: "insert", it: it(9, 2, 3)}, {kind: "insert", it: it(3, 1, 4)},
		}, []overflow.Item{it(3, 1, 4), it(3, 7, 2), it(9, 2, 3), it(9, 5, 1)}},
		{"delete matches height and seq, not node", []op{
			{kind: "insert", it: it(5, 1, 1)}, {kind: "insert", it: it(5, 2, 2)},
			{kind: "delete", it: it(5, 1, 0), ok: true}, {kind: "delete", it: it(5, 1, 1), ok: false}, {kind: "delete", it: it(6, 2, 2), ok: false},
		}, []overflow.Item{it(5, 2, 2)}},
		{"pop below", []op{
			{kind: "insert", it: it(5, 1, 1)}, {kind: "insert", it: it(7, 2, 2)},
			{kind: "popbelow", h: 5, ok: false}, {kind: "popbelow", h: 6, it: it(5, 1, 1), ok: true}, {kind: "popbelow", h: 6, ok: false},
		}, []overflow.Item{it(7, 2, 2)}},
		{"top heights", []op{
			{kind: "insert", it: it(1<<64-1, 2, 1)}, {kind: "insert", it: it(1<<64-1, 1, 2)}, {kind: "insert", it: it(0, 9, 3)},
			{kind: "popbelow", h: 1<<64 - 1, it: it(0, 9, 3), ok: true}, {kind: "popbelow", h: 1<<64 - 1, ok: false},
		}, []overflow.Item{it(1<<64-1, 1, 2), it(1<<64-1, 2, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := overflow.New()
			for _, o := range tc.ops {
				switch o.kind {
				case "insert":
					tr.Insert(o.it)
				case "delete":
					if got := tr.Delete(o.it); got != o.ok {
						t.Fatalf("Delete(%+v) = %v, want %v", o.it, got, o.ok)
					}
				case "popbelow":
					got, ok := tr.PopBelow(o.h)
					if ok != o.ok || (ok && got != o.it) {
						t.Fatalf("PopBelow(%d) = %+v %v, want %+v %v", o.h, got, ok, o.it, o.ok)
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
		tr.Insert(overflow.Item{Height: k, Seq: k})
	}
	n := 0
	tr.Ascend(func(overflow.Item) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("Ascend visited %d items after returning false at 3", n)
	}
}

func TestTreeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := overflow.New()
	var model []overflow.Item
	less := func(a, b overflow.Item) bool {
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
			it := overflow.Item{Height: rng.Uint64N(50), Seq: seq, Node: uint32(seq)}
			tr.Insert(it)
			model = append(model, it)
			sort.Slice(model, func(i, j int) bool { return less(model[i], model[j]) })
		case r < 8 && len(model) > 0:
			k := rng.IntN(len(model))
			if !tr.Delete(model[k]) {
				t.Fatalf("Delete of a present item failed")
			}
			model = slices.Delete(model, k, k+1)
		default:
			h := rng.Uint64N(50)
			it, ok := tr.PopBelow(h)
			wantOK := len(model) > 0 && model[0].Height < h
			if ok != wantOK || (ok && it != model[0]) {
				t.Fatalf("PopBelow(%d) = %+v %v", h, it, ok)
			}
			if ok {
				model = model[1:]
			}
		}
		if tr.Len() != len(model) {
			t.Fatalf("Len %d, want %d", tr.Len(), len(model))
		}
	}
	if got := items(tr); !slices.Equal(got, model) {
		t.Fatalf("items differ from model")
	}
}
