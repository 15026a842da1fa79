// Package tracemodel is a reference model of `timerlane replay`, for
// differential tests only.
//
// It is a deliberately simple, slow and independent reading of the trace
// contract (shared/conformance/FORMAT.md) and of docs/SPEC.md: the pending
// timers are a map, every end of block scans all of them, amounts are
// math/big integers, and a rollback restores a full copy of the state taken
// after every block. It models no state root, no tiers and no durability, so
// it prints the events of `replay` without their `root` fields.
//
// It was ported from an earlier black-box model in Python (session 45's
// conformance audit: confaudit/model45.py and gen45.py, kept outside the
// repository), which was written from FORMAT.md, the seeds (CIP-5, CIP-1
// v3) and SPEC.md without reading the engine. It adds SPEC §12.6's rule for
// a raised fairness window, which that model left out, and FORMAT.md's
// trace errors, which that model did not check.
//
// Independence is the point of the package: it must never import the
// engine, internal/replay or any package they are built from (ring, epoch,
// internal/trace, internal/fairness, internal/u128, ...), and its code must
// not be copied from them (TestIndependent checks the imports). A
// disagreement between the model and the engine is then a question to settle
// against the documents, not a shared mistake.
//
// Run replays a trace; Generate writes a random trace for it and the engine
// to disagree on. The comparison itself lives in this package's tests.
package tracemodel
