// Package radix sorts (64-bit key, position) items by key with a least
// significant digit first radix sort: one linear, stable pass per byte of
// the key that varies, where a comparison sort would make n·log n
// comparisons. The engine orders a block's lane candidates, its changed
// timer ids and its pending timers by sequence with it, and the calendar
// queue a bulk load of far timers by height.
package radix

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
