package engine

import (
	"math/bits"
	"slices"

	"github.com/timerlane/timerlane/internal/radix"
)

// sortKey is a candidate's place in the lane's order (CIP-1 §3 step 7):
// effective priority descending, then timer id ascending. w holds the
// complement of the 192-bit effective priority and the id's first 8
// bytes, so that ascending w is that order and most ties are settled
// without reading the record; keys with equal w go to the full tie-break.
type sortKey struct {
	w [4]uint64 // ^eff.hi, ^eff.mid, ^eff.lo, id[:8] big-endian
	k uint32    // index in cands
}

func newSortKey(eff wide, id0 uint64, k uint32) sortKey {
	return sortKey{w: [4]uint64{^eff.hi, ^eff.mid, ^eff.lo, id0}, k: k}
}

// before reports whether key a sorts before b; full ties go to tie.
func (a *sortKey) before(b *sortKey, tie func(a, b uint32) bool) bool {
	for i := range a.w {
		if a.w[i] != b.w[i] {
			return a.w[i] < b.w[i]
		}
	}
	return tie(a.k, b.k)
}

// compare is -1, 0 or +1 as a sorts before, with or after b.
func (a *sortKey) compare(b *sortKey, tie func(a, b uint32) bool) int {
	switch {
	case a.before(b, tie):
		return -1
	case b.before(a, tie):
		return 1
	}
	return 0
}

// keySorter sorts a block's keys, or makes a heap of them; it keeps its
// buffers between blocks.
type keySorter struct {
	a, b  []uint64
	order []uint32
}

// keyDiff gathers the bits in which keys differ from the first one given,
// for varying: the lane's classification gives it each key as it makes it,
// which spares the heap a pass over a million keys, 40 MiB.
type keyDiff struct {
	first, bits [4]uint64
	n           int
}

func (d *keyDiff) add(w *[4]uint64) {
	if d.n == 0 {
		d.first = *w
	}
	d.n++
	d.bits[0] |= w[0] ^ d.first[0]
	d.bits[1] |= w[1] ^ d.first[1]
	d.bits[2] |= w[2] ^ d.first[2]
	d.bits[3] |= w[3] ^ d.first[3]
}

// diffOf is the keyDiff of x.
func diffOf(x []sortKey) keyDiff {
	var d keyDiff
	for i := range x {
		d.add(&x[i].w)
	}
	return d
}

// varying finds where the keys that d gathered start to differ: the word
// of w, and how many of its leading bits all share (64 when all keys are
// equal). Keys of one block share their high bytes (priorities are small
// numbers).
func (d *keyDiff) varying() (word int, shift uint) {
	for word < 3 && d.bits[word] == 0 {
		word++
	}
	return word, uint(bits.LeadingZeros64(d.bits[word]))
}

// pack returns, for each key of x, a word that holds in its bits keep (the
// high ones) the key's bits from where they start to vary (varying's word
// and shift), and the key's position in x in the others: words whose bits
// keep differ compare as their keys; those that agree there need the keys
// themselves. The words are in s.a's memory.
func (s *keySorter) pack(x []sortKey, word int, shift uint, keep uint64) []uint64 {
	a := s.a[:0]
	for i := range x {
		v := x[i].w[word] << shift
		if word < 3 && shift > 0 && shift < 64 {
			v |= x[i].w[word+1] >> (64 - shift)
		}
		a = append(a, v&keep|uint64(i))
	}
	return a
}

// sort returns the positions in x of its keys in the order of before: a
// radix sort of their packed words makes a linear pass per 11 bits, where
// a comparison sort would make 130,000 comparisons of 10,000 candidates.
// The words keep as many bits as tell keys apart (those that vary among
// the effective priorities, then some 8 more than log2 n of the timer
// id). Runs that agree on those bits are then put in full order by
// comparisons; they are rare, short, or real ties.
func (s *keySorter) sort(x []sortKey, tie func(a, b uint32) bool) []uint32 {
	order := s.order[:0]
	if len(x) < 32 {
		for i := range x {
			order = append(order, uint32(i))
		}
		s.order = order
		orderPos(order, x, tie)
		return order
	}
	d := diffOf(x)
	word, shift := d.varying()
	posBits := bits.Len(uint(len(x)))
	need := 64
	switch word {
	case 2: // the priorities vary in their low word: 64 - shift bits
		need = 64 - int(shift) + posBits + 8
	case 3: // equal priorities: only the ids vary
		need = posBits + 8
	}
	passes := min((need+radix.HighDigitBits-1)/radix.HighDigitBits, (64-posBits)/radix.HighDigitBits, radix.MaxHighPasses)
	keep := ^uint64(0) << (64 - radix.HighDigitBits*passes)
	a, b := radix.SortHigh(s.pack(x, word, shift, keep), s.b, passes)
	for _, v := range a {
		order = append(order, uint32(v&^keep))
	}
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j]&keep == a[i]&keep {
			j++
		}
		if j-i > 1 {
			orderPos(order[i:j], x, tie)
		}
		i = j
	}
	s.a, s.b, s.order = a[:0], b[:0], order
	return order
}

// heap makes a heap of x's keys, whose keyDiff is d, their words packed
// as for sort but with every bit above the position kept: it pops the
// candidates in priority order, for a block whose lane holds only a small
// part of them. The heap of words is a fifth of the keys' memory, and
// most of its comparisons read one word, not a key's four.
func (s *keySorter) heap(x []sortKey, d *keyDiff, tie func(a, b uint32) bool) keyHeap {
	h := keyHeap{x: x, tie: tie}
	if len(x) > 0 {
		word, shift := d.varying()
		h.keep = ^uint64(0) << bits.Len(uint(len(x)))
		h.a = s.pack(x, word, shift, h.keep)
		s.a = h.a[:0] // its room, for the next block
		h.init()
	}
	return h
}

// keyHeap is a min-heap, by before, of packed keys of x (keySorter.heap).
// Specialised: the generic heap's comparator call costs more than most
// comparisons.
type keyHeap struct {
	a    []uint64
	keep uint64
	x    []sortKey
	tie  func(a, b uint32) bool
}

// Len is the number of keys in the heap.
func (h *keyHeap) Len() int { return len(h.a) }

// less reports whether packed word u sorts before v: by the bits keep
// holds when they differ (they are the high bits), else by the keys.
func (h *keyHeap) less(u, v uint64) bool {
	if u&h.keep != v&h.keep {
		return u < v
	}
	return h.x[u&^h.keep].before(&h.x[v&^h.keep], h.tie)
}

func (h *keyHeap) init() {
	for i := len(h.a)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves a[i] down to its place.
func (h *keyHeap) down(i int) {
	a := h.a
	for {
		c := 2*i + 1
		if c >= len(a) {
			return
		}
		if c+1 < len(a) && h.less(a[c+1], a[c]) {
			c++
		}
		if !h.less(a[c], a[i]) {
			return
		}
		a[i], a[c] = a[c], a[i]
		i = c
	}
}

// pop removes the first key and returns its position in x.
func (h *keyHeap) pop() uint32 {
	top := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a = h.a[:n]
	h.down(0)
	return uint32(top &^ h.keep)
}

// prune drops the keys whose positions in x stay refuses, and makes a heap
// of the rest.
func (h *keyHeap) prune(stay func(pos uint32) bool) {
	n := 0
	for _, v := range h.a {
		if stay(uint32(v &^ h.keep)) {
			h.a[n] = v
			n++
		}
	}
	h.a = h.a[:n]
	h.init()
}

// orderPos sorts the positions p by before of their keys in x: by
// insertion when short, as runs of equal sorting windows are.
func orderPos(p []uint32, x []sortKey, tie func(a, b uint32) bool) {
	if len(p) <= 12 {
		for i := 1; i < len(p); i++ {
			for j := i; j > 0 && x[p[j]].before(&x[p[j-1]], tie); j-- {
				p[j], p[j-1] = p[j-1], p[j]
			}
		}
		return
	}
	slices.SortFunc(p, func(a, b uint32) int { return x[a].compare(&x[b], tie) })
}

// A walk off the heap prunes it, dropping every candidate that the lane's
// room left can no longer hold, once more than pruneAfter and more than
// one in pruneShare of those left came off it finding no room. Without a
// prune, a backlog of timers too large for what the block's fires leave
// came off the heap one at a time, each block: O(n log n), 0.94 s a block
// at a million (BenchmarkLaneBacklog, kind=full). The misses before a
// prune cost about as much as the prune, so a walk that finds no more to
// drop is slowed by at most that factor.
const (
	pruneAfter = 256
	pruneShare = 64
)
