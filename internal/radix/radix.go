// Package radix sorts (64-bit key, position) items by key with a least
// significant digit first radix sort: one linear, stable pass per byte of
// the key that varies, where a comparison sort would make n·log n
// comparisons. The engine orders its changed timer ids and its pending
// timers by sequence with it, and the calendar queue a bulk load of far
// timers by height. SortHigh sorts bare 64-bit words by their high bits,
// as the lane orders a block's candidates.
package radix

import "slices"

// Item is what Sort orders: a key, and the position in the caller's data
// of what it stands for.
type Item struct {
	Key uint64
	Pos uint32
}

// Sort sorts a by Key, keeping the order of equal keys, with spare (of any
// length) as scratch, and returns the sorted items and the other buffer.
// It makes one pass per byte that is not 0 in vdiff, the bits in which
// some key differs from another (all ones when unknown; Diff computes it).
func Sort(a, spare []Item, vdiff uint64) (sorted, rest []Item) {
	b := append(spare[:0], a...)
	var at [256]int
	for d := uint(0); d < 64; d += 8 {
		if byte(vdiff>>d) == 0 {
			continue
		}
		clear(at[:])
		for i := range a {
			at[byte(a[i].Key>>d)]++
		}
		sum := 0
		for n, c := range at {
			at[n], sum = sum, sum+c
		}
		for i := range a {
			n := byte(a[i].Key >> d)
			b[at[n]] = a[i]
			at[n]++
		}
		a, b = b, a
	}
	return a, b
}

// Diff returns the bits in which some item's key differs from another's.
func Diff(a []Item) uint64 {
	var d uint64
	for i := range a {
		d |= a[i].Key ^ a[0].Key
	}
	return d
}

// HighDigitBits is the width of SortHigh's digits: a pass per 11 bits, and
// the counts of every digit fit in 40 KiB, which one pass over the values
// fills.
const (
	HighDigitBits = 11
	highBuckets   = 1 << HighDigitBits
)

// MaxHighPasses bounds SortHigh's passes: 5 digits of 11 bits.
const MaxHighPasses = 5

// SortHigh sorts a (fewer than 2^32 values) by the top 11·passes bits of
// its values (passes at most MaxHighPasses), keeping the order of values
// equal in those bits, with spare as scratch, and returns the sorted
// values and the other buffer. It makes one pass to count, then one per
// digit: none for a digit in which every value agrees. Packing a key's
// high bits above a position in one word halves the bytes each pass
// moves, against Sort's items.
func SortHigh(a, spare []uint64, passes int) (sorted, rest []uint64) {
	b := slices.Grow(spare[:0], len(a))[:len(a)]
	var at [MaxHighPasses][highBuckets]uint32
	for _, v := range a { // every digit, unused ones too: no inner loop
		at[0][v>>(64-HighDigitBits)]++
		at[1][v>>(64-2*HighDigitBits)&(highBuckets-1)]++
		at[2][v>>(64-3*HighDigitBits)&(highBuckets-1)]++
		at[3][v>>(64-4*HighDigitBits)&(highBuckets-1)]++
		at[4][v>>(64-5*HighDigitBits)&(highBuckets-1)]++
	}
	for j := passes - 1; j >= 0; j-- { // least significant digit first
		d, to := uint(64-HighDigitBits*(j+1)), &at[j]
		if len(a) == 0 || to[a[0]>>d&(highBuckets-1)] == uint32(len(a)) {
			continue // every value has the same digit here
		}
		var sum uint32
		for v, c := range to {
			to[v], sum = sum, sum+c
		}
		for _, v := range a {
			x := v >> d & (highBuckets - 1)
			b[to[x]] = v
			to[x]++
		}
		a, b = b, a
	}
	return a, b
}
