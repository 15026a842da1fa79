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
	for h := uint64(1); h <= 30; h++ {
		e.BeginBlock(h)
		if h == 1 { // a user transaction schedules two timers
			tx, _ := e.Begin(actor, 1)
			tx.Schedule(5, []byte("hello"))
			tx.Schedule(10, beat)
			tx.Commit()
		}
		e.EndBlock(node{}) // delivers the timers due at h
		e.Commit()
	}
	fmt.Println("pending:", e.Pending())
	// Output:
	// block 5: handle_timer("hello") for 0xaa00000000000000000000000000000000000000
	// block 10: tick("beat") for 0xaa00000000000000000000000000000000000000
	// block 20: tick("beat") for 0xaa00000000000000000000000000000000000000
	// block 30: tick("beat") for 0xaa00000000000000000000000000000000000000
	// pending: 0
}
