// Package fuzz holds the fuzz targets of timerlane that drive it whole
// (in its _test.go files):
//
//   - FuzzTierMigration: calendar inserts, removes and advances under a
//     layout the input chooses, checked against a simple model;
//   - FuzzEngineOps: schedule, cancel, revert, end-of-block and skip
//     sequences on the engine under two layouts and a model of FORMAT.md;
//   - FuzzLaneOps: the same under policy lane, with fees and funds;
//   - FuzzRestore: snapshots, cut or damaged, through engine.Restore;
//   - FuzzTraceParser: arbitrary bytes through the trace reader and replay.
//
// The packages keep their own targets beside their code: engine
// (FuzzApplyRecord, FuzzRoute, FuzzPaddedBase64), merkle (FuzzTree,
// FuzzProofDecode, FuzzReadImage), wal (FuzzRecordDecode,
// FuzzSnapshotDecode), internal/fairness (FuzzWindow), internal/u128
// (FuzzArith) and internal/tracemodel (FuzzReplayMatchesModel: the
// replay against an independent model of it); .ci/run runs each of them
// briefly (go test PKG -list '^Fuzz' lists a package's).
//
// Run one with
//
//	go test ./fuzz -run '^$' -fuzz FuzzName -fuzztime 100000x
//
// A count of execs, not a duration: Go 1.26's coordinator can report
// "context deadline exceeded" when a -fuzztime duration ends in the middle
// of an exec (golang/go#75804).
//
// Seed corpora live in testdata/fuzz/FuzzName/. The models the first two
// check against are shared with the unit tests: internal/calendar/calendartest
// and internal/enginemodel.
package fuzz
