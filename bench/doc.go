// Package bench holds timerlane's benchmarks; it has no code of its own.
//
// BenchmarkHold is the classic hold model of priority queues: n timers stay
// resident; one op pops the next timer due at the current height (moving
// the height on block by block while nothing is due) and re-inserts it gap
// blocks later. Every implementation is given and returns the same item
// (height, seq, val) and pops in (height, seq) order, which
// TestHoldEquivalent checks. Implementations: calendar (ours,
// internal/calendar), heap (hand-written binary heap), container_heap,
// btree (tidwall/btree ordered map, Aptos' BigOrderedMap approach) and
// map_slices (height -> slice, CIP-5's node layout). Gaps: exp (geometric,
// mean 1024), uniform (1..2000), bimodal (90% 1..64, 10% 50,000..500,000),
// far (90% 1..64, 10% 500,000..5,000,000; both through the epoch tier of
// the default layout), beyond (90% 1..64, 10% 10M..100M, through the
// overflow B-tree as well) and near (bimodal's near mode alone, 1..64:
// every timer stays in the ring, the calendar's floor under bimodal's
// time). Residents start
// in the model's equilibrium, so no warm-up is needed. allocs/Mop is the
// exact allocation count per million ops, which allocs/op truncates; the
// calendar's timers/block is how many ops share each block's fixed work.
//
// BenchmarkHoldBlockShare runs the calendar under near gaps with as few
// resident timers as give bimodal's timers/block at 1M (about 1,180): the
// same share of block work per op, with every timer in cache. Bimodal's
// time above it is what its far timers cost.
//
// Engine benchmarks, through the public API with a no-op Executor:
//
//   - BenchmarkKeccak: keccak256 of a timer id's preimage, the floor of
//     Schedule.
//   - BenchmarkSchedule: one successful Schedule, pending count steady.
//   - BenchmarkScheduleOverKeccak: Schedule's time less its Keccak's
//     (over-keccak-ns/op), the two timed in alternating batches of 256 in
//     one process, so that both run on the same machine.
//   - BenchmarkCancel: one Cancel and its share of the Commit that unlinks
//     it, 10k (warm) or 1M (cold) pending in the tier named.
//   - BenchmarkEndBlock: one block's EndBlock, Commit and next BeginBlock;
//     ns/timer is per delivered timer.
//   - BenchmarkPendingBytes: live heap per pending timer (B/timer) with 1M
//     timers, empty payloads, 10,000 actors, heights a third in each tier.
//   - BenchmarkGrowth: 1,100,000 Schedule calls into a new engine, each
//     timed: the longest (max-ms) and those over 1 ms, with the huge-page
//     hint on and off, and with Engine.Reserve first. Use -benchtime 1x.
//   - BenchmarkMemory: one load from a random cache line whose address the
//     load before it gave, over 16 MiB (the id index at 1M pending) and
//     64 MiB (the records): the machine's floor under the rows at 1M, as
//     the Keccak is Schedule's.
//   - BenchmarkMemoryLines: 1,024 independent loads from random lines of
//     16 or 64 MiB, all started before any is read (ns/line): the floor
//     of end of block at 1M, whose loads do not wait for one another.
//   - BenchmarkLaneEndBlock: a lane end of block that fires 10,000 timers
//     of 1,000 actors; BenchmarkLaneBacklog, the same while a backlog of
//     10k to 1M due timers waits in every block.
//   - BenchmarkLatencyCancel, BenchmarkLatencySkipEmpty,
//     BenchmarkLatencyEpochStage: every call of an operation whose cost
//     once grew with the timers at one height, timed: mean, 99.9th
//     percentile and slowest.
//   - BenchmarkDrain: an engine of 400,000 timers run until none is
//     pending, the longest block timed.
//   - BenchmarkRollback: a rollback of 1 or 8 blocks.
//   - BenchmarkRecover, BenchmarkRecoverTail, BenchmarkRecoverBulk,
//     BenchmarkDurableCommit, BenchmarkSnapshotCommit,
//     BenchmarkSnapshotEncode: the log (docs/DURABILITY.md).
//
// alloc_test.go checks, in a few milliseconds, that Schedule, Cancel and
// end of block allocate nothing in steady state; it runs with go test.
//
// Every benchmark at once (-bench .) runs far longer than the README's
// table, whose patterns took 12 min 45 s: many build a million timers or
// more before they time anything. Run patterns, as that table does, for
// example the hold model at 1M and the engine's hot paths:
//
//	go test ./bench -run '^$' -bench 'Hold/.*/n=1000000/' -benchmem -count 6 | tee out.txt
//	go test ./bench -run '^$' -bench '^Benchmark(Schedule|Cancel|EndBlock)$' -benchmem -count 6 | tee -a out.txt
//	benchstat -col /impl -filter '.name:Hold' out.txt
//	benchstat out.txt
//
// The 4M-resident hold runs only when named, and not with -short:
//
//	go test ./bench -run '^$' -bench 'Hold/.*/n=4000000/' -count 6
//
// Use -benchtime 1x for BenchmarkPendingBytes alone: one op builds 1M timers.
//
// On a shared machine one op's time moves by 10-30 % from run to run;
// instructions.sh counts the instructions one op runs (valgrind's
// cachegrind, two run lengths differenced), which the load does not move:
//
//	go test -c -o new.test ./bench
//	bench/instructions.sh ./new.test 'Hold/dist=bimodal/n=1000000/impl=calendar$'
//
// Its count covers the whole op, setup between timed parts included; TOP=N
// lists the N functions that run the most, to compare two builds by.
//
// rounds.sh compares the times of two builds, or more, in rounds that run
// each binary once, rotating the order from round to round (the binary
// run last in a fixed order came out up to 11 % slower than a copy of
// itself), and prints medians:
//
//	bench/rounds.sh 12 '^BenchmarkScheduleOverKeccak$/^pending=10000$/^payload=0$' 2000000x ./old.test ./new.test
package bench
