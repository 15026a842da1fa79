package ring

import (
	"slices"
	"testing"
)

func TestNewRingSizes(t *testing.T) {
	tests := []struct {
		size uint64
		ok   bool
	}{
		{0, false}, {1, true}, {2, true}, {3, false}, {4, true}, {6, false},
		{1 << 20, true}, {1<<20 + 1, false}, {1 << 24, true}, {1 << 25, false}, {1 << 63, false},
	}
	for _, tc := range tests {
		if tc.size > 1<<20 && tc.ok {
			continue // valid, but too big to allocate in a unit test
		}
		r, err := New(tc.size)
		if (err == nil) != tc.ok {
			t.Errorf("New(%d): err %v, want ok=%v", tc.size, err, tc.ok)
			continue
		}
		if err == nil && r.Size() != tc.size {
			t.Errorf("New(%d).Size() = %d", tc.size, r.Size())
		}
	}
}

func TestRing(t *testing.T) {
	type timer struct{ h, seq uint64 }
	type op struct {
		kind string // push, remove, take
		t    timer  // push, remove
		h    uint64 // take
		want []uint64
	}
	tests := []struct {
		name string
		size uint64
		ops  []op
		len  int
	}{
		{"take empty", 4, []op{{kind: "take", h: 3}}, 0},
		{"fifo in one bucket", 4, []op{
			{kind: "push", t: timer{5, 1}}, {kind: "push", t: timer{5, 2}}, {kind: "push", t: timer{6, 3}}, {kind: "push", t: timer{5, 4}},
			{kind: "take", h: 5, want: []uint64{1, 2, 4}}, {kind: "take", h: 5}, {kind: "take", h: 6, want: []uint64{3}},
		}, 0},
		{"bucket is height mod size", 4, []op{
			{kind: "push", t: timer{9, 1}}, {kind: "take", h: 1, want: []uint64{1}},
		}, 0},
		{"remove", 8, []op{
			{kind: "push", t: timer{3, 1}}, {kind: "push", t: timer{3, 2}}, {kind: "push", t: timer{3, 3}},
			{kind: "remove", t: timer{3, 2}}, {kind: "take", h: 3, want: []uint64{1, 3}},
		}, 0},
		{"len counts all buckets", 2, []op{
			{kind: "push", t: timer{0, 1}}, {kind: "push", t: timer{1, 2}}, {kind: "push", t: timer{1, 3}},
		}, 3},
		{"size one", 1, []op{
			{kind: "push", t: timer{7, 1}}, {kind: "push", t: timer{7, 2}}, {kind: "remove", t: timer{7, 1}},
			{kind: "take", h: 7, want: []uint64{2}},
		}, 0},
		{"top heights", 4, []op{
			{kind: "push", t: timer{1<<64 - 1, 1}}, {kind: "push", t: timer{1<<64 - 2, 2}},
			{kind: "take", h: 1<<64 - 1, want: []uint64{1}}, {kind: "take", h: 1<<64 - 2, want: []uint64{2}},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewArena()
			r, err := New(tc.size)
			if err != nil {
				t.Fatal(err)
			}
			nodes := map[timer]uint32{}
			for _, o := range tc.ops {
				switch o.kind {
				case "push":
					i := a.Alloc()
					a.At(i).Height, a.At(i).Seq = o.t.h, o.t.seq
					nodes[o.t] = i
					r.Push(a, i)
				case "remove":
					r.Remove(a, nodes[o.t])
				case "take":
					before := r.Len()
					l := r.Take(o.h)
					var got []uint64
					for _, i := range checkList(t, a, &l) {
						if a.At(i).Height%tc.size != o.h%tc.size {
							t.Fatalf("Take(%d) returned a node of height %d from another bucket", o.h, a.At(i).Height)
						}
						got = append(got, a.At(i).Seq)
					}
					if !slices.Equal(got, o.want) {
						t.Fatalf("Take(%d) = %v, want %v", o.h, got, o.want)
					}
					if r.Len() != before-len(got) {
						t.Fatalf("Len after Take = %d, want %d", r.Len(), before-len(got))
					}
					if b := r.Bucket(o.h); *b != (List{}) {
						t.Fatalf("bucket not empty after Take: %+v", *b)
					}
				}
			}
			if r.Len() != tc.len {
				t.Fatalf("Len = %d, want %d", r.Len(), tc.len)
			}
		})
	}
}
