package bench

import (
	"fmt"
	"testing"

	"github.com/timerlane/timerlane/engine"
)

// BenchmarkRecover: one op is engine.Open of a directory holding 1,040,000
// pending timers (empty payloads, 100 per actor): a snapshot taken after
// the 100th block of 10,000 schedules and 20 records of 2,000 after it.
func BenchmarkRecover(b *testing.B) {
	for _, root := range []bool{false, true} {
		b.Run(fmt.Sprintf("root=%v", root), func(b *testing.B) {
			dir := b.TempDir()
			cfg := engine.DefaultConfig()
			cfg.StateRoot, cfg.SnapshotEvery = root, 100
			e, err := engine.Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			const perBlock, blocks = 10_000, 120
			n := uint64(0)
			for h := uint64(1); h <= blocks; h++ {
				if err := e.BeginBlock(h); err != nil {
					b.Fatal(err)
				}
				count := perBlock
				if h > 100 {
					count = perBlock / 5 // 20 records of 2,000 after the snapshot
				}
				for k := 0; k < count; k += 100 { // 100 timers per actor and transaction
					tx, err := e.Begin(actors[(n/100)%nActors], 0)
					if err != nil {
						b.Fatal(err)
					}
					for range 100 {
						n++
						tx.SetNonce(n)
						if _, _, err := tx.Schedule(1_000_000+n%500_000, nil); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := e.EndBlock(nop); err != nil {
					b.Fatal(err)
				}
				if err := e.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			pending := e.Pending()
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				r, err := engine.Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if r.Pending() != pending {
					b.Fatalf("recovered %d pending, want %d", r.Pending(), pending)
				}
				r.Close()
			}
			b.ReportMetric(float64(pending), "timers")
		})
	}
}
