// Package bitset is a fixed-size set of bucket indices that can be scanned
// cyclically, a word at a time: the tiers use it to find their next
// non-empty bucket without visiting every empty one.
package bitset

import "math/bits"

// Cyclic is a set of indices in [0, size).
type Cyclic struct {
	words []uint64
	size  uint64
}

// New returns an empty set of size indices.
func New(size uint64) Cyclic {
	return Cyclic{words: make([]uint64, (size+63)/64), size: size}
}

// Set adds i.
func (c *Cyclic) Set(i uint64) { c.words[i>>6] |= 1 << (i & 63) }

// Clear removes i.
func (c *Cyclic) Clear(i uint64) { c.words[i>>6] &^= 1 << (i & 63) }

// Next returns the smallest k < n such that (start+k) mod size is in the
// set, visiting indices cyclically from start; start must be < size.
func (c *Cyclic) Next(start, n uint64) (uint64, bool) {
	b := start
	for k := uint64(0); k < n; {
		step := min(64-b&63, c.size-b, n-k) // to the end of the word, the set or the range
		w := c.words[b>>6] >> (b & 63)
		if step < 64 {
			w &= 1<<step - 1
		}
		if w != 0 {
			return k + uint64(bits.TrailingZeros64(w)), true
		}
		k += step
		if b += step; b == c.size {
			b = 0
		}
	}
	return 0, false
}
