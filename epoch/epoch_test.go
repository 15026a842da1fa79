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
		{epoch.MaxLength, 1, true}, {epoch.MaxLength + 1, 1, false}, {1 << 63, 1, false},
		{1, 1 << 20, true}, {1, 1<<20 + 1, false},
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
		{1000, 1<<64 - 1, (1<<64 - 1) / 1000}, {1 << 31, 1<<64 - 1, 1<<33 - 1},
		{1<<31 - 1, 1<<31 - 1, 1}, {1<<31 - 1, 1<<31 - 2, 0},
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

func TestIndex(t *testing.T) {
	tests := []struct {
		count, e, want uint64
	}{
		{1, 0, 0}, {1, 1<<64 - 1, 0}, {2, 5, 1}, {3, 5, 2}, {3, 1<<64 - 1, 0},
		{8192, 8192, 0}, {8192, 1<<64 - 1, 8191}, {1 << 20, 1<<20 + 7, 7},
		{1<<20 - 1, 1<<20 + 7, 8}, {1000, 1<<64 - 1, (1<<64 - 1) % 1000},
	}
	for _, tc := range tests {
		s, err := epoch.New(4, tc.count)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Index(tc.e); got != tc.want {
			t.Errorf("count %d: Index(%d) = %d, want %d", tc.count, tc.e, got, tc.want)
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
		{"top epoch", epoch.MaxLength, 4, []op{ // epoch 2^33-1: 2^64-2^31 .. 2^64-1
			{kind: "push", t: timer{1<<64 - 1, 1}}, {kind: "push", t: timer{1<<64 - epoch.MaxLength, 2}},
			{kind: "take", e: 1<<33 - 1, want: []uint64{1, 2}},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ring.NewChunks()
			s, err := epoch.New(tc.length, tc.count)
			if err != nil {
				t.Fatal(err)
			}
			pos := map[timer]ring.Pos{}
			for _, o := range tc.ops {
				switch o.kind {
				case "push":
					pos[o.t] = s.Push(c, ring.Entry{Height: o.t.h, Seq: o.t.seq})
				case "remove":
					s.Kill(c, o.t.h, pos[o.t], func(ring.Entry, ring.Pos) {})
				case "empty":
					if got := s.Bucket(o.e).Empty(); got != (o.want == nil) {
						t.Fatalf("Empty(%d) = %v", o.e, got)
					}
					if _, occupied := s.NextOccupied(o.e, o.e); occupied == (o.want == nil) {
						t.Fatalf("NextOccupied(%d, %d) = %v", o.e, o.e, occupied)
					}
				case "take":
					before := s.Len()
					if len(o.want) > 0 {
						m := ^uint64(0)
						for t, p := range pos {
							if s.Of(t.h)%tc.count == o.e%tc.count && atSeq(c, p) == t.seq {
								m = min(m, t.h)
							}
						}
						if got := s.MinHeight(c, o.e); got != m {
							t.Fatalf("MinHeight(%d) = %d, want %d", o.e, got, m)
						}
					}
					it := s.Take(o.e)
					var got []uint64
					for x, ok := it.Next(c); ok; x, ok = it.Next(c) {
						got = append(got, x.Seq)
					}
					if !slices.Equal(got, o.want) {
						t.Fatalf("Take(%d) = %v, want %v", o.e, got, o.want)
					}
					if s.Len() != before-len(got) {
						t.Fatalf("Len after Take = %d, want %d", s.Len(), before-len(got))
					}
					if !s.Bucket(o.e).Empty() {
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

func atSeq(c *ring.Chunks, p ring.Pos) uint64 {
	seq, _ := c.At(p)
	return seq
}
