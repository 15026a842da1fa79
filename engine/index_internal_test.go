package engine

import (
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/ring"
)

// TestPutAll: a bulk insert leaves the index as inserts one by one would
// (every id found at its record, the count right, lookups of absent ids
// failing), also into a table that already holds ids, and reports an id
// that comes twice.
func TestPutAll(t *testing.T) {
	// {0, 8150}: four segments of about 2,038 ids each, some of which
	// pass segHalf and split within the bulk insert.
	for _, tc := range []struct{ before, bulk int }{{0, 0}, {0, 1}, {0, 5000}, {300, 5000}, {4000, 10}, {0, 8150}} {
		ids := randomIDs(tc.before+tc.bulk, rand.New(rand.NewPCG(uint64(tc.before), uint64(tc.bulk))))
		x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
		// A fixed key, not the engine's random one: with 8,150 ids in
		// four segments (about 2,038 each), whether one passes segHalf
		// depends on the key, and with some keys none does.
		x.seed = [2]uint64{1, 2}
		for i := 1; i <= tc.before; i++ {
			x.put(&ids[i], uint32(i))
		}
		var recs []uint32
		for i := tc.before + 1; i < len(ids); i++ {
			recs = append(recs, uint32(i))
		}
		if dup := x.putAll(recs); dup != nil {
			t.Fatalf("%+v: duplicate %x reported", tc, dup[:4])
		}
		if x.n != len(ids)-1 {
			t.Fatalf("%+v: %d ids, want %d", tc, x.n, len(ids)-1)
		}
		checkIndex(t, &x, -1)
		if tc.bulk == 8150 && len(x.segs) <= 4 {
			t.Fatalf("%+v: %d segments: no segment split in the bulk insert", tc, len(x.segs))
		}
		for i := 1; i < len(ids); i++ {
			if got, ok := x.get(&ids[i]); !ok || got != uint32(i) {
				t.Fatalf("%+v: id of record %d found at %d, %v", tc, i, got, ok)
			}
		}
		var absent TimerID
		absent[0] = 1
		if _, ok := x.get(&absent); ok {
			t.Fatalf("%+v: an absent id is found", tc)
		}
		// The index still deletes and inserts as before.
		for i := 1; i < len(ids); i += 2 {
			x.del(&ids[i])
		}
		for i := 1; i < len(ids); i++ {
			if _, ok := x.get(&ids[i]); ok != (i%2 == 0) {
				t.Fatalf("%+v: after deletes, record %d found: %v", tc, i, ok)
			}
		}
	}
	// A duplicate, in the bulk or against an id already in.
	ids := []TimerID{{}, {1}, {2}, {1}}
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	if dup := x.putAll([]uint32{1, 2, 3}); dup == nil || *dup != ids[1] {
		t.Fatalf("duplicate in the bulk: got %v", dup)
	}
	x = newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	x.put(&ids[1], 1)
	if dup := x.putAll([]uint32{2, 3}); dup == nil || *dup != ids[1] {
		t.Fatalf("duplicate of an id already in: got %v", dup)
	}
}

// TestDuplicateGivesBackItsRecord: a Schedule refused as DuplicateTimer
// has written a record and its payload and queued it before the index
// said so; it takes all of it back, in every tier, so that refusals
// repeated any number of times take no more memory and leave the engine
// consistent.
func TestDuplicateGivesBackItsRecord(t *testing.T) {
	e, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.BeginBlock(1); err != nil {
		t.Fatal(err)
	}
	tx, err := e.Begin(Address{7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("a payload long enough to take pool bytes")
	l := e.cfg.layout()
	heights := []uint64{5, l.RingSize + 5, l.RingSize + l.EpochLength*l.EpochCount + 5} // ring, epoch tier, B-tree
	for _, h := range heights {
		if _, _, err := tx.Schedule(h, payload); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func() {
		for _, h := range heights {
			if _, _, err := tx.Schedule(h, payload); !errors.Is(err, ErrDuplicateTimer) {
				t.Fatalf("second schedule at %d: %v, want DuplicateTimer", h, err)
			}
		}
	}
	refuse() // the first refusal may take a fresh record, and free it
	recs, free, pool, st := e.nrecs, e.free.Len(), e.data.Bytes(), e.Stats()
	for range 10_000 {
		refuse()
	}
	if e.nrecs != recs || e.free.Len() != free || e.data.Bytes() != pool {
		t.Fatalf("after 30,000 refusals: %d records (%d free), %d pool bytes; before %d (%d free), %d",
			e.nrecs, e.free.Len(), e.data.Bytes(), recs, free, pool)
	}
	if got := e.Stats(); got != st {
		t.Fatalf("after the refusals: %+v, before %+v", got, st)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Verify(func(v uint32) (ring.Pos, bool) { return ring.Pos(e.recs.At(v).at), true }); err != nil {
		t.Fatal(err)
	}
	e.checkConsistent(t)
	if st := e.Stats(); st.Pending != 3 || st.InRing != 1 || st.InEpochs != 1 || st.InOverflow != 1 {
		t.Fatalf("%d pending, %d/%d/%d by tier; want 3, one in each", st.Pending, st.InRing, st.InEpochs, st.InOverflow)
	}
}

// TestIndexAgainstMap: random inserts and deletions (by id and by record)
// at load factors up to the limit, through the first split, checked
// against a map after every step: each present id is found at its record,
// each deleted one is not, and checkIndex holds.
func TestIndexAgainstMap(t *testing.T) {
	const recs = 6000 // about half in: past segHalf
	r := rand.New(rand.NewPCG(3, 4))
	ids := randomIDs(recs, r)
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	in := map[uint32]bool{}
	for step := range 40_000 {
		i := 1 + uint32(r.IntN(recs))
		switch {
		case !in[i]:
			x.put(&ids[i], i)
			in[i] = true
		case step%2 == 0:
			x.del(&ids[i])
			delete(in, i)
		default:
			x.delRec(x.tag(&ids[i]), i)
			delete(in, i)
		}
		if x.n != len(in) {
			t.Fatalf("step %d: %d ids, want %d", step, x.n, len(in))
		}
		if step%97 != 0 {
			continue
		}
		for k := uint32(1); k <= recs; k++ {
			got, ok := x.get(&ids[k])
			if ok != in[k] || ok && got != k {
				t.Fatalf("step %d: record %d found at %d, %v; present %v", step, k, got, ok, in[k])
			}
		}
		checkIndex(t, &x, step)
	}
	if len(x.segs) < 2 {
		t.Fatalf("%d segments: the test never split one", len(x.segs))
	}
}

// all returns every entry of the index.
func (x *idIndex) all() []uint64 {
	var out []uint64
	x.each(func(s uint64) { out = append(out, s) })
	return out
}

// TestIndexSplits: the index grows from empty to 40,000 ids through
// inserts mixed with deletions (by id, by record and in batches, as end of
// block deletes) and lookups, checked against a map, with checkIndex after
// every step while the index is small and every 53rd after.
func TestIndexSplits(t *testing.T) {
	const recs = 200_000 // inserts pick from these: half in at most
	r := rand.New(rand.NewPCG(5, 6))
	ids := randomIDs(recs, r)
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	in := map[uint32]bool{}
	var present []uint32            // the records in, in no order
	batchesNear, batchesFar := 0, 0 // delRecs calls within and beyond cachedSlots
	for step := 0; len(in) < 40_000; step++ {
		if len(present) > 0 && r.IntN(3) == 0 { // one deletion per two inserts
			k := r.IntN(len(present))
			i := present[k]
			present[k] = present[len(present)-1]
			present = present[:len(present)-1]
			delete(in, i)
			switch {
			case step%2 == 0:
				x.del(&ids[i])
			case step%15 != 1:
				x.delRec(x.tag(&ids[i]), i)
			default: // a batch: more than ahead of them at times
				batch, tags := []uint32{i}, []uint64{x.tag(&ids[i])}
				for len(present) > 0 && len(batch) < step%(2*ahead+3) {
					i := present[len(present)-1]
					present = present[:len(present)-1]
					delete(in, i)
					batch, tags = append(batch, i), append(tags, x.tag(&ids[i]))
				}
				if len(x.segs)*segLen > cachedSlots {
					batchesFar++
				} else {
					batchesNear++
				}
				x.delRecs(batch, tags)
			}
		} else {
			i := 1 + uint32(r.IntN(recs))
			if in[i] {
				continue
			}
			x.put(&ids[i], i)
			in[i], present = true, append(present, i)
		}
		if len(x.segs) <= 4 || step%53 == 0 { // a check reads every slot
			checkIndex(t, &x, step)
		}
		if x.n != len(in) {
			t.Fatalf("step %d: %d ids, want %d", step, x.n, len(in))
		}
		if step%211 == 0 {
			for k := uint32(1); k <= recs; k += 7 {
				got, ok := x.get(&ids[k])
				if ok != in[k] || ok && got != k {
					t.Fatalf("step %d: record %d found at %d, %v; present %v", step, k, got, ok, in[k])
				}
			}
		}
	}
	checkIndex(t, &x, -1)
	for k := uint32(1); k <= recs; k++ {
		if got, ok := x.get(&ids[k]); ok != in[k] || ok && got != k {
			t.Fatalf("at the end: record %d found at %d, %v; present %v", k, got, ok, in[k])
		}
	}
	// 40,000 ids at most half a segment's slots each need at least 20
	// segments; splits only at half full keep them to fewer than 80.
	if len(x.segs) < 20 || len(x.segs) >= 80 {
		t.Fatalf("%d segments for %d ids", len(x.segs), x.n)
	}
	if batchesNear == 0 || batchesFar == 0 {
		t.Fatalf("%d batch deletions within cachedSlots, %d beyond; want some of each", batchesNear, batchesFar)
	}
}

// checkIndex checks the index's structure: each segment is named by the
// directory entries that end in one suffix of its depth, all of them; each
// entry of it has that suffix and lies in an unbroken run from its home
// slot; it holds at most segHalf ids, as its count says; and n counts
// them all.
func checkIndex(t *testing.T, x *idIndex, step int) {
	t.Helper()
	if len(x.dir)&(len(x.dir)-1) != 0 || x.mask != uint64(len(x.dir)-1) {
		t.Fatalf("step %d: a directory of %d entries, mask %#x", step, len(x.dir), x.mask)
	}
	total := 0
	for k, m := range x.segs {
		bits := uint64(1)<<m.depth - 1
		var suffix uint64
		named := 0
		for i, d := range x.dir {
			if d.meta != m {
				continue
			}
			if d.seg != m.seg {
				t.Fatalf("step %d: directory entry %d names segment %d with another's slots", step, i, k)
			}
			if named == 0 {
				suffix = uint64(i) & bits
			} else if uint64(i)&bits != suffix {
				t.Fatalf("step %d: directory entries ending in %#x and %#x name segment %d of depth %d", step, suffix, uint64(i)&bits, k, m.depth)
			}
			named++
		}
		if named != len(x.dir)>>m.depth {
			t.Fatalf("step %d: segment %d of depth %d named by %d of %d directory entries", step, k, m.depth, named, len(x.dir))
		}
		n := 0
		for p, v := range m.seg {
			if v == 0 {
				continue
			}
			n++
			if tag := v >> 32; tag&bits != suffix {
				t.Fatalf("step %d: tag %#x in segment %d of suffix %#x (%d bits)", step, tag, k, suffix, m.depth)
			}
			for q := homeOf(v); q != uint64(p); q = (q + 1) & segMask {
				if m.seg[q] == 0 {
					t.Fatalf("step %d: segment %d slot %d is cut off from its home %d by an empty slot %d", step, k, p, homeOf(v), q)
				}
			}
		}
		if n != int(m.n) || n > segHalf {
			t.Fatalf("step %d: segment %d holds %d ids, counted %d", step, k, n, m.n)
		}
		total += n
	}
	if total != x.n {
		t.Fatalf("step %d: %d entries, n says %d", step, total, x.n)
	}
}

// randomIDs returns ids for records 1..n from r; record 0 is never used.
func randomIDs(n int, r *rand.Rand) []TimerID {
	ids := make([]TimerID, n+1)
	for i := 1; i <= n; i++ {
		for j := range ids[i] {
			ids[i][j] = byte(r.Uint32())
		}
	}
	return ids
}

// TestIndexReserve: reserve, on an empty index and on one that already
// split, leaves segments enough for n ids at about three eighths, with
// every id found; the inserts up to n after it split nothing.
func TestIndexReserve(t *testing.T) {
	const recs, n = 60_000, 50_000
	for _, before := range []uint32{0, 5000} {
		ids := randomIDs(recs, rand.New(rand.NewPCG(7, uint64(before))))
		x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
		i := uint32(1)
		for ; i <= before; i++ {
			x.put(&ids[i], i)
		}
		x.reserve(n)
		checkIndex(t, &x, int(i))
		if got := len(x.segs) * segLen; 8*n > 3*got || got > 16*n/3 {
			t.Fatalf("after %d ids, reserve(%d): %d slots", before, n, got)
		}
		segs := len(x.segs)
		for ; i <= n; i++ {
			x.put(&ids[i], i)
		}
		if len(x.segs) != segs {
			t.Fatalf("after %d ids, reserve(%d): the inserts up to it made %d segments more", before, n, len(x.segs)-segs)
		}
		checkIndex(t, &x, int(i))
		for k := uint32(1); k < recs; k++ {
			if got, ok := x.get(&ids[k]); ok != (k <= n) || ok && got != k {
				t.Fatalf("record %d found at %d, %v", k, got, ok)
			}
		}
	}
}

// TestIndexBytes: the index grows a segment at a time, so that its memory
// per id stays within that of segments between a quarter and a half full
// (32 B per id, and the directory), at every size from a few segments on;
// a table that doubled held both tables while it moved, up to 48 B per id.
func TestIndexBytes(t *testing.T) {
	const n = 300_000
	ids := randomIDs(n, rand.New(rand.NewPCG(8, 9)))
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	worst := 0.0
	for i := uint32(1); i <= n; i++ {
		x.put(&ids[i], i)
		if i >= 4*segHalf && i%1000 == 0 {
			perID := float64(len(x.segs)*int(unsafe.Sizeof(segment{}))) / float64(i)
			worst = max(worst, perID)
		}
	}
	require.Equal(t, x.slots.Bytes()+len(x.segs)*int(unsafe.Sizeof(segMeta{}))+len(x.dir)*int(unsafe.Sizeof(dirEntry{})), x.bytes())
	require.LessOrEqual(t, worst, 32.0*1.05, "segment bytes per id at worst")
}

// TestBulkWord: a restore's word gives back its tag and record, and two
// words agree in their top d bits exactly when their tags name the same
// segment at depth d.
func TestBulkWord(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for range 10_000 {
		a, b := uint64(r.Uint32()|1), uint64(r.Uint32()|1)
		if r.IntN(2) == 0 { // alike in some low bits
			b = b&^(1<<r.IntN(21)-1) | a&(1<<r.IntN(21)-1)
		}
		rec := r.Uint32()
		v, w := bulkWord(a, rec), bulkWord(b, rec+1)
		if bulkTag(v) != a || uint32(v) != rec || bulkTag(w) != b {
			t.Fatalf("tag %#x, record %d: word %#x gives back %#x, %d", a, rec, v, bulkTag(v), uint32(v))
		}
		for d := uint(1); d <= maxSegDepth; d++ {
			if same, want := v>>(64-d) == w>>(64-d), a&(1<<d-1) == b&(1<<d-1); same != want {
				t.Fatalf("tags %#x and %#x at depth %d: words agree %v, segments %v", a, b, d, same, want)
			}
		}
	}
}
