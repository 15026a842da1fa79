// Package engine is timerlane's public API: the timer scheduler of the
// Cowboy Actor Message Scheduler, which a node embeds.
//
// Actors schedule one-shot timers at future block heights; at the end of
// every block the engine delivers the timers due at that height, as
// deferred transactions, to the node's [Executor]. The semantics are those
// of CIP-5 as implemented (policy fifo), written down in docs/SPEC.md.
//
// A node drives one [Engine] per chain, block by block:
//
//	e.BeginBlock(h)            // epoch maintenance runs here
//	tx, _ := e.Begin(actor, nonce)
//	id, cost, err := tx.Schedule(h+10, payload)
//	tx.Commit()                // or tx.Revert(): all of its calls undone
//	e.EndBlock(executor)       // due timers fire; handlers may schedule more
//	e.Commit()
//
// Call failures are *CallError values (ErrHeightNotInFuture,
// ErrTooManyTimers, ...) to test with errors.Is; their Name is the error
// name of the conformance contract. Misuse of the lifecycle returns the
// other Err* values and changes nothing.
//
// Underneath, timers live in a three-tier calendar queue (a block ring, epoch
// slabs and a B-tree for the far future) over fixed-size slots addressed by
// index, so scheduling, cancelling and delivering allocate nothing in steady
// state. The tier layout (Config.RingSize, EpochLength, EpochCount) changes
// speed and memory only, never what is delivered or when.
package engine
