package bench

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/timerlane/timerlane/engine"
)

// BenchmarkGrowth measures the pauses of an engine that grows: one op
// schedules 1,100,000 timers into a new engine, 1,000 per actor and
// transaction, at heights spread over 100,000 blocks, timing each
// Schedule call. max-ms is the longest call; slow-calls counts those over
// 1 ms. The arenas take new blocks on the way, whose memory, touched
// first, can take the kernel milliseconds to map (a virtual machine's
// host maps its pages then), and the id index splits a segment at a time.
// It runs with the huge-page hint on and off (engine.SetHugePages): where
// the first touch of a huge page is slow, each new 2 MiB of records or
// index waits for it; and with the engine's room for all the timers
// reserved first (engine.Reserve: reserve-ms is its time, reserved-B/timer
// the arena and index it holds per timer), where none of that is left
// for the calls. Run it with -benchtime 1x: one op is about a second.
func BenchmarkGrowth(b *testing.B) {
	defer engine.SetHugePages(true)
	for _, on := range []bool{true, false} {
		for _, reserve := range []bool{false, true} {
			b.Run(fmt.Sprintf("hugepages=%v/reserve=%v", on, reserve), func(b *testing.B) {
				engine.SetHugePages(on)
				growth(b, reserve)
			})
		}
	}
}

func growth(b *testing.B, reserve bool) {
	const timers, perActor = 1_100_000, 1_000
	var longest, reserving time.Duration
	var slow, reserved int
	d := make([]time.Duration, 0, timers)
	b.ReportAllocs()
	for b.Loop() {
		e := newEngineDepth(b, 0)
		if reserve {
			t := time.Now()
			if err := e.Reserve(timers); err != nil {
				b.Fatal(err)
			}
			reserving = time.Since(t)
			st := e.Stats()
			reserved = st.ArenaBytes + st.IndexBytes
		}
		if err := e.BeginBlock(1); err != nil {
			b.Fatal(err)
		}
		d = d[:0]
		var a engine.Address
		var tx engine.Tx
		for k := range timers {
			if k%perActor == 0 {
				if k > 0 {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				binary.BigEndian.PutUint32(a[16:], uint32(k/perActor))
				var err error
				if tx, err = e.Begin(a, 0); err != nil {
					b.Fatal(err)
				}
			}
			tx.SetNonce(uint64(k))
			t := time.Now()
			_, _, err := tx.Schedule(2+uint64(k%100_000), nil)
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		longest = slices.Max(d)
		slow = 0
		for _, x := range d {
			if x > time.Millisecond {
				slow++
			}
		}
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(slow), "slow-calls")
	if reserve {
		b.ReportMetric(float64(reserving.Microseconds())/1000, "reserve-ms")
		b.ReportMetric(float64(reserved)/timers, "reserved-B/timer")
	}
}

// BenchmarkDrain measures the pauses of an engine that empties: one op
// schedules 400,000 timers with 32-byte payloads, 4 for each of 100,000
// actors, at heights spread over 4,000 blocks, then runs blocks until
// none is pending, timing each EndBlock and Commit. max-ms is the longest
// block; slow-blocks counts those over 1 ms, in a block that fires about
// 100 timers. Each fire frees a payload and, with the actor's last timer,
// its actor entry: free lists that grew by copying themselves (slices)
// made blocks late in the drain take milliseconds (session 32). One block
// is slow by design: block 9's Commit drops from the rollback history
// (depth 8) block 1, which scheduled all 400,000, about 1 ms. Run it with
// -benchtime 1x: one op is about a second.
func BenchmarkDrain(b *testing.B) {
	const actors, perActor, blocks = 100_000, 4, 4_000
	var longest time.Duration
	var slow, ran int
	d := make([]time.Duration, 0, blocks)
	payload := make([]byte, 32)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		e := newEngineDepth(b, 8)
		if err := e.BeginBlock(1); err != nil {
			b.Fatal(err)
		}
		var a engine.Address
		for k := range actors {
			binary.BigEndian.PutUint32(a[16:], uint32(k))
			tx, err := e.Begin(a, 0)
			if err != nil {
				b.Fatal(err)
			}
			for j := range perActor {
				h := 2 + uint64((k*perActor+j)*7919%blocks)
				binary.BigEndian.PutUint32(payload, uint32(j))
				if _, _, err := tx.Schedule(h, payload); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.EndBlock(noop{}); err != nil {
			b.Fatal(err)
		}
		if err := e.Commit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		d = d[:0]
		for h := uint64(2); e.Pending() > 0; h++ {
			if err := e.BeginBlock(h); err != nil {
				b.Fatal(err)
			}
			t := time.Now()
			_, err := e.EndBlock(noop{})
			if err == nil {
				err = e.Commit()
			}
			d = append(d, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
		}
		longest, ran, slow = slices.Max(d), len(d), 0
		for _, x := range d {
			if x > time.Millisecond {
				slow++
			}
		}
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(slow), "slow-blocks")
	b.ReportMetric(float64(ran), "blocks")
}
