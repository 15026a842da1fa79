package engine_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/enginemodel"
)

// invExec adapts a function to engine.Executor.
type invExec func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error)

func (f invExec) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) { return f(tx, d) }

var invNoop = invExec(func(engine.Tx, *engine.Delivery) (engine.Usage, error) { return engine.Usage{}, nil })

func invEngine(t *testing.T, mod func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// must fails the test on a non-nil error.
func invMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func invSchedule(t *testing.T, tx engine.Tx, h uint64, payload string) engine.TimerID {
	t.Helper()
	id, _, err := tx.Schedule(h, []byte(payload))
	if err != nil {
		t.Fatalf("Schedule(%d, %q): %v", h, payload, err)
	}
	return id
}

// runBlock runs block h with one committed tx per function and ends it.
func invBlock(t *testing.T, e *engine.Engine, h uint64, x engine.Executor, txs ...func(engine.Tx)) engine.BlockResult {
	t.Helper()
	invMust(t, e.BeginBlock(h))
	for k, f := range txs {
		tx, err := e.Begin(enginemodel.Actors[k%len(enginemodel.Actors)], uint64(k))
		invMust(t, err)
		f(tx)
		invMust(t, tx.Commit())
	}
	res, err := e.EndBlock(x)
	invMust(t, err)
	invMust(t, e.Commit())
	return res
}

func TestInvConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*engine.Config)
		ok   bool
	}{
		{"default", func(*engine.Config) {}, true},
		{"smallest layout", func(c *engine.Config) { c.RingSize, c.EpochLength, c.EpochCount = 2, 1, 1 }, true},
		{"ring not a power of two", func(c *engine.Config) { c.RingSize = 12 }, false},
		{"ring 1", func(c *engine.Config) { c.RingSize, c.EpochLength = 1, 1 }, false},
		{"epoch longer than ring", func(c *engine.Config) { c.EpochLength = c.RingSize + 1 }, false},
		{"epoch length 0", func(c *engine.Config) { c.EpochLength = 0 }, false},
		{"epoch count 0", func(c *engine.Config) { c.EpochCount = 0 }, false},
		{"cap 0", func(c *engine.Config) { c.MaxTimersPerActor = 0 }, true},
		{"cap 1", func(c *engine.Config) { c.MaxTimersPerActor = 1 }, true},
		{"payload limit 0", func(c *engine.Config) { c.MaxPayloadBytes = 0 }, true},
		{"payload limit 1 MiB", func(c *engine.Config) { c.MaxPayloadBytes = 1 << 20 }, true},
		{"payload limit above 1 MiB", func(c *engine.Config) { c.MaxPayloadBytes = 1<<20 + 1 }, false},
		{"handler limit 0", func(c *engine.Config) { c.MaxHandlerBytes = 0 }, true},
		{"handler limit 65537", func(c *engine.Config) { c.MaxHandlerBytes = 1<<16 + 1 }, true},
		{"handler limit 2^32-1", func(c *engine.Config) { c.MaxHandlerBytes = 1<<32 - 1 }, true},
		{"cycles per fire 0", func(c *engine.Config) { c.CyclesPerFire = 0 }, false},
		{"cells per fire 0", func(c *engine.Config) { c.CellsPerFire = 0 }, false},
		// The lane's bounds are the encodings' only: FORMAT.md bounds no
		// lane key, and a trace whose config is refused loses every event.
		{"lane of 1 cycle", func(c *engine.Config) { c.Lane.LaneTimerCycles = 1 }, true},
		{"lane of 0 cycles", func(c *engine.Config) { c.Lane.LaneTimerCycles = 0 }, false},
		{"lane cap above the lane", func(c *engine.Config) { c.Lane.MaxCyclesPerFireAuction = c.Lane.LaneTimerCycles + 1 }, true},
		{"lane cap 0", func(c *engine.Config) { c.Lane.MaxCyclesPerFireAuction = 0 }, false},
		{"lane cap above 2^60", func(c *engine.Config) { c.Lane.MaxCyclesPerFireAuction = 1<<60 + 1 }, false},
		{"free collections", func(c *engine.Config) { c.Lane.GCCostPerTimer = 0 }, true},
		{"initial basefee below the floor", func(c *engine.Config) {
			c.InitialBasefee, c.Lane.MinBasefee = engine.Amount{Lo: 5}, engine.Amount{Lo: 10}
		}, true},
		{"initial basefee 0", func(c *engine.Config) { c.InitialBasefee = engine.Amount{} }, true},
	}
	for _, tc := range tests {
		cfg := engine.DefaultConfig()
		tc.mod(&cfg)
		_, err := engine.New(cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: New: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: error %v does not wrap ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestInvLifecycleErrors(t *testing.T) {
	type step func(e *engine.Engine) error
	begin := func(h uint64) step { return func(e *engine.Engine) error { return e.BeginBlock(h) } }
	end := func(e *engine.Engine) error { _, err := e.EndBlock(invNoop); return err }
	commit := func(e *engine.Engine) error { return e.Commit() }
	tx := func(e *engine.Engine) error { _, err := e.Begin(enginemodel.Actors[0], 1); return err }
	skip := func(to uint64) step { return func(e *engine.Engine) error { _, err := e.SkipEmpty(to); return err } }
	tests := []struct {
		name  string
		setup []step
		last  step
		want  error
	}{
		{"first block 0", nil, begin(0), engine.ErrBadHeight},
		{"first block any height", nil, begin(77), nil},
		{"gap", []step{begin(5), end, commit}, begin(7), engine.ErrBadHeight},
		{"repeat", []step{begin(5), end, commit}, begin(5), engine.ErrBadHeight},
		{"next", []step{begin(5), end, commit}, begin(6), nil},
		{"begin twice", []step{begin(5)}, begin(6), engine.ErrBlockOpen},
		{"begin before commit", []step{begin(5), end}, begin(6), engine.ErrBlockEnded},
		{"end without block", nil, end, engine.ErrNoBlock},
		{"end twice", []step{begin(5), end}, end, engine.ErrBlockEnded},
		{"commit before end", []step{begin(5)}, commit, engine.ErrBlockNotEnded},
		{"commit without block", nil, commit, engine.ErrNoBlock},
		{"tx without block", nil, tx, engine.ErrNoBlock},
		{"tx after end", []step{begin(5), end}, tx, engine.ErrBlockEnded},
		{"tx while tx open", []step{begin(5), tx}, tx, engine.ErrTxOpen},
		{"end while tx open", []step{begin(5), tx}, end, engine.ErrTxOpen},
		{"skip inside block", []step{begin(5)}, skip(9), engine.ErrBlockOpen},
		{"skip after end", []step{begin(5), end}, skip(9), engine.ErrBlockEnded},
		{"skip between blocks", []step{begin(5), end, commit}, skip(9), nil},
		{"skip before the first block", nil, skip(9), nil},
		{"block after skip", []step{skip(9)}, begin(10), nil},
		{"block after skip must follow it", []step{skip(9)}, begin(9), engine.ErrBadHeight},
		{"block after 2^64-1", []step{skip(math.MaxUint64)}, begin(0), engine.ErrBadHeight},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := invEngine(t, nil)
			for _, s := range tc.setup {
				invMust(t, s(e))
			}
			if err := tc.last(e); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestInvClosedAndHandlerTx(t *testing.T) {
	e := invEngine(t, nil)
	invMust(t, e.BeginBlock(1))
	tx, err := e.Begin(enginemodel.Actors[0], 1)
	invMust(t, err)
	id := invSchedule(t, tx, 2, "x")
	invMust(t, tx.Commit())
	if _, _, err := tx.Schedule(3, nil); !errors.Is(err, engine.ErrTxClosed) {
		t.Errorf("Schedule after Commit: %v", err)
	}
	if _, err := tx.Cancel(id); !errors.Is(err, engine.ErrTxClosed) {
		t.Errorf("Cancel after Commit: %v", err)
	}
	if err := tx.Commit(); !errors.Is(err, engine.ErrTxClosed) {
		t.Errorf("Commit twice: %v", err)
	}
	if err := tx.Revert(); !errors.Is(err, engine.ErrTxClosed) {
		t.Errorf("Revert after Commit: %v", err)
	}
	_, err = e.EndBlock(invNoop)
	invMust(t, err)
	invMust(t, e.Commit())
	invMust(t, e.BeginBlock(2))
	calls := 0
	_, err = e.EndBlock(invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		calls++
		if err := tx.Commit(); !errors.Is(err, engine.ErrHandlerTx) {
			t.Errorf("handler Commit: %v", err)
		}
		if err := tx.Revert(); !errors.Is(err, engine.ErrHandlerTx) {
			t.Errorf("handler Revert: %v", err)
		}
		if _, err := e.Begin(enginemodel.Actors[1], 1); !errors.Is(err, engine.ErrInEndBlock) {
			t.Errorf("Begin inside a handler: %v", err)
		}
		if _, err := e.EndBlock(invNoop); !errors.Is(err, engine.ErrInEndBlock) {
			t.Errorf("EndBlock inside a handler: %v", err)
		}
		// Until session 38, ErrBlockNotEnded: true, but not the reason.
		if err := e.Commit(); !errors.Is(err, engine.ErrInEndBlock) {
			t.Errorf("Commit inside a handler: %v", err)
		}
		return engine.Usage{}, nil
	}))
	invMust(t, err)
	if calls != 1 {
		t.Fatalf("%d fires, want 1", calls)
	}
}

// TestInvTimerIDVectors checks the id derivation against the ids printed in
// the conformance trace 02-id-derivation.
func TestInvTimerIDVectors(t *testing.T) {
	addr := func(s string) engine.Address {
		var a engine.Address
		b, _ := hex.DecodeString(s)
		copy(a[:], b)
		return a
	}
	tests := []struct {
		actor   engine.Address
		height  uint64
		payload string
		nonce   uint64
		want    string
	}{
		{addr("0000000000000000000000000000000000000001"), 2, "", 0, "fe9a6618c45816d6039b2fe10de95985e7b6611a141931ecbc22d622109abed3"},
		{addr("abcdef0123456789abcdef0123456789abcdef01"), 100, "deadbeef", 5, "d26c3d3b8238d5e03255acfb737354114b2e738fd5d29616f0eeddfea7ef2d70"},
		{addr("abcdef0123456789abcdef0123456789abcdef01"), 101, "deadbeef", 5, "7e94aa6869bf94b7dc5370b2014b5395abe4f8c36684d270d81644a5baac7a1c"},
		{addr("abcdef0123456789abcdef0123456789abcdef01"), 100, "deadbeef", 6, "2a7896030c4239c20a3ef8fd73006b0bb7e37103a9125fa635ebf06988ffe453"},
	}
	for _, tc := range tests {
		e := invEngine(t, nil)
		invMust(t, e.BeginBlock(1))
		tx, err := e.Begin(tc.actor, tc.nonce)
		invMust(t, err)
		payload, _ := hex.DecodeString(tc.payload)
		id, cost, err := tx.Schedule(tc.height, payload)
		invMust(t, err)
		if got := hex.EncodeToString(id[:]); got != tc.want {
			t.Errorf("id %s, want %s", got, tc.want)
		}
		if model := enginemodel.TimerID(tc.actor, tc.height, payload, tc.nonce); model != id {
			t.Errorf("the model derives %x", model)
		}
		if cost != (engine.Cost{Cycles: 1000, Cells: uint64(len(payload))}) {
			t.Errorf("cost %+v", cost)
		}
	}
}

// TestInvEndOfBlockRules: all due timers leave the pending set before any
// fires; a handler's cancel of another due timer is UnknownTimer and that
// timer still fires; due timers do not count toward the cap while handlers
// run; handler timers for a height come after the transactions' ones.
func TestInvEndOfBlockRules(t *testing.T) {
	e := invEngine(t, func(c *engine.Config) { c.MaxTimersPerActor = 2 })
	a := enginemodel.Actors[0]
	var due [2]engine.TimerID
	var later engine.TimerID
	invMust(t, e.BeginBlock(10))
	tx, _ := e.Begin(a, 1)
	due[0] = invSchedule(t, tx, 11, "first")
	due[1] = invSchedule(t, tx, 11, "second")
	if _, _, err := tx.Schedule(12, nil); !errors.Is(err, engine.ErrTooManyTimers) {
		t.Fatalf("third timer: %v", err)
	}
	invMust(t, tx.Commit())
	_, err := e.EndBlock(invNoop)
	invMust(t, err)
	invMust(t, e.Commit())

	invMust(t, e.BeginBlock(11))
	var fired []engine.TimerID
	_, err = e.EndBlock(invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		fired = append(fired, d.TimerID)
		if e.Pending() != len(fired)-1 {
			t.Errorf("fire %d: Pending %d: due timers still pending", len(fired), e.Pending())
		}
		other := due[1-len(fired)+1]
		if _, err := tx.Cancel(other); !errors.Is(err, engine.ErrUnknownTimer) {
			t.Errorf("handler cancel of a same-block due timer: %v", err)
		}
		if len(fired) == 1 {
			tx.SetNonce(9)
			// Two timers allowed: the due ones no longer count.
			later = invSchedule(t, tx, 13, "from handler")
		}
		return engine.Usage{}, nil
	}))
	invMust(t, err)
	invMust(t, e.Commit())
	if !slices.Equal(fired, due[:]) {
		t.Fatalf("fired %x, want %x", fired, due)
	}
	invMust(t, e.BeginBlock(12))
	tx, _ = e.Begin(a, 2)
	fromTx := invSchedule(t, tx, 13, "from tx")
	invMust(t, tx.Commit())
	_, err = e.EndBlock(invNoop)
	invMust(t, err)
	invMust(t, e.Commit())
	invMust(t, e.BeginBlock(13))
	fired = nil
	_, err = e.EndBlock(invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		fired = append(fired, d.TimerID)
		return engine.Usage{}, nil
	}))
	invMust(t, err)
	// Scheduled in block 11 by a handler, then in block 12 by a tx: FIFO.
	if !slices.Equal(fired, []engine.TimerID{later, fromTx}) {
		t.Fatalf("fired %x, want handler's then tx's", fired)
	}
}

func TestInvCancelDueInBlock(t *testing.T) {
	e := invEngine(t, nil)
	invMust(t, e.BeginBlock(1))
	tx, _ := e.Begin(enginemodel.Actors[0], 1)
	keep := invSchedule(t, tx, 2, "keep")
	drop := invSchedule(t, tx, 2, "drop")
	invMust(t, tx.Commit())
	_, err := e.EndBlock(invNoop)
	invMust(t, err)
	invMust(t, e.Commit())
	invMust(t, e.BeginBlock(2))
	tx, _ = e.Begin(enginemodel.Actors[1], 1)
	if _, err := tx.Cancel(drop); !errors.Is(err, engine.ErrNotOwner) {
		t.Fatalf("foreign cancel: %v", err)
	}
	invMust(t, tx.Commit())
	tx, _ = e.Begin(enginemodel.Actors[0], 2)
	if c, err := tx.Cancel(drop); err != nil || c != (engine.Cost{Cycles: 500}) {
		t.Fatalf("cancel in the due block: %+v %v", c, err)
	}
	if _, err := tx.Cancel(drop); !errors.Is(err, engine.ErrUnknownTimer) {
		t.Fatalf("second cancel: %v", err)
	}
	invMust(t, tx.Commit())
	var fired []engine.TimerID
	res, err := e.EndBlock(invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		fired = append(fired, d.TimerID)
		return engine.Usage{}, nil
	}))
	invMust(t, err)
	if !slices.Equal(fired, []engine.TimerID{keep}) || res.Fired != 1 || res.Pending != 0 {
		t.Fatalf("fired %x, result %+v", fired, res)
	}
}

// TestInvRevertRestoresState: a reverted tx or handler leaves pending
// timers, counts and FIFO positions exactly as they were.
func TestInvRevertRestoresState(t *testing.T) {
	// Without rollback, the fired timers' records (and their actor) are
	// freed at once.
	e := invEngine(t, func(c *engine.Config) { c.MaxTimersPerActor, c.RollbackDepth = 3, 0 })
	a := enginemodel.Actors[0]
	invMust(t, e.BeginBlock(1))
	tx, _ := e.Begin(a, 1)
	t1 := invSchedule(t, tx, 5, "1")
	t2 := invSchedule(t, tx, 5, "2")
	invMust(t, tx.Commit())
	before := e.Stats()
	tx, _ = e.Begin(a, 2)
	if _, err := tx.Cancel(t1); err != nil {
		t.Fatal(err)
	}
	invSchedule(t, tx, 5, "3")
	invSchedule(t, tx, 5, "4") // allowed: t1 is cancelled in this tx
	if _, _, err := tx.Schedule(5, []byte("5")); !errors.Is(err, engine.ErrTooManyTimers) {
		t.Fatalf("fourth pending timer: %v", err)
	}
	invMust(t, tx.Revert())
	if got := e.Stats(); got.Pending != before.Pending || got.InRing != before.InRing || got.Actors != before.Actors {
		t.Fatalf("after revert %+v, before %+v", got, before)
	}
	if e.PendingOf(a) != 2 {
		t.Fatalf("PendingOf = %d", e.PendingOf(a))
	}
	_, err := e.EndBlock(invNoop)
	invMust(t, err)
	invMust(t, e.Commit())
	// A handler that uses too many cells reverts its schedule.
	h, err := e.SkipEmpty(100)
	invMust(t, err)
	if h != 4 {
		t.Fatalf("SkipEmpty stopped at %d, want 4", h)
	}
	invMust(t, e.BeginBlock(5))
	var fired []engine.TimerID
	res, err := e.EndBlock(invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
		fired = append(fired, d.TimerID)
		invSchedule(t, tx, 9, string(d.Payload))
		return engine.Usage{Cells: d.CellsLimit + 1}, nil
	}))
	invMust(t, err)
	if !slices.Equal(fired, []engine.TimerID{t1, t2}) || res.Pending != 0 || e.Stats().Actors != 0 {
		t.Fatalf("fired %x, result %+v, stats %+v", fired, res, e.Stats())
	}
}

// TestInvSteadyStateMemory: scheduling and firing the same load over and over
// does not grow the engine's memory, once the rollback history is full.
func TestInvSteadyStateMemory(t *testing.T) {
	for _, depth := range []uint64{0, 64} {
		e := invEngine(t, func(c *engine.Config) { c.RingSize, c.EpochLength, c.EpochCount, c.RollbackDepth = 16, 4, 2, depth })
		var first engine.Stats
		for h := uint64(1); h <= 500; h++ {
			invBlock(t, e, h, invNoop, func(tx engine.Tx) {
				for k := range 50 {
					invSchedule(t, tx, h+1+uint64(k%40), fmt.Sprintf("payload %d of %d", k, h))
				}
			})
			if h == 200 {
				first = e.Stats()
			}
		}
		last := e.Stats()
		if last.ArenaBytes != first.ArenaBytes || last.IndexBytes != first.IndexBytes || last.DataBytes != first.DataBytes {
			t.Fatalf("depth %d: memory grew in steady state: %+v -> %+v", depth, first, last)
		}
		if last.Pending != 875 || last.Actors != 1 { // sum over the last 40 blocks of (40-j) + max(0, 10-j)
			t.Fatalf("depth %d: stats %+v", depth, last)
		}
	}
}

// TestInvLargePayloadsGiveMemoryBack: a burst of large payloads (200 KB,
// a size class of one payload per chunk) holds its memory only while the
// engine holds its timers; once they fired and left the rollback history,
// the payload store is back within 8 MiB of its size under the steady
// load around the burst, which itself neither grows it nor allocates it
// anew.
func TestInvLargePayloadsGiveMemoryBack(t *testing.T) {
	const depth = 16
	e := invEngine(t, func(c *engine.Config) { c.RollbackDepth = depth })
	big := bytes.Repeat([]byte("large payload "), 200_000/14)
	h := uint64(0)
	run := func(blocks, perBlock int) {
		for range blocks {
			h++
			invBlock(t, e, h, invNoop, func(tx engine.Tx) {
				for k := range perBlock {
					tx.SetNonce(uint64(k))
					if _, _, err := tx.Schedule(h+5, big); err != nil {
						t.Fatalf("block %d: Schedule: %v", h, err)
					}
				}
			})
		}
	}
	run(3*depth, 2)
	steady := e.Stats().DataBytes
	run(3*depth, 2)
	if got := e.Stats().DataBytes; got != steady {
		t.Fatalf("the steady load's payload store went from %d to %d bytes", steady, got)
	}
	run(1, 400) // 80 MB
	if peak := e.Stats().DataBytes; peak < steady+400*200_000 {
		t.Fatalf("%d bytes with the burst pending, %d before it", peak, steady)
	}
	run(3*depth, 2)
	// 64 KiB for the burst's tags and free lists, which stay.
	if got := e.Stats().DataBytes; got > steady+max(steady, 8<<20)+64<<10 {
		t.Fatalf("%d bytes after the burst fired and left the history, %d before it", got, steady)
	}
}

// TestInvTopOfChain runs the chain to height 2^64-1 under every layout, with
// timers due on its last heights.
func TestInvTopOfChain(t *testing.T) {
	for _, l := range enginemodel.Layouts {
		t.Run(fmt.Sprint(l), func(t *testing.T) {
			cfg := enginemodel.WithLayout(engine.DefaultConfig(), l)
			e, err := engine.New(cfg)
			invMust(t, err)
			_, err = e.SkipEmpty(math.MaxUint64 - 10)
			invMust(t, err)
			var want []engine.TimerID
			invBlock(t, e, math.MaxUint64-9, invNoop, func(tx engine.Tx) {
				for x := uint64(0); x <= 5; x++ {
					want = append(want, invSchedule(t, tx, math.MaxUint64-5+x, "a"), invSchedule(t, tx, math.MaxUint64-5+x, "b"))
				}
			})
			var got []engine.TimerID
			x := invExec(func(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
				if d.Height != d.Block {
					t.Errorf("timer of %d fired at %d", d.Height, d.Block)
				}
				if _, _, err := tx.Schedule(d.Block, nil); !errors.Is(err, engine.ErrHeightNotInFuture) {
					t.Errorf("schedule at the current height: %v", err)
				}
				got = append(got, d.TimerID)
				return engine.Usage{}, nil
			})
			for e.Height() < math.MaxUint64 {
				h, err := e.SkipEmpty(math.MaxUint64)
				invMust(t, err)
				if h < math.MaxUint64 {
					invBlock(t, e, h+1, x)
				}
			}
			if !slices.Equal(got, want) || e.Pending() != 0 {
				t.Fatalf("fired %d of %d timers, %d pending", len(got), len(want), e.Pending())
			}
			if err := e.BeginBlock(0); !errors.Is(err, engine.ErrBadHeight) {
				t.Fatalf("block after 2^64-1: %v", err)
			}
		})
	}
}

// TestInvSkipEmptyLayoutIndependent: SkipEmpty(to) runs the empty blocks up
// to to, stopping just before the next block in which a timer is due: the
// height it returns is min(to, next due - 1) under every layout (the layout
// is "speed and memory only, never behaviour").
func TestInvSkipEmptyLayoutIndependent(t *testing.T) {
	for _, l := range enginemodel.Layouts {
		t.Run(fmt.Sprint(l), func(t *testing.T) {
			e, err := engine.New(enginemodel.WithLayout(engine.DefaultConfig(), l))
			invMust(t, err)
			invBlock(t, e, 1, invNoop, func(tx engine.Tx) { invSchedule(t, tx, 30, "") })
			tests := []struct{ to, want uint64 }{{10, 10}, {29, 29}, {100, 29}}
			for _, tc := range tests {
				if h, err := e.SkipEmpty(tc.to); err != nil || h != tc.want {
					t.Fatalf("SkipEmpty(%d) = %d, %v; want %d", tc.to, h, err, tc.want)
				}
			}
		})
	}
}

// TestInvStaleTxHandle: a transaction handle that was committed stays
// closed (ErrTxClosed) even after the next transaction opens; it must never
// act as that transaction, whose actor may be another.
func TestInvStaleTxHandle(t *testing.T) {
	e := invEngine(t, nil)
	invMust(t, e.BeginBlock(1))
	stale, err := e.Begin(enginemodel.Actors[0], 1)
	invMust(t, err)
	invMust(t, stale.Commit())
	fresh, err := e.Begin(enginemodel.Actors[1], 1)
	invMust(t, err)
	if _, _, err := stale.Schedule(5, []byte("as whom?")); !errors.Is(err, engine.ErrTxClosed) {
		t.Errorf("Schedule on a committed handle after the next Begin: %v (PendingOf(actor 1) = %d)", err, e.PendingOf(enginemodel.Actors[1]))
	}
	invMust(t, fresh.Commit())
}
