package engine_test

import (
	"fmt"

	"github.com/timerlane/timerlane/engine"
)

// beat routes to the handler "tick" with the payload "beat".
var beat = []byte(`{"_handler":"tick","_payload":"YmVhdA=="}`)

// node is the embedder's side: it runs the handler of each due timer.
type node struct{}

func (node) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	fmt.Printf("block %d: %s(%q) for %s\n", d.Block, d.Handler, d.Payload, d.Actor)
	if string(d.Handler) == "tick" && d.Block < 30 {
		// A heartbeat: the handler schedules its own next run.
		if _, _, err := tx.Schedule(d.Block+10, beat); err != nil {
			return engine.Usage{}, err // reverts the handler's calls
		}
	}
	return engine.Usage{Cycles: 20_000}, nil
}

func Example() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	actor := engine.Address{0xaa}
	for h := e.Height() + 1; h <= 30; h++ {
		if err := e.BeginBlock(h); err != nil {
			panic(err)
		}
		if h == 1 { // a user transaction schedules two timers
			tx, _ := e.Begin(actor, 1)
			tx.Schedule(5, []byte("hello")) // a *engine.CallError if refused
			tx.Schedule(10, beat)
			tx.Commit()
		}
		if _, err := e.EndBlock(node{}); err != nil { // delivers the timers due at h
			panic(err)
		}
		if err := e.Commit(); err != nil {
			panic(err)
		}
	}
	fmt.Println("pending:", e.Pending())
	// Output:
	// block 5: handle_timer("hello") for 0xaa00000000000000000000000000000000000000
	// block 10: tick("beat") for 0xaa00000000000000000000000000000000000000
	// block 20: tick("beat") for 0xaa00000000000000000000000000000000000000
	// block 30: tick("beat") for 0xaa00000000000000000000000000000000000000
	// pending: 0
}

// settlement prints each fire's fee settlement under the lane.
type settlement struct{}

func (settlement) Fired(d *engine.Delivery, r engine.FireResult) {
	f := r.Fee
	fmt.Printf("block %d: %q charged %s, refund %s, tip %s, burned %s (W %d ppm)\n",
		d.Block, d.Payload, f.Charged, f.Refund, f.Tip, f.Burned, f.Weight)
}

func (settlement) Collected(id engine.TimerID, why engine.GCReason) {
	fmt.Println("collected:", why)
}

func (settlement) Deferred(id engine.TimerID, why engine.DeferReason) {}

func (settlement) Clamped(id engine.TimerID, stated, clamped engine.Amount) {
	fmt.Printf("priority fee %s clamped to %s\n", stated, clamped)
}

// Example_lane runs the CIP-1 timer lane: timers pay their fires from a
// ledger, at the lane basefee plus a priority fee, and an unfunded timer
// is collected instead of firing.
func Example_lane() {
	cfg := engine.DefaultConfig()
	cfg.Policy = engine.PolicyLane
	e, err := engine.New(cfg)
	if err != nil {
		panic(err)
	}
	rich, poor := engine.Address{0xaa}, engine.Address{0xbb}
	e.Ledger().Credit(rich, engine.Amount{Lo: 1_000_000_000})
	e.SetObserver(settlement{})

	e.BeginBlock(1)
	tx, _ := e.Begin(rich, 1)
	tx.ScheduleFees(3, []byte("paid"), &engine.Fees{
		Set:    engine.HasMaxFee | engine.HasMaxPriorityFee | engine.HasGasLimit,
		MaxFee: engine.Amount{Lo: 2_000}, MaxPriorityFee: engine.Amount{Lo: 5_000}, GasLimit: 100_000,
	})
	tx.Commit()
	tx, _ = e.Begin(poor, 1)
	tx.Schedule(3, []byte("unfunded"))
	tx.Commit()
	for h := uint64(1); h <= 3; h++ {
		if h > 1 {
			e.BeginBlock(h)
		}
		e.EndBlock(node{})
		e.Commit()
	}
	fmt.Println("basefee now:", e.Basefee(), "pending:", e.Pending())
	// Output:
	// priority fee 5000 clamped to 1000
	// collected: insufficient_funds
	// block 3: handle_timer("paid") for 0xaa00000000000000000000000000000000000000
	// block 3: "paid" charged 176600000, refund 141280000, tip 20000000, burned 15320000 (W 2000000 ppm)
	// basefee now: 671 pending: 0
}

// A reorg: block 5 is replaced. Rollback returns the engine to its state
// after block 4, where the timer due at 5 is pending again; the new block
// 5 cancels it instead.
func ExampleEngine_Rollback() {
	e, err := engine.New(engine.DefaultConfig()) // RollbackDepth 256
	if err != nil {
		panic(err)
	}
	actor := engine.Address{0xaa}
	var id engine.TimerID
	for h := uint64(1); h <= 5; h++ {
		e.BeginBlock(h)
		if h == 1 {
			tx, _ := e.Begin(actor, 1)
			id, _, _ = tx.Schedule(5, []byte("hello"))
			tx.Commit()
		}
		e.EndBlock(node{})
		e.Commit()
	}
	if err := e.Rollback(4); err != nil {
		panic(err)
	}
	fmt.Println("height", e.Height(), "pending", e.Pending())
	e.BeginBlock(5)
	tx, _ := e.Begin(actor, 2)
	tx.Cancel(id)
	tx.Commit()
	e.EndBlock(node{})
	e.Commit()
	fmt.Println("height", e.Height(), "pending", e.Pending())
	// Output:
	// block 5: handle_timer("hello") for 0xaa00000000000000000000000000000000000000
	// height 4 pending 1
	// height 5 pending 0
}

// A node that expects up to a million pending timers reserves their room
// when it starts, so that no call on the way there stops to grow the
// engine's memory.
func ExampleEngine_Reserve() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	before := e.Stats()
	if err := e.Reserve(1_000_000); err != nil {
		panic(err)
	}
	after := e.Stats()
	fmt.Println("reserved at least 100 MB:", after.ArenaBytes+after.IndexBytes-before.ArenaBytes-before.IndexBytes >= 100<<20)
	fmt.Println(e.Reserve(-1))
	// Output:
	// reserved at least 100 MB: true
	// timerlane: Reserve out of range: -1 timers: must be in [0, 1073741824]
}
