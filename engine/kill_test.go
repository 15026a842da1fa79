package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// TestCancelFarTimers: cancels of timers in the overflow tree, which the
// queue keeps as tombstones until their epoch comes into range or a purge
// takes them (many here, so that purges run), change nothing observable:
// the tier counts, and which timers fire, when and in what order, with
// reverted cancels, records reused by later timers (rollback off) or held
// by the history, and a rollback that brings cancelled timers back.
func TestCancelFarTimers(t *testing.T) {
	for _, depth := range []uint64{0, 4} {
		t.Run(fmt.Sprintf("rollback_depth=%d", depth), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) {
				c.RingSize, c.EpochLength, c.EpochCount, c.RollbackDepth = 16, 4, 2, depth
			})
			type timer struct {
				id     engine.TimerID
				height uint64
				seq    int // schedule order
				live   bool
			}
			var timers []*timer
			schedule := func(tx engine.Tx, height uint64) {
				id, _, err := tx.Schedule(height, fmt.Appendf(nil, "t%d", len(timers)))
				require.NoError(t, err)
				timers = append(timers, &timer{id: id, height: height, seq: len(timers), live: true})
			}
			cancel := func(tx engine.Tx, from, to int) {
				for _, tm := range timers[from:to] {
					_, err := tx.Cancel(tm.id)
					require.NoError(t, err)
				}
			}
			markCancelled := func(from, to int) {
				for _, tm := range timers[from:to] {
					tm.live = false
				}
			}
			inOverflow := func() int {
				n := 0
				for _, tm := range timers {
					if tm.live {
						n++
					}
				}
				return n
			}
			block := func(h uint64, f func()) {
				require.NoError(t, e.BeginBlock(h))
				f()
				_, err := e.EndBlock(&recorder{})
				require.NoError(t, err)
				require.NoError(t, e.Commit())
				st := e.Stats()
				require.Equal(t, inOverflow(), st.InOverflow, "block %d", h)
				require.LessOrEqual(t, st.OverflowTombstones, 2*st.InOverflow+64, "block %d", h)
			}
			block(1, func() {
				tx, _ := e.Begin(actorA, 1)
				for k := range 600 {
					schedule(tx, 1000+uint64(k%300))
				}
				require.NoError(t, tx.Commit())
			})
			block(2, func() {
				tx, _ := e.Begin(actorA, 2)
				cancel(tx, 0, 300)
				require.NoError(t, tx.Commit())
				markCancelled(0, 300)
				tx, _ = e.Begin(actorA, 3) // reverted: these stay pending
				cancel(tx, 300, 350)
				require.NoError(t, tx.Revert())
				tx, _ = e.Begin(actorA, 4) // takes the freed records when depth is 0
				for k := range 50 {
					schedule(tx, 1000+uint64(k))
				}
				require.NoError(t, tx.Commit())
				tx, _ = e.Begin(actorA, 5)
				cancel(tx, 350, 500)
				require.NoError(t, tx.Commit())
				markCancelled(350, 500)
			})
			require.Equal(t, 450, e.Stats().OverflowTombstones, "450 cancels, no purge yet")
			if depth > 0 {
				block(3, func() {
					tx, _ := e.Begin(actorA, 6)
					cancel(tx, 500, 560)
					require.NoError(t, tx.Commit())
					markCancelled(500, 560)
				})
				require.NoError(t, e.Rollback(2))
				for _, tm := range timers[500:560] {
					tm.live = true
				}
				block(3, func() {
					tx, _ := e.Begin(actorA, 7)
					cancel(tx, 540, 550)
					require.NoError(t, tx.Commit())
					markCancelled(540, 550)
				})
			}
			var want []engine.TimerID
			live := slices.DeleteFunc(slices.Clone(timers), func(tm *timer) bool { return !tm.live })
			slices.SortStableFunc(live, func(a, b *timer) int { return int(a.height) - int(b.height) })
			for _, tm := range live {
				want = append(want, tm.id)
			}
			rec := &recorder{}
			for h := e.Height() + 1; h <= 1300; h++ {
				require.NoError(t, e.BeginBlock(h))
				_, err := e.EndBlock(rec)
				require.NoError(t, err)
				require.NoError(t, e.Commit())
			}
			var got []engine.TimerID
			for _, f := range rec.fired {
				got = append(got, f.id)
			}
			require.Equal(t, want, got)
			require.Zero(t, e.Pending())
		})
	}
}
