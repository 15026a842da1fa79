package engine

import (
	"math"
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
	w   [4]uint64 // ^eff.hi, ^eff.mid, ^eff.lo, id[:8] big-endian
	k   uint32    // index in cands
	gas uint32    // the candidate's gas limit, or maxGas32 for one that large: the heap's prune reads it in place
}

// maxGas32 stands in sortKey.gas for a gas limit of maxGas32 or more.
const maxGas32 = math.MaxUint32

func newSortKey(eff wide, id0 uint64, k uint32, gas uint64) sortKey {
	return sortKey{w: [4]uint64{^eff.hi, ^eff.mid, ^eff.lo, id0}, k: k, gas: uint32(min(gas, maxGas32))}
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

// keySorter sorts a block's keys; it keeps its buffers between blocks.
type keySorter struct {
	a, b       []uint64
	order, tmp []uint32
	runs       []uint32 // a stack of the runs sortRun sorts again, from and to
}

// sort returns the positions in x of its keys in the order of before.
func (s *keySorter) sort(x []sortKey, tie func(a, b uint32) bool) []uint32 {
	order := s.order[:0]
	for i := range x {
		order = append(order, uint32(i))
	}
	s.order = order
	s.sortRun(order, x, tie)
	return order
}

// runRadix is the shortest run of keys that sortRun sorts by radix: a
// radix sort clears 40 KiB of counts, which fewer keys do not repay.
const runRadix = 256

// sortRun puts the positions p in the order of before of their keys in x.
// Keys of one block share their high bytes (priorities are small
// numbers), so it reads w from its most significant bit that is not the
// same in every key of p, takes as many of those bits as it needs to tell
// keys apart (those that vary among the effective priorities, then some 8
// more than log2 n of the timer id) and packs them, above the key's place
// in p, in one word: a radix sort of those words makes a linear pass per
// 11 bits, where a comparison sort would make 130,000 comparisons of
// 10,000 candidates. Keys that agree on those bits are sorted again the
// same way, on the bits below, when there are runRadix of them or more,
// else by comparisons. Before session 47 they all went to comparisons:
// one priority far above the others left the others agreeing on every
// bit taken, and 100,000 candidates sorted by comparisons.
func (s *keySorter) sortRun(p []uint32, x []sortKey, tie func(a, b uint32) bool) {
	if len(p) < runRadix {
		orderPos(p, x, tie)
		return
	}
	var diff [4]uint64 // the bits in which some key differs from the first
	first := x[p[0]].w
	for _, i := range p {
		w := &x[i].w
		diff[0] |= w[0] ^ first[0]
		diff[1] |= w[1] ^ first[1]
		diff[2] |= w[2] ^ first[2]
		diff[3] |= w[3] ^ first[3]
	}
	if diff == [4]uint64{} { // equal keys: only tie orders them
		orderPos(p, x, tie)
		return
	}
	word := 0
	for word < 3 && diff[word] == 0 {
		word++
	}
	shift := uint(bits.LeadingZeros64(diff[word]))
	posBits := bits.Len(uint(len(p)))
	need := 64
	switch word {
	case 2: // the priorities vary in their low word: 64 - shift bits
		need = 64 - int(shift) + posBits + 8
	case 3: // equal priorities: only the ids vary
		need = posBits + 8
	}
	passes := min((need+radix.HighDigitBits-1)/radix.HighDigitBits, (64-posBits)/radix.HighDigitBits, radix.MaxHighPasses)
	keep := ^uint64(0) << (64 - radix.HighDigitBits*passes)
	high := func(i uint32) uint64 { // the bits of key i taken, at the top of a word
		v := x[i].w[word] << shift
		if word < 3 && shift > 0 {
			v |= x[i].w[word+1] >> (64 - shift)
		}
		return v & keep
	}
	a := s.a[:0]
	for k, i := range p {
		a = append(a, high(i)|uint64(k))
	}
	a, b := radix.SortHigh(a, s.b, passes)
	tmp := append(s.tmp[:0], p...)
	for j, v := range a {
		p[j] = tmp[v&^keep]
	}
	// Runs of keys that agree on the bits taken: short ones now, long
	// ones once a and b, which sorting them again takes, are done with.
	base := len(s.runs)
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j]&keep == a[i]&keep {
			j++
		}
		switch {
		case j-i >= runRadix:
			s.runs = append(s.runs, uint32(i), uint32(j))
		case j-i > 1:
			orderPos(p[i:j], x, tie)
		}
		i = j
	}
	s.a, s.b, s.tmp = a[:0], b[:0], tmp[:0]
	for r := base; r < len(s.runs); r += 2 { // each call leaves s.runs as it found it
		s.sortRun(p[s.runs[r]:s.runs[r+1]], x, tie)
	}
	s.runs = s.runs[:base]
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

// heapKeys arranges x as a heap whose top comes first by before; with
// siftKeys it pops the candidates in priority order, for a block whose
// lane holds only a small part of them. Specialised to sortKey: the
// generic heap's comparator call costs more than the comparison itself.
func heapKeys(x []sortKey, tie func(a, b uint32) bool) {
	for i := len(x)/2 - 1; i >= 0; i-- {
		siftKeys(x, i, tie)
	}
}

// siftKeys moves x[i] down to its place in the heap x.
func siftKeys(x []sortKey, i int, tie func(a, b uint32) bool) {
	for {
		c := 2*i + 1
		if c >= len(x) {
			return
		}
		if c+1 < len(x) && x[c+1].before(&x[c], tie) {
			c++
		}
		if !x[c].before(&x[i], tie) {
			return
		}
		x[i], x[c] = x[c], x[i]
		i = c
	}
}

// A walk off the heap prunes it: it drops every candidate larger than the
// room the lane has left, which can never fit (the room only shrinks
// during a walk), once more than pruneAfter candidates, and more than a
// pruneShare-th of the heap, came off it finding no room. Without a
// prune, a backlog of timers too large for what the block's fires leave
// came off the heap one at a time, each block: O(n log n), a second a
// block at a million (BenchmarkLaneBacklog, kind=full). The heap ends
// when a prune keeps more than half of it, or when an eighth of it came
// off: the walk then sorts what is left and goes on in order. So an
// order made to defeat the prune, or a lane that holds more of the
// candidates than the choice of the heap judged (session 47's reviews),
// costs about a sort more, not O(n log n).
const (
	pruneAfter = 256
	pruneShare = 64
)

// pruneKeys moves to the front of x the keys of the candidates whose gas
// fits in room, in their order, and returns how many. It reads the keys
// alone, in sequence, but for a gas limit of maxGas32 or more.
func pruneKeys(x []sortKey, cands []cand, room uint64) int {
	n := 0
	for _, key := range x {
		fits := uint64(key.gas) <= room
		if key.gas == maxGas32 {
			fits = cands[key.k].gas <= room
		}
		if fits {
			x[n] = key
			n++
		}
	}
	return n
}
