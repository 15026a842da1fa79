// Package prefetch asks the CPU to start loading a cache line that the
// caller will read or write soon, so that the miss overlaps other work (a
// Keccak, the loads of other timers) instead of stalling the access. It is
// a hint: it changes no memory and never faults, so it affects speed only,
// never what the engine computes.
package prefetch
