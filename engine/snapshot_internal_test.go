package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func snapConfig(policy Policy, layout [3]uint64) Config {
	cfg := DefaultConfig()
	cfg.RingSize, cfg.EpochLength, cfg.EpochCount = layout[0], layout[1], layout[2]
	cfg.Policy, cfg.ActivationHeight, cfg.StateRoot = policy, 10, true
	cfg.Lane.FairnessWindowBlocks = 6
	cfg.Lane.LaneTimerCycles = 500_000
	return cfg
}

// TestSnapshotRoundTrip: at many points of random runs, a snapshot
// restored under another layout has the same root and leaves, and then
// runs the same blocks to the same roots as the engine it came from.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, policy := range []Policy{PolicyFIFO, PolicyLane} {
		e, err := New(snapConfig(policy, [3]uint64{4096, 1024, 64}))
		require.NoError(t, err)
		for _, a := range []Address{{1}, {2}, {3}} {
			require.NoError(t, e.Ledger().Credit(a, Amount{Lo: 1 << 50}))
		}
		p := &program{r: rand.New(rand.NewPCG(7, 8)), policy: policy}
		h := uint64(1)
		for round := range 6 {
			for range 15 {
				p.block(t, e, h)
				h++
			}
			var buf bytes.Buffer
			require.NoError(t, e.WriteSnapshot(&buf))
			c, err := Restore(snapConfig(policy, [3]uint64{2, 1, 1}), bytes.NewReader(buf.Bytes()))
			require.NoError(t, err, "%v round %d", policy, round)
			require.Equal(t, e.Root(), c.Root())
			require.ElementsMatch(t, e.Leaves(), c.Leaves())
			require.Equal(t, e.Pending(), c.Pending())
			c.SetLedger(e.Ledger().(*MemLedger).Clone())
			// Both run the same next blocks.
			pe := &program{r: rand.New(rand.NewPCG(uint64(round), 1)), policy: policy, live: append([]TimerID(nil), p.live...)}
			pc := &program{r: rand.New(rand.NewPCG(uint64(round), 1)), policy: policy, live: append([]TimerID(nil), p.live...)}
			probe, err := Restore(snapConfig(policy, [3]uint64{16, 8, 3}), bytes.NewReader(buf.Bytes()))
			require.NoError(t, err)
			probe.SetLedger(e.Ledger().(*MemLedger).Clone())
			for k := uint64(0); k < 10; k++ {
				pe.block(t, probe, h+k)
				pc.block(t, c, h+k)
				require.Equal(t, probe.Root(), c.Root(), "%v round %d block %d", policy, round, h+k)
			}
		}
	}
}

// TestSnapshotDamage: every truncation and every flipped byte of a
// snapshot fails to restore, with ErrSnapshot.
func TestSnapshotDamage(t *testing.T) {
	e, err := New(snapConfig(PolicyLane, [3]uint64{4096, 1024, 64}))
	require.NoError(t, err)
	require.NoError(t, e.Ledger().Credit(Address{1}, Amount{Lo: 1 << 50}))
	p := &program{r: rand.New(rand.NewPCG(1, 2)), policy: PolicyLane}
	for h := uint64(1); h <= 14; h++ {
		p.block(t, e, h)
	}
	var buf bytes.Buffer
	require.NoError(t, e.WriteSnapshot(&buf))
	snap := buf.Bytes()
	require.Greater(t, len(snap), 200)
	cfg := snapConfig(PolicyLane, [3]uint64{16, 8, 3})
	for n := 0; n < len(snap); n++ {
		_, err := Restore(cfg, bytes.NewReader(snap[:n]))
		require.True(t, errors.Is(err, ErrSnapshot), "truncated at %d: %v", n, err)
	}
	for k := range snap {
		bad := bytes.Clone(snap)
		bad[k] ^= 0x01
		_, err := Restore(cfg, bytes.NewReader(bad))
		require.True(t, errors.Is(err, ErrSnapshot), "byte %d flipped: %v", k, err)
		// The damage is the snapshot's, never the caller's configuration.
		require.False(t, errors.Is(err, ErrInvalidConfig), "byte %d flipped: %v", k, err)
	}
	other := snapConfig(PolicyLane, [3]uint64{16, 8, 3})
	other.MaxTimersPerActor = 7
	_, err = Restore(other, bytes.NewReader(snap))
	require.ErrorIs(t, err, ErrSnapshot)
	require.ErrorContains(t, err, "another configuration")
}

// TestPendingBySeq: the pending timers in insertion order, whatever the
// span of their sequences: the packed sort for spans of up to 32 bits
// (the digits of 11 bits full or not), the sort of items beyond. The
// sequences are set by hand (a span of 2^40 takes 2^40 schedules).
func TestPendingBySeq(t *testing.T) {
	for _, span := range []uint{1, 2, 10, 11, 12, 21, 22, 23, 31, 32, 33, 40, 63, 64} {
		t.Run(fmt.Sprint(span), func(t *testing.T) {
			max := ^uint64(0) >> (64 - span)
			n := 500
			if uint64(n) > max {
				n = int(max) + 1 // each timer its own sequence in the span
			}
			e, err := New(DefaultConfig())
			require.NoError(t, err)
			require.NoError(t, e.BeginBlock(1))
			tx, err := e.Begin(Address{1}, 1)
			require.NoError(t, err)
			for k := range n {
				_, _, err := tx.Schedule(uint64(2+k%7), []byte{byte(k), byte(k >> 8)})
				require.NoError(t, err)
			}
			require.NoError(t, tx.Commit())
			// Distinct offsets within [0, 2^span), the ends included,
			// above a random base (for span 64 the sum wraps: the
			// sequences are then any n distinct values), given to the
			// records in a random order.
			r := rand.New(rand.NewPCG(uint64(span), 3))
			base := r.Uint64() >> 1
			seen := map[uint64]bool{0: true, max: true}
			seqs := []uint64{0, max}
			for len(seqs) < n {
				if v := r.Uint64() & max; !seen[v] {
					seen[v] = true
					seqs = append(seqs, v)
				}
			}
			var recs []uint32
			e.ids.each(func(s uint64) { recs = append(recs, uint32(s)) })
			r.Shuffle(len(recs), func(a, b int) { recs[a], recs[b] = recs[b], recs[a] })
			want := map[uint64]uint32{}
			for k, i := range recs {
				e.recs.At(i).seq = base + seqs[k]
				want[e.recs.At(i).seq] = i
			}
			got := e.pendingBySeq()
			require.Len(t, got, len(recs))
			for k := 1; k < len(got); k++ {
				require.Less(t, e.recs.At(got[k-1]).seq, e.recs.At(got[k]).seq, "position %d", k)
			}
			for _, i := range got {
				require.Equal(t, i, want[e.recs.At(i).seq])
			}
		})
	}
}
