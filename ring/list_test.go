package ring

import (
	"slices"
	"testing"
)

func TestList(t *testing.T) {
	type op struct {
		kind string // push, remove, pop, append
		node int    // index into the nodes made for the test (push, remove)
		want int    // pop: expected node, -1 for Nil
		m    []int  // append: nodes pushed to a second list first
	}
	tests := []struct {
		name string
		ops  []op
		want []int
	}{
		{"empty", nil, nil},
		{"push", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "push", node: 2}}, []int{0, 1, 2}},
		{"remove head", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "remove", node: 0}}, []int{1}},
		{"remove tail", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "remove", node: 1}}, []int{0}},
		{"remove middle", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "push", node: 2}, {kind: "remove", node: 1}}, []int{0, 2}},
		{"remove only", []op{{kind: "push", node: 0}, {kind: "remove", node: 0}}, nil},
		{"remove then push again", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "remove", node: 0}, {kind: "push", node: 0}}, []int{1, 0}},
		{"pop empty", []op{{kind: "pop", want: -1}}, nil},
		{"pop order", []op{{kind: "push", node: 3}, {kind: "push", node: 1}, {kind: "pop", want: 3}, {kind: "push", node: 2}, {kind: "pop", want: 1}}, []int{2}},
		{"pop all", []op{{kind: "push", node: 0}, {kind: "pop", want: 0}, {kind: "pop", want: -1}}, nil},
		{"append to empty", []op{{kind: "append", m: []int{0, 1}}}, []int{0, 1}},
		{"append empty", []op{{kind: "push", node: 0}, {kind: "append"}}, []int{0}},
		{"append", []op{{kind: "push", node: 0}, {kind: "push", node: 1}, {kind: "append", m: []int{2, 3}}}, []int{0, 1, 2, 3}},
		{"append then remove joint", []op{{kind: "push", node: 0}, {kind: "append", m: []int{1, 2}}, {kind: "remove", node: 0}, {kind: "remove", node: 1}}, []int{2}},
		{"append then push", []op{{kind: "append", m: []int{1}}, {kind: "push", node: 0}}, []int{1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewArena()
			nodes := make([]uint32, 4)
			byIdx := map[uint32]int{}
			for k := range nodes {
				nodes[k] = a.Alloc()
				byIdx[nodes[k]] = k
			}
			var l List
			for _, o := range tc.ops {
				switch o.kind {
				case "push":
					l.PushBack(a, nodes[o.node])
				case "remove":
					l.Remove(a, nodes[o.node])
					if n := a.At(nodes[o.node]); n.next != Nil || n.prev != Nil {
						t.Fatalf("removed node keeps links %+v", *n)
					}
				case "pop":
					got := l.PopFront(a)
					want := Nil
					if o.want >= 0 {
						want = nodes[o.want]
					}
					if got != want {
						t.Fatalf("PopFront = %d, want %d", got, want)
					}
				case "append":
					var m List
					for _, k := range o.m {
						m.PushBack(a, nodes[k])
					}
					l.Append(a, &m)
					if m != (List{}) {
						t.Fatalf("Append left the source non-empty: %+v", m)
					}
				}
				checkList(t, a, &l)
			}
			var got []int
			for _, i := range checkList(t, a, &l) {
				got = append(got, byIdx[i])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("list %v, want %v", got, tc.want)
			}
		})
	}
}

// TestListRandom checks the list against a slice under random operations.
func TestListRandom(t *testing.T) {
	a := NewArena()
	var l, m List
	var model, mModel []uint32
	free := []uint32{}
	for k := 0; k < 64; k++ {
		free = append(free, a.Alloc())
	}
	x := uint64(1)
	rnd := func(n int) int { x = x*6364136223846793005 + 1442695040888963407; return int((x >> 33) % uint64(n)) }
	for step := 0; step < 20000; step++ {
		switch r := rnd(10); {
		case r < 4 && len(free) > 0:
			i := free[len(free)-1]
			free = free[:len(free)-1]
			if rnd(3) == 0 {
				m.PushBack(a, i)
				mModel = append(mModel, i)
			} else {
				l.PushBack(a, i)
				model = append(model, i)
			}
		case r < 6 && len(model) > 0:
			k := rnd(len(model))
			l.Remove(a, model[k])
			free = append(free, model[k])
			model = slices.Delete(model, k, k+1)
		case r < 8:
			i := l.PopFront(a)
			if len(model) == 0 {
				if i != Nil {
					t.Fatalf("PopFront of empty list = %d", i)
				}
				break
			}
			if i != model[0] {
				t.Fatalf("PopFront = %d, want %d", i, model[0])
			}
			model = model[1:]
			free = append(free, i)
		default:
			l.Append(a, &m)
			model = append(model, mModel...)
			mModel = nil
		}
		if got := checkList(t, a, &l); !slices.Equal(got, model) {
			t.Fatalf("step %d: list %v, want %v", step, got, model)
		}
		if got := checkList(t, a, &m); !slices.Equal(got, mModel) {
			t.Fatalf("step %d: second list %v, want %v", step, got, mModel)
		}
	}
}
