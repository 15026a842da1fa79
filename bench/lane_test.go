package bench

import (
	"fmt"
	"testing"

	"github.com/timerlane/timerlane/engine"
)

// laneBlock drives the lane's end of block: every block, laneActors actors
// each schedule laneEach timers due in the next block, with gas limits that
// let the whole set fit the lane, so that each end of block classifies,
// prices, sorts, settles and fires 10,000 timers.
type laneBlock struct {
	tb    testing.TB
	e     *engine.Engine
	nonce uint64
	fired int
}

const (
	laneActors = 1_000
	laneEach   = 10
	laneDue    = laneActors * laneEach
	laneGas    = 2_000_000 / laneDue // the lane's default budget, exactly
	laneWindow = 32
)

// laneConfig is the lane's configuration in these benchmarks.
func laneConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.Policy = engine.PolicyLane
	// A short fairness window, so that the warm-up below reaches the steady
	// state, where the window's log has stopped growing.
	cfg.Lane.FairnessWindowBlocks = laneWindow
	// Blocks at the basefee's target, so that it stays put: each handler
	// uses its whole gas limit (usesLimit), and a lane twice their sum is
	// half used. A full lane would raise it 12.5 % a block until, after
	// some hundred blocks, the fees outgrow any balance and long runs
	// collect instead of firing.
	cfg.Lane.LaneTimerCycles = 2 * laneDue * laneGas
	cfg.RollbackDepth = benchRollbackDepth
	return cfg
}

// openLane returns a laneBlock on a new engine of cfg, in block 1, with
// every account of funded rich.
func openLane(tb testing.TB, cfg engine.Config, funded []engine.Address) *laneBlock {
	e, err := engine.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	big, _ := engine.ParseAmount("1000000000000000000000000")
	for _, a := range funded {
		if err := e.Ledger().Credit(a, big); err != nil {
			tb.Fatal(err)
		}
	}
	if err := e.BeginBlock(1); err != nil {
		tb.Fatal(err)
	}
	return &laneBlock{tb: tb, e: e}
}

func newLaneBlock(tb testing.TB) *laneBlock {
	lb := openLane(tb, laneConfig(), actors[:laneActors])
	lb.fill() // due in block 2
	lb.end(false)
	// Free lists, buffers and the fairness window grow; the rollback
	// history's buffers last, for some 50 blocks, until they are large
	// enough to compact in place (a shorter warm-up shows their growth as
	// B/op in runs of a few hundred blocks).
	for range 2 * laneWindow {
		lb.fill()
		lb.next()
	}
	return lb
}

// usesLimit is an Executor whose handlers do nothing but use all the
// cycles their fire allows.
type usesLimit struct{}

func (usesLimit) Execute(_ engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{Cycles: d.CyclesLimit}, nil
}

// fill schedules the next block's timers: varied tips, so the sort works.
func (lb *laneBlock) fill() {
	h := lb.e.Height() + 1
	for a := range laneActors {
		tx, err := lb.e.Begin(actors[a], 0)
		if err != nil {
			lb.tb.Fatal(err)
		}
		for k := range laneEach {
			lb.nonce++
			tx.SetNonce(lb.nonce)
			f := engine.Fees{Set: engine.HasGasLimit | engine.HasMaxPriorityFee, GasLimit: laneGas,
				MaxPriorityFee: engine.Amount{Lo: uint64(k*7+a) % 13}}
			if _, err := tx.ScheduleFees(h, nil, &f); err != nil {
				lb.tb.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			lb.tb.Fatal(err)
		}
	}
}

// next ends the open block, which fires the timers the previous one
// scheduled, and opens the following one.
func (lb *laneBlock) next() { lb.end(true) }

func (lb *laneBlock) end(check bool) {
	r, err := lb.e.EndBlock(usesLimit{})
	if err != nil {
		lb.tb.Fatal(err)
	}
	if check && r.Fired != laneDue {
		lb.tb.Fatalf("block %d fired %d of %d (deferred %d, gc %d)", r.Height, r.Fired, laneDue, r.Deferred, r.GC)
	}
	lb.fired += r.Fired
	if err := lb.e.Commit(); err != nil {
		lb.tb.Fatal(err)
	}
	if err := lb.e.BeginBlock(r.Height + 1); err != nil {
		lb.tb.Fatal(err)
	}
}

// BenchmarkLaneEndBlock: one op is one lane end of block with 10,000 due
// timers from 1,000 actors (classification, agents, W, sort, GC check,
// settlement on the ledger, fairness update), an Executor that does
// nothing but report its whole gas limit used; the target
// is 2 ms and 0 allocs/op.
func BenchmarkLaneEndBlock(b *testing.B) {
	timeBlocks(b, newLaneBlock(b), laneDue, "ns/timer")
}

// timeBlocks times lb's ends of block, its fills out of the time, and
// reports the time per timer due, due of them in each block, under unit.
func timeBlocks(b *testing.B, lb *laneBlock, due int, unit string) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		lb.fill()
		b.StartTimer()
		lb.next()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*due), unit)
}

func TestLaneEndBlockAllocs(t *testing.T) {
	if n := allocsPerBlock(newLaneBlock(t), 10); n != 0 {
		t.Errorf("lane end of block: %v allocs per block, want 0", n)
	}
}

// allocsPerBlock is the allocations of lb's end of block and its next
// fill, in steady state, in runs runs: fill allocates nothing either, and
// both are counted.
func allocsPerBlock(lb *laneBlock, runs int) float64 {
	lb.fill()
	return testing.AllocsPerRun(runs, func() {
		lb.next()
		lb.fill()
	})
}

// BenchmarkLaneBacklog: one op is one lane end of block, with its Commit
// and the next BeginBlock, that fires the 10,000 timers of
// BenchmarkLaneEndBlock while `backlog` more due timers wait, every block
// (docs/SPEC.md §12.5: each block classifies and prices the whole due
// set). The backlog's kind says why it waits:
//
//   - below: its stated max fee no longer covers the basefee, which a
//     full block raised after the timers were scheduled (a congested
//     lane's equilibrium: the basefee climbs until bids drop out);
//   - full: a gas limit the lane cannot hold beside the block's fires, and
//     no tip, so that it comes last in the order and each block's walk
//     reaches it and finds no room (lane_full).
//
// The fires use half the lane, so the basefee stays put.
func BenchmarkLaneBacklog(b *testing.B) {
	for _, kind := range []string{"below", "full"} {
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("kind=%s/backlog=%d", kind, n), func(b *testing.B) {
				timeBlocks(b, newLaneBacklog(b, kind, n), laneDue+n, "ns/due")
			})
		}
	}
}

// TestLaneBacklogAllocs: the lane's end of block allocates nothing with a
// backlog waiting either way, the full kind's walk taking candidates off
// a heap and pruning it (at 100,000 waiting; at 10,000 it sorts them).
func TestLaneBacklogAllocs(t *testing.T) {
	for _, kind := range []string{"below", "full"} {
		if n := allocsPerBlock(newLaneBacklog(t, kind, 100_000), 5); n != 0 {
			t.Errorf("%s: %v allocs per block, want 0", kind, n)
		}
	}
}

// newLaneBacklog is newLaneBlock with n timers of the given kind (see
// BenchmarkLaneBacklog) waiting from block 3 on, scheduled by the actors
// after the lane's.
func newLaneBacklog(tb testing.TB, kind string, n int) *laneBlock {
	cfg := laneConfig()
	// Room for the full kind's gas limit, which only an empty lane holds.
	cfg.Lane.MaxCyclesPerFireAuction = cfg.Lane.LaneTimerCycles
	cfg.Lane.MinBasefee = cfg.InitialBasefee // no fall in the empty block 1
	lb := openLane(tb, cfg, actors)
	e := lb.e
	f := engine.Fees{Set: engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee,
		GasLimit: laneGas, MaxFee: e.Basefee()}
	if kind == "full" {
		f.Set, f.MaxFee = f.Set&^engine.HasMaxFee, engine.Amount{}
		f.GasLimit = cfg.Lane.LaneTimerCycles
	}
	waiting := actors[laneActors:]
	for k := 0; k < n; k += perTx {
		tx, err := e.Begin(waiting[k/perTx%len(waiting)], 0)
		if err != nil {
			tb.Fatal(err)
		}
		for j := k; j < min(n, k+perTx); j++ {
			lb.nonce++
			tx.SetNonce(lb.nonce)
			if _, err := tx.ScheduleFees(3, nil, &f); err != nil {
				tb.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	// Block 2 fires twice the lane's timers, which fill it: the basefee
	// rises for block 3, past the below kind's max fee.
	lb.fill()
	lb.fill()
	lb.end(false)
	lb.fill()
	lb.end(false)
	for range 2 * laneWindow {
		lb.fill()
		lb.next()
	}
	return lb
}
