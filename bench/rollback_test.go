package bench

import (
	"fmt"
	"testing"
)

// BenchmarkRollback measures Rollback of the last k blocks of the steady
// load (perBlock schedules a block, about as many fires) at a number of
// pending timers. Between rollbacks the k blocks run again, untimed. The
// queue runs back in place unless an epoch of the tiers began in the k
// blocks (docs/SPEC.md §14), which in these blocks none does: the cost is
// the undone operations. A rollback that rebuilds the queue costs a pass
// over the pending timers more (README).
func BenchmarkRollback(b *testing.B) {
	for _, pending := range []int{10_240, 1 << 20} {
		for _, k := range []int{1, benchRollbackDepth} {
			b.Run(fmt.Sprintf("pending=%d/blocks=%d", pending, k), func(b *testing.B) {
				s := newSteady(b, pending, nil)
				e := s.e
				end := func() {
					s.fill()
					if _, err := e.EndBlock(nop); err != nil {
						b.Fatal(err)
					}
					if err := e.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				end()
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					top := e.Height()
					for range k {
						if err := e.BeginBlock(e.Height() + 1); err != nil {
							b.Fatal(err)
						}
						s.inBlock = 0
						end()
					}
					b.StartTimer()
					if err := e.Rollback(top); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
