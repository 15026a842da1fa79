// Package ring is tier 1 of the calendar queue: the block ring buffer.
//
// A bucket is an unrolled list: a chain of fixed-size chunks of 32 inline
// entries (512 bytes, on cache-line boundaries; the chain's links are kept
// apart), taken from a [Chunks] arena with a free list, so appending
// writes next to the previous entry, draining a bucket reads memory in
// order, and in steady state nothing is allocated. An entry's [Pos] (its
// chunk and slot) lets its owner cancel it in O(1): the entry becomes a
// tombstone (Seq 0) that draining skips, and once tombstones outnumber
// the live entries the bucket is compacted in place a few slots per
// cancel ([Bucket.Compact]), the moved entries' owners told their new
// positions. A bucket can also be taken from
// the front a few entries at a time ([Bucket.Shift]) and handed whole to
// an empty bucket in O(1) ([Buckets.MoveTo]), its entries keeping their
// positions: the calendar spreads the promotion of an epoch over the
// blocks before it with both. A [Ring] is a power-of-two array of
// buckets, bucket = height & (size-1), with a bitset of the non-empty ones.
//
// A chunk stores an entry in 16 bytes, its height as a 32-bit offset from
// the bucket's base height (that of the first entry pushed into it empty),
// so a bucket's heights must lie within 2^31 of each other; Push panics
// otherwise. The ring does not check which heights it holds: its owner
// keeps every resident height within one window of at most Size
// consecutive heights, so a bucket never mixes two heights.
package ring
