package scratch

import "testing"

// use appends n bytes to what Take returns and gives it back.
func use(s *Buf, n int) {
	b := s.Take()
	for range n {
		b = append(b, 1)
	}
	s.Keep(b)
}

func TestKeep(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int // one use each
		after int   // uses of 100 KB after them
		kept  bool  // the room of the largest use still held
	}{
		{"small uses only", []int{100 << 10, 200 << 10}, 200, true},
		{"one large use, next use", []int{64 << 20}, 1, true},
		{"one large use, 100 small ones after", []int{64 << 20}, 100, false},
		{"large uses in turn with small", []int{16 << 20, 100 << 10, 16 << 20, 100 << 10, 16 << 20}, 10, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Buf
			largest := 0
			for _, n := range tc.sizes {
				use(&s, n)
				largest = max(largest, n)
			}
			for range tc.after {
				use(&s, 100<<10)
			}
			if kept := cap(s.b) >= largest; kept != tc.kept {
				t.Fatalf("room %d after uses %v and %d of 100 KB: kept the largest (%d) %v, want %v", cap(s.b), tc.sizes, tc.after, largest, kept, tc.kept)
			}
			if last := s.Last(); len(last) != 100<<10 && tc.after > 0 {
				t.Fatalf("Last holds %d bytes, want the last use's %d", len(last), 100<<10)
			}
			if len(s.Take()) != 0 {
				t.Fatal("Take returned a non-empty buffer")
			}
		})
	}
}

// TestSteadyUsesAllocateNothing: uses of sizes that vary below the
// high-water mark reuse the room, however large.
func TestSteadyUsesAllocateNothing(t *testing.T) {
	var s Buf
	use(&s, 8<<20)
	k := 0
	allocs := testing.AllocsPerRun(200, func() {
		k++
		b := s.Take()
		b = append(b, make([]byte, (4+k%5)<<20)...)
		s.Keep(b)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations a use", allocs)
	}
}
