package epoch_test

import (
	"slices"
	"testing"

	"github.com/timerlane/timerlane/epoch"
	"github.com/timerlane/timerlane/ring"
)

func TestNewBounds(t *testing.T) {
	tests := []struct {
		length, count uint64
		ok            bool
	}{
		{0, 1, false}, {1, 0, false}, {1, 1, true}, {7, 3, true},
		{1 << 63, 1, true}, {1, 1 << 20, true}, {1, 1<<20 + 1, false},
	}
	for _, tc := range tests {
		s, err := epoch.New(tc.length, tc.count)
		if (err == nil) != tc.ok {
			t.Errorf("New(%d, %d): err %v, want ok=%v", tc.length, tc.count, err, tc.ok)
			continue
		}
		if err == nil && (s.Length() != tc.length || s.Count() != tc.count || s.Len() != 0) {
			t.Errorf("New(%d, %d): Length %d Count %d Len %d", tc.length, tc.count, s.Length(), s.Count(), s.Len())
		}
	}
}

func TestOf(t *testing.T) {
	tests := []struct {
		length, h, want uint64
	}{
		{1, 0, 0}, {1, 5, 5}, {4, 3, 0}, {4, 4, 1}, {4, 7, 1}, {3, 9, 3},
		{1024, 1<<64 - 1, (1<<64 - 1) / 1024}, {1, 1<<64 - 1, 1<<64 - 1},
	}
	for _, tc := range tests {
		s, err := epoch.New(tc.length, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Of(tc.h); got != tc.want {
			t.Errorf("length %d: Of(%d) = %d, want %d", tc.length, tc.h, got, tc.want)
		}
	}
}

func TestSlabs(t *testing.T) {
	type timer struct{ h, seq uint64 }
	type op struct {
		kind string // push, remove, take, empty
		t    timer
		e    uint64   // take, empty
		want []uint64 // take: seqs; empty: nil for true, non-nil for false
	}
	tests := []struct {
		name          string
		length, count uint64
		ops           []op
		len           int
	}{
		{"one epoch keeps insertion order across its heights", 4, 2, []op{
			{kind: "push", t: timer{9, 1}}, {kind: "push", t: timer{8, 2}}, {kind: "push", t: timer{11, 3}}, {kind: "push", t: timer{9, 4}},
			{kind: "empty", e: 2, want: []uint64{}}, {kind: "empty", e: 1},
			{kind: "take", e: 2, want: []uint64{1, 2, 3, 4}}, {kind: "empty", e: 2},
		}, 0},
		{"epochs apart", 2, 3, []op{
			{kind: "push", t: timer{2, 1}}, {kind: "push", t: timer{5, 2}}, {kind: "push", t: timer{3, 3}},
			{kind: "take", e: 2, want: []uint64{2}}, {kind: "take", e: 1, want: []uint64{1, 3}},
		}, 0},
		{"bucket is epoch mod count", 1, 2, []op{
			{kind: "push", t: timer{7, 1}}, {kind: "empty", e: 1, want: []uint64{}}, {kind: "take", e: 3, want: []uint64{1}},
		}, 0},
		{"remove", 10, 1, []op{
			{kind: "push", t: timer{10, 1}}, {kind: "push", t: timer{15, 2}}, {kind: "push", t: timer{19, 3}},
			{kind: "remove", t: timer{10, 1}}, {kind: "remove", t: timer{19, 3}},
			{kind: "take", e: 1, want: []uint64{2}},
		}, 0},
		{"len", 3, 4, []op{
			{kind: "push", t: timer{0, 1}}, {kind: "push", t: timer{3, 2}}, {kind: "push", t: timer{11, 3}}, {kind: "remove", t: timer{3, 2}},
		}, 2},
		{"top epoch", 1 << 62, 4, []op{
			{kind: "push", t: timer{1<<64 - 1, 1}}, {kind: "push", t: timer{3 << 62, 2}},
			{kind: "take", e: 3, want: []uint64{1, 2}},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ring.NewArena()
			s, err := epoch.New(tc.length, tc.count)
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
					s.Push(a, i)
				case "remove":
					s.Remove(a, nodes[o.t])
				case "empty":
					if got := s.Empty(o.e); got != (o.want == nil) {
						t.Fatalf("Empty(%d) = %v", o.e, got)
					}
				case "take":
					before := s.Len()
					l := s.Take(o.e)
					var got []uint64
					for i := l.Head; i != ring.Nil; i = a.Next(i) {
						got = append(got, a.At(i).Seq)
					}
					if !slices.Equal(got, o.want) || l.Len != len(got) {
						t.Fatalf("Take(%d) = %v (Len %d), want %v", o.e, got, l.Len, o.want)
					}
					if s.Len() != before-len(got) {
						t.Fatalf("Len after Take = %d, want %d", s.Len(), before-len(got))
					}
					if !s.Empty(o.e) || s.Bucket(o.e).Len != 0 {
						t.Fatalf("bucket %d not empty after Take", o.e)
					}
				}
			}
			if s.Len() != tc.len {
				t.Fatalf("Len = %d, want %d", s.Len(), tc.len)
			}
		})
	}
}
