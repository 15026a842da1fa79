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
// The hash is keyed with a per-engine random seed so that nobody can grind
// ids into one probe run. The seed affects speed only: the index is never
// iterated, so nothing observable depends on it.
type idIndex struct {
	slots []uint64
	mask  uint64
	n     int
	seed  [2]uint64
	idOf  func(rec uint32) *TimerID
}

func newIDIndex(idOf func(uint32) *TimerID) idIndex {
	return idIndex{slots: make([]uint64, 1024), mask: 1023, seed: [2]uint64{rand.Uint64(), rand.Uint64()}, idOf: idOf}
}

func (x *idIndex) tag(id *TimerID) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[0:8])^x.seed[0], binary.LittleEndian.Uint64(id[8:16])^x.seed[1])
	t := (hi ^ lo) >> 32
	if t == 0 {
		t = 1
	}
	return t
}

// find returns the slot position holding id, or the empty position where it
// would go, and whether it was found.
func (x *idIndex) find(id *TimerID, tag uint64) (uint64, bool) {
	for p := tag & x.mask; ; p = (p + 1) & x.mask {
		s := x.slots[p]
		if s == 0 {
			return p, false
		}
		if s>>32 == tag && *x.idOf(uint32(s)) == *id {
			return p, true
		}
	}
}

// prefetch starts loading the first slot a probe for tag reads.
func (x *idIndex) prefetch(tag uint64) { prefetch.Line(unsafe.Pointer(&x.slots[tag&x.mask])) }

// prefetchRun starts loading the line of the first slot a probe for tag
// reads and the line after it: a deletion reads on to the end of the
// run, which at the index's higher loads often crosses into the next line.
func (x *idIndex) prefetchRun(tag uint64) {
	prefetch.Lines(unsafe.Pointer(&x.slots[tag&x.mask]), unsafe.Pointer(&x.slots[(tag|7+1)&x.mask]), nil, nil)
}

// slot is where a lookup found an id, or where it would go.
type slot struct{ p, tag uint64 }

// lookup finds id: its record and slot, or the slot where it would go.
func (x *idIndex) lookup(id *TimerID) (slot, uint32, bool) {
	t := x.tag(id)
	p, ok := x.find(id, t)
	return slot{p, t}, uint32(x.slots[p]), ok
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
// no change to the index since.
func (x *idIndex) putAt(s slot, id *TimerID, rec uint32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
		s.p, _ = x.find(id, s.tag)
	}
	x.slots[s.p] = s.tag<<32 | uint64(rec)
	x.n++
}

// del removes id, which must be present.
func (x *idIndex) del(id *TimerID) {
	s, _, ok := x.lookup(id)
	if !ok {
		panic("engine: id index lost a pending timer")
	}
	x.delAt(s)
}

// delRec removes the entry of record rec, whose id hashes to tag: the
// probe compares record indices, so it reads no id.
func (x *idIndex) delRec(tag uint64, rec uint32) {
	slots, mask := x.slots, x.mask
	p := tag & mask
	for v := slots[p]; uint32(v) != rec; v = slots[p] {
		if v == 0 {
			panic("engine: id index lost a pending timer")
		}
		p = (p + 1) & mask
	}
	x.delAt(slot{p: p, tag: tag})
}

// delAt removes the id at s, from a lookup that found it, with no change to
// the index since.
func (x *idIndex) delAt(s slot) {
	slots, mask := x.slots, x.mask
	p := s.p
	x.n--
	// Backward shift: pull later entries of the run into the hole when their
	// home bucket does not lie strictly between the hole and them. Whether
	// an entry moves is a coin toss to the branch predictor, so the loop
	// writes the hole either way and picks the new hole without a branch.
	for q := (p + 1) & mask; ; q = (q + 1) & mask {
		v := slots[q]
		if v == 0 {
			break
		}
		home := (v >> 32) & mask
		// m is all ones when v moves: (q-home)&mask >= (q-p)&mask.
		m := uint64((int64((q-p)&mask) - int64((q-home)&mask) - 1) >> 63)
		slots[p] ^= (slots[p] ^ v) & m
		p ^= (p ^ q) & m
	}
	slots[p] = 0
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

func (x *idIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	hugepage.Advise(x.slots) // probed at random: a million ids' slots span 16 MiB
	x.mask = uint64(len(x.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		p := (s >> 32) & x.mask
		for x.slots[p] != 0 {
			p = (p + 1) & x.mask
		}
		x.slots[p] = s
	}
}

func (x *idIndex) bytes() int { return 8 * len(x.slots) }

// reserve grows the index at once to hold n ids, so that a bulk load (a
// snapshot) does not rehash it at every doubling.
func (x *idIndex) reserve(n int) {
	for 2*n > len(x.slots) {
		x.grow()
	}
}
