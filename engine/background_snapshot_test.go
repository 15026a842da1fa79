package engine

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/internal/vfs/errorfs"
	"github.com/timerlane/timerlane/wal"
)

// TestBackgroundSnapshotStress runs random blocks on an engine with a
// snapshot every 2 to 5 blocks (written in the background, the default),
// with rollbacks, WaitSnapshots and reopens between them, under each sync
// policy and end-of-block policy. The engine stays in step with an
// in-memory one that runs the same blocks (roots after every block,
// rollback and reopen). Crash images taken before random filesystem
// operations, of the Commit's goroutine or of a snapshot's writer, must
// reopen at a block between the last acknowledged and the last attempted,
// with a root that block had and a tree that proves it. The wal's stress
// tests check the log on its own; this checks the engine's use of it: the
// records, the snapshots it encodes while its next blocks go on, and the
// truncations of its rollbacks.
func TestBackgroundSnapshotStress(t *testing.T) {
	seeds := 4
	if testing.Short() {
		seeds = 2
	}
	for _, syncp := range []wal.SyncPolicy{wal.SyncEveryBlock, wal.SyncInterval(300 * time.Microsecond), wal.SyncNone} {
		for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
			for seed := range seeds {
				t.Run(fmt.Sprintf("%v/%v/seed=%d", syncp, policy, seed), func(t *testing.T) {
					backgroundSnapshotRun(t, syncp, policy, uint64(seed))
				})
			}
		}
	}
}

// blockRange is the blocks a crash may recover: from the lowest
// acknowledged to the highest attempted while it was taken.
type blockRange struct{ acked, attempted uint64 }

// engineCrash is a crash image of a run, where it was taken, and the
// blocks it may recover.
type engineCrash struct {
	where  string
	blocks blockRange
	image  *vfs.MemFS
}

// backgroundSnapshotRun is one run of TestBackgroundSnapshotStress: seed
// draws the snapshot interval, the rollback depth and the log's options
// (logged, so that a failure names them), and the blocks and calls.
func backgroundSnapshotRun(t *testing.T, syncp wal.SyncPolicy, policy Policy, seed uint64) {
	const blocks = 120
	r := rand.New(rand.NewPCG(seed, 77))
	cfg := durableConfig(policy, [3]uint64{16, 8, 3})
	cfg.SnapshotEvery = 2 + r.Uint64N(4)
	cfg.RollbackDepth = 3 + r.Uint64N(6)
	cfg.Sync = syncp
	opts := quietLog
	opts.SegmentSize = int64(600 + r.IntN(3000))
	opts.RetainSnapshots = 1 + r.IntN(3)
	if r.IntN(2) == 0 {
		opts.Compression = wal.CompressZstd
	}
	t.Logf("SnapshotEvery %d, RollbackDepth %d, SegmentSize %d, RetainSnapshots %d, %v",
		cfg.SnapshotEvery, cfg.RollbackDepth, opts.SegmentSize, opts.RetainSnapshots, opts.Compression)

	var mu sync.Mutex // guards what the injector shares with the run
	var cur blockRange
	step := 0
	roots := map[uint64]map[[32]byte]bool{} // every root each block had
	var crashes []engineCrash
	set := func(f func(b *blockRange)) {
		mu.Lock()
		defer mu.Unlock()
		f(&cur)
	}
	m := vfs.NewMem()
	ir := rand.New(rand.NewPCG(seed, 78))
	inj := errorfs.Func(func(op errorfs.Op) errorfs.Fault {
		if !errorfs.Writes.Has(op.Kind) {
			return errorfs.Fault{}
		}
		mu.Lock()
		x, before, at := ir.IntN(100), cur, step
		mu.Unlock()
		switch {
		case x < 3:
			where := fmt.Sprintf("at step %d, before %v", at, op)
			lose, half := m.Crash(vfs.CrashOptions{}), m.Crash(vfs.CrashOptions{KeepUnsynced: func(_ string, n int) int { return n / 2 }})
			mu.Lock()
			b := blockRange{min(before.acked, cur.acked), max(before.attempted, cur.attempted)}
			crashes = append(crashes, engineCrash{where + ", unsynced lost", b, lose}, engineCrash{where + ", half the unsynced kept", b, half})
			mu.Unlock()
		case x < 13:
			time.Sleep(time.Duration(x) * 20 * time.Microsecond)
		}
		return errorfs.Fault{}
	})
	fsys := errorfs.Wrap(m, inj)

	d, err := openFS(fsys, "db", cfg, opts)
	require.NoError(t, err)
	ref, err := New(cfg)
	require.NoError(t, err)
	for _, a := range []Address{{1}, {2}, {3}} {
		require.NoError(t, d.Ledger().Credit(a, Amount{Lo: 1 << 50}))
		require.NoError(t, ref.Ledger().Credit(a, Amount{Lo: 1 << 50}))
	}
	pd := &program{r: rand.New(rand.NewPCG(seed, 6)), policy: policy}
	pr := &program{r: rand.New(rand.NewPCG(seed, 6)), policy: policy}
	for i := range blocks {
		h := d.Height() + 1
		mu.Lock()
		step = i
		cur.attempted = max(cur.attempted, h)
		// The reference runs the block first: its root is known before the
		// block's record can be in a crash image.
		pr.block(t, ref, h)
		if roots[h] == nil {
			roots[h] = map[[32]byte]bool{}
		}
		roots[h][ref.Root()] = true
		mu.Unlock()
		pd.block(t, d, h)
		require.Equal(t, ref.Root(), d.Root(), "step %d, block %d", i, h)
		if syncp == wal.SyncEveryBlock || h%cfg.SnapshotEvery == 0 { // a snapshot's block is synced first
			set(func(b *blockRange) { b.acked = h })
		}
		set(func(b *blockRange) { b.acked = max(b.acked, d.Durable()) })
		switch x := r.IntN(100); {
		case x < 10 && h > 2:
			to := h - min(1+r.Uint64N(cfg.RollbackDepth), h-1)
			if err := ref.Rollback(to); err != nil {
				// Past the reach of RollbackDepth from the highest block.
				require.ErrorIs(t, err, ErrRollbackTooDeep, "step %d", i)
				break
			}
			set(func(b *blockRange) { b.acked = min(b.acked, to) })
			require.NoError(t, d.Rollback(to), "step %d: rollback to %d", i, to)
			set(func(b *blockRange) { *b = blockRange{to, to} })
			require.Equal(t, ref.Root(), d.Root(), "step %d: after rollback to %d", i, to)
		case x < 16:
			ledger := d.Ledger()
			require.NoError(t, d.Close(), "step %d", i)
			set(func(b *blockRange) { b.acked = h })
			d, err = openFS(fsys, "db", cfg, opts)
			require.NoError(t, err, "step %d: reopen at %d", i, h)
			d.SetLedger(ledger)
			require.Equal(t, h, d.Height(), "step %d: reopen", i)
			require.Equal(t, ref.Root(), d.Root(), "step %d: reopen at %d", i, h)
		case x < 19:
			require.NoError(t, d.WaitSnapshot(), "step %d", i)
		}
	}
	h := d.Height()
	require.NoError(t, d.Close())
	set(func(b *blockRange) { b.acked = h })
	crashes = append(crashes, engineCrash{"at the end", cur, m.Crash(vfs.CrashOptions{})})

	for _, c := range crashes {
		e, err := openFS(c.image, "db", cfg, opts)
		require.NoError(t, err, "crash %s", c.where)
		h := e.Height()
		if h < c.blocks.acked || h > c.blocks.attempted {
			t.Fatalf("crash %s: reopened at block %d, want %d to %d", c.where, h, c.blocks.acked, c.blocks.attempted)
		}
		if h > 0 && !roots[h][e.Root()] {
			t.Fatalf("crash %s: reopened at block %d with a root it never had", c.where, h)
		}
		require.NoError(t, e.CheckRoot(), "crash %s", c.where)
		require.NoError(t, e.Close())
	}
	t.Logf("%d crash images checked", len(crashes))
}
