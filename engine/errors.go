package engine

import "errors"

// CallError is the failure of a schedule or cancel call. Its Name is the
// error name of the conformance contract (FORMAT.md) and is what consensus
// sees; compare with errors.Is against the Err* values. A call returns the
// sentinel itself, not a copy naming the values it judged (the height,
// the size, the id: the caller has them), so that a refused call, which
// a spammer can repeat at will, allocates nothing.
type CallError struct {
	name, text string
}

func (e *CallError) Error() string { return e.name + ": " + e.text }

// Name is the contract's name of the error, such as "HeightNotInFuture".
func (e *CallError) Name() string { return e.name }

// Call errors, in the order schedule checks them (CIP-5 §4.2, FORMAT.md).
var (
	ErrHeightNotInFuture = &CallError{"HeightNotInFuture", "the height is not above the current block height"}
	ErrPayloadTooLarge   = &CallError{"PayloadTooLarge", "the payload is longer than max_payload_bytes"}
	ErrInvalidHandler    = &CallError{"InvalidHandler", "the _handler of a routing payload is empty or longer than max_handler_bytes"}
	ErrTooManyTimers     = &CallError{"TooManyTimers", "the actor already has max_timers_per_actor timers pending"}
	ErrDuplicateTimer    = &CallError{"DuplicateTimer", "a timer with the same id is already pending"}
	ErrUnknownTimer      = &CallError{"UnknownTimer", "no timer with this id is pending"}
	ErrNotOwner          = &CallError{"NotOwner", "the timer belongs to another actor"}

	// Policy lane (CIP-1 §6, §10), checked after InvalidHandler in the
	// order TimerArgDeprecated, GasLimitTooHigh, InvalidExpiry,
	// TimerRejectedBelowBasefee, then TooManyTimers and DuplicateTimer.
	ErrTimerArgDeprecated        = &CallError{"TimerArgDeprecated", "the bid argument is withdrawn (CIP-1 §6)"}
	ErrGasLimitTooHigh           = &CallError{"GasLimitTooHigh", "gas_limit is above the per-fire cycles cap"}
	ErrInvalidExpiry             = &CallError{"InvalidExpiry", "expires_at is below the timer's height, beyond max_ttl_blocks after it, or (extend) below its current expiry"}
	ErrTimerRejectedBelowBasefee = &CallError{"TimerRejectedBelowBasefee", "max_fee_per_cycle is below the lane basefee"}
	ErrInsufficientFunds         = &CallError{"InsufficientFunds", "the balance does not cover the amount"}
)

// Lifecycle and configuration errors: misuse of the API by the embedder.
var (
	ErrInvalidConfig = errors.New("timerlane: invalid config")
	ErrNoBlock       = errors.New("timerlane: no block is open")
	ErrBlockOpen     = errors.New("timerlane: a block is already open")
	ErrBlockNotEnded = errors.New("timerlane: the block has not ended")
	ErrBlockEnded    = errors.New("timerlane: the block has ended; commit it first")
	ErrTxOpen        = errors.New("timerlane: a transaction is open")
	ErrTxClosed      = errors.New("timerlane: the transaction is no longer open")
	ErrHandlerTx     = errors.New("timerlane: a handler's transaction is committed or reverted by the engine")
	ErrBadHeight     = errors.New("timerlane: block height out of sequence")
	ErrNeedsLane     = errors.New("timerlane: fee fields, extend and system instructions need policy lane")
	ErrNotSystem     = errors.New("timerlane: the sender is not a system deployer")
	ErrReserveRange  = errors.New("timerlane: Reserve out of range")
	ErrInvalidFees   = errors.New("timerlane: invalid fee arguments")
	ErrNoExecutor    = errors.New("timerlane: EndBlock needs an Executor")
	ErrInEndBlock    = errors.New("timerlane: end of block is running: only a handler's own transaction may call in")
	ErrClosed        = errors.New("timerlane: the engine is closed")
	// ErrConfigMismatch is a log or snapshot written under another
	// configuration than the engine's: its limits, costs, policy,
	// activation height, initial basefee or system deployers differ (the
	// tier layout, the state root, the rollback depth and the log's own
	// settings may change between runs, and the lane parameters are the
	// log's or snapshot's). The error names the first field that differs;
	// LogConfig reads a log's own configuration.
	ErrConfigMismatch = errors.New("timerlane: written under another configuration")
	// ErrEndBlockFailed is returned by every block call after an end of
	// block failed half done: a Ledger panicked (the panic goes through
	// EndBlock), or returned an error other than those Ledger documents
	// (EndBlock returns it, matching both ErrEndBlockFailed and the
	// Ledger's error). Reopen a durable engine from its log (the last
	// committed block); build an in-memory one anew. The ledger keeps the
	// operations the block made before the failure, and the Observer
	// heard its fires: the node takes its ledger back to the last
	// committed block too, as for a reorg, before the block runs again.
	ErrEndBlockFailed = errors.New("timerlane: an end of block failed half done; the engine must be reopened")
	// ErrExecutorPanic is matched by the FireResult.Err of a handler whose
	// Execute panicked: the engine reverts it, as a handler that failed.
	ErrExecutorPanic = errors.New("timerlane: the Executor panicked")
)

// ErrorName returns the contract name of a call error, or "" if err is not one.
func ErrorName(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.name
	}
	return ""
}
