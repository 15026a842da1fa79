package engine

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"

	"github.com/timerlane/timerlane/internal/hugepage"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/radix"
	"github.com/timerlane/timerlane/internal/slab"
)

// idIndex maps the id of every pending timer to its record: extendible
// hashing over segments of segLen slots, each an open-addressing table with
// linear probing and backward-shift deletion. A slot holds a 32-bit tag of
// the id's hash (bits 32..63) and the record index (bits 0..31); 0 is
// empty. The tag's low bits pick the segment through a directory (dir),
// its top segShift bits the home slot in it; the home of a slot is derived
// from its tag, so deletion can move entries back without reading ids.
//
// A segment holds at most segHalf ids. The insert that would pass that
// splits it: the ids whose next tag bit is 1 move to a new segment, and
// the directory, doubled first if the segment was named by a single entry
// of it, sends that half of the segment's tags there. So the index grows
// by one segment of 32 KiB at a time, and a split costs a pass over one
// segment (BenchmarkGrowth's max-ms), with no second table held while it
// grows: a table that doubled held its old and new tables together, 50 B
// per id at a million pending, against 21 B here (BenchmarkPendingBytes,
// index-B/timer).
//
// The hash is keyed with a per-engine random seed so that nobody can grind
// ids into one segment or probe run. The seed affects speed and memory
// only (which segments split when): the index is never iterated in an
// order that shows, so nothing observable depends on it.
type idIndex struct {
	// What lookups and inserts read, together in 64 bytes; what only
	// growth reads, behind a pointer.
	dir  []dirEntry // the segment of tag t is dir[t&mask]
	mask uint64     // len(dir)-1: the directory has 2^depth entries
	seed [2]uint64
	idOf func(rec uint32) *TimerID
	n    int // ids
	*segments
}

// segments is the index's memory: its segments' metadata and slots.
type segments struct {
	segs  []*segMeta        // every segment, in the order made
	slots slab.Slab[uint64] // the segments' slots: segment k is chunk k
	split []uint64          // a splitting segment's ids, reused
}

const (
	segShift = slab.Shift // a segment is a chunk of the slab
	segLen   = 1 << segShift
	segMask  = segLen - 1
	// segHalf is the most ids a segment holds: linear probing's runs stay
	// short at half full.
	segHalf = segLen / 2
	// maxSegDepth is the longest suffix of a tag that names a segment
	// (bits below the home's): a directory of 2^20 entries addresses
	// 2^32 slots, room for every record index.
	maxSegDepth = 32 - segShift
)

type segment [segLen]uint64

// segMeta is what the index knows of a segment beyond its slots, apart
// from them: a segment of 32 KiB plus a count would take 40 KiB of heap.
type segMeta struct {
	seg   *segment
	n     uint32 // ids in it
	depth uint8  // the low tag bits that name it: the directory entries
	// that end in them all point to it
}

// dirEntry is a directory entry: a segment and what is known of it, in one
// load.
type dirEntry struct {
	seg  *segment
	meta *segMeta
}

func newIDIndex(idOf func(uint32) *TimerID) idIndex {
	x := idIndex{seed: [2]uint64{rand.Uint64(), rand.Uint64()}, idOf: idOf, segments: new(segments)}
	x.dir = []dirEntry{x.newSegment(0)}
	return x
}

// newSegment adds an empty segment named by depth bits. Its slots are a
// chunk of the slab, whose blocks past a few MiB are advised to huge pages
// and made ready ahead: a million ids' segments span 16 MiB, probed at
// random, and segments of their own each (new(segment)) made a Cancel at
// a million pending 348.4 ns where the slab's took 317.6 (BenchmarkCancel,
// 4 rounds), from misses of the TLB.
func (x *idIndex) newSegment(depth uint8) dirEntry {
	first := uint32(len(x.segs)) * segLen
	x.slots.Ensure(first + segLen - 1)
	m := &segMeta{seg: (*segment)(unsafe.Pointer(x.slots.At(first))), depth: depth}
	// Mapped now: a probe of a page never touched maps the zero page, and
	// the write after it faults again.
	hugepage.Touch(m.seg[:])
	x.segs = append(x.segs, m)
	return dirEntry{seg: m.seg, meta: m}
}

func (x *idIndex) tag(id *TimerID) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[0:8])^x.seed[0], binary.LittleEndian.Uint64(id[8:16])^x.seed[1])
	t := (hi ^ lo) >> 32
	if t == 0 {
		t = 1
	}
	return t
}

// home is the home slot of tag in its segment; homeOf that of slot value v.
func home(tag uint64) uint64 { return tag >> (32 - segShift) & segMask }
func homeOf(v uint64) uint64 { return v >> (64 - segShift) }

// slot is where a lookup found an id, or where it would go: position p of
// the segment of dirEntry d.
type slot struct {
	dirEntry
	tag, p uint64
}

// find returns the slot holding id, or the empty slot where it would go,
// and whether it was found.
func (x *idIndex) find(id *TimerID, tag uint64) (slot, bool) {
	d := x.dir[tag&x.mask]
	p, ok := probe(d.seg, tag, id, x.idOf)
	return slot{dirEntry: d, tag: tag, p: p}, ok
}

// probe looks for id in segment s from its home slot: the slot holding it,
// or the first empty one.
func probe(s *segment, tag uint64, id *TimerID, idOf func(uint32) *TimerID) (uint64, bool) {
	for p := home(tag); ; p = (p + 1) & segMask {
		v := *slotAt(s, p)
		if v == 0 {
			return p, false
		}
		if v>>32 == tag && sameID(idOf(uint32(v)), id) {
			return p, true
		}
	}
}

// slotAt is &s[p&segMask], by address arithmetic: s[p] makes the compiler
// load the segment's first line as a check that s is not nil (it never
// is), one more line for a lookup to wait for (probe), an insert or a
// prefetch. In probeRec that check also serves shiftBack's accesses
// after it, and stays.
func slotAt(s *segment, p uint64) *uint64 {
	return (*uint64)(unsafe.Add(unsafe.Pointer(s), p&segMask<<3))
}

// prefetchRun starts loading the line of tag's home slot and the line
// after it: a deletion reads on to the end of the run, which near half
// full often crosses into the next line.
func (x *idIndex) prefetchRun(tag uint64) {
	s, h := x.dir[tag&x.mask].seg, home(tag)
	prefetch.Lines(unsafe.Pointer(slotAt(s, h)), unsafe.Pointer(slotAt(s, h|7+1)), nil, nil)
}

// candidate returns the record of the first slot of tag's run that has
// tag, without reading any id: the record a lookup of an id with that tag
// will most likely compare, which a caller can start loading.
func (x *idIndex) candidate(tag uint64) (uint32, bool) {
	s := x.dir[tag&x.mask].seg
	for p := home(tag); ; p = (p + 1) & segMask {
		switch v := *slotAt(s, p); {
		case v == 0:
			return 0, false
		case v>>32 == tag:
			return uint32(v), true
		}
	}
}

// lookAhead is how many places ahead of its lookup a pass of lookups
// loads an id's record, and twice that its slot (lookupAhead).
const lookAhead = 8

// lookupAhead serves place k of a pass of n lookups of the ids id(0),
// id(1), ..., which lie at random in the index: each lookup would wait
// for its slot, then its record. It loads the record of id(k+lookAhead),
// whose slot it loaded lookAhead places before, and the slot of
// id(k+2*lookAhead), so that their misses overlap the lookups before.
func (e *Engine) lookupAhead(id func(int) *TimerID, k, n int) {
	if j := k + lookAhead; j < n {
		if r, ok := e.ids.candidate(e.ids.tag(id(j))); ok {
			e.prefetchRec(r)
		}
		if j += lookAhead; j < n {
			e.ids.prefetchRun(e.ids.tag(id(j)))
		}
	}
}

// lookup finds id: its record and slot, or the slot where it would go.
func (x *idIndex) lookup(id *TimerID) (slot, uint32, bool) {
	s, ok := x.find(id, x.tag(id))
	return s, uint32(*slotAt(s.seg, s.p)), ok
}

func (x *idIndex) get(id *TimerID) (uint32, bool) {
	_, rec, ok := x.lookup(id)
	return rec, ok
}

// put adds id -> rec; id must not be present.
func (x *idIndex) put(id *TimerID, rec uint32) {
	s, _, _ := x.lookup(id)
	x.putAt(s, rec)
}

// putAt adds id -> rec at s, from a lookup of id that found nothing, with
// no change to the index since. It splits the segment first when it holds
// segHalf ids.
func (x *idIndex) putAt(s slot, rec uint32) {
	if s.meta.n >= segHalf {
		s = x.makeRoom(s.tag)
	}
	*slotAt(s.seg, s.p) = s.tag<<32 | uint64(rec)
	s.meta.n++
	x.n++
}

// makeRoom splits the segment of tag until it holds fewer than segHalf
// ids, and returns the empty slot where tag goes. A split that sends
// every id one way (tags alike in their next bit) leaves the segment full
// and splits again. At maxSegDepth, only reached by 2,048 tags alike in
// their low 20 bits, the segment fills beyond half instead, and a full
// one would probe for ever: that panics.
func (x *idIndex) makeRoom(tag uint64) slot {
	for {
		d := x.dir[tag&x.mask]
		if d.meta.n < segHalf || d.meta.depth == maxSegDepth {
			if d.meta.n >= segLen-1 {
				panic("engine: id index: a segment of maximal depth is full")
			}
			return slot{dirEntry: d, tag: tag, p: emptyFrom(d.seg, home(tag))}
		}
		x.splitSegment(tag)
	}
}

// emptyFrom is the first empty slot of s from slot p.
func emptyFrom(s *segment, p uint64) uint64 {
	for s[p&segMask] != 0 {
		p++
	}
	return p & segMask
}

// splitSegment splits the segment of tag in two by the tag bit above the
// depth that names it.
func (x *idIndex) splitSegment(tag uint64) {
	d := x.dir[tag&x.mask]
	depth := d.meta.depth
	if uint64(1)<<depth == uint64(len(x.dir)) {
		x.dir = append(x.dir, x.dir...)
		x.mask = uint64(len(x.dir) - 1)
	}
	d.meta.depth++
	up := x.newSegment(depth + 1)
	// The directory entries of the segment are those that end in tag's low
	// depth bits; those of them with the next bit set now name the new
	// segment.
	bit := uint64(1) << depth
	for i := tag&(bit-1) | bit; i < uint64(len(x.dir)); i += 2 * bit {
		x.dir[i] = up
	}
	if d.meta.n == 0 { // a reservation's or a restore's split
		return
	}
	x.split = x.split[:0]
	for _, v := range d.seg {
		if v != 0 {
			x.split = append(x.split, v)
		}
	}
	clear(d.seg[:])
	d.meta.n = 0
	for _, v := range x.split {
		to := d
		if v>>32&bit != 0 {
			to = up
		}
		to.seg[emptyFrom(to.seg, homeOf(v))] = v
		to.meta.n++
	}
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
	d := x.dir[tag&x.mask]
	p, ok := probeRec(d.seg, tag, rec)
	if !ok {
		panic(errLost)
	}
	x.delAt(slot{dirEntry: d, tag: tag, p: p})
}

// probeRec looks for record rec in segment s from tag's home slot.
func probeRec(s *segment, tag uint64, rec uint32) (uint64, bool) {
	p := home(tag)
	for v := s[p]; uint32(v) != rec; v = s[p] {
		if v == 0 {
			return 0, false
		}
		p = (p + 1) & segMask
	}
	return p, true
}

// delAt removes the id at s, from a lookup that found it, with no change to
// the index since.
func (x *idIndex) delAt(s slot) {
	shiftBack(s.seg, s.p)
	s.meta.n--
	x.n--
}

// shiftBack empties slot p of segment s: backward shift, which pulls later
// entries of the run into the hole when their home slot does not lie
// strictly between the hole and them. Whether an entry moves is a coin
// toss to the branch predictor, so the loop writes the hole either way and
// picks the new hole without a branch.
func shiftBack(s *segment, p uint64) {
	for q := p; ; {
		q = (q + 1) & segMask
		v := s[q]
		if v == 0 {
			break
		}
		// m is all ones when v moves: (q-home)&segMask >= (q-p)&segMask
		// (masking after the subtraction is the same).
		m := uint64((int64((q-p)&segMask) - int64((q-homeOf(v))&segMask) - 1) >> 63)
		s[p] ^= (s[p] ^ v) & m
		p ^= (p ^ q) & m
	}
	s[p] = 0
}

// cachedSlots is the size up to which the index is left to the cache: its
// 256 KiB (10,000 pending timers' ids) stay in a core's L2 from block to
// block, so that loading ahead costs a call per deletion and gains nothing.
const cachedSlots = 1 << 15

// delRecs is delRec for each of recs, whose ids hash to tags. In an index
// larger than cachedSlots it loads each one's run ahead deletions before
// it, and the misses outweigh the calls. Within it, it works inline: end
// of block calls it for every fired timer, and the calls of delRec cost
// as much as its work when the slots are cached.
func (x *idIndex) delRecs(recs []uint32, tags []uint64) {
	if len(x.segs)*segLen > cachedSlots {
		for k, rec := range recs {
			if j := k + ahead; j < len(tags) {
				x.prefetchRun(tags[j])
			}
			x.delRec(tags[k], rec)
		}
		return
	}
	// In locals: the compiler cannot tell that the writes to the slots
	// leave x's fields as they were, and would load them at each timer.
	dir, mask := x.dir, x.mask
	for k, rec := range recs {
		tag := tags[k]
		d := dir[tag&mask]
		p, ok := probeRec(d.seg, tag, rec)
		if !ok {
			panic(errLost)
		}
		shiftBack(d.seg, p)
		d.meta.n--
	}
	x.n -= len(recs)
}

// putAll adds the ids of records recs, none of them present, segment by
// segment: a restore's million inserts then fill one segment of 32 KiB
// after another instead of missing the cache at each. It stops at an id
// that comes twice, or is already in, and returns it.
func (x *idIndex) putAll(recs []uint32) (dup *TimerID) {
	x.presplit(x.n+len(recs), segHalf)
	mask, depth := x.mask, uint(bits.TrailingZeros64(x.mask+1))
	// Each record in one word, ordered by its segment in its top depth
	// bits (bulkWord): one pass of SortHigh per 11 of them, over 8 bytes
	// an id, where Sort took a pass per byte of a 64-bit key over 16.
	words := make([]uint64, len(recs))
	for k, i := range recs {
		words[k] = bulkWord(x.tag(x.idOf(i)), i)
	}
	words, _ = radix.SortHigh(words, nil, min(int(depth+radix.HighDigitBits-1)/radix.HighDigitBits, radix.MaxHighPasses))
	shift := 64 - depth // a group's words agree above it: one segment's
	for from := 0; from < len(words); {
		to := from + 1
		for to < len(words) && words[to]>>shift == words[from]>>shift {
			to++
		}
		// A segment that its share would fill past half splits now,
		// while empty or nearly, rather than full.
		if m := x.dir[bulkTag(words[from])&mask].meta; int(m.n)+to-from > segHalf && m.depth < maxSegDepth {
			x.splitSegment(bulkTag(words[from]))
		}
		for _, v := range words[from:to] {
			id := x.idOf(uint32(v)) // an address: the record is read only where a tag matches
			s, found := x.find(id, bulkTag(v))
			if found {
				return id
			}
			x.putAt(s, uint32(v))
		}
		from = to
	}
	return nil
}

// bulkWord packs tag t and record rec into one word: the low 20 bits of
// t, which name its segment, reversed on top (so that the word's top
// bits are the bits that name a segment at any depth, first bit first),
// then t's top 12 bits, then rec. bulkTag unpacks t.
func bulkWord(t uint64, rec uint32) uint64 {
	low := bits.Reverse32(uint32(t)&(1<<maxSegDepth-1)) >> (32 - maxSegDepth)
	return uint64(low)<<(64-maxSegDepth) | t>>maxSegDepth<<32 | uint64(rec)
}

func bulkTag(v uint64) uint64 {
	low := bits.Reverse32(uint32(v>>(64-maxSegDepth)) << (32 - maxSegDepth))
	return v>>32&(1<<segShift-1)<<maxSegDepth | uint64(low)
}

// each calls f with every entry of the index, in no meaningful order.
func (x *idIndex) each(f func(entry uint64)) {
	for _, m := range x.segs {
		for _, v := range m.seg {
			if v != 0 {
				f(v)
			}
		}
	}
}

func (x *idIndex) bytes() int {
	return x.slots.Bytes() + len(x.segs)*int(unsafe.Sizeof(segMeta{})) + len(x.dir)*int(unsafe.Sizeof(dirEntry{}))
}

// reserve splits segments now so that n ids, spread as tags are, fill
// them to three eighths on average: an engine that reserved room for n
// timers (Engine.Reserve) splits a segment on its way there only where
// the tags crowd one past half.
func (x *idIndex) reserve(n int) { x.presplit(n, 3*segLen/8) }

// presplit splits segments until n ids, spread as tags are, average at
// most perSeg a segment. A restore asks for half full, as growth leaves a
// segment at most (those its ids crowd past half split as they come):
// more would hold memory that an engine grown to n does not.
func (x *idIndex) presplit(n, perSeg int) {
	depth := uint8(0)
	for depth < maxSegDepth && perSeg<<depth < n {
		depth++
	}
	// The directory doubles under the loop: its new entries copy the old
	// ones and are visited too.
	for i := 0; i < len(x.dir); i++ {
		for x.dir[i].meta.depth < depth {
			x.splitSegment(uint64(i))
		}
	}
}
