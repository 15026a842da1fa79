package bytepool

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/timerlane/timerlane/internal/slab"
)

// freeRoom is the room of a class's free list once it has one item: a
// slab chunk of 4-byte indices.
const freeRoom = 4 << slab.Shift

func TestClassBoundaries(t *testing.T) {
	tests := []struct {
		n         int
		classSize int
	}{
		{1, 16}, {15, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64},
		{1000, 1024}, {1024, 1024}, {1025, 2048},
		{1<<19 + 1, 1 << 20}, {1<<20 - 1, 1 << 20}, {MaxLen, 1 << 20},
	}
	for _, tc := range tests {
		var p Pool
		ref, buf := p.Alloc(tc.n, 0)
		if ref == 0 {
			t.Errorf("Alloc(%d) returned the empty reference", tc.n)
		}
		if len(buf) != tc.n || cap(buf) != tc.n {
			t.Errorf("Alloc(%d): len %d cap %d", tc.n, len(buf), cap(buf))
		}
		if got := 1 << (classOf(tc.n) + minShift); got != tc.classSize {
			t.Errorf("class of %d has size %d, want %d", tc.n, got, tc.classSize)
		}
		if got := SizeOf(ref); got != tc.classSize {
			t.Errorf("SizeOf(Alloc(%d)) = %d, want %d", tc.n, got, tc.classSize)
		}
		// The pool holds whole chunks of the class, at least one item,
		// an 8-byte tag for each item, and its free list's room (two
		// lists for a class of one-item chunks: free and bare).
		want := max(1, chunkBytes/tc.classSize)*(tc.classSize+8) + freeRoom
		if tc.classSize >= chunkBytes {
			want += freeRoom
		}
		if p.Bytes() != want {
			t.Errorf("Alloc(%d): Bytes %d, want %d", tc.n, p.Bytes(), want)
		}
		// Every byte of the buffer is usable and read back through Get.
		for i := range buf {
			buf[i] = byte(i*7 + tc.n)
		}
		if !bytes.Equal(get(&p, ref, tc.n), buf) {
			t.Errorf("Get(%d) differs from what was written", tc.n)
		}
	}
}

func TestEmptyReference(t *testing.T) {
	var p Pool
	if n := SizeOf(0); n != 0 {
		t.Fatalf("SizeOf(0) = %d", n)
	}
	if b := get(&p, 0, 0); len(b) != 0 {
		t.Fatalf("Get(0, 0) = %q", b)
	}
	r1, _ := p.Alloc(1, 0)
	p.Free(0) // no-op
	p.Free(0)
	r2, b2 := p.Alloc(1, 0)
	if r2 == r1 || r2 == 0 {
		t.Fatalf("after Free(0): Alloc gave %d (first was %d)", r2, r1)
	}
	b2[0] = 1 // a real, writable slot
	if p.Bytes() != chunkBytes/16*(16+8)+freeRoom {
		t.Fatalf("Bytes %d after two small allocations", p.Bytes())
	}
}

// TestFreeHasRoom frees, for the first time, more items than a free list
// held before. Its room was made as the items were handed out, so Free
// never grows it (a push past the room panics): a list grown by append
// copied itself whole when it doubled, milliseconds at 100,000 items.
func TestFreeHasRoom(t *testing.T) {
	for _, n := range []int{16, 4096, 1 << 20} {
		var p Pool
		count := min(100_000, 64<<20/n)
		refs := make([]uint32, count)
		for i := range refs {
			refs[i], _ = p.Alloc(n, 0)
		}
		cl := &p.classes[classOf(n)]
		if cl.free.Cap() < count {
			t.Fatalf("%d-byte items: room for %d free items, %d handed out", n, cl.free.Cap(), count)
		}
		for _, r := range refs {
			p.Free(r)
		}
		if cl.free.Len()+cl.bare.Len() != count || cl.inUse != 0 {
			t.Errorf("%d-byte items: %d free, %d bare, %d in use after freeing %d", n, cl.free.Len(), cl.bare.Len(), cl.inUse, count)
		}
		// Freed items are handed out again, the last freed first (of
		// those a class of one-item chunks kept the memory of).
		want := refs[count-1]
		if top, ok := cl.free.Top(); ok && n >= chunkBytes {
			want = uint32(classOf(n))<<idxBits | (top + 1)
		}
		if r, _ := p.Alloc(n, 0); r != want {
			t.Errorf("%d-byte items: Alloc after Free gave %d, want %d", n, r, want)
		}
	}
}

// TestLargeClassesGiveBack: a class of one-item chunks holds the memory
// of at most max(in use, keepBytes' worth) freed items: after a burst is
// freed the pool is back near its size before it; items handed out again
// keep their contents; and a steady churn below the bound allocates
// nothing.
func TestLargeClassesGiveBack(t *testing.T) {
	for _, n := range []int{chunkBytes, 200_000, MaxLen} {
		var p Pool
		size := 1 << (classOf(n) + minShift)
		hold, _ := p.Alloc(n, 1) // one that stays throughout
		base := p.Bytes()
		burst := 2*keepBytes/size + 8 // past twice the floor
		refs := make([]uint32, burst)
		for i := range refs {
			var buf []byte
			refs[i], buf = p.Alloc(n, uint64(i))
			buf[0], buf[n-1] = byte(i), byte(i+1)
		}
		peak := p.Bytes()
		// Free in halves: while half the burst is in use, the pool
		// keeps at most that many freed items.
		for _, r := range refs[:burst/2] {
			p.Free(r)
		}
		cl := &p.classes[classOf(n)]
		if kept := cl.free.Len(); kept > max(cl.inUse, keepBytes/size) {
			t.Fatalf("%d-byte items: %d freed items kept with %d in use", n, kept, cl.inUse)
		}
		for i, r := range refs[burst/2:] {
			i += burst / 2
			if tag, room := p.Load(r); tag != uint64(i) || room[0] != byte(i) || room[n-1] != byte(i+1) {
				t.Fatalf("%d-byte items: item %d changed while others were given back", n, i)
			}
			p.Free(r)
		}
		floor := keepBytes + burst*8 // and every item's tag stays
		if got := p.Bytes(); got > base+floor {
			t.Errorf("%d-byte items: %d bytes after the burst was freed, want at most %d (%d before it, %d at its peak)", n, got, base+floor, base, peak)
		}
		// Handed out again, whether kept or bare: whole, writable rooms.
		for i := range refs {
			var buf []byte
			refs[i], buf = p.Alloc(n, uint64(i))
			if len(buf) != n {
				t.Fatalf("%d-byte items: Alloc gave %d bytes", n, len(buf))
			}
			buf[0], buf[n-1] = byte(i), byte(i+1)
		}
		for i, r := range refs {
			if tag, room := p.Load(r); tag != uint64(i) || room[0] != byte(i) || room[n-1] != byte(i+1) || len(room) != size {
				t.Fatalf("%d-byte items: item %d does not read back", n, i)
			}
		}
		if p.Bytes() != peak {
			t.Errorf("%d-byte items: %d bytes with the burst back, want %d as at its peak", n, p.Bytes(), peak)
		}
		// Churn: as many freed as handed out, below the bound.
		allocs := testing.AllocsPerRun(100, func() {
			for _, r := range refs[:8] {
				p.Free(r)
			}
			for i := range 8 {
				refs[i], _ = p.Alloc(n, 0)
			}
		})
		if allocs != 0 {
			t.Errorf("%d-byte items: churn allocates %.1f per run", n, allocs)
		}
		if tag, _ := p.Load(hold); tag != 1 {
			t.Errorf("%d-byte items: the item held throughout changed", n)
		}
	}
}

func TestFreeReuse(t *testing.T) {
	tests := []struct {
		name   string
		n, m   int
		reused bool
	}{
		{"same size", 5, 5, true},
		{"same class 1 and 16", 1, 16, true},
		{"same class 17 and 32", 17, 32, true},
		{"16 then 17", 16, 17, false},
		{"17 then 16", 17, 16, false},
		{"largest class", MaxLen, 1<<19 + 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p Pool
			keep, kb := p.Alloc(tc.n, 0) // a neighbour that must not be disturbed
			for i := range kb {
				kb[i] = 0xA5
			}
			ref, _ := p.Alloc(tc.n, 0)
			bytesBefore := p.Bytes()
			p.Free(ref)
			ref2, buf := p.Alloc(tc.m, 0)
			if (ref2 == ref) != tc.reused {
				t.Fatalf("Alloc(%d) after Free of Alloc(%d): ref %d, first %d, want reuse=%v", tc.m, tc.n, ref2, ref, tc.reused)
			}
			if tc.reused && p.Bytes() != bytesBefore {
				t.Fatalf("reuse grew the pool from %d to %d bytes", bytesBefore, p.Bytes())
			}
			for i := range buf {
				buf[i] = 0x5A
			}
			for i, c := range get(&p, keep, tc.n) {
				if c != 0xA5 {
					t.Fatalf("neighbour byte %d overwritten", i)
				}
			}
		})
	}
}

func TestFreeIsLIFO(t *testing.T) {
	var p Pool
	a, _ := p.Alloc(8, 0)
	b, _ := p.Alloc(8, 0)
	c, _ := p.Alloc(8, 0)
	p.Free(a)
	p.Free(c)
	if got, _ := p.Alloc(8, 0); got != c {
		t.Fatalf("first reuse %d, want %d (last freed)", got, c)
	}
	if got, _ := p.Alloc(8, 0); got != a {
		t.Fatalf("second reuse %d, want %d", got, a)
	}
	if got, _ := p.Alloc(8, 0); got == a || got == b || got == c {
		t.Fatalf("new slot %d collides with a live one", got)
	}
}

// TestContentsPreserved allocates, fills, frees and reallocates strings of
// every class at random and checks that no live string ever changes.
func TestContentsPreserved(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var p Pool
	type live struct {
		ref  uint32
		data []byte
		tag  uint64
	}
	var all []live
	liveRefs := map[uint32]bool{}
	sizes := []int{1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 4096, 4097, 70000}
	for step := 0; step < 20000; step++ {
		if len(all) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(all))
			got := get(&p, all[k].ref, len(all[k].data))
			if !bytes.Equal(got, all[k].data) {
				t.Fatalf("step %d: string %d changed", step, all[k].ref)
			}
			tag, room := p.Load(all[k].ref)
			if tag != all[k].tag || !bytes.Equal(room[:len(all[k].data)], all[k].data) || len(room) != 1<<(classOf(len(all[k].data))+minShift) {
				t.Fatalf("step %d: string %d loads tag %#x and %d bytes of room; want %#x and its class's", step, all[k].ref, tag, len(room), all[k].tag)
			}
			p.Free(all[k].ref)
			delete(liveRefs, all[k].ref)
			all[k] = all[len(all)-1]
			all = all[:len(all)-1]
			continue
		}
		n := sizes[rng.IntN(len(sizes))]
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(n)
		}
		tag := rng.Uint64()
		ref, buf := p.Alloc(n, tag)
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		copy(buf, data)
		// Appending to the buffer must not spill into a neighbour.
		_ = append(buf, 0xFF)
		if liveRefs[ref] {
			t.Fatalf("step %d: Alloc returned the live reference %d", step, ref)
		}
		liveRefs[ref] = true
		all = append(all, live{ref, data, tag})
	}
	for _, l := range all {
		if tag, _ := p.Load(l.ref); !bytes.Equal(get(&p, l.ref, len(l.data)), l.data) || tag != l.tag {
			t.Fatalf("string %d changed", l.ref)
		}
	}
	if tag, room := p.Load(0); tag != 0 || len(room) != 0 {
		t.Fatalf("the empty string loads tag %#x and %d bytes", tag, len(room))
	}
}

// TestNextAddr: NextAddr is where the next Alloc's buffer starts and where
// its tag is, whether it comes from the free list or is the class's next
// unused item, and nil before the class has memory; it changes nothing.
func TestNextAddr(t *testing.T) {
	var p Pool
	for _, n := range []int{1, 16, 17, 1000, MaxLen} {
		if a, tag := p.NextAddr(n); a != nil || tag != nil {
			t.Fatalf("NextAddr(%d) = %p, %p before any Alloc, want nil", n, a, tag)
		}
	}
	ref, buf := p.Alloc(20, 7)
	copy(buf, "twenty bytes exactly")
	next, ntag := p.NextAddr(20) // the next unused item of the class
	other, obuf := p.Alloc(20, 42)
	if unsafe.Pointer(unsafe.SliceData(obuf)) != next || *(*uint64)(ntag) != 42 {
		t.Fatalf("Alloc wrote at %p, NextAddr said %p; the tag there is %d, want 42", unsafe.SliceData(obuf), next, *(*uint64)(ntag))
	}
	p.Free(other)
	next, ntag = p.NextAddr(20) // the top of the free list
	if got, tag := string(get(&p, ref, 20)), *(*uint64)(ntag); got != "twenty bytes exactly" || tag != 42 {
		t.Fatalf("after NextAddr: Get %q, the freed item's tag %d", got, tag)
	}
	again, abuf := p.Alloc(20, 9)
	if again != other || unsafe.Pointer(unsafe.SliceData(abuf)) != next || *(*uint64)(ntag) != 9 {
		t.Fatalf("Alloc after Free returned %#x at %p, want the freed %#x at %p", again, unsafe.SliceData(abuf), other, next)
	}
}

// get is the n bytes stored under ref: the prefix of its room.
func get(p *Pool, ref uint32, n int) []byte {
	_, room := p.Load(ref)
	return room[:n:n]
}
