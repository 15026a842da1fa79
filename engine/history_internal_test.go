package engine

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/ring"
)

// chainStep is one step of a chain a test drives: a block, or a SkipEmpty
// to a height, with what the random program held before it, so that the
// step can be run again exactly.
type chainStep struct {
	block  bool
	height uint64 // the block, or the height SkipEmpty reached
	src    rand.PCG
	live   []TimerID
	ledger *MemLedger
	root   [32]byte // after the step
}

// chain drives a random program on an engine and remembers its canonical
// steps: a rollback drops the steps above its target.
type chain struct {
	t     *testing.T
	e     *Engine
	src   *rand.PCG
	p     *program
	steps []chainStep
}

func newChain(t *testing.T, e *Engine, policy Policy, seed uint64) *chain {
	src := rand.NewPCG(seed, 77)
	return &chain{t: t, e: e, src: src, p: &program{r: rand.New(src), policy: policy, sys: Address{0x5e}}}
}

// step runs the next step: mostly a block, sometimes a few empty blocks.
func (c *chain) step() {
	s := chainStep{src: *c.src, live: append([]TimerID(nil), c.p.live...), ledger: c.e.Ledger().(*MemLedger).Clone()}
	h := c.e.Height() + 1
	if c.p.r.IntN(8) == 0 {
		to, err := c.e.SkipEmpty(h + c.p.r.Uint64N(6))
		require.NoError(c.t, err)
		s.height = to
	} else {
		c.p.block(c.t, c.e, h)
		s.block, s.height = true, h
	}
	s.root = c.e.Root()
	require.Equal(c.t, c.e.scratchRoot(), s.root, "height %d", s.height)
	c.steps = append(c.steps, s)
}

// resume sets the program's state to what it was before step s.
func (c *chain) resume(s chainStep) {
	*c.src = s.src
	c.p.live = append(c.p.live[:0], s.live...)
	c.e.SetLedger(s.ledger.Clone())
}

// fromScratch runs the chain's canonical steps on a new engine, without
// rollback, requiring each to reach the same height and root, and returns
// that engine.
func (c *chain) fromScratch(policy Policy) *Engine {
	ref, err := New(rollbackConfig(policy, [3]uint64{16, 8, 3}, 0))
	require.NoError(c.t, err)
	rc := newChain(c.t, ref, policy, 0)
	for _, s := range c.steps {
		rc.resume(s)
		rc.step()
		got := rc.steps[len(rc.steps)-1]
		require.Equal(c.t, s.height, got.height)
		require.Equal(c.t, s.root, got.root, "%v: the final chain from scratch, height %d", policy, s.height)
	}
	return ref
}

func rollbackConfig(policy Policy, layout [3]uint64, depth uint64) Config {
	cfg := snapConfig(policy, layout)
	cfg.RollbackDepth = depth
	cfg.SystemDeployers = []Address{{0x5e}}
	return cfg
}

func creditAll(t testing.TB, e *Engine) {
	for _, a := range []Address{{1}, {2}, {3}} {
		require.NoError(t, e.Ledger().Credit(a, Amount{Lo: 1 << 30}))
	}
}

// TestRollback drives random chains under both policies and three layouts
// and rolls back at random points, to random depths (inside runs of empty
// blocks too). After each rollback the engine has exactly the root and
// leaves it had after the target block; the chain then goes on, either
// running the same blocks again (which must give the same roots) or a
// fork. At the end, an engine that ran only the final chain, from
// scratch, has the same state at every step.
func TestRollback(t *testing.T) {
	const depth = 12
	for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
		for _, tc := range []struct {
			layout   [3]uint64
			maxBytes uint64 // Config.RollbackBytes
		}{{[3]uint64{2, 1, 1}, 0}, {[3]uint64{16, 8, 3}, 0}, {[3]uint64{4096, 1024, 64}, 0}, {[3]uint64{16, 8, 3}, 64}} {
			layout := tc.layout
			cfg := rollbackConfig(policy, layout, depth)
			cfg.RollbackBytes = tc.maxBytes
			e, err := New(cfg)
			require.NoError(t, err)
			creditAll(t, e)
			c := newChain(t, e, policy, layout[0])
			pick := rand.New(rand.NewPCG(layout[1], 5)) // the test's choices, apart from the chain's
			rollbacks, tooDeep, top := 0, 0, uint64(0)
			for len(c.steps) < 160 {
				c.step()
				top = max(top, e.Height())
				if tc.maxBytes > 0 && e.hist.blocks.len() > 1 { // the newest stays whatever it holds
					require.LessOrEqual(t, e.hist.bytes, tc.maxBytes)
				}
				if pick.IntN(6) != 0 || len(c.steps) < 3 {
					continue
				}
				// A target: the height after some step, or inside a run of
				// empty blocks.
				k := len(c.steps) - 2 - pick.IntN(min(len(c.steps)-1, depth+4))
				target := c.steps[k].height
				if !c.steps[k+1].block && pick.IntN(2) == 0 && c.steps[k+1].height > target+1 {
					target++ // a height SkipEmpty ran through
				}
				before, leaves := e.Root(), e.Leaves()
				err := e.Rollback(target)
				if (top-target > depth || tc.maxBytes > 0) && errors.Is(err, ErrRollbackTooDeep) {
					// Beyond the depth below the highest block reached, the
					// engine may refuse (or still hold the blocks: it trims
					// whole runs of empty blocks); with a bound on the
					// bytes held, also within it, but only below the
					// oldest block it holds, which the error names.
					if top-target <= depth {
						oldest := e.hist.blocks.at(0).from - 1
						require.Less(t, target, oldest)
						require.ErrorContains(t, err, fmt.Sprintf("the oldest block it can return to is %d", oldest))
					}
					tooDeep++
					require.Equal(t, before, e.Root())
					require.ElementsMatch(t, leaves, e.Leaves())
					continue
				}
				require.NoError(t, err, "%v %v rollback to %d at %d", policy, layout, target, c.steps[len(c.steps)-1].height)
				rollbacks++
				require.Equal(t, target, e.Height())
				require.Equal(t, e.scratchRoot(), e.Root())
				if target == c.steps[k].height {
					require.Equal(t, c.steps[k].root, e.Root(), "%v %v rollback to %d", policy, layout, target)
				}
				require.NoError(t, e.q.Verify(func(v uint32) (ring.Pos, bool) { return ring.Pos(e.recs.At(v).at), true }))
				e.checkConsistent(t)
				// Go on from the target: the program state of the step
				// after it, which either runs the same steps again or a
				// fork.
				redo := append([]chainStep(nil), c.steps[k+1:]...)
				c.steps = c.steps[:k+1]
				next := redo[0]
				c.resume(next)
				if target != c.steps[k].height {
					// Inside a skipped run: finish it as before.
					_, err := e.SkipEmpty(next.height)
					require.NoError(t, err)
					require.Equal(t, next.root, e.Root())
					c.steps = append(c.steps, next)
					continue
				}
				if pick.IntN(2) == 0 {
					for _, s := range redo {
						c.resume(s) // a fork may have reseeded before s
						c.step()
						got := c.steps[len(c.steps)-1]
						require.Equal(t, s.height, got.height)
						require.Equal(t, s.root, got.root, "%v %v: block %d run again", policy, layout, s.height)
					}
				} else {
					c.src.Seed(uint64(len(c.steps)), uint64(rollbacks)) // a fork
				}
			}
			require.Greater(t, rollbacks, 10, "%v %v", policy, layout)
			// Rolled back in place unless two windows began (a window is
			// one block under (2, 1, 1)); rebuilt otherwise.
			inPlace := rollbacks - e.Stats().QueueRebuilds
			t.Logf("%v %v, RollbackBytes %d: %d rollbacks, %d in place, %d too deep", policy, layout, tc.maxBytes, rollbacks, inPlace, tooDeep)
			if layout[1] > 1 {
				require.Positive(t, inPlace, "%v %v", policy, layout)
			} else {
				require.Positive(t, e.Stats().QueueRebuilds, "%v %v", policy, layout)
			}
			require.Positive(t, tooDeep, "%v %v: rollbacks beyond the depth were tried", policy, layout)
			ref := c.fromScratch(policy)
			require.ElementsMatch(t, ref.Leaves(), e.Leaves())
			require.Equal(t, ref.Pending(), e.Pending())
		}
	}
}

// TestRollbackErrors: the cases Rollback refuses, each leaving the engine
// as it was.
func TestRollbackErrors(t *testing.T) {
	cfg := rollbackConfig(PolicyLane, [3]uint64{16, 8, 3}, 4)
	e, err := New(cfg)
	require.NoError(t, err)
	creditAll(t, e)
	require.ErrorIs(t, e.Rollback(0), ErrBadHeight, "before the first block")
	p := &program{r: rand.New(rand.NewPCG(1, 2)), policy: PolicyLane}
	p.block(t, e, 5)
	require.ErrorIs(t, e.Rollback(4), ErrBadHeight, "before the first block")
	require.ErrorIs(t, e.Rollback(6), ErrBadHeight, "a future block")
	require.NoError(t, e.Rollback(5), "the current block")
	for h := uint64(6); h <= 15; h++ {
		p.block(t, e, h)
	}
	h := e.Height()
	root := e.Root()
	err = e.Rollback(h - 5)
	require.ErrorIs(t, err, ErrRollbackTooDeep)
	// Depth 4 undoes four blocks: h-4 is the deepest target, and the error
	// names it.
	require.ErrorContains(t, err, fmt.Sprintf("the oldest block it can return to is %d", h-4))
	require.NoError(t, e.BeginBlock(h+1))
	require.ErrorIs(t, e.Rollback(h-1), ErrBlockOpen)
	_, err = e.EndBlock(nopExec{})
	require.NoError(t, err)
	require.ErrorIs(t, e.Rollback(h-1), ErrBlockEnded)
	require.NoError(t, e.Commit())
	require.NoError(t, e.Rollback(h))
	require.Equal(t, root, e.Root())

	off := rollbackConfig(PolicyFIFO, [3]uint64{16, 8, 3}, 0)
	f, err := New(off)
	require.NoError(t, err)
	for h := uint64(1); h <= 3; h++ {
		require.NoError(t, f.BeginBlock(h))
		_, err = f.EndBlock(nopExec{})
		require.NoError(t, err)
		require.NoError(t, f.Commit())
	}
	require.ErrorIs(t, f.Rollback(2), ErrRollbackTooDeep)

	// SkipEmpty from a new engine runs blocks 1..to: they are its first
	// blocks, and a rollback may go to any of them.
	for _, pol := range []Policy{PolicyFIFO, PolicyLane} {
		g, err := New(rollbackConfig(pol, [3]uint64{16, 8, 3}, 4))
		require.NoError(t, err)
		_, err = g.SkipEmpty(3)
		require.NoError(t, err)
		require.ErrorIs(t, g.Rollback(0), ErrBadHeight, "before the first block")
		require.NoError(t, g.Rollback(1))
		require.Equal(t, uint64(1), g.Height())
		ref, err := New(rollbackConfig(pol, [3]uint64{16, 8, 3}, 4))
		require.NoError(t, err)
		_, err = ref.SkipEmpty(1)
		require.NoError(t, err)
		require.Equal(t, ref.Root(), g.Root(), "policy %v: the root of block 1", pol)
	}
}

// checkConsistent checks that the id index, the queue and the deferred
// list hold the same pending timers, and the pending counts agree.
func (e *Engine) checkConsistent(t testing.TB) {
	t.Helper()
	queued := map[uint32]bool{}
	e.q.Walk(func(x ring.Entry, _ calendar.Tier) { queued[uint32(x.Val)] = true })
	for k, i := range e.lane.deferred {
		queued[i] = true
		// Due, and where the list says it is.
		require.LessOrEqual(t, e.recs.At(i).height, e.height, "timer %d on the deferred list", i)
		require.Equal(t, listed|uint32(k), e.recs.At(i).at, "timer %d on the deferred list", i)
	}
	require.Len(t, e.lane.reasons, len(e.lane.deferred))
	n := 0
	perActor := map[uint32]uint32{}
	for _, s := range e.ids.all() {
		if s == 0 {
			continue
		}
		n++
		i := uint32(s)
		require.True(t, queued[i], "indexed timer %d not queued", i)
		got, ok := e.ids.get(&e.recs.At(i).id)
		require.True(t, ok)
		require.Equal(t, i, got)
		perActor[e.recs.At(i).actor]++
	}
	require.Equal(t, n, len(queued), "indexed vs queued")
	require.Equal(t, n, e.pending)
	for a, k := range perActor {
		require.Equal(t, k, e.actors.at(a).pending, "actor %d", a)
	}
	// Every record is pending, held by the history (a timer it removed or
	// took to fire, which a rollback may bring back) or free; an actor's
	// refs count its pending and held records (and the fairness window's
	// one), and what the history will free with a held record is what the
	// record holds.
	refs := maps.Clone(perActor)
	held := 0
	for k := range e.hist.ops.len() {
		u := e.hist.ops.at(k)
		if u.kind != undoCancel {
			continue
		}
		r := e.recs.At(u.rec)
		require.Equal(t, r.held(), u.held(), "held record %d", u.rec)
		refs[r.actor]++
		held++
	}
	for k := range e.hist.taken.len() {
		tk := e.hist.taken.at(k)
		r := e.recs.At(tk.rec)
		require.Equal(t, r.held(), tk.held, "held taken record %d", tk.rec)
		refs[r.actor]++
		held++
	}
	for a := range e.actors.n {
		if a > 0 && e.lane.window.Recent(a) != 0 {
			refs[a]++ // the fairness window's
		}
	}
	require.Equal(t, n+held, int(e.nrecs)-1-e.free.Len(), "records in use")
	// Every fee entry is a pending or held record's, or free, once.
	fees := map[uint32]bool{}
	for _, s := range e.ids.all() {
		if s != 0 && e.recs.At(uint32(s)).fee != 0 {
			fees[e.recs.At(uint32(s)).fee] = true
		}
	}
	for k := range e.hist.ops.len() {
		if u := e.hist.ops.at(k); u.kind == undoCancel && u.held().fee != 0 {
			require.False(t, fees[u.held().fee], "fee entry %d held twice", u.held().fee)
			fees[u.held().fee] = true
		}
	}
	for k := range e.hist.taken.len() {
		if f := e.hist.taken.at(k).held.fee; f != 0 {
			require.False(t, fees[f], "fee entry %d held twice", f)
			fees[f] = true
		}
	}
	for _, f := range freeFees(e) {
		require.False(t, fees[f], "fee entry %d in use and free", f)
		fees[f] = true
	}
	require.Equal(t, int(e.lane.nfees)-1, len(fees), "fee entries")
	require.Equal(t, len(refs), e.actors.len(), "actors with a record")
	for a, k := range refs {
		require.Equal(t, k, e.actors.at(a).refs, "refs of actor %d", a)
	}
}

// TestDurableRollback: rollbacks of an engine on a log, across snapshots,
// each followed by a crash (unsynced data lost) and a reopen under another
// layout: the reopened engine is at the target (or, for a target reached by
// empty blocks, at the block before them, from which SkipEmpty gets there),
// with the target's root; right after a reopen it can roll back again over
// the records it replayed. At the end, an engine that ran only the final
// chain from scratch agrees.
func TestDurableRollback(t *testing.T) {
	const depth = 10
	for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
		cfg := rollbackConfig(policy, [3]uint64{16, 8, 3}, depth)
		cfg.SnapshotEvery = 4
		fs := vfs.NewMem()
		d, err := openFS(fs, "db", cfg, quietLog)
		require.NoError(t, err)
		creditAll(t, d)
		c := newChain(t, d, policy, 11)
		pick := rand.New(rand.NewPCG(12, 13))
		layouts := [][3]uint64{{2, 1, 1}, {4096, 1024, 64}, {16, 8, 3}}
		top := uint64(0) // the highest height reached: rollbacks reach top - depth
		for round := range 12 {
			for range 6 + pick.IntN(6) {
				c.step()
			}
			top = max(top, d.Height())
			k := len(c.steps) - 2 - pick.IntN(min(len(c.steps)-1, depth-1))
			for top-c.steps[k].height > depth-1 {
				k++
			}
			target := c.steps[k]
			require.NoError(t, d.Rollback(target.height), "%v round %d", policy, round)
			require.Equal(t, target.root, d.Root())

			// A crash, and a reopen under another layout.
			fs = fs.Crash(vfs.CrashOptions{})
			reopen := cfg
			reopen.RingSize, reopen.EpochLength, reopen.EpochCount = layouts[round%3][0], layouts[round%3][1], layouts[round%3][2]
			d, err = openFS(fs, "db", reopen, quietLog)
			require.NoError(t, err, "%v round %d", policy, round)
			at := k
			for at >= 0 && !c.steps[at].block {
				at--
			}
			if at >= 0 {
				require.Equal(t, c.steps[at].height, d.Height(), "%v round %d: reopened", policy, round)
				require.Equal(t, c.steps[at].root, d.Root(), "%v round %d: reopened", policy, round)
			}
			if d.Height() < target.height {
				_, err := d.SkipEmpty(target.height)
				require.NoError(t, err)
			}
			require.Equal(t, target.root, d.Root(), "%v round %d", policy, round)

			next := c.steps[k+1] // the program state after the target
			c.e = d
			c.steps = c.steps[:k+1]
			if round%3 == 2 && k > 0 && c.steps[k-1].block && c.steps[k].block {
				// Again, at once: the history is the records replayed.
				require.NoError(t, d.Rollback(c.steps[k-1].height), "%v round %d: rollback after reopen", policy, round)
				require.Equal(t, c.steps[k-1].root, d.Root())
				next = c.steps[k]
				c.steps = c.steps[:k]
			}
			// Continue with a fork.
			c.resume(next)
			c.src.Seed(uint64(round), 99)
		}
		require.NoError(t, d.Close())
		c.fromScratch(policy)
	}
}

// TestFIFOBuf runs a history buffer as the engine does, a block's worth of
// pushes then a trim of the oldest block, and checks that every item stays
// at its absolute position, that the buffer's memory stays within a small
// multiple of its live items, and that it stops copying them once grown.
func TestFIFOBuf(t *testing.T) {
	const perBlock, depth = 1000, 8
	var f fifoBuf[uint64]
	var starts []uint64
	next := uint64(0)
	moves := 0
	for block := range 200 {
		starts = append(starts, f.end())
		for range perBlock {
			before := f.base
			f.push1(next)
			if f.base != before {
				moves++
			}
			next++
		}
		if len(starts) > depth {
			f.trim(starts[1])
			starts = starts[1:]
		}
		for k := range f.len() {
			if *f.at(k) != f.abs(k) {
				t.Fatalf("block %d: item %d holds %d", block, f.abs(k), *f.at(k))
			}
		}
		require.LessOrEqual(t, cap(f.buf), 4*(depth+1)*perBlock, "block %d", block)
		if block == 100 {
			moves = 0
		}
	}
	require.Zero(t, moves, "push compacted the buffer in steady state")
}

// TestUndoSize: trimHist hints the line of every other undo entry, which
// reaches every line only while two entries fit in one (64 bytes).
func TestUndoSize(t *testing.T) {
	require.LessOrEqual(t, 2*unsafe.Sizeof(undo{}), uintptr(64))
}

// TestPreimageAligned: timerID writes the id preimage in 8-byte words at
// multiples of 8, which keeps each store inside one cache line only while
// the buffer itself starts at a multiple of 8 (an allocation does).
func TestPreimageAligned(t *testing.T) {
	require.Zero(t, unsafe.Offsetof(Engine{}.pre)%8)
}
