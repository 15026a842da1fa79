package engine

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"

	"github.com/timerlane/timerlane/internal/hugepage"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/radix"
)

// idIndex maps the id of every pending timer to its record: open addressing
// with linear probing and backward-shift deletion. A slot holds a 32-bit tag
// of the id's hash (bits 32..63) and the record index (bits 0..31); 0 is
// empty. The bucket of a slot is derived from its tag, so deletion can move
// entries back without reading ids. At most half the slots are used.
//
// The index grows by doubling, a little at a time: while it grows, the
// table it grows from stays as old, lookups probe both, inserts go to the
// new one only, and every insert moves at least growStep slots of old (see
// moveSome). A doubling moved in one go would pause the call that made it
// for as long as a rehash of every id (BenchmarkGrowth measures it).
//
// The hash is keyed with a per-engine random seed so that nobody can grind
// ids into one probe run. The seed affects speed only: the index is never
// iterated in an order that shows, so nothing observable depends on it.
type idIndex struct {
	slots []uint64
	mask  uint64
	n     int // ids, in slots and old

	// While growing: the table being moved into slots, the next of its
	// slots to move, and the empty slot the move started from, where it
	// ends. nil when not growing.
	old           []uint64
	oldMask       uint64
	cur, moveStop uint64

	seed [2]uint64
	idOf func(rec uint32) *TimerID

	// The table of the next doubling, made ready on another goroutine
	// from three eighths full on (hugepage.MakeAhead), and its slots; nil
	// when not asked for.
	next      <-chan []uint64
	nextSlots int

	// calm is the most ids the index holds with nothing for putAt to do
	// but store: no doubling to make ready, start or move. setCalm sets
	// it at each change of those states; 0 while a doubling is under way.
	calm int
}

// prepareFrom is the smallest table whose doubling is made ready ahead:
// below it the new table is a few hundred KiB, quick to allocate and map.
const prepareFrom = 1 << 17

func newIDIndex(idOf func(uint32) *TimerID) idIndex {
	x := idIndex{slots: make([]uint64, 1024), mask: 1023, seed: [2]uint64{rand.Uint64(), rand.Uint64()}, idOf: idOf}
	x.setCalm()
	return x
}

// prepareAt and growAt are the most ids a table of l slots holds before
// its doubling is made ready ahead (from prepareFrom slots on) and before
// the doubling starts. l is a power of two: both are exact.
func prepareAt(l int) int { return 3 * l / 8 }
func growAt(l int) int    { return l / 2 }

// setCalm sets calm from putBusy's thresholds.
func (x *idIndex) setCalm() {
	switch l := len(x.slots); {
	case x.old != nil:
		x.calm = 0
	case x.next == nil && l >= prepareFrom:
		x.calm = prepareAt(l)
	default:
		x.calm = growAt(l)
	}
}

func (x *idIndex) tag(id *TimerID) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[0:8])^x.seed[0], binary.LittleEndian.Uint64(id[8:16])^x.seed[1])
	t := (hi ^ lo) >> 32
	if t == 0 {
		t = 1
	}
	return t
}

// slot is where a lookup found an id, or where it would go: position p
// of the table that inserts go to, or of old when inOld.
type slot struct {
	p, tag uint64
	inOld  bool
}

// find returns the slot holding id, or the empty slot where it would go,
// and whether it was found.
func (x *idIndex) find(id *TimerID, tag uint64) (slot, bool) {
	if x.old != nil {
		if p, ok := probe(x.old, x.oldMask, tag, id, x.idOf); ok {
			return slot{p: p, tag: tag, inOld: true}, true
		}
	}
	p, ok := probe(x.slots, x.mask, tag, id, x.idOf)
	return slot{p: p, tag: tag}, ok
}

// probe looks for id in table t from its home slot: the slot holding it,
// or the first empty one.
func probe(t []uint64, mask, tag uint64, id *TimerID, idOf func(uint32) *TimerID) (uint64, bool) {
	for p := tag & mask; ; p = (p + 1) & mask {
		s := t[p]
		if s == 0 {
			return p, false
		}
		if s>>32 == tag && *idOf(uint32(s)) == *id {
			return p, true
		}
	}
}

// table is the table that holds s.
func (x *idIndex) table(s slot) ([]uint64, uint64) {
	if s.inOld {
		return x.old, x.oldMask
	}
	return x.slots, x.mask
}

// prefetchRun is prefetchRunIn in each table.
func (x *idIndex) prefetchRun(tag uint64) {
	if x.old != nil {
		prefetchRunIn(x.old, x.oldMask, tag)
	}
	prefetchRunIn(x.slots, x.mask, tag)
}

// prefetchRunIn starts loading the line of tag's home slot in table t and
// the line after it: a deletion reads on to the end of the run, which at
// the index's higher loads often crosses into the next line.
func prefetchRunIn(t []uint64, mask, tag uint64) {
	prefetch.Lines(unsafe.Pointer(&t[tag&mask]), unsafe.Pointer(&t[(tag|7+1)&mask]), nil, nil)
}

// lookup finds id: its record and slot, or the slot where it would go.
func (x *idIndex) lookup(id *TimerID) (slot, uint32, bool) {
	s, ok := x.find(id, x.tag(id))
	t, _ := x.table(s)
	return s, uint32(t[s.p]), ok
}

func (x *idIndex) get(id *TimerID) (uint32, bool) {
	_, rec, ok := x.lookup(id)
	return rec, ok
}

// put adds id -> rec; id must not be present.
func (x *idIndex) put(id *TimerID, rec uint32) {
	s, _, _ := x.lookup(id)
	x.putAt(s, id, rec)
}

// putAt adds id -> rec at s, from a lookup of id that found nothing, with
// no change to the index since. It starts a doubling when the index would
// be more than half full, and moves some of a doubling under way. The
// common insert, with none of that to do, tests one count (calm) for it.
func (x *idIndex) putAt(s slot, id *TimerID, rec uint32) {
	if x.n >= x.calm {
		x.putBusy(s, id, rec)
		return
	}
	x.slots[s.p] = s.tag<<32 | uint64(rec)
	x.n++
}

// putBusy is putAt past calm.
func (x *idIndex) putBusy(s slot, id *TimerID, rec uint32) {
	if x.old == nil && x.next == nil && len(x.slots) >= prepareFrom && x.n+1 > prepareAt(len(x.slots)) {
		// The inserts after a doubling write the new table at random:
		// unmapped, its pages each made the first insert there wait for
		// the kernel (BenchmarkGrowth's doubling-ms).
		x.nextSlots = 2 * len(x.slots)
		x.next = hugepage.MakeAhead[uint64](x.nextSlots)
	}
	if x.old == nil && x.n+1 > growAt(len(x.slots)) {
		x.startGrow()
		s, _ = x.find(id, s.tag)
	}
	x.slots[s.p] = s.tag<<32 | uint64(rec)
	x.n++
	if x.old != nil {
		x.moveSome()
	}
	x.setCalm()
}

// del removes id, which must be present.
func (x *idIndex) del(id *TimerID) {
	s, _, ok := x.lookup(id)
	if !ok {
		panic(errLost)
	}
	x.delAt(s)
}

// errLost is the panic of a deletion that does not find a timer the
// engine holds pending: the index and the records disagree.
const errLost = "engine: id index lost a pending timer"

// delRec removes the entry of record rec, whose id hashes to tag: the
// probe compares record indices, so it reads no id.
func (x *idIndex) delRec(tag uint64, rec uint32) {
	if x.old != nil {
		if p, ok := probeRec(x.old, x.oldMask, tag, rec); ok {
			x.delAt(slot{p: p, tag: tag, inOld: true})
			return
		}
	}
	p, ok := probeRec(x.slots, x.mask, tag, rec)
	if !ok {
		panic(errLost)
	}
	x.delAt(slot{p: p, tag: tag})
}

// probeRec looks for record rec in table t from tag's home slot.
func probeRec(t []uint64, mask, tag uint64, rec uint32) (uint64, bool) {
	p := tag & mask
	for v := t[p]; uint32(v) != rec; v = t[p] {
		if v == 0 {
			return 0, false
		}
		p = (p + 1) & mask
	}
	return p, true
}

// delAt removes the id at s, from a lookup that found it, with no change to
// the index since.
func (x *idIndex) delAt(s slot) {
	slots, mask := x.table(s)
	shiftBack(slots, mask, s.p)
	x.n--
}

// shiftBack empties slot p of table t: backward shift, which pulls later
// entries of the run into the hole when their home bucket does not lie
// strictly between the hole and them. Whether an entry moves is a coin
// toss to the branch predictor, so the loop writes the hole either way and
// picks the new hole without a branch.
func shiftBack(t []uint64, mask, p uint64) {
	for q := (p + 1) & mask; t[q] != 0; q = (q + 1) & mask {
		v := t[q]
		// m is all ones when v moves: (q-home)&mask >= (q-p)&mask, for
		// home = (v>>32)&mask (masking after the subtraction is the same).
		m := uint64((int64((q-p)&mask) - int64((q-v>>32)&mask) - 1) >> 63)
		t[p] ^= (t[p] ^ v) & m
		p ^= (p ^ q) & m
	}
	t[p] = 0
}

// cachedSlots is the size up to which a table is left to the cache: its
// 256 KiB (10,000 pending timers' ids) stay in a core's L2 from block to
// block, so that loading ahead costs a call per deletion and gains nothing.
const cachedSlots = 1 << 15

// delRecs is delRec for each of recs, whose ids hash to tags, loading
// each one's run ahead deletions before it in a table larger than
// cachedSlots. Outside a doubling it works on the one table inline: end of
// block calls it for every fired timer, and the calls of delRec cost as
// much as its work when the slots are cached.
func (x *idIndex) delRecs(recs []uint32, tags []uint64) {
	if x.old != nil {
		for k, i := range recs {
			if j := k + ahead; j < len(tags) {
				x.prefetchRun(tags[j])
			}
			x.delRec(tags[k], i)
		}
		return
	}
	t, mask := x.slots, x.mask
	far := len(t) > cachedSlots
	for k, rec := range recs {
		if j := k + ahead; far && j < len(tags) {
			prefetchRunIn(t, mask, tags[j])
		}
		p, ok := probeRec(t, mask, tags[k], rec)
		if !ok {
			panic(errLost)
		}
		shiftBack(t, mask, p)
	}
	x.n -= len(recs)
}

// growStep is how many slots of the old table an insert moves at least
// while the index grows. A doubling starts at half of the old table's
// slots full, so it ends within len(old)/growStep inserts, with the new
// table, twice the size, at most 5/16 full: never time for another.
const growStep = 8

// startGrow begins a doubling: the table becomes old, and a table of
// twice its size takes the inserts. The move starts at an empty slot of
// old (there is one: old is at most half full), so that no run of it is
// ever split between moved and unmoved slots.
func (x *idIndex) startGrow() {
	x.old, x.oldMask = x.slots, x.mask
	if x.next != nil {
		x.slots, x.next, x.nextSlots = <-x.next, nil, 0
	} else {
		x.slots = newTable(2 * len(x.old))
	}
	x.mask = uint64(len(x.slots) - 1)
	x.moveStop = 0
	for x.old[x.moveStop] != 0 {
		x.moveStop++
	}
	x.cur = x.moveStop
}

// newTable returns an empty table of n slots, advised to huge pages: it is
// probed at random, and a million ids' slots span 16 MiB.
func newTable(n int) []uint64 { return hugepage.Make[uint64](n) }

// moveSome moves the next growStep slots of old, and the rest of the run
// it is in, into the new table: between calls, every run of old lies
// wholly on one side of cur, so a probe of old from a home already moved
// past meets an empty slot at once, and a deletion's backward shift never
// carries an entry into the moved part. Old is dropped when the move has
// gone round to where it started.
func (x *idIndex) moveSome() {
	for k := 0; k < growStep || x.old[x.cur] != 0; k++ {
		if v := x.old[x.cur]; v != 0 {
			x.old[x.cur] = 0
			x.insert(v)
		}
		x.cur = (x.cur + 1) & x.oldMask
		if x.cur == x.moveStop {
			x.old, x.oldMask = nil, 0
			return
		}
	}
}

// insert puts slot value v (tag and record) into the first empty slot of
// slots from its home: a move between tables, which needs no lookup.
func (x *idIndex) insert(v uint64) {
	p := (v >> 32) & x.mask
	for x.slots[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.slots[p] = v
}

// putAll adds the ids of records recs, none of them present, in the order
// of their home slots: a restore's million inserts then walk the table
// in sequence instead of missing the cache at each. It stops at an id
// that comes twice, or is already in, and returns it.
func (x *idIndex) putAll(recs []uint32) (dup *TimerID) {
	x.reserve(x.n + len(recs))
	items := make([]radix.Item, len(recs))
	for k, i := range recs {
		t := x.tag(x.idOf(i))
		items[k] = radix.Item{Key: (t&x.mask)<<32 | t, Pos: i}
	}
	items, _ = radix.Sort(items, nil, radix.Diff(items))
	for _, it := range items {
		t, i := it.Key&(1<<32-1), it.Pos
		p := t & x.mask
		for ; x.slots[p] != 0; p = (p + 1) & x.mask {
			if s := x.slots[p]; s>>32 == t && *x.idOf(uint32(s)) == *x.idOf(i) {
				return x.idOf(i)
			}
		}
		x.slots[p] = t<<32 | uint64(i)
		x.n++
	}
	return nil
}

// finishGrow moves what is left of a doubling under way.
func (x *idIndex) finishGrow() {
	for x.old != nil {
		x.moveSome()
	}
}

// each calls f with every entry of the index, in no meaningful order.
func (x *idIndex) each(f func(entry uint64)) {
	for _, t := range [][]uint64{x.old, x.slots} {
		for _, s := range t {
			if s != 0 {
				f(s)
			}
		}
	}
}

func (x *idIndex) bytes() int { return 8 * (len(x.slots) + len(x.old) + x.nextSlots) }

// reserve grows the index at once to hold n ids, so that a bulk load (a
// snapshot) does not rehash it at every doubling, nor an engine that
// reserved room for n timers (Engine.Reserve) ever double on the way
// there. The new table's pages are mapped before the ids move in. It
// leaves no doubling under way.
func (x *idIndex) reserve(n int) {
	x.finishGrow()
	defer x.setCalm()
	size := len(x.slots)
	for 2*n > size {
		size *= 2
	}
	if size == len(x.slots) {
		return
	}
	old := x.slots
	x.next, x.nextSlots = nil, 0 // a table asked for the next doubling is too small
	x.slots = newTable(size)
	hugepage.Touch(x.slots)
	x.mask = uint64(size - 1)
	for _, v := range old {
		if v != 0 {
			x.insert(v)
		}
	}
}
