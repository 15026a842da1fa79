//go:build race

package engine

// raceEnabled: the race detector's instrumentation allocates (sync.Pool
// drops what it is given at random), so allocation bounds do not hold.
const raceEnabled = true
