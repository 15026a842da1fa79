// Package fairness maintains the CIP-1 §8 fairness window and computes the
// per-actor fairness weight W(actor) that the lane policy multiplies into a
// timer's effective priority at every end of block.
//
// # Semantics
//
// Actors are uint32 handles chosen by the caller (the engine's dense actor
// index). The window is F blocks long (F >= 1, fairness_window_blocks). At
// the end of block H the caller, in this order:
//
//  1. calls [Window.Expire](H), which drops every fire recorded at a height
//     below H−F (nothing when H < F), so that the window is the fires of the
//     F most recent completed blocks [H−F, H−1];
//  2. reads weights with [Window.Weight];
//  3. records the fires of block H with [Window.Add](H, actor, n).
//
// recent(actor) is the sum of the actor's fires in the window. With the n
// actors having recent >= 1 sorted ascending as c_1..c_n, the network median
// is kept doubled so that it stays an integer: m2 = 2·c_((n+1)/2) when n is
// odd, c_(n/2)+c_(n/2+1) when n is even and 0 when n = 0. The weight in
// parts per million is
//
//	W_ppm = 2_000_000 − min(1_000_000, ⌊recent·2_000_000 / max(2, m2)⌋)
//
// that is clip(2 − recent/max(1, median), 1, 2) with the ratio rounded down,
// so W is rounded up to the next ppm. An actor without recent fires gets
// 2_000_000.
//
// # Representation
//
// Memory is proportional to the fires in the window, not to F per actor (the
// spec's 1,000-element ring buffer per actor is not used):
//
//   - a FIFO log of (actor, n) entries of 12 bytes, one per (height, actor)
//     with fires, in a power-of-two ring addressed by sequence numbers, and
//     beside it a ring of one 16-byte record per height with fires (the
//     height and its first entry). Repeated Adds of one actor at one height
//     coalesce into one entry: each actor keeps the sequence number of its
//     newest entry, which is at the current height when it is at or after
//     the current height's first entry;
//   - a dense per-actor table indexed by handle (recent count, newest entry,
//     position in the median heaps; 24 bytes), grown by doubling;
//   - the median kept incrementally by two indexed binary heaps over the
//     actors present (16 bytes each): a max-heap holding the lower ⌈n/2⌉
//     counts and a min-heap holding the upper ⌊n/2⌋, so m2 is read from the
//     two tops in O(1) and a count change costs O(log actors). Unlike a
//     histogram over count values, their size does not depend on how large
//     the counts are.
//
// Every Add and every expired entry is O(log actors), so a block costs
// O((entries added + entries expired)·log actors): proportional to the actors
// that fired, independent of F and of the idle actors. Nothing allocates in
// steady state: the slices are reused and only grow (by doubling) when they
// must; a ring shrinks again when it falls below an eighth of its capacity.
//
// Everything is deterministic: integers only, no maps, no clock. The log
// ([Window.Walk], oldest first) is the whole state besides F: replaying it
// into a new Window with Add rebuilds the same window.
package fairness
