// Package engine is timerlane's public API: the timer scheduler of the
// Cowboy Actor Message Scheduler, which a node embeds.
//
// Actors schedule one-shot timers at future block heights; at the end of
// every block the engine delivers the timers due at that height, as
// deferred transactions, to the node's [Executor]. Two end-of-block
// policies: CIP-5 as implemented ([PolicyFIFO], the default: every due
// timer fires, in insertion order) and the CIP-1 timer lane ([PolicyLane]:
// an EIP-1559 lane basefee, Gas Bidding Agents, the fairness weight, the GC
// lane, TTLs and system instructions, with the embedder's [Ledger]).
// docs/SPEC.md writes their semantics down, with every choice the specs
// left open.
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
// [New] makes an engine in memory; [Open] recovers one from a directory
// and logs every committed block there (a write-ahead log with snapshots;
// Config.Sync says what survives a crash), and [OpenReadOnly] reads one
// beside a running node. With Config.StateRoot, [Engine.Root] is a Merkle
// root over every pending timer and the scheduler's state, and
// [Engine.Prove] proves a timer pending or not. [Engine.Rollback] returns
// the engine to any of its last Config.RollbackDepth blocks (fewer when
// Config.RollbackBytes bounds the history's payloads), log included, for
// a reorg. An Engine is not safe for concurrent use.
//
// Underneath, timers live in a three-tier calendar queue (a block ring, epoch
// slabs and a B-tree for the far future) over fixed-size slots addressed by
// index, so scheduling, cancelling and delivering allocate nothing in steady
// state. The tier layout (Config.RingSize, EpochLength, EpochCount) changes
// speed and memory only, never what is delivered or when.
package engine
