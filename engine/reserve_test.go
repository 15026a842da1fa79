package engine_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// TestReserve: after Reserve(n), n timers spread over every bucket of the
// ring and the epoch tier (a chunk each, where n/32 chunks would hold
// them packed) and into the overflow tier, then 1,100 blocks of
// deliveries and epoch moves (one window change) with a rollback that
// rebuilds the queue, grow neither the arena nor the id index; and the
// deliveries and roots are those of the same blocks without the
// reservation.
func TestReserve(t *testing.T) {
	const actors, each = 40, 1000
	const n = actors * each
	type result struct {
		fired []fired
		roots [][32]byte
	}
	run := func(reserve bool) result {
		e := newEngine(t, func(c *engine.Config) { c.StateRoot = true })
		l := e.Config()
		ring, epochs := l.RingSize, l.EpochLength*l.EpochCount
		var want engine.Stats
		if reserve {
			require.NoError(t, e.Reserve(n))
			want = e.Stats()
		}
		grew := func(when string) {
			if s := e.Stats(); reserve && (s.ArenaBytes != want.ArenaBytes || s.IndexBytes != want.IndexBytes) {
				t.Fatalf("%s: arena %d, index %d bytes; reserved %d, %d", when, s.ArenaBytes, s.IndexBytes, want.ArenaBytes, want.IndexBytes)
			}
		}
		var res result
		rec := &recorder{}
		require.NoError(t, e.BeginBlock(1))
		for a := range actors {
			var actor engine.Address
			binary.BigEndian.PutUint32(actor[:], uint32(a+1))
			tx, err := e.Begin(actor, 1)
			require.NoError(t, err)
			for k := range each {
				// Half in the ring, half over the epoch tier and past it.
				x := uint64(k*actors + a)
				h := 2 + x%ring
				if x%2 == 1 {
					h = ring + (x*7919)%(epochs+epochs/8)
				}
				tx.SetNonce(uint64(k)) // ids differ at equal heights
				_, _, err := tx.Schedule(h, nil)
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
		}
		require.Equal(t, n, e.Pending())
		grew("after scheduling")
		block := func(h uint64) {
			if h > 1 {
				require.NoError(t, e.BeginBlock(h))
			}
			_, err := e.EndBlock(rec)
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			res.roots = append(res.roots, e.Root())
			grew("after a block")
		}
		for h := uint64(1); h <= 1000; h++ {
			block(h)
		}
		require.NoError(t, e.Rollback(900))
		grew("after the rollback")
		res.roots = append(res.roots, e.Root())
		for h := uint64(901); h <= 1100; h++ {
			block(h)
		}
		res.fired = rec.fired
		return res
	}
	with, without := run(true), run(false)
	require.Greater(t, len(with.fired), n/8)
	require.Equal(t, without.fired, with.fired)
	require.Equal(t, without.roots, with.roots)
}

func TestReserveRange(t *testing.T) {
	e := newEngine(t, nil)
	for _, n := range []int{-1, engine.MaxReserve + 1} {
		require.ErrorIs(t, e.Reserve(n), engine.ErrReserveRange, "n = %d", n)
	}
	before := e.Stats()
	require.NoError(t, e.Reserve(0))
	require.Equal(t, before, e.Stats(), "Reserve(0) changed the engine's memory")
	require.NoError(t, e.Reserve(5000))
	after := e.Stats()
	require.Greater(t, after.ArenaBytes, before.ArenaBytes)
	require.NoError(t, e.Reserve(100)) // smaller: nothing changes
	require.Equal(t, after, e.Stats())
}

// TestReserveInEndBlockAndAfterClose: Reserve is a call into the engine
// like any other: from a handler it gets ErrInEndBlock (it would grow the
// id index under the fires), after Close ErrClosed (until session 38 both
// returned nil, found by the API audit).
func TestReserveInEndBlockAndAfterClose(t *testing.T) {
	e := newEngine(t, nil)
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(actorA, 1)
	require.NoError(t, err)
	_, _, err = tx.Schedule(2, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, err = e.EndBlock(&recorder{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.NoError(t, e.BeginBlock(2))
	var inside error
	_, err = e.EndBlock(invExec(func(engine.Tx, *engine.Delivery) (engine.Usage, error) {
		inside = e.Reserve(1 << 16)
		return engine.Usage{}, nil
	}))
	require.NoError(t, err)
	require.ErrorIs(t, inside, engine.ErrInEndBlock)
	require.NoError(t, e.Commit())
	require.NoError(t, e.Close())
	require.ErrorIs(t, e.Reserve(10), engine.ErrClosed)
}

// TestStatsRecords: Stats.Records counts the pending timers' records and,
// with rollback on, those the history keeps for the last RollbackDepth
// blocks; with rollback off, the pending ones alone.
func TestStatsRecords(t *testing.T) {
	for _, depth := range []uint64{0, 4} {
		e := newEngine(t, func(c *engine.Config) { c.RollbackDepth = depth })
		for h := uint64(1); h <= 10; h++ {
			require.NoError(t, e.BeginBlock(h))
			tx, err := e.Begin(actorA, h)
			require.NoError(t, err)
			for k := range 3 { // each block: 3 timers, one due next block
				_, _, err := tx.Schedule(h+1+uint64(k)*100, []byte{byte(k)})
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
			_, err = e.EndBlock(&recorder{})
			require.NoError(t, err)
			require.NoError(t, e.Commit())
			// Fired so far: one per block from block 2 on; the history
			// keeps the last depth blocks' fires.
			held := min(h-1, depth)
			require.Equal(t, e.Pending()+int(held), e.Stats().Records, "depth %d, block %d", depth, h)
		}
	}
}
