package ring

import "testing"

// checkList verifies the links of l: forward and backward walks agree, the
// length matches and the ends are right. It returns the nodes in order.
func checkList(t *testing.T, a *Arena, l *List) []uint32 {
	t.Helper()
	var fwd []uint32
	prev := Nil
	for i := l.Head; i != Nil; i = a.At(i).next {
		if a.At(i).prev != prev {
			t.Fatalf("node %d: prev %d, want %d", i, a.At(i).prev, prev)
		}
		fwd = append(fwd, i)
		prev = i
		if len(fwd) > l.Len+1 {
			t.Fatalf("list longer than Len %d (cycle?)", l.Len)
		}
	}
	if prev != l.Tail {
		t.Fatalf("tail %d, want %d", l.Tail, prev)
	}
	if len(fwd) != l.Len {
		t.Fatalf("Len %d, walked %d nodes", l.Len, len(fwd))
	}
	return fwd
}

func TestArenaAlloc(t *testing.T) {
	tests := []struct {
		name  string
		ops   []int // > 0: alloc (the value is ignored); < 0: free the -op'th allocated index (1-based)
		want  []uint32
		live  int
		bytes int
	}{
		{"first index is 1", []int{1}, []uint32{1}, 1, 4096 * 24},
		{"sequential", []int{1, 1, 1}, []uint32{1, 2, 3}, 3, 4096 * 24},
		{"free then reuse", []int{1, 1, -1, 1}, []uint32{1, 2, 1}, 2, 4096 * 24},
		{"reuse is LIFO", []int{1, 1, 1, -1, -3, 1, 1, 1}, []uint32{1, 2, 3, 3, 1, 4}, 4, 4096 * 24},
		{"free all", []int{1, 1, -2, -1}, []uint32{1, 2}, 0, 4096 * 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewArena()
			var got []uint32
			for _, op := range tc.ops {
				if op > 0 {
					i := a.Alloc()
					if *a.At(i) != (Node{}) {
						t.Fatalf("Alloc returned non-zero node %d: %+v", i, *a.At(i))
					}
					a.At(i).Height, a.At(i).Seq = 99, 77 // dirty it
					got = append(got, i)
				} else {
					a.Free(got[-op-1])
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k := range got {
				if got[k] != tc.want[k] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			if a.Live() != tc.live {
				t.Errorf("Live = %d, want %d", a.Live(), tc.live)
			}
			if a.Bytes() != tc.bytes {
				t.Errorf("Bytes = %d, want %d", a.Bytes(), tc.bytes)
			}
		})
	}
}

func TestArenaGrowthKeepsNodes(t *testing.T) {
	a := NewArena()
	const n = 3*4096 + 17
	first := a.At(a.Alloc())
	first.Height = 12345
	for i := 1; i < n; i++ {
		j := a.Alloc()
		if j != uint32(i+1) {
			t.Fatalf("alloc %d returned %d", i, j)
		}
		a.At(j).Height = uint64(j)
	}
	if first.Height != 12345 || a.At(1) != first {
		t.Fatalf("growing the arena moved node 1")
	}
	for j := uint32(2); j <= n; j++ {
		if a.At(j).Height != uint64(j) {
			t.Fatalf("node %d lost its height", j)
		}
	}
	if a.Bytes() != 4*4096*24 || a.Live() != n {
		t.Fatalf("Bytes %d Live %d", a.Bytes(), a.Live())
	}
	// Freed nodes come back zeroed and before any new slot.
	for j := uint32(1); j <= n; j++ {
		a.Free(j)
	}
	seen := map[uint32]bool{}
	for k := 0; k < n; k++ {
		j := a.Alloc()
		if j == Nil || j > n || seen[j] {
			t.Fatalf("realloc %d returned %d", k, j)
		}
		if *a.At(j) != (Node{}) {
			t.Fatalf("reused node %d not zeroed", j)
		}
		seen[j] = true
	}
	if a.Bytes() != 4*4096*24 {
		t.Fatalf("reuse grew the arena: %d bytes", a.Bytes())
	}
}
