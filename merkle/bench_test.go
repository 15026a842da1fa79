package merkle

import (
	"bufio"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

const benchN = 1_000_000

var (
	benchOnce sync.Once
	benchTree *Tree
	benchKeys [][32]byte // the keys in benchTree, in no order
	benchRng  = rand.New(rand.NewPCG(1, 2))
	benchSeq  uint64
)

// million returns a tree of 1,000,000 random keys, its root computed,
// shared by the benchmarks (which leave it with 1,000,000 keys, listed in
// benchKeys).
func million() *Tree {
	benchOnce.Do(func() {
		benchTree = New()
		benchKeys = make([][32]byte, benchN)
		for i := range benchKeys {
			benchKeys[i] = randKey(benchRng)
			benchTree.Set(benchKeys[i], benchKeys[i])
		}
		benchTree.Root()
	})
	return benchTree
}

// pickDistinct returns n distinct indices below of.
func pickDistinct(n, of int) []int {
	seen := make(map[int]bool, n)
	out := make([]int, 0, n)
	for len(out) < n {
		if i := benchRng.IntN(of); !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

// BenchmarkRoot1000Updates: at 1,000,000 keys, set new values for 1,000
// random keys and compute the root (one op = the batch). Reports the
// Keccak-256 calls per batch against the bound: the distinct nodes on the
// union of the 1,000 root-to-leaf paths, counted from the tree's shape
// (Tree.bound).
func BenchmarkRoot1000Updates(b *testing.B) {
	tr := million()
	changed := make([][32]byte, 1000)
	var idx []int
	benchBatch(b, tr, changed,
		func() {
			idx = pickDistinct(1000, benchN)
			for j, i := range idx {
				changed[j] = benchKeys[i]
			}
		},
		func() {
			for _, k := range changed {
				benchSeq++ // a value never set before: every Set changes
				v := k
				binary.BigEndian.PutUint64(v[:], benchSeq)
				tr.Set(k, v)
			}
		})
}

// BenchmarkRoot1000Churn: at 1,000,000 keys, delete 500 random keys and
// insert 500 new ones (the timers a block fires and schedules), then
// compute the root; the bound counts the nodes on the changed keys' paths
// whose subtree changed (Tree.bound).
func BenchmarkRoot1000Churn(b *testing.B) {
	tr := million()
	changed := make([][32]byte, 1000)
	var idx []int
	benchBatch(b, tr, changed,
		func() {
			idx = pickDistinct(500, benchN)
			for j, i := range idx {
				changed[j] = benchKeys[i]
				changed[500+j] = randKey(benchRng)
				benchKeys[i] = changed[500+j]
			}
		},
		func() {
			for _, k := range changed[:500] {
				tr.Delete(k)
			}
			for _, k := range changed[500:] {
				tr.Set(k, k)
			}
		})
}

// benchBatch times change()+Root per op, prepare() (untimed) having filled
// changed, and reports hashes against the bound, the time in change() and
// in Root, and Root's time against the bound in time: bound hashes done
// back to back in a hot loop (untimed) right after each Root, so under the
// same machine load.
func benchBatch(b *testing.B, tr *Tree, changed [][32]byte, prepare, change func()) {
	b.ReportAllocs()
	var hashes, bound uint64
	var setNs, rootNs, boundNs time.Duration
	kh := newHasher()
	var kl, kr [32]byte
	for b.Loop() {
		b.StopTimer()
		prepare()
		b.StartTimer()
		h := tr.Hashes()
		t0 := time.Now()
		change()
		t1 := time.Now()
		tr.Root()
		setNs += t1.Sub(t0)
		rootNs += time.Since(t1)
		hashes += tr.Hashes() - h
		b.StopTimer()
		nb := tr.bound(changed)
		bound += uint64(nb)
		// the bound in time: as many hashes in a hot loop, now
		t2 := time.Now()
		for range nb {
			kh.inner(3, &kl, &kr, &kl)
		}
		boundNs += time.Since(t2)
		b.StartTimer()
	}
	b.ReportMetric(float64(hashes)/float64(b.N), "keccak/op")
	b.ReportMetric(float64(bound)/float64(b.N), "bound/op")
	b.ReportMetric(float64(hashes)/float64(bound), "keccak/bound")
	b.ReportMetric(float64(setNs)/float64(b.N), "changes-ns/op")
	b.ReportMetric(float64(rootNs)/float64(b.N), "root-ns/op")
	b.ReportMetric(float64(rootNs)/float64(hashes), "root-ns/keccak")
	b.ReportMetric(float64(rootNs)/float64(boundNs), "root/bound-time")
}

// BenchmarkSet: one Set of a new value for a random key at 1,000,000 keys
// (no Root).
func BenchmarkSet(b *testing.B) {
	tr := million()
	idx := pickDistinct(1<<16, benchN)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := benchKeys[idx[i&(1<<16-1)]]
		benchSeq++
		v := k
		binary.BigEndian.PutUint64(v[:], benchSeq)
		tr.Set(k, v)
		i++
	}
	b.StopTimer()
	tr.Root()
}

// BenchmarkGet: one Get of a random present key at 1,000,000 keys.
func BenchmarkGet(b *testing.B) {
	tr := million()
	idx := pickDistinct(1<<16, benchN)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tr.Get(benchKeys[idx[i&(1<<16-1)]])
		i++
	}
}

// BenchmarkProve: ProveInto (reusing the proof) for a random key at
// 1,000,000 keys, half of them absent.
func BenchmarkProve(b *testing.B) {
	tr := million()
	tr.Root()
	idx := pickDistinct(1<<16, benchN)
	b.ReportAllocs()
	var p Proof
	i := 0
	steps := 0
	for b.Loop() {
		k := benchKeys[idx[i&(1<<16-1)]]
		if i&1 == 1 {
			k[31] ^= 1
		}
		tr.ProveInto(k, &p)
		steps += len(p.Path)
		i++
	}
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}

// BenchmarkVerify: Verify of a proof of presence at 1,000,000 keys.
func BenchmarkVerify(b *testing.B) {
	tr := million()
	root := tr.Root()
	const n = 256
	proofs := make([]Proof, n)
	values := make([][32]byte, n)
	keys := make([][32]byte, n)
	for j, i := range pickDistinct(n, benchN) {
		keys[j] = benchKeys[i]
		values[j], _ = tr.Get(keys[j])
		proofs[j] = tr.Prove(keys[j])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % n
		if err := Verify(root, keys[j], &values[j], proofs[j]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// heapPerEntry builds a tree of n random keys (generated on the fly, not
// kept) with its root, and returns the heap bytes it holds per entry and
// the nanoseconds per entry to build it.
func heapPerEntry(n int) (bytes float64, tree *Tree) {
	rng := rand.New(rand.NewPCG(8, 8))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := New()
	for range n {
		k := randKey(rng)
		tr.Set(k, k)
	}
	tr.Root()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tr)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), tr
}

// BenchmarkBuild1M: build a tree of 1,000,000 random keys and compute its
// root (one op); reports the heap bytes held per entry.
func BenchmarkBuild1M(b *testing.B) {
	var perEntry float64
	for b.Loop() {
		perEntry, _ = heapPerEntry(benchN)
	}
	b.ReportMetric(perEntry, "B/entry")
}

// TestBytesPerEntry: at 1,000,000 entries the tree holds at most 150 heap
// bytes per entry (64 per leaf, 76 per internal node, plus slack).
func TestBytesPerEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a tree of 1,000,000 keys")
	}
	perEntry, tr := heapPerEntry(benchN)
	t.Logf("%.1f heap bytes per entry at %d entries", perEntry, tr.Len())
	if perEntry > 150 {
		t.Errorf("%.1f bytes per entry, want at most 150", perEntry)
	}
}

// BenchmarkKeccak: one internal-node hash (a 66-byte Keccak-256), the unit
// of the bound: a batch's Root cannot take less than bound × this.
func BenchmarkKeccak(b *testing.B) {
	h := newHasher()
	var l, r, out [32]byte
	b.ReportAllocs()
	for b.Loop() {
		h.inner(3, &l, &r, &out)
		l[0]++
	}
}

// BenchmarkWriteImage1M: write the image of a tree of 1,000,000 random
// keys (one op) into a buffered writer that keeps nothing: the part of a
// snapshot's encoding that the tree takes.
func BenchmarkWriteImage1M(b *testing.B) {
	_, tr := heapPerEntry(benchN)
	w := bufio.NewWriterSize(io.Discard, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.WriteImage(w); err != nil {
			b.Fatal(err)
		}
	}
}
