package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

type nopExec struct{}

func (nopExec) Execute(Tx, *Delivery) (Usage, error) { return Usage{Cycles: 100}, nil }

// rootExec runs handlers that schedule and cancel at random.
type rootExec struct {
	r    *rand.Rand
	live *[]TimerID
}

func (x rootExec) Execute(tx Tx, d *Delivery) (Usage, error) {
	if n := len(*x.live); n > 0 && x.r.IntN(3) == 0 {
		tx.Cancel((*x.live)[x.r.IntN(n)])
	}
	if x.r.IntN(2) == 0 {
		if s, err := tx.ScheduleFees(d.Block+1+x.r.Uint64N(40), []byte{byte(x.r.IntN(256))}, &Fees{}); err == nil {
			*x.live = append(*x.live, s.ID)
		}
	}
	u := Usage{Cycles: x.r.Uint64N(d.CyclesLimit + 1)}
	if x.r.IntN(5) == 0 {
		return u, fmt.Errorf("revert")
	}
	return u, nil
}

// program drives an engine through random blocks: schedules with random
// fees, cancels, extends, reverted transactions, system cancels (when sys
// is set) and handlers that schedule and cancel (rootExec). The same seed
// gives the same calls, so two engines in the same state stay in step.
type program struct {
	r      *rand.Rand
	policy Policy
	live   []TimerID
	sys    Address // a system deployer, or zero for none
}

// block runs block h.
func (p *program) block(t testing.TB, e *Engine, h uint64) {
	t.Helper()
	require.NoError(t, e.BeginBlock(h))
	p.txs(t, e, h)
	_, err := e.EndBlock(rootExec{r: p.r, live: &p.live})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}

// txs runs the open block h's transactions and system instructions.
func (p *program) txs(t testing.TB, e *Engine, h uint64) {
	t.Helper()
	r := p.r
	actors := []Address{{1}, {2}, {3}}
	for range r.IntN(3) {
		tx, err := e.Begin(actors[r.IntN(3)], r.Uint64())
		require.NoError(t, err)
		for range r.IntN(5) {
			switch r.IntN(4) {
			case 0, 1:
				f := &Fees{}
				if p.policy == PolicyLane && r.IntN(2) == 0 {
					f.Set = HasGasLimit | HasExpiresAt | HasMaxPriorityFee
					f.GasLimit, f.ExpiresAt = r.Uint64N(300_000), h+40+r.Uint64N(30)
					f.MaxPriorityFee = Amount{Lo: r.Uint64N(50)}
				}
				if s, err := tx.ScheduleFees(h+1+r.Uint64N(60), []byte{byte(r.IntN(256)), 7}, f); err == nil {
					p.live = append(p.live, s.ID)
				}
			case 2:
				if len(p.live) > 0 {
					tx.Cancel(p.live[r.IntN(len(p.live))])
				}
			case 3:
				if p.policy == PolicyLane && len(p.live) > 0 {
					tx.Extend(p.live[r.IntN(len(p.live))], h+60+r.Uint64N(60))
				}
			}
		}
		if r.IntN(4) == 0 {
			require.NoError(t, tx.Revert())
		} else {
			require.NoError(t, tx.Commit())
		}
	}
	if p.sys != (Address{}) && p.policy == PolicyLane && r.IntN(10) == 0 && len(p.live) > 0 {
		e.SystemCancel(p.sys, p.live[r.IntN(len(p.live))])
	}
}

// TestRootIncremental drives random blocks under both policies and three
// layouts and checks after every block that the incremental root equals
// the root computed from scratch, and that the layouts agree.
func TestRootIncremental(t *testing.T) {
	for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
		var roots [][][32]byte
		for _, layout := range [][3]uint64{{2, 1, 1}, {16, 8, 3}, {4096, 1024, 64}} {
			cfg := DefaultConfig()
			cfg.RingSize, cfg.EpochLength, cfg.EpochCount = layout[0], layout[1], layout[2]
			cfg.Policy, cfg.ActivationHeight, cfg.StateRoot = policy, 20, true
			cfg.Lane.FairnessWindowBlocks = 5
			cfg.Lane.LaneTimerCycles = 600_000
			cfg.SystemDeployers = []Address{{0x5e}}
			e, err := New(cfg)
			require.NoError(t, err)
			for _, a := range []Address{{1}, {2}, {3}} {
				require.NoError(t, e.Ledger().Credit(a, Amount{Lo: 1 << 40}))
			}
			p := &program{r: rand.New(rand.NewPCG(3, 4)), policy: policy, sys: Address{0x5e}}
			var got [][32]byte
			for h := uint64(1); h <= 150; h++ {
				if p.r.IntN(8) == 0 {
					to, err := e.SkipEmpty(h + p.r.Uint64N(6))
					require.NoError(t, err)
					h = to + 1
				}
				p.block(t, e, h)
				root := e.Root()
				require.Equal(t, e.scratchRoot(), root, "%v layout %v block %d", policy, layout, h)
				got = append(got, root)
			}
			roots = append(roots, got)
		}
		require.Equal(t, roots[0], roots[1], "%v", policy)
		require.Equal(t, roots[0], roots[2], "%v", policy)
	}
}

// TestRootSkipEmpty: skipping empty blocks gives the root of running them
// one by one, fairness entries aging out included.
func TestRootSkipEmpty(t *testing.T) {
	for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
		build := func() *Engine {
			cfg := DefaultConfig()
			cfg.Policy, cfg.StateRoot = policy, true
			cfg.Lane.FairnessWindowBlocks = 4
			e, err := New(cfg)
			require.NoError(t, err)
			require.NoError(t, e.Ledger().Credit(Address{1}, Amount{Lo: 1 << 50}))
			require.NoError(t, e.BeginBlock(1))
			tx, _ := e.Begin(Address{1}, 1)
			tx.Schedule(2, nil)
			tx.Schedule(40, nil)
			require.NoError(t, tx.Commit())
			_, err = e.EndBlock(nopExec{})
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			return e
		}
		a, b := build(), build()
		for h := uint64(2); h <= 30; h++ {
			require.NoError(t, a.BeginBlock(h))
			_, err := a.EndBlock(nopExec{})
			require.NoError(t, err)
			require.NoError(t, a.Commit())
		}
		require.NoError(t, b.BeginBlock(2))
		_, err := b.EndBlock(nopExec{})
		require.NoError(t, err)
		require.NoError(t, b.Commit())
		to, err := b.SkipEmpty(30)
		require.NoError(t, err)
		require.Equal(t, uint64(30), to)
		require.Equal(t, a.Root(), b.Root(), "%v", policy)
		require.Equal(t, a.scratchRoot(), b.Root(), "%v", policy)
	}
}

// TestRootChangesStayBounded: with the state root on and Root never
// called, the list of changes not yet hashed stays proportional to the
// pending timers (it grew by 64 bytes per timer ever scheduled and fired),
// and the root is still the one an engine that asks every block computes.
func TestRootChangesStayBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StateRoot = true
	silent, err := New(cfg)
	require.NoError(t, err)
	asking, err := New(cfg)
	require.NoError(t, err)
	const perBlock, blocks = 200, 1000 // 400k changes, about 200 pending
	most := 0
	for h := uint64(1); h <= blocks; h++ {
		for _, e := range []*Engine{silent, asking} {
			scheduleBlock(t, e, h, perBlock)
		}
		asking.Root()
		most = max(most, len(silent.root.dirty))
	}
	require.LessOrEqual(t, most, 2*perBlock+dirtyFree+2*perBlock)
	require.Equal(t, asking.Root(), silent.Root())
	require.NoError(t, silent.CheckRoot())
}

// TestRootChangesReuseTheirList: an engine whose root is never asked for
// keeps the list of changes that Commit hashes, so that its steady state
// allocates nothing. (Dropping the list at every flush allocated about
// 100 KB a block here, in steps that AllocsPerRun rounds away.)
func TestRootChangesReuseTheirList(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StateRoot = true
	e, err := New(cfg)
	require.NoError(t, err)
	const perBlock = 200 // a flush about every 160 blocks
	run := func(from, to uint64) {
		for h := from; h <= to; h++ {
			scheduleBlock(t, e, h, perBlock)
		}
	}
	run(1, 1000) // past the first flushes and every actor's first timer
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run(1001, 2000)
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by 1000 blocks")
	require.NoError(t, e.CheckRoot())
}

// scheduleBlock runs block h: one transaction of actor {0xab, h} schedules
// n timers for the next block, and the timers due fire.
func scheduleBlock(t *testing.T, e *Engine, h uint64, n int) {
	t.Helper()
	require.NoError(t, e.BeginBlock(h))
	tx, err := e.Begin(Address{0xab, byte(h)}, h)
	require.NoError(t, err)
	for k := range n {
		_, _, err := tx.Schedule(h+1, []byte{byte(k)})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	_, err = e.EndBlock(nopExec{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}
