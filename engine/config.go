package engine

import (
	"fmt"

	"github.com/timerlane/timerlane/internal/bytepool"
	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/hugepage"
	"github.com/timerlane/timerlane/wal"
)

// MaxPayloadLimit is the largest Config.MaxPayloadBytes: the largest
// payload the engine's storage holds (1 MiB, CIP-5's limit).
const MaxPayloadLimit = bytepool.MaxLen

// Config is the engine's configuration. Start from DefaultConfig; zero
// values are not defaults.
type Config struct {
	// Tier layout: speed and memory only, never behaviour.
	RingSize    uint64 // buckets of the block ring, a power of two >= 2
	EpochLength uint64 // blocks per epoch, 1 .. RingSize
	EpochCount  uint64 // epochs held by the epoch tier, >= 1

	MaxTimersPerActor uint32 // CIP-5 §8: 1024
	MaxPayloadBytes   uint32 // CIP-5 §4.2: 1 MiB
	MaxHandlerBytes   uint32 // CIP-5 §4.2: 256 (a handler is part of its payload: any value is valid)

	CyclesPerFire  uint64 // CIP-5 §5.2: cycles limit of a fire, 550,000
	CellsPerFire   uint64 // CIP-5 §5.2: cells limit of a fire, 550,000
	ScheduleCycles uint64 // CIP-5 §6.1: 1,000 (plus one cell per payload byte)
	CancelCycles   uint64 // CIP-5 §6.1: 500

	// Policy decides what fires at end of block: PolicyFIFO (CIP-5) or
	// PolicyLane (CIP-1), which runs fifo below ActivationHeight. Under
	// PolicyFIFO the lane's fields are checked and unused. ActivationHeight
	// and InitialBasefee are state all the same: a log written under fifo
	// reopens only with the same (ErrConfigMismatch); its Lane parameters
	// are the log's, as under the lane. timerlane replay refuses an
	// activation_height under fifo; the engine keeps accepting one, as
	// logs written with one exist.
	Policy           Policy
	ActivationHeight uint64
	InitialBasefee   Amount     // lane basefee of the first lane block (min_lane_basefee if that is above it)
	Lane             LaneParams // governance-tunable (SYS_UPDATE_TIMER_CONFIG)
	SystemDeployers  []Address  // senders allowed to issue system instructions (CIP-1 §12)

	// StateRoot keeps the Merkle state root (docs/STATE_ROOT.md) up to date:
	// Root and Prove need it. It costs a Keccak-256 and a tree path per
	// timer a block changes, paid at Root (and at every Commit of an engine
	// that logs to a directory: its records carry the root).
	StateRoot bool

	// RollbackDepth is how many of the last blocks Rollback can take back
	// (DefaultRollbackDepth; 0 turns rollback off). The engine keeps their
	// undo entries and the records of the timers they removed: memory
	// proportional to the timers those blocks changed.
	RollbackDepth uint64
	// RollbackBytes, if not 0, bounds the memory the handlers and
	// payloads of those removed timers hold (counted in the payload
	// pool's size classes, powers of two from 16 bytes): the oldest
	// blocks but the newest leave the history early, and Rollback then
	// reaches fewer than RollbackDepth blocks back (ErrRollbackTooDeep
	// names the oldest target). The newest block stays whatever it
	// holds, so one block's payloads may pass the bound until the next
	// Commit. Without it, a history of RollbackDepth blocks that each
	// fired megabytes of payloads holds them all. What Rollback can
	// reach is the node's matter, not consensus: no root or delivery
	// depends on it.
	RollbackBytes uint64

	// Durability (used by Open only): when the write-ahead log fsyncs
	// (default every block) and how many records lie between full
	// snapshots (0: DefaultSnapshotEvery).
	Sync          wal.SyncPolicy
	SnapshotEvery uint64
	// SnapshotInline makes the Commit that writes a snapshot return once
	// the snapshot is on disk. By default that Commit returns once the
	// snapshot is encoded in memory, and the log compresses, writes and
	// fsyncs it in the background while blocks go on
	// (wal.Log.StartSnapshot): less than half the pause at a million
	// timers, for memory that holds the encoding (154-176 bytes per
	// pending timer at a million with the state root's tree:
	// BenchmarkSnapshotCommit, docs/DURABILITY.md) until it is written. A
	// failure of that background write fails the next Commit (or Rollback)
	// with ErrLogFailed, as a failure to append a record would; the block
	// that started the snapshot stays committed (its record was synced
	// first). Close waits for the write.
	SnapshotInline bool
	// CheckEveryRoot makes Open check the root of every record it replays;
	// by default it checks the last one's, which proves the state it
	// recovers (timerlane verify sets it).
	CheckEveryRoot bool
	// Logf receives, one line a call, what the log does to its files on
	// its own: what recovery cuts, removes or sets aside (a torn tail, a
	// leftover temporary file, a damaged snapshot). Nil: log.Printf
	// (wal.Options.Logf).
	Logf func(format string, args ...any)
}

// Policy names an end-of-block policy.
type Policy uint8

// The policies.
const (
	PolicyFIFO Policy = iota // CIP-5 as implemented: every due timer fires, in insertion order
	PolicyLane               // CIP-1 v3: EIP-1559 timer lane, from ActivationHeight
)

func (p Policy) String() string {
	if p == PolicyLane {
		return "lane"
	}
	return "fifo"
}

// LaneParams are the lane's governance parameters (CIP-1 §5, §8-§10), the
// part of the configuration SYS_UPDATE_TIMER_CONFIG may change (the fifo
// phase's per-fire cycles limit, Config.CyclesPerFire, is not: SPEC §12.9).
type LaneParams struct {
	LaneTimerCycles         uint64    // lane budget per block: 2,000,000; the basefee targets half
	GCCycles                uint64    // GC lane budget per block (TIMER_GC_CYCLES): 5,000,000
	GCCostPerTimer          uint64    // GC cycles per collected timer: 5,000
	MaxCyclesPerFireAuction uint64    // per-fire cap in the lane: 250,000
	FairnessWindowBlocks    uint64    // W(actor) window: 1,000
	MaxTTLBlocks            uint64    // expires_at - height at most: 2,592,000
	BidDeprecationBlocks    uint64    // bid accepted (ignored) until activation + this: 0
	MinBasefee              Amount    // floor of the lane basefee: 1
	TierMultipliers         [4]uint64 // per mille, by PriorityTier: standard 1000, economy 800, fast 1500, urgent 2500
}

// DefaultLaneParams returns CIP-1's values and the engine's choices for
// what CIP-1 leaves open (docs/SPEC.md §12.10).
func DefaultLaneParams() LaneParams {
	return LaneParams{
		LaneTimerCycles: 2_000_000, GCCycles: 5_000_000, GCCostPerTimer: 5_000,
		MaxCyclesPerFireAuction: 250_000, FairnessWindowBlocks: 1_000, MaxTTLBlocks: 2_592_000,
		MinBasefee: Amount{Lo: 1}, TierMultipliers: [4]uint64{1000, 800, 1500, 2500},
	}
}

// maxLaneCycles bounds the budgets so that 8 × target and the sums of gas
// limits stay far from 2^64.
const maxLaneCycles = 1 << 60

// Validate reports the first parameter out of bounds, wrapping
// ErrInvalidConfig.
func (p LaneParams) Validate() error {
	bad := func(field string, v uint64, rule string) error {
		return fmt.Errorf("%w: %s %d: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case p.LaneTimerCycles < 1 || p.LaneTimerCycles > maxLaneCycles:
		return bad("lane_timer_cycles", p.LaneTimerCycles, "must be in [1, 2^60]")
	case p.GCCycles > maxLaneCycles:
		return bad("timer_gc_cycles", p.GCCycles, "must be <= 2^60")
	case p.GCCostPerTimer > maxLaneCycles:
		return bad("gc_cost_per_timer", p.GCCostPerTimer, "must be <= 2^60")
	case p.MaxCyclesPerFireAuction < 1 || p.MaxCyclesPerFireAuction > maxLaneCycles:
		// Above lane_timer_cycles it is allowed: a timer whose gas limit
		// the lane cannot hold waits lane_full (docs/SPEC.md §12.10).
		return bad("max_cycles_per_fire_auction_phase", p.MaxCyclesPerFireAuction, "must be in [1, 2^60]")
	case p.FairnessWindowBlocks < 1:
		return bad("fairness_window_blocks", p.FairnessWindowBlocks, "must be >= 1")
	}
	for t, m := range p.TierMultipliers {
		if m > 1_000_000 {
			return bad("priority_tier_multipliers."+PriorityTier(t).String(), m, "must be <= 1000000 per mille")
		}
	}
	return nil
}

// SetHugePages turns on (the default) or off, for every engine of the
// process, the hint that asks Linux to back the big arrays (the timer
// records, the id index, the tiers' chunks) with 2 MiB pages, for the
// arrays taken from then on. With huge pages, random accesses over a
// million timers miss the TLB less (end of block at 1M pending 247 -> 201
// µs per block on the machine it was measured on); but where the kernel,
// or a virtual machine's host, maps a huge page slowly on its first touch,
// the Schedule that touches a new one waits for it (4.1-4.8 ms on a machine
// whose end of block gained nothing from them: docs/BENCHMARK_HISTORY.md,
// "Session 12").
// Nothing the engine computes depends on it.
func SetHugePages(on bool) { hugepage.SetEnabled(on) }

// DefaultConfig returns CIP-5's values and the default tier layout.
func DefaultConfig() Config {
	l := calendar.DefaultLayout
	return Config{
		RingSize: l.RingSize, EpochLength: l.EpochLength, EpochCount: l.EpochCount,
		MaxTimersPerActor: 1024,
		MaxPayloadBytes:   1 << 20,
		MaxHandlerBytes:   256,
		CyclesPerFire:     550_000,
		CellsPerFire:      550_000,
		ScheduleCycles:    1_000,
		CancelCycles:      500,
		InitialBasefee:    Amount{Lo: 1_000},
		Lane:              DefaultLaneParams(),
		RollbackDepth:     DefaultRollbackDepth,
	}
}

func (c Config) layout() calendar.Layout {
	return calendar.Layout{RingSize: c.RingSize, EpochLength: c.EpochLength, EpochCount: c.EpochCount}
}

// Validate reports the first field out of bounds, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.layout().Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	bad := func(field string, v uint64, rule string) error {
		return fmt.Errorf("%w: %s %d: %s", ErrInvalidConfig, field, v, rule)
	}
	switch {
	case c.MaxPayloadBytes > MaxPayloadLimit:
		return bad("max_payload_bytes", uint64(c.MaxPayloadBytes), fmt.Sprintf("must be <= %d", MaxPayloadLimit))
	case c.CyclesPerFire < 1:
		return bad("cycles_per_fire", c.CyclesPerFire, "must be >= 1")
	case c.CellsPerFire < 1:
		return bad("cells_per_fire", c.CellsPerFire, "must be >= 1")
	case c.Policy > PolicyLane:
		return bad("policy", uint64(c.Policy), "must be fifo or lane")
	}
	// The lane's parameters are checked under fifo too: the engine builds
	// the lane's state from them whatever the policy, and a fifo config
	// with a window of 0 blocks made New panic (session 38's API audit).
	// An initial basefee below the floor is not an error: the lane starts
	// at the floor (docs/SPEC.md §12.7), as it does when an update raises
	// the floor above it before activation.
	return c.Lane.Validate()
}
