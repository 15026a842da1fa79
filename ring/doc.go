// Package ring is tier 1 of the calendar queue: the block ring buffer.
//
// Timers live in an [Arena] of fixed-size [Node] slots addressed by uint32
// indices (0 is the nil index), grown in slabs and recycled through a free
// list, so that in steady state nothing is allocated. A [List] is an
// intrusive doubly linked FIFO list threaded through the arena's nodes; a
// [Ring] is a power-of-two array of such lists, one bucket per block height
// modulo the ring size. Enqueue, cancel and taking a whole bucket are O(1).
//
// The ring does not know which heights it holds: its owner keeps every
// resident height within one window of at most Size consecutive heights, so
// a bucket never mixes two heights.
package ring
