package engine

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"unsafe"

	"lukechampine.com/uint128"

	"github.com/timerlane/timerlane/internal/u128"
)

// Amount is a token amount (balances, fees per cycle, tips): an unsigned
// 128-bit integer, as CIP-1 §7.2 types them. Every sum and product the
// engine forms is overflow-checked.
type Amount = uint128.Uint128

// ParseAmount reads a decimal amount in [0, 2^128-1].
func ParseAmount(s string) (Amount, error) {
	if s == "" || len(s) > 39 {
		return Amount{}, fmt.Errorf("amount %q: want a decimal integer in [0, 2^128-1]", s)
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return Amount{}, fmt.Errorf("amount %q: want a decimal integer in [0, 2^128-1]", s)
		}
	}
	a, err := uint128.FromString(s)
	if err != nil {
		return Amount{}, fmt.Errorf("amount %q: want a decimal integer in [0, 2^128-1]", s)
	}
	return a, nil
}

// wide is a 192-bit unsigned integer, hi:mid:lo: an effective priority,
// a per-cycle fee times a weight in parts per million.
type wide struct{ hi, mid, lo uint64 }

func mulWide(a Amount, w uint64) wide {
	h1, lo := bits.Mul64(a.Lo, w)
	h2, m := bits.Mul64(a.Hi, w)
	mid, c := bits.Add64(m, h1, 0)
	return wide{hi: h2 + c, mid: mid, lo: lo}
}

// Ledger is the token state the lane charges fees against (CIP-1 §3 step
// 8): the embedding node implements it over its accounts. Debit fails with
// ErrInsufficientFunds, changing nothing, when the balance is below x (the
// timer is collected, insufficient_funds); Credit fails with
// ErrAmountOverflow when the balance would pass 2^128-1 (the refund or
// tip it cannot hold is burned instead), and Burn may, for its own count.
// Any other error is the node's account store failing, which no other
// validator shares: the end of block stops settling, EndBlock returns the
// error (matching ErrEndBlockFailed), and the engine takes no further
// block, as after a Ledger's panic. Errors wrap the sentinels (errors.Is).
type Ledger interface {
	Balance(a Address) Amount
	Debit(a Address, x Amount) error
	Credit(a Address, x Amount) error
	Burn(x Amount) error
}

// An AccountLedger is a Ledger that also names accounts by number. The
// lane charges and refunds a payer at each of its fires; with account
// numbers it looks each payer up once a block instead of at every fire.
// The engine uses the numbers only within the end of block that asked
// for them, and the operations must act exactly as the Ledger's on the
// account's address.
type AccountLedger interface {
	Ledger
	// Account is the number of a's account, or false if a has none (a
	// balance of 0 that no Debit above 0 can take from).
	Account(a Address) (uint32, bool)
	BalanceOf(n uint32) Amount
	DebitAccount(n uint32, x Amount) error
	CreditAccount(n uint32, x Amount) error
}

// ErrAmountOverflow is a credit or burn that would pass 2^128-1.
var ErrAmountOverflow = errors.New("timerlane: amount overflows 128 bits")

// MemLedger is an in-memory AccountLedger, for embedding and tests. The
// zero value is not ready: use NewMemLedger. A type that embeds a
// *MemLedger to change Debit or Credit inherits its account-number methods
// too, and the engine charges an AccountLedger through those: override
// DebitAccount and CreditAccount alike, or hide them by holding the
// MemLedger as a plain Ledger (struct{ engine.Ledger }).
type MemLedger struct {
	// Account n's balance is balances[n], its address addrs[n]: one map
	// lookup per operation rather than a read and a write. Accounts are
	// never removed, so a number stays valid for the ledger's life.
	index    map[Address]uint32
	balances []Amount
	addrs    []Address
	burned   Amount
	// The last account looked up, as the lane refunds the payer it has
	// just charged: a refund then costs no map lookup.
	last    Address
	lastAt  uint32
	hasLast bool
}

// find returns the index of a's balance, if a has one.
func (l *MemLedger) find(a *Address) (uint32, bool) {
	if l.hasLast && sameAddr(&l.last, a) {
		return l.lastAt, true
	}
	i, ok := l.index[*a]
	if ok {
		l.last, l.lastAt, l.hasLast = *a, i, true
	}
	return i, ok
}

// NewMemLedger returns an empty ledger: every balance is 0.
func NewMemLedger() *MemLedger { return &MemLedger{index: map[Address]uint32{}} }

// Account is the number of a's account, if a has one: an address has an
// account from its first credit on.
func (l *MemLedger) Account(a Address) (uint32, bool) { return l.find(&a) }

// Balance is a's balance.
func (l *MemLedger) Balance(a Address) Amount {
	if i, ok := l.find(&a); ok {
		return l.balances[i]
	}
	return Amount{}
}

// BalanceOf is the balance of account n.
func (l *MemLedger) BalanceOf(n uint32) Amount { return l.balances[n] }

// Debit takes x from a.
func (l *MemLedger) Debit(a Address, x Amount) error {
	if i, ok := l.find(&a); ok {
		return l.DebitAccount(i, x)
	}
	if x.IsZero() {
		return nil
	}
	return fmt.Errorf("%w: %s has 0, needs %s", ErrInsufficientFunds, a, x)
}

// DebitAccount takes x from account n.
func (l *MemLedger) DebitAccount(n uint32, x Amount) error {
	b := &l.balances[n]
	if b.Cmp(x) < 0 {
		return fmt.Errorf("%w: %s has %s, needs %s", ErrInsufficientFunds, l.addrs[n], *b, x)
	}
	*b = b.Sub(x)
	return nil
}

// Credit adds x to a.
func (l *MemLedger) Credit(a Address, x Amount) error {
	if x.IsZero() {
		return nil
	}
	i, ok := l.find(&a)
	if !ok {
		i = uint32(len(l.balances))
		l.index[a] = i
		l.balances = append(l.balances, Amount{})
		l.addrs = append(l.addrs, a)
	}
	return l.CreditAccount(i, x)
}

// CreditAccount adds x to account n.
func (l *MemLedger) CreditAccount(n uint32, x Amount) error {
	b, ok := u128.Add(l.balances[n], x)
	if !ok {
		return fmt.Errorf("%w: credit %s to %s", ErrAmountOverflow, x, l.addrs[n])
	}
	l.balances[n] = b
	return nil
}

// Burn destroys x.
func (l *MemLedger) Burn(x Amount) error {
	b, ok := u128.Add(l.burned, x)
	if !ok {
		return fmt.Errorf("%w: burn %s", ErrAmountOverflow, x)
	}
	l.burned = b
	return nil
}

// Burned is everything burned so far.
func (l *MemLedger) Burned() Amount { return l.burned }

// Clone returns an independent copy (for rollback and tests).
func (l *MemLedger) Clone() *MemLedger {
	return &MemLedger{index: maps.Clone(l.index), balances: slices.Clone(l.balances), addrs: slices.Clone(l.addrs), burned: l.burned,
		last: l.last, lastAt: l.lastAt, hasLast: l.hasLast}
}

// PriorityTier is CIP-1 §7.3's priority hint: a multiplier, from the
// governance config, on the timer's priority fee. It is applied once, at
// the schedule, to the stated priority fee or without one to the default
// agent's (the previous block's p50), and the timer then states the
// result (docs/SPEC.md §12.2).
type PriorityTier uint8

// The tiers; the zero value is Standard.
const (
	Standard PriorityTier = iota
	Economy
	Fast
	Urgent
)

var tierNames = [...]string{"standard", "economy", "fast", "urgent"}

func (t PriorityTier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("PriorityTier(%d)", uint8(t))
}

// ParsePriorityTier reads economy, standard, fast or urgent.
func ParsePriorityTier(s string) (PriorityTier, bool) {
	for i, n := range tierNames {
		if n == s {
			return PriorityTier(i), true
		}
	}
	return 0, false
}

// FeeField names the lane fields a schedule call states; the others take
// their defaults (docs/SPEC.md §12.1).
type FeeField uint8

const (
	HasFeePayer FeeField = 1 << iota
	HasGasLimit
	HasExpiresAt
	HasMaxFee
	HasMaxPriorityFee
	HasTier
	HasBid // the deprecated bid: its value is never used

	allFeeFields = HasBid<<1 - 1
)

// check is ErrInvalidFees, saying what is wrong, for arguments that name
// a field or tier that does not exist (which a snapshot or log record
// could not hold back), or that give a field a value without its Set bit
// (a value the call would ignore: most likely a forgotten bit); else nil.
func (f *Fees) check() error {
	var stray string
	switch set := f.Set; {
	case set&^allFeeFields != 0:
		return fmt.Errorf("%w: Set bits %#x name no field", ErrInvalidFees, uint8(set&^allFeeFields))
	case set&HasTier != 0 && f.Tier > Urgent:
		return fmt.Errorf("%w: Tier %d names no priority tier", ErrInvalidFees, f.Tier)
	case set&HasFeePayer == 0 && f.FeePayer != Address{}:
		stray = "FeePayer"
	case set&HasGasLimit == 0 && f.GasLimit != 0:
		stray = "GasLimit"
	case set&HasExpiresAt == 0 && f.ExpiresAt != 0:
		stray = "ExpiresAt"
	case set&HasMaxFee == 0 && !f.MaxFee.IsZero():
		stray = "MaxFee"
	case set&HasMaxPriorityFee == 0 && !f.MaxPriorityFee.IsZero():
		stray = "MaxPriorityFee"
	case set&HasTier == 0 && f.Tier != Standard:
		stray = "Tier"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s has a value but Set lacks Has%s", ErrInvalidFees, stray, stray)
}

// Fees are the CIP-1 §6 arguments of a schedule call under policy lane.
//
// The fields are ordered so that they take 72 bytes, not 80: the lane
// keeps a Fees for each timer that states any, and reads it at each end of
// block at which the timer is due.
type Fees struct {
	// FeePayer pays the timer's fires. The engine does not check that
	// it consented (it sees addresses only): the node must, before the
	// call (docs/SPEC.md §12.1).
	FeePayer       Address
	Set            FeeField // which of the other fields were given
	Tier           PriorityTier
	GasLimit       uint64
	ExpiresAt      uint64
	MaxFee         Amount // per cycle
	MaxPriorityFee Amount // per cycle
}

// The size the layout above is for.
var _ [72]byte = [unsafe.Sizeof(Fees{})]byte{}

// Scheduled is what a successful schedule call returns.
type Scheduled struct {
	ID   TimerID
	Cost Cost
	// Clamped reports TimerPriorityClampedAtSchedule (CIP-1 §6): the stated
	// priority fee was above max fee − basefee and was lowered to it.
	Clamped            bool
	StatedPriorityFee  Amount
	ClampedPriorityFee Amount
}

// BidContext is what a Gas Bidding Agent sees (CIP-1 §7.2).
type BidContext struct {
	TimerID             TimerID
	Actor               Address
	TriggerHeight       uint64 // the height the timer was scheduled for
	CurrentHeight       uint64
	BasefeeCycle        Amount // CIP-3's cycle basefee: the lane's (the engine knows no other)
	BasefeeCell         Amount // CIP-3's cell basefee: 0, cells are not priced by the lane
	BasefeeLaneTimer    Amount
	LastBlockCycleUsage uint64 // lane cycles of the previous block
	PrevP50Tip          Amount // median priority fee of the previous block's fires
	OwnerBalance        Amount
}

// Bid is an agent's answer: fees per cycle.
type Bid struct {
	MaxFee, MaxPriorityFee Amount
}

// GasBidder is a custom Gas Bidding Agent (CIP-1 §7). Bid is called
// read-only at fire time for each due timer of its actor that states no
// fees of its own. An error or a panic counts as no answer: the timer is
// priced by the default agent instead, and the block goes on.
type GasBidder interface {
	Bid(ctx *BidContext) (Bid, error)
}

// DefaultBid is the normative default agent (CIP-1 §7.1): max fee twice
// the lane basefee (saturating), priority fee the previous block's median.
func DefaultBid(ctx *BidContext) Bid { return defaultBid(ctx.BasefeeLaneTimer, ctx.PrevP50Tip) }

func defaultBid(basefee, p50 Amount) Bid {
	return Bid{MaxFee: u128.SatMul64(basefee, 2), MaxPriorityFee: p50}
}
