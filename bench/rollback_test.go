package bench

import (
	"fmt"
	"testing"

	"github.com/timerlane/timerlane/internal/calendar"
)

// BenchmarkRollback measures Rollback of the last k blocks of the steady
// load (perBlock schedules a block, about as many fires) at a number of
// pending timers. Between rollbacks the k blocks run again, untimed. The
// queue runs back in place (docs/SPEC.md §14): the cost is the undone
// operations. With epoch=start the first of the k blocks starts an epoch
// of the tiers, whose moves are undone too. (A rollback that rebuilds the
// queue costs a pass over the pending timers more: README.)
func BenchmarkRollback(b *testing.B) {
	for _, pending := range []int{10_240, 1 << 20} {
		for _, k := range []int{1, benchRollbackDepth} {
			for _, start := range []bool{false, true} {
				name := fmt.Sprintf("pending=%d/blocks=%d", pending, k)
				if start {
					name += "/epoch=start"
				}
				b.Run(name, func(b *testing.B) { benchRollback(b, pending, k, start) })
			}
		}
	}
}

func benchRollback(b *testing.B, pending, k int, epochStart bool) {
	s := newSteady(b, pending, nil)
	e := s.e
	end := func() {
		s.fill()
		endBlock(b, e)
	}
	block := func() {
		if err := e.BeginBlock(e.Height() + 1); err != nil {
			b.Fatal(err)
		}
		s.inBlock = 0
		end()
	}
	end()
	for epochStart && (e.Height()+1)%calendar.DefaultLayout.EpochLength != 0 {
		block()
	}
	rebuilds := e.Stats().QueueRebuilds
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		top := e.Height()
		for range k {
			block()
		}
		b.StartTimer()
		if err := e.Rollback(top); err != nil {
			b.Fatal(err)
		}
	}
	if got := e.Stats().QueueRebuilds - rebuilds; got != 0 {
		b.Fatalf("%d of %d rollbacks rebuilt the queue", got, b.N)
	}
}
