package engine

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/ring"
)

// TestPutAll: a bulk insert leaves the index as inserts one by one would
// (every id found at its record, the count right, lookups of absent ids
// failing), also into a table that already holds ids, and reports an id
// that comes twice.
func TestPutAll(t *testing.T) {
	for _, tc := range []struct{ before, bulk int }{{0, 0}, {0, 1}, {0, 5000}, {300, 5000}, {4000, 10}} {
		ids := randomIDs(tc.before+tc.bulk, rand.New(rand.NewPCG(uint64(tc.before), uint64(tc.bulk))))
		x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
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
// at load factors up to the limit, checked against a map after every step:
// each present id is found at its record, each deleted one is not, and
// every entry lies in an unbroken run from its home slot, which is what
// the backward-shift deletion must keep.
func TestIndexAgainstMap(t *testing.T) {
	const recs = 3000
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
		for p, v := range x.slots {
			if v == 0 {
				continue
			}
			for q := (v >> 32) & x.mask; q != uint64(p); q = (q + 1) & x.mask {
				if x.slots[q] == 0 {
					t.Fatalf("step %d: slot %d is cut off from its home %d by an empty slot %d", step, p, (v>>32)&x.mask, q)
				}
			}
		}
	}
}

// all returns every entry of the index, in both tables while it grows.
func (x *idIndex) all() []uint64 {
	var out []uint64
	x.each(func(s uint64) { out = append(out, s) })
	return out
}

// TestIndexGrowsInSteps: the index grows from empty to 40,000 ids through
// inserts mixed with deletions (by id and by record) and lookups, checked
// against a map; after every step each table keeps every entry reachable
// from its home slot, the part of the old table already moved is empty,
// and the new table is at most half full (at every step while the index
// is small, at every 53rd after); no insert moves more than a
// quarter of a table of 4,096 slots or more, and every doubling ends.
func TestIndexGrowsInSteps(t *testing.T) {
	const recs = 200_000 // inserts pick from these: half in at most
	r := rand.New(rand.NewPCG(5, 6))
	ids := randomIDs(recs, r)
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	in := map[uint32]bool{}
	var present []uint32 // the records in, in no order
	doublings, growingSteps := 0, 0
	batchesGrowing, batchesFar := 0, 0 // delRecs calls during a doubling, and beyond cachedSlots
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
			default: // a batch, as end of block deletes: more than ahead of them at times
				batch, tags := []uint32{i}, []uint64{x.tag(&ids[i])}
				for len(present) > 0 && len(batch) < step%(2*ahead+3) {
					i := present[len(present)-1]
					present = present[:len(present)-1]
					delete(in, i)
					batch, tags = append(batch, i), append(tags, x.tag(&ids[i]))
				}
				switch {
				case x.old != nil:
					batchesGrowing++
				case len(x.slots) > cachedSlots:
					batchesFar++
				}
				x.delRecs(batch, tags)
			}
		} else {
			i := 1 + uint32(r.IntN(recs))
			if in[i] {
				continue
			}
			growing, cur, oldLen := x.old != nil, x.cur, len(x.old)
			slotsBefore := len(x.slots)
			x.put(&ids[i], i)
			in[i], present = true, append(present, i)
			switch {
			case len(x.slots) != slotsBefore:
				doublings++
				if x.old == nil && slotsBefore >= 4096 {
					t.Fatalf("step %d: a doubling of %d slots ended in the insert that began it", step, slotsBefore)
				}
			case growing && x.old != nil:
				if moved := (x.cur - cur) & uint64(oldLen-1); oldLen >= 4096 && int(moved) > oldLen/4 {
					t.Fatalf("step %d: one insert moved %d of %d old slots", step, moved, oldLen)
				}
			}
			if x.old != nil {
				growingSteps++
			}
		}
		if len(x.slots) <= 8192 || step%53 == 0 { // a check reads every slot
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
	x.finishGrow()
	checkIndex(t, &x, -1)
	for k := uint32(1); k <= recs; k++ {
		if got, ok := x.get(&ids[k]); ok != in[k] || ok && got != k {
			t.Fatalf("at the end: record %d found at %d, %v; present %v", k, got, ok, in[k])
		}
	}
	// 1,024 slots to 131,072 for 40,000 ids: seven doublings, each spread
	// over many inserts, the last two beyond cachedSlots.
	if doublings != 7 || growingSteps < 10_000 {
		t.Fatalf("%d doublings over %d inserts made while growing; want 7, over at least 10,000", doublings, growingSteps)
	}
	if batchesGrowing == 0 || batchesFar == 0 {
		t.Fatalf("%d batch deletions during a doubling, %d in a table beyond cachedSlots; want some of each", batchesGrowing, batchesFar)
	}
}

// checkIndex checks the index's tables: every entry lies in an unbroken
// run from its home slot, the moved part of a table being grown from is
// empty, the table that takes inserts is at most half full, and n counts
// the entries of both.
func checkIndex(t *testing.T, x *idIndex, step int) {
	t.Helper()
	reachable := func(tab []uint64, mask uint64, name string) int {
		n := 0
		for p, v := range tab {
			if v == 0 {
				continue
			}
			n++
			for q := (v >> 32) & mask; q != uint64(p); q = (q + 1) & mask {
				if tab[q] == 0 {
					t.Fatalf("step %d: %s slot %d is cut off from its home %d by an empty slot %d", step, name, p, (v>>32)&mask, q)
				}
			}
		}
		return n
	}
	n := reachable(x.slots, x.mask, "new")
	if 2*n > len(x.slots) {
		t.Fatalf("step %d: %d ids in %d slots", step, n, len(x.slots))
	}
	if x.old != nil {
		n += reachable(x.old, x.oldMask, "old")
		for p := x.moveStop; p != x.cur; p = (p + 1) & x.oldMask {
			if x.old[p] != 0 {
				t.Fatalf("step %d: old slot %d, moved past (from %d to %d), holds an id", step, p, x.moveStop, x.cur)
			}
		}
	}
	if n != x.n {
		t.Fatalf("step %d: %d entries, n says %d", step, n, x.n)
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

// TestIndexReserve: reserve, even in the middle of a doubling, leaves one
// table big enough for n ids at most half full, with every id found and
// reachable from its home; the n inserts after it start no doubling.
func TestIndexReserve(t *testing.T) {
	const recs, n = 60_000, 50_000
	r := rand.New(rand.NewPCG(7, 8))
	ids := randomIDs(recs, r)
	x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
	i := uint32(1)
	for ; x.old == nil || i < 600; i++ { // into a doubling under way
		x.put(&ids[i], i)
	}
	x.reserve(n)
	if x.old != nil || len(x.slots) < 2*n || len(x.slots)&(len(x.slots)-1) != 0 {
		t.Fatalf("after reserve(%d): growing %v, %d slots", n, x.old != nil, len(x.slots))
	}
	size := len(x.slots)
	for ; i <= n; i++ {
		x.put(&ids[i], i)
		if x.old != nil || len(x.slots) != size {
			t.Fatalf("insert %d of %d reserved grew the index", i, n)
		}
	}
	for k := uint32(1); k < recs; k++ {
		if got, ok := x.get(&ids[k]); ok != (k <= n) || ok && got != k {
			t.Fatalf("record %d found at %d, %v", k, got, ok)
		}
	}
	for p, v := range x.slots {
		for q := (v >> 32) & x.mask; v != 0 && q != uint64(p); q = (q + 1) & x.mask {
			if x.slots[q] == 0 {
				t.Fatalf("slot %d is cut off from its home by an empty slot %d", p, q)
			}
		}
	}
}

// TestIndexPreparesItsDoubling: from three eighths full, a table of
// prepareFrom slots or more has its doubling's table made ready ahead,
// which the doubling then takes (and counts in bytes meanwhile); a
// reserve that outgrows it drops it.
func TestIndexPreparesItsDoubling(t *testing.T) {
	const n = 70_000
	ids := randomIDs(n+1, rand.New(rand.NewPCG(8, 9)))
	for _, reserveAt := range []int{0, 50_000} {
		x := newIDIndex(func(i uint32) *TimerID { return &ids[i] })
		asked := false
		for i := uint32(1); i <= n; i++ {
			if int(i) == reserveAt { // past three eighths of 2^17 slots
				require.NotNil(t, x.next)
				x.reserve(4 * n)
				require.Nil(t, x.next, "a reserve drops the table asked for")
				require.Equal(t, 8*len(x.slots), x.bytes())
			}
			slots, preparing := len(x.slots), x.next != nil
			x.put(&ids[i], i)
			if x.old == nil { // putAt's calm must not let a threshold pass
				require.LessOrEqual(t, 2*x.n, len(x.slots), "over half full at %d ids, not growing", i)
				if x.next == nil && len(x.slots) >= prepareFrom {
					require.LessOrEqual(t, 8*x.n, 3*len(x.slots), "past three eighths at %d ids, the doubling not asked for", i)
				}
			}
			switch {
			case len(x.slots) != slots:
				require.True(t, preparing || slots < prepareFrom, "a doubling of %d slots at %d ids was not made ready", slots, i)
				require.Nil(t, x.next)
			case x.next != nil:
				asked = true
				require.GreaterOrEqual(t, 8*int(i), 3*len(x.slots))
				require.Equal(t, 8*(len(x.slots)+len(x.old)+2*len(x.slots)), x.bytes())
			}
		}
		require.True(t, asked)
		x.finishGrow()
		for i := uint32(1); i <= n; i++ {
			got, ok := x.get(&ids[i])
			require.True(t, ok)
			require.Equal(t, i, got)
		}
	}
}
