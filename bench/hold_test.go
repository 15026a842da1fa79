package bench

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// sink keeps the checksums alive so that no step can be optimised away.
var sink uint64

// holdSizes are the resident counts run by default; 4M runs only when the
// -bench pattern names it (it needs about 1 GB and minutes), never in -short.
var holdSizes = []int{10_000, 100_000, 1_000_000}

const bigSize = 4_000_000

func sizes() []int { return withNamed(holdSizes, bigSize) }

// withNamed is sizes, and big after them when the -bench pattern names it
// (as "4000000"), never in -short: a size too big to run by default.
func withNamed(sizes []int, big int) []int {
	f := flag.Lookup("test.bench")
	if testing.Short() || f == nil || !strings.Contains(f.Value.String(), fmt.Sprint(big)) {
		return sizes
	}
	return append(sizes[:len(sizes):len(sizes)], big)
}

// BenchmarkHold: one op is one timer moved, popped when due and re-inserted
// gap blocks later, with the cost of moving the height on included.
func BenchmarkHold(b *testing.B) {
	for _, d := range dists {
		for _, n := range sizes() {
			for _, im := range impls {
				b.Run(fmt.Sprintf("dist=%s/n=%d/impl=%s", d.name, n, im.name), func(b *testing.B) {
					benchHold(b, im.name, newWorkload(d, n))
				})
			}
		}
	}
}

// benchHold runs one implementation; each case spells out its own loop so
// that the step is a direct call.
func benchHold(b *testing.B, name string, w *workload) {
	var sum uint64
	var before, after runtime.MemStats
	b.ReportAllocs()
	switch name {
	case "calendar":
		c := newCalendarHold(w)
		settle(&before)
		for b.Loop() {
			c.step()
		}
		sum = c.sum
		// Each block costs the calendar a fixed share (Advance, Take and
		// staging), which the timers due in it divide. The clock starts
		// at height 0.
		b.ReportMetric(float64(b.N)/float64(max(1, c.cur)), "timers/block")
	case "heap":
		c := newHeapHold(w)
		settle(&before)
		for b.Loop() {
			c.step()
		}
		sum = c.sum
	case "container_heap":
		c := newStdHeapHold(w)
		settle(&before)
		for b.Loop() {
			c.step()
		}
		sum = c.sum
	case "btree":
		c := newBtreeHold(w)
		settle(&before)
		for b.Loop() {
			c.step()
		}
		sum = c.sum
	case "map_slices":
		c := newMapHold(w)
		settle(&before)
		for b.Loop() {
			c.step()
		}
		sum = c.sum
	default:
		b.Fatalf("unknown implementation %q", name)
	}
	sink += sum
	// allocs/op is truncated to an integer; an allocation every few ops
	// shows only here (and in B/op).
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)*1e6/float64(b.N), "allocs/Mop")
}

// BenchmarkHoldBlockShare is the calendar under near gaps alone with as
// many timers due per block as bimodal has at 1M resident: every timer
// in the ring and in cache, each block's fixed share of the work the same
// as bimodal's. Bimodal's time above it is its far timers' cost.
func BenchmarkHoldBlockShare(b *testing.B) {
	near, bimodal := distNamed("near"), distNamed("bimodal")
	// Timers due per block are n / mean gap, in equilibrium.
	n := int(1_000_000 * meanGap(near) / meanGap(bimodal))
	b.Run(fmt.Sprintf("dist=near/n=%d/impl=calendar", n), func(b *testing.B) {
		benchHold(b, "calendar", newWorkload(near, n))
	})
}

// settle collects the setup's garbage, so that no implementation pays for
// another's, and reads the allocation count the loop starts from.
func settle(m *runtime.MemStats) {
	runtime.GC()
	runtime.ReadMemStats(m)
}

// TestHoldEquivalent checks that all implementations pop the same timers,
// (height, seq, val), in the same order, so that the benchmark compares
// equal work.
func TestHoldEquivalent(t *testing.T) {
	const n, ops = 2000, 100_000
	for _, d := range dists {
		w := newWorkload(d, n)
		var want clock
		for k, im := range impls {
			h := im.make(w)
			for range ops {
				h.step()
			}
			got := *h.state()
			if k == 0 {
				want = got
				continue
			}
			if got.sum != want.sum || got.cur != want.cur || got.seq != want.seq {
				t.Errorf("dist=%s: %s ends at height %d seq %d sum %#x; %s at %d %d %#x",
					d.name, im.name, got.cur, got.seq, got.sum, impls[0].name, want.cur, want.seq, want.sum)
			}
		}
	}
}
