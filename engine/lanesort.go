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

// keySorter sorts a block's keys; it keeps its buffers between blocks.
type keySorter struct {
	a, b  []radix.Item
	spare []sortKey
}

// sort returns x sorted by before, in a buffer of the sorter's; x's
// becomes the sorter's spare. Keys of one block share their high bytes
// (priorities are small numbers), so it sorts by the 64 bits of w from
// the most significant one that is not the same in every key: a least
// significant digit first radix sort of (those bits, position) items,
// one linear pass per byte that varies, where a comparison sort would
// make 130,000 comparisons of 10,000 candidates. Runs that agree on
// those bits are then put in full order by comparisons; within a block
// they are real ties, rare since the bits reach into the timer ids.
func (s *keySorter) sort(x []sortKey, tie func(a, b uint32) bool) []sortKey {
	if len(x) < 32 {
		insertKeys(x, tie)
		return x
	}
	var diff [4]uint64 // the bits in which some key differs from x[0]
	for i := range x {
		for j := range diff {
			diff[j] |= x[i].w[j] ^ x[0].w[j]
		}
	}
	word := 0
	for word < 3 && diff[word] == 0 {
		word++
	}
	shift := uint(bits.LeadingZeros64(diff[word])) // 64 when all keys are equal
	a := s.a[:0]
	var vdiff uint64
	for i := range x {
		v := x[i].w[word] << shift
		if word < 3 && shift > 0 {
			v |= x[i].w[word+1] >> (64 - shift)
		}
		a = append(a, radix.Item{Key: v, Pos: uint32(i)})
		vdiff |= v ^ a[0].Key
	}
	a, b := radix.Sort(a, s.b, vdiff)
	out := s.spare[:0]
	for _, it := range a {
		out = append(out, x[it.Pos])
	}
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j].Key == a[i].Key {
			j++
		}
		if j-i > 1 {
			orderKeys(out[i:j], tie)
		}
		i = j
	}
	s.a, s.b, s.spare = a[:0], b[:0], x[:0]
	return out
}

// orderKeys sorts x by before: by insertion when short, as runs of equal
// sorting windows are.
func orderKeys(x []sortKey, tie func(a, b uint32) bool) {
	if len(x) <= 12 {
		insertKeys(x, tie)
		return
	}
	slices.SortFunc(x, func(a, b sortKey) int { return a.compare(&b, tie) })
}

// insertKeys sorts a short x by before.
func insertKeys(x []sortKey, tie func(a, b uint32) bool) {
	for i := 1; i < len(x); i++ {
		for j := i; j > 0 && x[j].before(&x[j-1], tie); j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
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
