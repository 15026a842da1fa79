package engine_test

// A randomized differential test of the engine against the simple model of
// internal/enginemodel, under several tier layouts.

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/enginemodel"
)

var modelSeeds = flag.Int("model.seeds", 0, "number of random programs for TestEngineMatchesModel (0: the default)")

func TestEngineMatchesModel(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	if *modelSeeds > 0 {
		seeds = *modelSeeds
	}
	configs := []struct {
		name                  string
		cap, handler, payload uint32
	}{
		{"cap3", 3, 256, 1 << 20},
		{"cap1-small", 1, 8, 64},
		{"cap1024-small", 1024, 6, 48},
		{"cap4", 4, 12, 1 << 20},
	}
	stats := map[string]int{}
	for s := range seeds {
		c := configs[s%len(configs)]
		cfg := engine.DefaultConfig()
		cfg.MaxTimersPerActor, cfg.MaxHandlerBytes, cfg.MaxPayloadBytes = c.cap, c.handler, c.payload
		if s%3 == 0 {
			cfg.RollbackDepth = 0 // records are freed at once: the actor table is exact
		}
		p := enginemodel.GenProgram(rand.New(rand.NewPCG(uint64(s), 1)), uint64(s), cfg, 150)
		want := enginemodel.RunModel(cfg, p)
		for _, line := range want {
			f := strings.Fields(line)
			switch {
			case f[0] == "fire":
				stats["fire"]++
			case f[0] == "fired" && strings.HasSuffix(line, "true"):
				stats["handler reverted"]++
			case len(f) >= 6 && (f[0] == "tx" || f[0] == "handler"):
				stats[f[0]+" "+f[5]]++
			case f[0] == "revert":
				stats["tx revert"]++
			}
		}
		for _, l := range enginemodel.Layouts {
			got, err := enginemodel.RunEngine(enginemodel.WithLayout(cfg, l), p)
			if d := enginemodel.Diff(want, got); d != "" || err != nil {
				t.Fatalf("seed %d (%s), layout %v: err %v; logs differ at %s", s, c.name, l, err, d)
			}
		}
	}
	// The programs must reach every outcome, or the test proves little.
	for _, k := range []string{"fire", "handler reverted", "tx revert", "tx ok", "handler ok", "tx HeightNotInFuture", "tx PayloadTooLarge",
		"tx InvalidHandler", "tx TooManyTimers", "tx DuplicateTimer", "tx UnknownTimer", "tx NotOwner", "handler UnknownTimer",
		"handler HeightNotInFuture", "handler TooManyTimers", "handler DuplicateTimer"} {
		if stats[k] == 0 {
			t.Errorf("no %q in %d programs: %v", k, seeds, stats)
		}
	}
	t.Logf("outcomes: %v", stats)
}
