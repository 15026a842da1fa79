package merkle

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

func keyOf(b ...byte) (k [32]byte) {
	copy(k[:], b)
	return k
}

// keyBit is the key with only bit i set.
func keyBit(i int) (k [32]byte) {
	k[i/8] = 0x80 >> (i % 8)
	return k
}

func TestEmptyTree(t *testing.T) {
	var tr Tree // the zero Tree is usable
	if tr.Root() != ([32]byte{}) || tr.Len() != 0 || tr.Hashes() != 0 {
		t.Fatalf("empty tree: root %x, len %d, hashes %d", tr.Root(), tr.Len(), tr.Hashes())
	}
	if _, ok := tr.Get(keyOf(1)); ok {
		t.Fatal("Get on the empty tree found a key")
	}
	if tr.Delete(keyOf(1)) {
		t.Fatal("Delete on the empty tree found a key")
	}
	tr.Set(keyOf(1), keyOf(2))
	if !tr.Delete(keyOf(1)) || tr.Root() != ([32]byte{}) || tr.Len() != 0 {
		t.Fatalf("after insert and delete: root %x, len %d", tr.Root(), tr.Len())
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
}

// TestShapes checks small trees against roots written out by hand from the
// hashing rules.
func TestShapes(t *testing.T) {
	v1, v2, v3 := keyOf(0xa1), keyOf(0xa2), keyOf(0xa3)
	last := keyBit(255) // 00…01
	tests := []struct {
		name string
		kvs  []kv
		want [32]byte
	}{
		{"empty", nil, [32]byte{}},
		{"one leaf", []kv{{keyOf(0x42), v1}}, LeafHash(keyOf(0x42), v1)},
		{"split at bit 0", []kv{{keyBit(0), v1}, {keyOf(), v2}},
			InnerHash(0, LeafHash(keyOf(), v2), LeafHash(keyBit(0), v1))},
		{"split at bit 255", []kv{{last, v1}, {keyOf(), v2}},
			InnerHash(255, LeafHash(keyOf(), v2), LeafHash(last, v1))},
		{"split at bit 9", []kv{{keyOf(0xff, 0x40), v1}, {keyOf(0xff, 0x00), v2}},
			InnerHash(9, LeafHash(keyOf(0xff, 0x00), v2), LeafHash(keyOf(0xff, 0x40), v1))},
		{"three, nested", []kv{{keyBit(0), v1}, {keyOf(), v2}, {last, v3}},
			InnerHash(0, InnerHash(255, LeafHash(keyOf(), v2), LeafHash(last, v3)), LeafHash(keyBit(0), v1))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]int{nil, {-1}} { // forwards and backwards
				tr := New()
				for i := range tc.kvs {
					j := i
					if order != nil {
						j = len(tc.kvs) - 1 - i
					}
					tr.Set(tc.kvs[j].k, tc.kvs[j].v)
				}
				if got := tr.Root(); got != tc.want {
					t.Fatalf("root %x, want %x", got, tc.want)
				}
				m := map[[32]byte][32]byte{}
				for _, p := range tc.kvs {
					m[p.k] = p.v
				}
				if ref := refRoot(m); ref != tc.want {
					t.Fatalf("reference root %x, want %x", ref, tc.want)
				}
			}
		})
	}
}

// TestAgainstReference applies thousands of random operations, mostly on
// keys that collide and share long prefixes, and compares the tree with a
// map and the reference root after every one.
func TestAgainstReference(t *testing.T) {
	seeds, steps := 12, 2000
	if testing.Short() {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 1))
		g := newKeyGen(rng)
		tr := New()
		m := map[[32]byte][32]byte{}
		var present [][32]byte
		for step := range steps {
			var k, v [32]byte
			op := rng.IntN(10)
			switch {
			case op < 5: // set a (likely new) key
				k, v = g.key(), randKey(rng)
			case op < 7 && len(m) > 0: // change or rewrite a present key
				k = present[rng.IntN(len(present))]
				v = m[k]
				if rng.IntN(3) > 0 {
					v = randKey(rng)
				}
			default: // delete, present or not
				k = g.key()
				if rng.IntN(2) == 0 && len(m) > 0 {
					k = present[rng.IntN(len(present))]
				}
				_, had := m[k]
				if tr.Delete(k) != had {
					t.Fatalf("seed %d step %d: Delete = %v, want %v", seed, step, !had, had)
				}
				delete(m, k)
			}
			if op < 7 && (op < 5 || len(m) > 0) {
				if _, had := m[k]; !had {
					present = append(present, k)
				}
				tr.Set(k, v)
				m[k] = v
			}
			if rng.IntN(4) > 0 { // sometimes let changes pile up
				if got, want := tr.Root(), refRoot(m); got != want {
					t.Fatalf("seed %d step %d: root %x, reference %x", seed, step, got, want)
				}
			}
			if tr.Len() != len(m) {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, tr.Len(), len(m))
			}
			if step%50 == 0 {
				if err := tr.check(); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				for _, k := range present {
					got, ok := tr.Get(k)
					want, had := m[k]
					if ok != had || got != want {
						t.Fatalf("seed %d step %d: Get(%x) = %x %v, want %x %v", seed, step, k[:4], got[:4], ok, want[:4], had)
					}
				}
			}
		}
		if got, want := tr.Root(), refRoot(m); got != want {
			t.Fatalf("seed %d: final root %x, reference %x", seed, got, want)
		}
	}
}

// TestHistoryIndependence builds the same final set many ways (shuffled
// insertion orders, extra keys inserted then deleted, values changed and
// changed back, keys deleted and re-inserted, Root called at random points
// or never) and checks that they all reach the same root.
func TestHistoryIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	g := newKeyGen(rng)
	final := map[[32]byte][32]byte{}
	for len(final) < 300 {
		final[g.key()] = randKey(rng)
	}
	var keys [][32]byte
	for k := range final {
		keys = append(keys, k)
	}
	want := refRoot(final)
	for way := range 50 {
		tr := New()
		order := rng.Perm(len(keys))
		var extra [][32]byte
		for _, i := range order {
			k := keys[i]
			switch rng.IntN(6) {
			case 0: // an extra key, removed at the end
				x := g.key()
				if _, in := final[x]; !in {
					tr.Set(x, randKey(rng))
					extra = append(extra, x)
				}
			case 1: // another value first
				tr.Set(k, randKey(rng))
			case 2: // inserted, deleted, inserted later below
				tr.Set(k, final[k])
				tr.Delete(k)
			}
			tr.Set(k, final[k])
			if rng.IntN(20) == 0 {
				tr.Root()
			}
		}
		for _, x := range extra {
			tr.Delete(x)
		}
		if way%2 == 1 { // a snapshot restored: a fresh tree from the set
			tr = New()
			for _, i := range rng.Perm(len(keys)) {
				tr.Set(keys[i], final[keys[i]])
			}
		}
		if got := tr.Root(); got != want {
			t.Fatalf("way %d: root %x, want %x", way, got, want)
		}
		if err := tr.check(); err != nil {
			t.Fatalf("way %d: %v", way, err)
		}
	}
}

// bound is the number of distinct nodes of the tree that must be rehashed
// after the keys in changed were set (to a new value) or deleted, counted
// from the tree's current shape, independently of its stale flags: every
// node on the search path of a changed key whose subtree contains (or
// contained) the key, that is, which branches before the first bit where
// the key differs from the leaf the search ends at, plus that leaf if it
// is the key's.
func (t *Tree) bound(changed [][32]byte) int {
	seen := map[ref]bool{}
	for _, k := range changed {
		if t.root == 0 {
			break
		}
		r := t.root
		for r&leafBit == 0 {
			n := t.inner(r)
			r = n.child[bitAt(&k, n.bit)]
		}
		cpl, differ := firstDiff(&k, &t.leaf(r).key)
		r = t.root
		for r&leafBit == 0 {
			n := t.inner(r)
			if differ && n.bit >= cpl {
				break
			}
			seen[r] = true
			r = n.child[bitAt(&k, n.bit)]
		}
		if !differ {
			seen[r] = true
		}
	}
	return len(seen)
}

// TestHashesMatchBound checks that Root computes exactly one Keccak-256 per
// node that must be rehashed: for batches of updates, inserts and deletes
// of distinct keys, and for a key set many times before one Root.
func TestHashesMatchBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr, keys := randTree(rng, 20000)
	tr.Root()
	for _, batch := range []int{1, 10, 100, 1000} {
		for _, mix := range []string{"update", "insert", "delete", "churn"} {
			var changed [][32]byte
			used := map[[32]byte]bool{}
			pick := func() [32]byte {
				for {
					i := rng.IntN(len(keys))
					if k := keys[i]; !used[k] {
						used[k] = true
						keys[i] = keys[len(keys)-1]
						keys = keys[:len(keys)-1]
						return k
					}
				}
			}
			for i := range batch {
				k, v := [32]byte{}, randKey(rng)
				switch {
				case mix == "update":
					k = pick()
					keys = append(keys, k)
					tr.Set(k, v)
					tr.Set(k, randKey(rng)) // twice: still one hash
					tr.Set(k, v)
				case mix == "insert" || (mix == "churn" && i%2 == 0):
					k = randKey(rng)
					keys = append(keys, k)
					tr.Set(k, v)
				default:
					k = pick()
					tr.Delete(k)
				}
				changed = append(changed, k)
			}
			if err := tr.check(); err != nil {
				t.Fatalf("%d %s: %v", batch, mix, err)
			}
			want := tr.bound(changed)
			h := tr.Hashes()
			tr.Root()
			if got := tr.Hashes() - h; got != uint64(want) {
				t.Errorf("%d %s: %d hashes, bound %d", batch, mix, got, want)
			}
		}
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
	h := tr.Hashes()
	tr.Root()
	k := keys[0]
	v, _ := tr.Get(k)
	tr.Set(k, v) // the same value: nothing to rehash
	tr.Root()
	if tr.Hashes() != h {
		t.Errorf("Root with nothing changed hashed %d times", tr.Hashes()-h)
	}
}

func TestClone(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tr := New()
	for range 5000 {
		tr.Set(randKey(rng), randKey(rng))
	}
	k := randKey(rng)
	tr.Set(k, keyOf(1)) // stale when cloned
	c := tr.Clone()
	r := tr.Root()
	if c.Root() != r || c.Len() != tr.Len() {
		t.Fatal("clone differs")
	}
	c.Set(k, keyOf(2))
	c.Delete(randKey(rng))
	for range 100 {
		c.Set(randKey(rng), randKey(rng))
	}
	if tr.Root() != r {
		t.Fatal("changing the clone changed the original")
	}
	c.Set(k, keyOf(1))
	tr.Set(randKey(rng), keyOf(3))
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(k); v != keyOf(1) {
		t.Fatal("clone lost a value")
	}
}

// TestNoAllocations: in steady state (slabs grown, free lists stocked) Set,
// Delete, Get, Root, ProveInto with a reused proof and Verify allocate
// nothing.
func TestNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	tr, keys := randTree(rng, 10000)
	tr.Root()
	i := 0
	var p Proof
	tr.ProveInto(keys[0], &p)
	tests := []struct {
		name string
		f    func()
	}{
		{"Set (update)", func() { i++; tr.Set(keys[i%len(keys)], keyOf(byte(i))) }},
		{"Delete+Set", func() { i++; k := keys[i%len(keys)]; tr.Delete(k); tr.Set(k, keyOf(byte(i))) }},
		{"Set+Root", func() { i++; tr.Set(keys[i%len(keys)], keyOf(byte(i))); tr.Root() }},
		{"Get", func() { i++; tr.Get(keys[i%len(keys)]) }},
		{"ProveInto", func() { i++; tr.ProveInto(keys[i%len(keys)], &p) }},
		{"Verify", func() {
			v, _ := tr.Get(keys[0])
			tr.ProveInto(keys[0], &p)
			if err := Verify(tr.Root(), keys[0], &v, p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		if a := testing.AllocsPerRun(1000, tc.f); a != 0 {
			t.Errorf("%s: %v allocations per run", tc.name, a)
		}
	}
}

// TestRootHalvesAllocateNothing: a Root that hashes a half on a worker
// allocates nothing (a goroutine per Root allocated its closure). Counted
// with MemStats: AllocsPerRun runs on one P, where Root hashes alone.
func TestRootHalvesAllocateNothing(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("Root hashes on one goroutine with GOMAXPROCS 1")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	tr, keys := randTree(rng, 10000)
	batch := func(round int) {
		for k, key := range keys[:1000] {
			tr.Set(key, keyOf(byte(round+k)))
		}
		if tr.staleSlots < parallelMin {
			t.Fatalf("%d stale slots: too few for the halves", tr.staleSlots)
		}
		tr.Root()
	}
	batch(0) // starts the workers
	// MemStats counts the whole process: a collection that starts in the
	// window can start its mark workers then, as it did twice in 50 Roots
	// under CI's go test ./... (session 45). A goroutine per Root, as
	// before, allocated at least one object each.
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for r := 1; r <= 50; r++ {
		batch(r)
	}
	runtime.ReadMemStats(&m1)
	if n := m1.Mallocs - m0.Mallocs; n > 5 {
		t.Errorf("%d allocations over 50 Roots that hash their halves apart, want at most 5", n)
	}
}

// TestRootHalves: a batch large enough for Root to hash the root's two
// subtrees on two goroutines gives the root, and makes the number of
// hashes, of one goroutine (a Clone, which starts with no count of stale
// slots, hashes on one).
func TestRootHalves(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tr := New()
	var keys [][32]byte
	for batch := range 4 {
		for range 6000 {
			k := randKey(r)
			if len(keys) > 0 && r.IntN(3) == 0 { // change or delete one already in
				k = keys[r.IntN(len(keys))]
				if r.IntN(2) == 0 {
					tr.Delete(k)
					continue
				}
			}
			keys = append(keys, k)
			tr.Set(k, randKey(r))
		}
		if tr.staleSlots < parallelMin {
			t.Fatalf("batch %d: %d stale slots, too few to test the halves", batch, tr.staleSlots)
		}
		one := tr.Clone()
		h := tr.Hashes()
		got, want := tr.Root(), one.Root()
		if got != want || got != tr.fullRoot() {
			t.Fatalf("batch %d: root %x, on one goroutine %x", batch, got, want)
		}
		if tr.Hashes()-h != one.Hashes() {
			t.Fatalf("batch %d: %d hashes, on one goroutine %d", batch, tr.Hashes()-h, one.Hashes())
		}
	}
}
