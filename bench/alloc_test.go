package bench

import (
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
)

// The steady state of a node allocates nothing per call: these tests fail
// on any allocation in Schedule, Cancel or end of block once the engine's
// slabs, index, pools and buffers have grown to the workload.

func TestScheduleAllocs(t *testing.T) {
	s := newSteady(t, 8*perBlock, payload(32))
	// 1+1000 calls stay within one block, so no block ends in between.
	if n := testing.AllocsPerRun(1000, s.schedule); n != 0 {
		t.Errorf("Schedule: %v allocs per call, want 0", n)
	}
}

func TestCancelAllocs(t *testing.T) {
	// A third of the pool in each tier, so that every kind of unlink runs.
	const pool = 3 * 4 * perBlock
	var heights []uint64
	for _, tier := range []calendar.Tier{calendar.TierRing, calendar.TierEpoch, calendar.TierOverflow} {
		heights = append(heights, tierHeights(tier, pool/3)...)
	}
	c := newCanceller(t, heights)
	// One full round first: actors dropped and re-added, free lists grown.
	for range pool / perBlock {
		for range perBlock {
			c.cancel()
		}
		c.closeTx()
		c.refill(perBlock)
	}
	// The calls include the Commits, every perTx calls, that unlink the
	// cancelled timers and free them.
	if n := testing.AllocsPerRun(1000, c.cancel); n != 0 {
		t.Errorf("Cancel: %v allocs per call, want 0", n)
	}
}

func TestEndBlockAllocs(t *testing.T) {
	s := newSteady(t, 8*perBlock, nil)
	fired := s.fired
	// Nothing is scheduled in between, so the 1+8 blocks deliver what the
	// steady state left pending.
	if n := testing.AllocsPerRun(8, s.next); n != 0 {
		t.Errorf("EndBlock: %v allocs per block, want 0", n)
	}
	if s.fired-fired < 4*perBlock {
		t.Fatalf("only %d timers fired; the test measures too little", s.fired-fired)
	}
}
