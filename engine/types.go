package engine

import (
	"encoding/binary"
	"encoding/hex"
)

// Address is an actor's 20-byte address.
type Address [20]byte

// TimerID is the 32-byte id of a timer (CIP-5 §3.3).
type TimerID [32]byte

func (a Address) String() string  { return "0x" + hex.EncodeToString(a[:]) }
func (id TimerID) String() string { return "0x" + hex.EncodeToString(id[:]) }

// sameID is *a == *b in four loads of each: the compiler compares
// 32-byte arrays with a call of runtime.memequal, whose call and setup
// cost more than the compare on Cancel's and the index probe's paths.
func sameID(a, b *TimerID) bool {
	le := binary.LittleEndian
	return le.Uint64(a[0:8]) == le.Uint64(b[0:8]) && le.Uint64(a[8:16]) == le.Uint64(b[8:16]) &&
		le.Uint64(a[16:24]) == le.Uint64(b[16:24]) && le.Uint64(a[24:32]) == le.Uint64(b[24:32])
}

// sameAddr is *a == *b in three loads of each: the compiler compares
// 20-byte arrays with a call.
func sameAddr(a, b *Address) bool {
	le := binary.LittleEndian
	return le.Uint64(a[0:8]) == le.Uint64(b[0:8]) && le.Uint64(a[8:16]) == le.Uint64(b[8:16]) &&
		le.Uint32(a[16:20]) == le.Uint32(b[16:20])
}

// Cost is what a call charges: cycles and cells (CIP-5 §6.1).
type Cost struct {
	Cycles, Cells uint64
}

// Usage is what a handler consumed.
type Usage struct {
	Cycles, Cells uint64
}

// DefaultHandler is the handler of a timer whose payload does not route.
const DefaultHandler = "handle_timer"

var defaultHandler = []byte(DefaultHandler)

// Delivery is the deferred transaction of one due timer (CIP-5 §5.2). The
// Handler and Payload slices belong to the engine and are valid only during
// the Execute call that receives them: copy what you keep.
type Delivery struct {
	TimerID     TimerID
	Actor       Address // the owning actor, whose Handler runs
	Sender      Address // the actor that scheduled the timer (= Actor)
	Origin      [32]byte
	Handler     []byte
	Payload     []byte
	Height      uint64 // the height the timer was scheduled for
	Block       uint64 // the block it fires in
	CyclesLimit uint64
	CellsLimit  uint64
}

// Executor runs the handlers of due timers; the embedding node implements
// it. Execute runs d's handler inside tx, through which the handler may
// schedule and cancel timers (for later blocks only). A non-nil error, or a
// usage above d's limits, reverts the handler: none of its calls take effect,
// and the timer is consumed all the same.
type Executor interface {
	Execute(tx Tx, d *Delivery) (Usage, error)
}

// FireResult is the outcome of one fire, reported to an Observer.
type FireResult struct {
	Usage Usage
	// Reverted: the handler's calls took no effect, because Execute
	// returned an error (Err), panicked (Err matches ErrExecutorPanic),
	// or reported a Usage above the Delivery's limits (Err nil).
	Reverted bool
	Err      error    // the handler's error, if it returned one
	Fee      *FireFee // the lane's settlement; nil under fifo. Valid during the call only
}

// Observer hears what happens at end of block. Implementations must not
// call back into the engine.
type Observer interface {
	// Fired follows the Execute call of each fired timer.
	Fired(d *Delivery, r FireResult)
}

// BlockResult sums up one end of block.
type BlockResult struct {
	Height   uint64
	Fired    int
	Deferred int
	GC       int
	Pending  int          // timers pending after the block
	Lane     *LaneFigures // the lane's figures; nil when the block ran fifo. Valid until the next EndBlock
}
