package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/timerlane/timerlane/internal/fairness"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/slab"
	"github.com/timerlane/timerlane/internal/u128"
	"github.com/timerlane/timerlane/ring"
)

// DeferReason says why a due timer did not run in a block (it stays
// pending and is considered again in the next one).
type DeferReason uint8

// The reasons, as FORMAT.md names them.
const (
	LaneFull     DeferReason = iota + 1 // the lane's cycles were taken by higher priorities
	OverCap                             // gas_limit above max_cycles_per_fire_auction_phase
	BelowBasefee                        // its max fee no longer covers the lane basefee
	GCBudget                            // to be collected, but the GC lane is spent
)

// unlisted marks, between take and compactList, a deferred entry taken
// off the list.
const unlisted DeferReason = 255

var deferNames = [...]string{"", "lane_full", "over_cap", "below_basefee", "gc_budget"}

func (r DeferReason) String() string { return deferNames[r] }

// GCReason says why a timer was collected without firing (CIP-1 §9).
type GCReason uint8

// The reasons, as FORMAT.md names them.
const (
	Expired           GCReason = iota + 1 // the block is past its expires_at
	InsufficientFunds                     // its fee payer cannot cover max_cost
	SystemCancel                          // SYS_CANCEL_TIMER
)

var gcNames = [...]string{"", "expired", "insufficient_funds", "system_cancel"}

func (r GCReason) String() string { return gcNames[r] }

// LaneObserver hears the lane's events; an Observer that also implements
// it gets them, when they happen. At end of block, the GC lane's Collected
// reports come before the block's fires, in ascending timer id; a timer
// whose payer the fires before it spent is collected at its turn, among
// the fires (FORMAT.md's replay prints it with the others, first); the
// Deferred reports come after the fires, in ascending timer id.
type LaneObserver interface {
	Collected(id TimerID, reason GCReason)
	Deferred(id TimerID, reason DeferReason)
	// Clamped is TimerPriorityClampedAtSchedule (CIP-1 §6), heard when a
	// schedule call succeeds with its priority fee lowered (its
	// transaction may still revert).
	Clamped(id TimerID, stated, clamped Amount)
}

// FireFee is the settlement of one fire under the lane (CIP-1 §3 step 8).
// Charged = Refund + Tip + Burned exactly.
type FireFee struct {
	FeePayer    Address
	GasLimit    uint64
	PriorityFee Amount // per cycle, after the clamp against the basefee
	Weight      uint32 // W(actor) in parts per million
	Charged     Amount // the pre-charge, max_cost
	Refund      Amount
	Tip         Amount // to the block's proposer
	Burned      Amount
}

// LaneFigures sum up one lane block.
type LaneFigures struct {
	Basefee     Amount // the basefee this block ran at
	NextBasefee Amount
	LaneCycles  uint64 // the cycles the fires used (a revert its whole limit): the utilisation
	GCCycles    uint64
	Burned      Amount // all the block burned, tips the proposer could not hold included; saturates at 2^128-1
	Tips        Amount // what the proposer received: the block's tips, all or none (docs/SPEC.md §12.5)
	P50Tip      Amount // median priority fee of this block's fires
}

// laneState is the lane's consensus state and its per-block scratch.
type laneState struct {
	basefee    Amount // the lane basefee of the open (or next) block
	p50        Amount // median priority fee of the previous block's fires
	lastCycles uint64 // lane cycles of the previous block
	params     LaneParams
	update     *LaneParams // SYS_UPDATE_TIMER_CONFIG, applied at the next block
	window     *fairness.Window
	ledger     Ledger // what SetLedger set
	// led is the ledger in force for the end of block that runs, accts the
	// same if it has account numbers: set when an end of block starts.
	led      Ledger
	accts    AccountLedger
	agents   map[Address]GasBidder
	proposer Address
	sysGC    int // SYS_CANCEL_TIMER collections in the open block

	deferred []uint32      // records of due timers that have not run; rec.at is listed | position
	reasons  []DeferReason // parallel to deferred

	// fees holds the fee fields timers stated; a timer that stated none has
	// no entry (rec.fee 0) and takes every default.
	fees    slab.Slab[Fees]
	feeFree slab.Stack // free entries, with room for every entry handed out
	nfees   uint32
	cands   []cand
	keys    []sortKey
	sorter  keySorter
	ordered []cand // the candidates in priority order (the other cands buffer)
	gcs     []gcCand
	fired   []Amount
	order   []uint32
	avail   slab.Slab[availRec]  // per payer that is an actor, by actor index
	weights slab.Slab[weightRec] // W by actor index
	// gen counts lane ends of block: it stamps the per-actor entries above.
	// Not the height, which a block run again after a rollback repeats.
	gen       uint64
	tipsDue   Amount // tips of this block's fires, not yet paid
	burnDue   Amount // basefee of this block's fires, not yet burned
	tipsBurnt Amount // tips of this block the proposer's balance could not hold
	tipsOver  bool   // this block's tips sum past 2^128-1: all are burned
	// ledgerErr is the first error of the block's ledger calls other than
	// the two a Ledger documents (ErrInsufficientFunds on a debit,
	// ErrAmountOverflow on a credit or burn): the node's account store
	// failed, and the block cannot be settled (EndBlock fails).
	ledgerErr error
	fireCount slab.Slab[uint32] // fires of this block, by actor index
	dueOpen   bool              // a lane end of block runs: weightRec.due counts (dueOf)
	firing    []uint32          // actors with fires in this block
	fee       FireFee
	tie       func(a, b uint32) bool // ids of cands[a] < cands[b]
	onExpired func(height uint64, actor uint32, n uint64)
	onPruned  func(actor uint32)
	byID      func(a, b uint32) int // compares the ids of records a and b
	figures   LaneFigures
	ctx       BidContext
}

// gcCand is a due timer the GC lane is to collect.
type gcCand struct {
	rec uint32
	why GCReason
}

// cand is a due timer that may run in this block.
type cand struct {
	prio     Amount
	gas      uint64
	wf       uint32 // W(actor) in parts per million, and the flags below
	rec      uint32
	payerIdx uint32 // the payer's actor index, if it is an actor with timers
	tag      uint32 // its id's tag in the id index: take reads no record
}

// A candidate is 40 bytes: a block's candidates are read in several passes
// and should stay in cache between them, so what can be derived again
// cheaply (max_cost, the payer's address) is not stored, and the flags
// share a word with W, which is at most 2,000,000.
const (
	candCovered  = 1 << 31 // max_cost fits in 128 bits
	candFeePayer = 1 << 30 // the payer is the fee_payer of its fee fields, not its actor
)

func (c *cand) weight() uint32 { return c.wf &^ (candCovered | candFeePayer) }
func (c *cand) covered() bool  { return c.wf&candCovered != 0 }
func (c *cand) feePayer() bool { return c.wf&candFeePayer != 0 }

// maxCost is c's max_cost, (basefee + priority fee) × gas limit (CIP-1
// §3 step 8). c.covered() must be true: the sum and the product fit in
// 128 bits, so they need no overflow check, and the function inlines.
func (s *laneState) maxCost(c *cand) Amount {
	lo, carry := bits.Add64(s.basefee.Lo, c.prio.Lo, 0)
	hi := s.basefee.Hi + c.prio.Hi + carry
	pHi, pLo := bits.Mul64(lo, c.gas)
	return Amount{Lo: pLo, Hi: pHi + hi*c.gas}
}

// candPayer is who pays c. A timer's own actor is c.payerIdx, its record's
// actor, whose entry lives as long as the record: c's timer has not been
// released while c is in use. A fee_payer is read from the timer's fee
// fields: c.payerIdx names that payer's entry only if it is an actor with
// timers, and the GC lane or a fire could drop its last timer and free the
// index for another actor mid-block. The result points into the actor
// table or the fee fields, so that each copy of the address is loaded from
// where it rests.
func (e *Engine) candPayer(c *cand) *Address {
	if c.feePayer() {
		return &e.lane.fees.At(e.recs.At(c.rec).fee).FeePayer
	}
	return &e.actors.at(c.payerIdx).addr
}

func (s *laneState) init(c Config) {
	s.basefee, s.params = c.InitialBasefee, c.Lane
	if s.basefee.Cmp(c.Lane.MinBasefee) < 0 { // the lane starts at its floor
		s.basefee = c.Lane.MinBasefee
	}
	s.window = fairness.New(c.Lane.FairnessWindowBlocks)
	s.ledger = NewMemLedger()
	s.agents = map[Address]GasBidder{}
	s.fees.Ensure(0)
	s.nfees = 1
}

// laneActive reports whether the lane runs the block at height h.
func (e *Engine) laneActive(h uint64) bool {
	return e.cfg.Policy == PolicyLane && h >= e.cfg.ActivationHeight
}

// SetLedger sets the ledger the lane charges from the next end of block
// on (one that has started keeps the ledger it started with); the engine
// starts with an empty MemLedger.
//
// nil sets a new, empty MemLedger: the lane always has a ledger to read.
func (e *Engine) SetLedger(l Ledger) {
	if l == nil {
		l = NewMemLedger()
	}
	e.lane.ledger = l
}

// Ledger is the ledger the lane charges.
func (e *Engine) Ledger() Ledger { return e.lane.ledger }

// SetAgent gives actor a custom Gas Bidding Agent; nil restores the
// default agent.
func (e *Engine) SetAgent(actor Address, g GasBidder) {
	if g == nil {
		delete(e.lane.agents, actor)
		return
	}
	e.lane.agents[actor] = g
}

// SetProposer sets the open block's proposer, who receives the tips; a
// block whose proposer is not set pays tips to the zero address.
func (e *Engine) SetProposer(a Address) { e.lane.proposer = a }

// Basefee is the lane basefee of the open block (between blocks: of the
// next one).
func (e *Engine) Basefee() Amount { return e.lane.basefee }

// LaneParams are the lane parameters in force.
func (e *Engine) LaneParams() LaneParams { return e.lane.params }

// NextLaneParams are the lane parameters the next block will run with:
// those of the open block's last SYS_UPDATE_TIMER_CONFIG, else those in
// force. An update that changes a few keys starts from these, so that two
// updates in one block both count.
func (e *Engine) NextLaneParams() LaneParams {
	if u := e.lane.update; u != nil {
		return *u
	}
	return e.lane.params
}

// beginLaneBlock applies a pending config update. The lane starts at its
// activation height (CIP-1 §13.2) from the state New gave it: basefee
// initial, an empty fairness window (so every actor starts at W = 2), no
// previous tips. The basefee is not touched here: every end of block left
// it at what the next block runs at, the update's floor counted (endBlock).
func (e *Engine) beginLaneBlock() {
	s := &e.lane
	if s.update != nil {
		s.params, s.update = *s.update, nil
		s.window.SetBlocks(s.params.FairnessWindowBlocks)
	}
	s.proposer, s.sysGC = Address{}, 0
}

// cap is the per-fire cycles cap at height h.
func (e *Engine) fireCap(h uint64) uint64 {
	if e.laneActive(h) {
		return e.lane.params.MaxCyclesPerFireAuction
	}
	return e.cfg.CyclesPerFire
}

// prefetchFee starts loading r's fee fields, if it has any: both of the
// cache lines its entry may span.
func (e *Engine) prefetchFee(r *rec) {
	if r.fee != 0 {
		f := e.lane.fees.At(r.fee)
		prefetch.Line(unsafe.Pointer(f))
		prefetch.Line(unsafe.Add(unsafe.Pointer(f), unsafe.Sizeof(*f)-1))
	}
}

func (e *Engine) feeOf(r *rec) *Fees {
	if r.fee == 0 {
		return nil
	}
	return e.lane.fees.At(r.fee)
}

// allocFee returns a free fee entry, holding whatever it last held: its
// caller writes all of it.
func (e *Engine) allocFee() uint32 {
	s := &e.lane
	if i, ok := s.feeFree.Pop(); ok {
		return i
	}
	i := s.nfees
	s.fees.Ensure(i)
	s.nfees++
	// Room to free every entry without growing: freeing allocates nothing.
	s.feeFree.Reserve(int(s.nfees))
	return i
}

// freeFee frees fee entry i (0: none) without writing it: a record the
// history releases is cold, and whoever takes the entry next writes it.
func (e *Engine) freeFee(i uint32) {
	if i != 0 {
		e.lane.feeFree.Push(i)
	}
}

// expiry is the last height at which timer r may still run: its
// expires_at, or by default its height + max_ttl_blocks (saturating).
func (e *Engine) expiry(r *rec, f *Fees) uint64 {
	if f != nil && f.Set&HasExpiresAt != 0 {
		return f.ExpiresAt
	}
	return satAddU64(r.height, e.lane.params.MaxTTLBlocks)
}

func satAddU64(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

// payerIdx is the actor index of timer r's payer, 0 if the payer is not
// an actor with timers: the selection keeps those payers' balances in a
// table by index rather than a map by address.
func (e *Engine) payerIdx(r *rec, f *Fees) uint32 {
	if f != nil && f.Set&HasFeePayer != 0 {
		i, _ := e.actors.lookup(&f.FeePayer)
		return i
	}
	return r.actor
}

// funds is c's payer's balance as the end of block starts, before any of
// its fires: CIP-1 §3 step 4 judges every due timer on it. A payer that
// is an actor is read once per block (availOf).
func (e *Engine) funds(c *cand) Amount {
	if c.payerIdx != 0 {
		return e.availOf(c).bal
	}
	return e.lane.led.Balance(*e.candPayer(c))
}

// availOf is the entry of c's payer, an actor (c.payerIdx != 0): its
// balance read from the ledger at its first use in the block, the
// account looked up once.
func (e *Engine) availOf(c *cand) *availRec {
	s := &e.lane
	a := s.avail.At(c.payerIdx)
	if a.gen != s.gen {
		a.gen, a.bal, a.acct = s.gen, Amount{}, 0
		if s.accts == nil {
			a.bal = s.led.Balance(*e.candPayer(c))
		} else if n, ok := s.accts.Account(*e.candPayer(c)); ok {
			a.bal, a.acct = s.accts.BalanceOf(n), n+1
		}
	}
	return a
}

// enterDue counts a timer of actor a into the due set of this end of block.
func (s *laneState) enterDue(a uint32) {
	d := s.weights.At(a)
	if d.dueGen != s.gen {
		d.dueGen, d.due = s.gen, 0
	}
	d.due++
}

// leaveDue counts one out, as it fires or is collected.
func (s *laneState) leaveDue(a uint32) { s.weights.At(a).due-- }

// dueOf is how many of actor a's timers are still in the due set of the
// end of block that runs (0 outside one): FORMAT.md's end of block takes
// the due timers out of the pending set before handlers run, so they do
// not count toward the actor's cap while they do (docs/SPEC.md §12.5).
// Those left waiting count again once the block ends.
func (s *laneState) dueOf(a uint32) uint32 {
	if !s.dueOpen || uint64(a) >= uint64(s.weights.Cap()) {
		return 0 // an actor added since the end of block began
	}
	if d := s.weights.At(a); d.dueGen == s.gen {
		return d.due
	}
	return 0
}

// weight is W(actor) for actor index a in this block, computed once per
// actor and block: a division each, where a block has far more timers
// than actors.
func (e *Engine) weight(a uint32) *weightRec {
	s := &e.lane
	wr := s.weights.At(a)
	if wr.gen != s.gen {
		wr.gen, wr.w, wr.f = s.gen, s.window.Weight(a), s.window.Factor(a)
	}
	return wr
}

// weightRec is an actor's W during one block's end: in parts per million,
// as FireFee reports it, and exactly, as the order uses it (f is W times a
// number common to the block, fairness.Window.Factor).
type weightRec struct {
	gen uint64 // the end of block it is for; older entries are stale
	f   uint64
	w   uint32
	// due counts the actor's timers still in the due set of end of block
	// dueGen (dueOf): beside W, whose line the classification loads for
	// both.
	due    uint32
	dueGen uint64
}

// availRec is a payer's balance as one block's end starts.
type availRec struct {
	gen  uint64 // the end of block it is for; older entries are stale
	bal  Amount
	acct uint32 // the payer's account number plus one, 0 for none (or no AccountLedger)
}

// payerAcct is the account number plus one of c's payer, if the block's
// ledger numbers accounts and c's payer has one; c went through funds in
// this block.
func (s *laneState) payerAcct(c *cand) uint32 {
	if c.payerIdx == 0 {
		return 0
	}
	return s.avail.At(c.payerIdx).acct
}

// failLedger records that the ledger's op failed with err, which is not
// one of the errors a Ledger documents: the end of block stops at its next
// step and makes no further ledger call, and EndBlock fails.
func (s *laneState) failLedger(op string, err error) {
	if s.ledgerErr == nil {
		s.ledgerErr = fmt.Errorf("the Ledger's %s failed: %w", op, err)
	}
}

// burn destroys x. A sum of burns past 2^128-1 (ErrAmountOverflow) is the
// ledger's to count; the tokens are gone either way.
func (s *laneState) burn(x Amount) {
	if s.ledgerErr != nil {
		return // the store failed: nothing more is asked of it
	}
	if err := s.led.Burn(x); err != nil && !errors.Is(err, ErrAmountOverflow) {
		s.failLedger("Burn", err)
	}
}

// debit takes x from a, whose account number plus one is acct (0: by
// address).
func (s *laneState) debit(acct uint32, a *Address, x Amount) error {
	if acct != 0 {
		return s.accts.DebitAccount(acct-1, x)
	}
	return s.led.Debit(*a, x)
}

// credit adds x to a, named as for debit.
func (s *laneState) credit(acct uint32, a *Address, x Amount) error {
	if acct != 0 {
		return s.accts.CreditAccount(acct-1, x)
	}
	return s.led.Credit(*a, x)
}

// agentBid prices timer r, which states no fee, for this block: its
// actor's custom agent, else the default agent (CIP-1 §7), whose bid def
// is. (A priority tier became a stated fee at the schedule: §12.2.)
func (e *Engine) agentBid(r *rec, def *Bid) Bid {
	s := &e.lane
	actor := e.actors.at(r.actor).addr
	g, ok := s.agents[actor]
	if !ok {
		return *def
	}
	c := &s.ctx
	*c = BidContext{
		TimerID: r.id, Actor: actor, TriggerHeight: r.height, CurrentHeight: e.height,
		BasefeeCycle: s.basefee, BasefeeLaneTimer: s.basefee, LastBlockCycleUsage: s.lastCycles, PrevP50Tip: s.p50,
		OwnerBalance: s.led.Balance(actor),
	}
	return callAgent(g, c, *def)
}

// statedBid is def with the fees f states in place of its own.
func statedBid(f *Fees, def *Bid) Bid {
	b := *def
	if f.Set&HasMaxFee != 0 {
		b.MaxFee = f.MaxFee
	}
	if f.Set&HasMaxPriorityFee != 0 {
		b.MaxPriorityFee = f.MaxPriorityFee
	}
	return b
}

// callAgent asks a custom agent, falling back to def when it fails or
// panics: an agent can never halt the block.
func callAgent(g GasBidder, c *BidContext, def Bid) (b Bid) {
	defer func() {
		if recover() != nil {
			b = def
		}
	}()
	ctx := *c // the agent gets a copy: read-only
	b, err := g.Bid(&ctx)
	if err != nil {
		return def
	}
	return b
}

// listAll puts the timers of due on the deferred list, in order. Their
// records' places (rec.at) are set by the classify pass, which loads each
// record anyway: until then they hold stale queue positions.
func (e *Engine) listAll(due ring.Iter) {
	s := &e.lane
	n := len(s.deferred)
	s.deferred = due.AppendVals(e.q.C, s.deferred)
	s.reasons = append(s.reasons, make([]DeferReason, len(s.deferred)-n)...) // no allocation past growth
}

// addDeferred puts due timer i on the deferred list.
func (e *Engine) addDeferred(i uint32) {
	s := &e.lane
	if len(s.deferred) >= listed-1 { // its places would reach killed
		panic("engine: 2^31-1 timers on the deferred list")
	}
	s.deferred = append(s.deferred, i)
	s.reasons = append(s.reasons, 0)
	e.recs.At(i).at = listed | uint32(len(s.deferred)-1)
}

// dropDeferred takes timer i off the deferred list.
func (e *Engine) dropDeferred(i uint32) {
	s := &e.lane
	r := e.recs.At(i)
	k, _ := r.onList()
	last := len(s.deferred) - 1
	if j := s.deferred[last]; int(k) != last {
		s.deferred[k], s.reasons[k] = j, s.reasons[last]
		if s.reasons[k] != unlisted { // a fired timer's record keeps at 0
			e.recs.At(j).at = listed | k
		}
	}
	s.deferred, s.reasons = s.deferred[:last], s.reasons[:last]
	r.at = 0
}

// compactList drops from the deferred list the entries take marked
// unlisted, keeping the order of the rest.
func (e *Engine) compactList() {
	s := &e.lane
	w := 0
	for k, i := range s.deferred {
		if s.reasons[k] == unlisted {
			continue
		}
		if w != k {
			s.deferred[w], s.reasons[w] = i, s.reasons[k]
			e.recs.At(i).at = listed | uint32(w)
		}
		w++
	}
	s.deferred, s.reasons = s.deferred[:w], s.reasons[:w]
}

func (e *Engine) setReason(i uint32, why DeferReason) {
	k, _ := e.recs.At(i).onList()
	e.lane.reasons[k] = why
}

// collect removes timer i, which is not firing, from the pending set for
// good, and reports it.
func (e *Engine) collect(i uint32, why GCReason) {
	id := e.recs.At(i).id
	e.drop(i)
	e.reportCollected(&id, why)
}

func (e *Engine) reportCollected(id *TimerID, why GCReason) {
	if o, ok := e.obs.(LaneObserver); ok {
		defer e.observed()
		o.Collected(*id, why)
	}
}

func (e *Engine) notifyDeferred(lo LaneObserver, id TimerID, why DeferReason) {
	defer e.observed()
	lo.Deferred(id, why)
}

// expireWindow drops the fairness window's fires older than the window at
// block h, with their state-root leaves, and releases the actors that
// leave it.
func (e *Engine) expireWindow(h uint64) {
	e.lane.window.ExpireEach(h, e.lane.onExpired, e.lane.onPruned)
}

// takeOne takes candidate c, timer r, out of the pending set just before
// it fires, and returns its history entry's position for retireOne. The
// cap did not count it since the end of block began (dueOf).
func (e *Engine) takeOne(c *cand, r *rec) uint64 {
	e.actors.at(r.actor).pending--
	e.lane.leaveDue(r.actor)
	e.touch(&r.id)
	e.ids.delRec(uint64(c.tag), c.rec)
	e.pending--
	return e.keepOne(c.rec)
}

// listedAt is the place of record i on the deferred list, if i is there:
// a record freed and taken again by another timer, or killed (whose at
// has the listed bit), is not.
func (e *Engine) listedAt(i uint32) (uint32, bool) {
	s := &e.lane
	at, ok := e.recs.At(i).onList()
	return at, ok && int(at) < len(s.deferred) && s.deferred[at] == i
}

// lane is CIP-1 v3's end of block (§3 steps 4-10), from ActivationHeight;
// below it the block runs fifo. docs/SPEC.md §12 states every rule.
type lane struct{}

func (lane) endBlock(e *Engine, x Executor, due ring.Iter) BlockResult {
	if !e.laneActive(e.height) {
		res := fifo{}.endBlock(e, x, due)
		// Before activation the basefee is where the lane would start
		// should the next block be its first: nothing moves it but the
		// floor, which it follows both ways, the next block's (a pending
		// update's) counting already, as after a lane block
		// (docs/STATE_ROOT.md §4: the basefee the next block runs at).
		b := e.cfg.InitialBasefee
		if f := e.NextLaneParams().MinBasefee; b.Cmp(f) < 0 {
			b = f
		}
		e.lane.basefee = b
		return res
	}
	s := &e.lane
	s.gen++
	s.led = s.ledger
	s.accts, _ = s.led.(AccountLedger)
	h := e.height
	p := &s.params
	listedFrom := len(s.deferred)
	e.listAll(due)
	e.expireWindow(h)

	// Classify every due timer (step 4) and price the candidates (steps 5-6).
	fireCap := p.MaxCyclesPerFireAuction
	cands, gcs, keys := s.cands[:0], s.gcs[:0], s.keys[:0]
	minGas, sumGas := uint64(math.MaxUint64), uint64(0)
	def := defaultBid(s.basefee, s.p50)
	// W, the available funds and the fire counts are kept by actor index,
	// payers' and timers' alike; no actor is added before the fires. They
	// are slabs, which grow a chunk at a time: slices grown by append
	// copied themselves whole, at a million actors 56 MiB in one end of
	// block.
	s.weights.Ensure(e.actors.n - 1)
	s.avail.Ensure(e.actors.n - 1)
	s.fireCount.Ensure(e.actors.n - 1)
	s.dueOpen = true
	defer func() { s.dueOpen = false }()
	for k, i := range s.deferred {
		// Loads ahead: the record two steps away, then its fee fields.
		if j := k + 2*ahead; j < len(s.deferred) {
			e.prefetchRec(s.deferred[j])
		}
		if j := k + ahead; j < len(s.deferred) {
			e.prefetchFee(e.recs.At(s.deferred[j]))
		}
		r := e.recs.At(i)
		if k >= listedFrom {
			r.at = listed | uint32(k)
		}
		s.enterDue(r.actor)
		f := e.feeOf(r)
		if h > e.expiry(r, f) {
			gcs = append(gcs, gcCand{i, Expired})
			continue
		}
		gas := fireCap
		if f != nil && f.Set&HasGasLimit != 0 {
			gas = f.GasLimit
		}
		// Stated fees beat the actor's agent (docs/SPEC.md §12.3).
		b := def
		switch {
		case f != nil && f.Set&(HasMaxFee|HasMaxPriorityFee) != 0:
			b = statedBid(f, &def)
		case len(s.agents) > 0:
			b = e.agentBid(r, &def)
		}
		if b.MaxFee.Cmp(s.basefee) < 0 {
			s.reasons[k] = BelowBasefee
			if gas > fireCap {
				s.reasons[k] = OverCap
			}
			continue
		}
		prio := b.MaxFee.Sub(s.basefee)
		if b.MaxPriorityFee.Cmp(prio) < 0 {
			prio = b.MaxPriorityFee
		}
		c := cand{prio: prio, gas: gas, rec: i, payerIdx: e.payerIdx(r, f)}
		if perCycle, ok := u128.Add(s.basefee, prio); ok {
			if _, ok := u128.Mul64(perCycle, gas); ok {
				c.wf |= candCovered
			}
		}
		if f != nil && f.Set&HasFeePayer != 0 {
			c.wf |= candFeePayer
		}
		// CIP-1 §3 step 4, before step 7's cap: collected if its payer
		// cannot cover its max_cost as the end of block starts.
		if !c.covered() || e.funds(&c).Cmp(s.maxCost(&c)) < 0 {
			gcs = append(gcs, gcCand{i, InsufficientFunds})
			continue
		}
		if gas > fireCap {
			s.reasons[k] = OverCap
			continue
		}
		s.reasons[k] = LaneFull // unless the walk fires or collects it
		// W, as weight gives it, without a call once the actor has it.
		w := s.weights.At(r.actor)
		if w.gen != s.gen {
			w = e.weight(r.actor)
		}
		c.wf |= w.w
		c.tag = uint32(e.ids.tag(&r.id))
		keys = append(keys, newSortKey(mulWide(prio, w.f), binary.BigEndian.Uint64(r.id[:8]), uint32(len(cands)), gas))
		minGas, sumGas = min(minGas, gas), satAddU64(sumGas, gas)
		cands = append(cands, c)
	}
	// The GC lane (§9), in ascending timer id, within its own budget.
	res := BlockResult{}
	fig := &s.figures
	*fig = LaneFigures{Basefee: s.basefee}
	slices.SortFunc(gcs, func(a, b gcCand) int { return s.byID(a.rec, b.rec) })
	for _, g := range gcs {
		if fig.GCCycles+p.GCCostPerTimer > p.GCCycles {
			e.setReason(g.rec, GCBudget)
			continue
		}
		fig.GCCycles += p.GCCostPerTimer
		s.leaveDue(e.recs.At(g.rec).actor)
		e.collect(g.rec, g.why)
		res.GC++
	}

	// Sort (step 7): effective priority descending, then timer id. Then
	// walk that order, firing each timer that fits in what the fires
	// before it left of the lane (steps 7-8): a timer runs when the
	// cycles its predecessors used plus its gas limit fit in
	// lane_timer_cycles. Once no candidate can fit any more, the rest need
	// no ordering. So when the lane can hold only a small part of the
	// candidates, the walk takes them off a heap, and a backlog far larger
	// than the lane costs O(n) per block; otherwise a sort is faster.
	s.cands = cands // for s.tie
	useHeap := sumGas > p.LaneTimerCycles && !holdsAQuarter(cands, minGas, p.LaneTimerCycles)
	if useHeap {
		heapKeys(keys, s.tie)
	} else {
		cands = s.inOrder(keys, cands)
	}
	// The walk's unvisited candidates: off the heap, keys[:n]; in order,
	// cands[next:n]. Those it leaves are lane_full, as classified.
	var used uint64 // the lane cycles the block's fires used so far
	fired := s.fired[:0]
	n, next := len(cands), 0
	misses := 0           // candidates off the heap that found no room, since the last prune
	pops := len(keys) / 8 // what the heap may give before the walk sorts the rest instead
	for next < n && p.LaneTimerCycles-used >= minGas && s.ledgerErr == nil {
		k := next
		if useHeap {
			if misses > max(pruneAfter, n/pruneShare) {
				left := pruneKeys(keys[:n], cands, p.LaneTimerCycles-used)
				if misses = 0; left <= n/2 { // the heap halved, or emptied: go on with it
					n, pops = left, left/8
					heapKeys(keys[:n], s.tie)
					continue
				}
				n, pops = left, 0 // most of it may fit yet
			}
			if pops == 0 {
				// Off the heap the rest would cost more than a sort:
				// walk them in order instead (lanesort.go, pruneAfter).
				cands, useHeap = s.inOrder(keys[:n], cands), false
				continue
			}
			pops--
			k = int(keys[0].k)
			n--
			keys[0] = keys[n]
			siftKeys(keys[:n], 0, s.tie)
		} else {
			next++
			// Loads ahead for a candidate that can still fit: the others
			// are passed over without reading their records.
			if j := next + ahead; j < n && used+cands[j].gas <= p.LaneTimerCycles {
				e.prefetchRec(cands[j].rec)
				e.ids.prefetchRun(uint64(cands[j].tag))
			}
		}
		c := &cands[k]
		if used+c.gas > p.LaneTimerCycles {
			misses++ // the walk goes on: a smaller one may fit
			continue
		}
		r := e.recs.At(c.rec)
		at, ok := e.listedAt(c.rec)
		if !ok { // gone, though no handler can cancel it (dueNow)
			continue
		}
		fee := &s.fee
		maxCost := s.maxCost(c)
		payer := e.candPayer(c)
		acct := s.payerAcct(c)
		if err := s.debit(acct, payer, maxCost); err != nil {
			if !errors.Is(err, ErrInsufficientFunds) {
				s.failLedger("Debit", err)
				break
			}
			// Its payer covered max_cost as the block's end started, and
			// the fires before it spent part of that: CIP-1 §3 step 8
			// collects it, in the GC lane's budget.
			if fig.GCCycles+p.GCCostPerTimer > p.GCCycles {
				s.reasons[at] = GCBudget
				continue
			}
			fig.GCCycles += p.GCCostPerTimer
			s.leaveDue(r.actor)
			e.collect(c.rec, InsufficientFunds)
			res.GC++
			continue
		}
		// Take it out of the pending set, then fire it and settle.
		s.reasons[at] = unlisted // compactList drops it
		r.at = 0
		kept := e.takeOne(c, r)
		// Field by field, as for openTx; Refund, Tip and Burned follow.
		fee.FeePayer, fee.GasLimit, fee.PriorityFee, fee.Weight, fee.Charged = *payer, c.gas, c.prio, c.weight(), maxCost
		actor := r.actor
		u, reverted := e.fire(x, c.rec, c.gas, fee)
		billed := c.gas
		if !reverted {
			billed = min(u.Cycles, c.gas)
		}
		used += billed
		// Exact split of the pre-charge: refund + tip + burned = max_cost.
		fee.Tip = c.prio.Mul64(billed)
		fee.Burned = s.basefee.Mul64(billed)
		fee.Refund = maxCost.Sub(fee.Tip).Sub(fee.Burned)
		e.settle(fee, acct)
		fig.Burned = u128.SatAdd(fig.Burned, fee.Burned) // fig.Tips: what payTips paid
		fired = append(fired, c.prio)
		e.countFire(actor)
		if e.obs != nil {
			e.notifyFired()
		}
		e.retireOne(kept, c.rec)
		res.Fired++
	}
	if s.ledgerErr != nil {
		return res // EndBlock fails: nothing more is settled or reported
	}
	s.keys = keys[:0]
	fig.LaneCycles = used

	e.compactList()
	// Whatever is left waits for the next block (step 9), reported in
	// ascending timer id.
	res.Deferred = len(s.deferred)
	if lo, ok := e.obs.(LaneObserver); ok && len(s.deferred) > 0 {
		order := append(s.order[:0], s.deferred...)
		slices.SortFunc(order, s.byID)
		for _, i := range order {
			r := e.recs.At(i)
			k, _ := r.onList()
			e.notifyDeferred(lo, r.id, s.reasons[k])
		}
		clear(order)
		s.order = order[:0]
	}

	e.recordFires(h)
	// What the proposer received, and what it could not hold burned: the
	// block line says where the tips went.
	fig.Tips = e.payTips()
	fig.Burned = u128.SatAdd(fig.Burned, s.tipsBurnt)
	s.tipsBurnt = Amount{}

	// Next block's basefee (§5) and default tip (§7.1).
	fig.P50Tip = median(fired)
	// The floor is the next block's: an update made in this block is in
	// force there, and NextBasefee is the basefee that block runs at.
	fig.NextBasefee = nextBasefee(s.basefee, fig.LaneCycles, p.LaneTimerCycles, e.NextLaneParams().MinBasefee)
	s.basefee, s.p50, s.lastCycles = fig.NextBasefee, fig.P50Tip, fig.LaneCycles
	clear(fired)
	s.fired = fired[:0]
	s.cands, s.gcs = cands[:0], gcs[:0]
	res.Lane = fig
	return res
}

// inOrder returns the candidates of keys in the order of the keys (step
// 7), laid out in the buffer that cands is not: the walk then reads them
// in sequence instead of missing the cache on each.
func (s *laneState) inOrder(keys []sortKey, cands []cand) []cand {
	ordered := s.ordered[:0]
	for _, j := range s.sorter.sort(keys, s.tie) {
		ordered = append(ordered, cands[keys[j].k])
	}
	s.ordered = cands[:0]
	return ordered
}

// holdsAQuarter judges whether a lane of room cycles holds a quarter of
// the candidates, to choose the walk's sort or its heap: no when even the
// smallest gas limit, minGas, lets fewer fit; else yes when a quarter of
// them have gas limits of at most room / (n/4) each, which fit together;
// else no (if many are just above that, the walk leaves the heap for a
// sort once an eighth of it came off). The count runs only when minGas
// does not settle it: a few small timers among a backlog of large ones
// make no lane that holds many (before session 47 one timer of gas limit
// 1 among a million candidates made the walk sort them all, half a
// second a block).
func holdsAQuarter(cands []cand, minGas, room uint64) bool {
	quarter := uint64(len(cands) / 4)
	if minGas > 0 && room/minGas < quarter {
		return false
	}
	if quarter == 0 {
		return true
	}
	each, n := room/quarter, uint64(0)
	for i := range cands {
		if cands[i].gas <= each {
			n++
		}
	}
	return n >= quarter
}

// countFire counts a fire of actor in this block. The first one holds a
// reference to the actor, so that its index cannot be reused by another
// actor before recordFires.
func (e *Engine) countFire(actor uint32) {
	s := &e.lane
	n := s.fireCount.At(actor)
	if *n == 0 {
		s.firing = append(s.firing, actor)
		e.actors.at(actor).refs++
	}
	*n++
}

// recordFires adds the block's fires to the fairness window, one entry per
// actor (CIP-1 §3 step 10). The window keeps one reference per actor it
// holds: the block's reference becomes it, or is dropped if it has one.
func (e *Engine) recordFires(h uint64) {
	s := &e.lane
	for _, a := range s.firing {
		if s.window.Recent(a) != 0 {
			e.actors.unref(a)
		}
		n := s.fireCount.At(a)
		e.addFires(h, a, uint64(*n))
		*n = 0
	}
	s.firing = s.firing[:0]
}

// addFires records n fires of actor index a at height h: in the fairness
// window, its state-root leaf and the block's log record.
func (e *Engine) addFires(h uint64, a uint32, n uint64) {
	e.lane.window.Add(h, a, n)
	e.fairAdded(h, a, n)
	if e.dur != nil {
		e.dur.fair = appendFairEntry(e.dur.fair, h, &e.actors.at(a).addr, n)
		e.dur.nfair++
	}
}

// addFiresOf is addFires for an actor named by address (an entry of a
// snapshot or a log record), taking the window's reference on it if the
// window holds none. It refuses counts the window cannot hold.
func (e *Engine) addFiresOf(h uint64, actor *Address, n uint64) error {
	i, _ := e.actors.lookup(actor)
	if n == 0 || n > 1<<40 || e.lane.window.Recent(i) > 1<<61 {
		return fmt.Errorf("%d fires of %s at height %d", n, actor, h)
	}
	e.addFires(h, e.windowActor(actor), n)
	return nil
}

// windowActor returns the index of actor for an entry about to enter the
// fairness window, taking the window's reference on it if it holds none.
func (e *Engine) windowActor(actor *Address) uint32 {
	i, _ := e.actors.lookup(actor)
	if i == 0 || e.lane.window.Recent(i) == 0 {
		i = e.actors.ref(i, actor)
	}
	return i
}

// A fairness entry in snapshots and log records: height[8] || actor[20]
// || fires[8].
const fairEntryLen = 36

func appendFairEntry(b []byte, h uint64, actor *Address, n uint64) []byte {
	b = binary.BigEndian.AppendUint64(b, h)
	b = append(b, actor[:]...)
	return binary.BigEndian.AppendUint64(b, n)
}

func readFairEntry(x []byte) (h uint64, actor Address, n uint64) {
	return binary.BigEndian.Uint64(x), Address(x[8:28]), binary.BigEndian.Uint64(x[28:36])
}

// settle pays out a fire's pre-charge: the refund to the payer at once,
// so that the next pre-charge of the same payer sees it; the tip to the
// proposer and the burn are summed and paid once, at the end of the block
// (payTips). Choice: a proposer that is also a payer does not spend this
// block's tips on a later pre-charge of the block (docs/SPEC.md §12.5).
// A refund the ledger cannot hold is burned rather than lost from the
// books. acct is as for debit.
func (e *Engine) settle(f *FireFee, acct uint32) {
	s := &e.lane
	if err := s.credit(acct, &f.FeePayer, f.Refund); err != nil {
		if !errors.Is(err, ErrAmountOverflow) {
			s.failLedger("Credit", err)
		}
		f.Burned, f.Refund = f.Burned.Add(f.Refund), Amount{}
	}
	if burn, ok := u128.Add(s.burnDue, f.Burned); ok {
		s.burnDue = burn
	} else { // the sum would pass 2^128-1: burn what is due first
		s.burn(s.burnDue)
		s.burnDue = f.Burned
	}
	tips, ok := u128.Add(s.tipsDue, f.Tip)
	if !ok || s.tipsOver {
		// The block's tips pass 2^128-1, more than any balance can hold:
		// the proposer receives none of them (payTips), so all are
		// burned, whatever part of them a partial sum could have paid.
		s.tipsOver = true
		s.burnTips(s.tipsDue)
		s.burnTips(f.Tip)
		tips = Amount{}
	}
	s.tipsDue = tips
}

// payTips credits the block's summed tips to the proposer, once, at the
// block's end, and burns its summed basefee; it returns what the proposer
// received. Tips the proposer's balance cannot hold (past 2^128 − 1) are
// burned, all of them, as a refund the payer's cannot hold is (settle).
func (e *Engine) payTips() (paid Amount) {
	s := &e.lane
	if err := s.led.Credit(s.proposer, s.tipsDue); err != nil {
		if !errors.Is(err, ErrAmountOverflow) {
			s.failLedger("Credit", err)
		}
		s.burnTips(s.tipsDue)
	} else {
		paid = s.tipsDue
	}
	s.burn(s.burnDue)
	s.tipsDue, s.burnDue, s.tipsOver = Amount{}, Amount{}, false
	return paid
}

// burnTips burns tips that the proposer does not receive.
func (s *laneState) burnTips(x Amount) {
	s.burn(x)
	s.tipsBurnt = u128.SatAdd(s.tipsBurnt, x)
}

// median is the p50 of xs (reordered in place): the middle value, or for
// an even count the mean of the two middle ones rounded down; 0 for none.
func median(xs []Amount) Amount {
	if len(xs) == 0 {
		return Amount{}
	}
	m := len(xs) / 2
	selectAmount(xs, m)
	if len(xs)%2 == 1 {
		return xs[m]
	}
	a, b := slices.MaxFunc(xs[:m], Amount.Cmp), xs[m] // xs[:m] <= xs[m]
	// floor((a+b)/2) without overflow: a/2 + b/2 + (1 if both odd).
	r := a.Rsh(1).Add(b.Rsh(1))
	if a.Lo&1 == 1 && b.Lo&1 == 1 {
		r = r.Add64(1)
	}
	return r
}

// selectAmount reorders xs so that xs[k] is the value a sort would put
// there, with none greater before it and none smaller after: a
// quickselect, O(n) where a sort of a block's 10,000 fired tips is
// O(n log n). It partitions three ways, as a block's tips repeat, around
// the median of three, and sorts what is left once it has partitioned
// more than 2·log2(n) times, so no input makes it quadratic.
func selectAmount(xs []Amount, k int) {
	lo, hi := 0, len(xs) // xs[k] lies in xs[lo:hi]
	for depth := 2 * bits.Len(uint(len(xs))); hi-lo > 16 && depth > 0; depth-- {
		a, b, c := xs[lo], xs[lo+(hi-lo)/2], xs[hi-1]
		if a.Cmp(b) > 0 {
			a, b = b, a
		}
		if b.Cmp(c) > 0 {
			b = c
			if a.Cmp(b) > 0 {
				b = a
			}
		}
		pivot := b
		// xs[lo:lt] < pivot, xs[lt:i] == pivot, xs[gt:hi] > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch xs[i].Cmp(pivot) {
			case -1:
				xs[lt], xs[i] = xs[i], xs[lt]
				lt++
				i++
			case 1:
				gt--
				xs[i], xs[gt] = xs[gt], xs[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return
		}
	}
	slices.SortFunc(xs[lo:hi], Amount.Cmp)
}

// nextBasefee is CIP-1 §5 in integers: with lane budget l and used cycles
// u (utilisation u/l, target 1/2), the basefee moves by
// basefee × clip((2u − l)/l, −1/8, +1/8), rounded down, rising by at least
// 1 when 2u > l (so a basefee of 0..7 can still rise) and never below
// floor. l is at most 2^60, so 8l and 8|2u − l| fit in 64 bits.
func nextBasefee(b Amount, used, l uint64, floor Amount) Amount {
	u2 := 2 * min(used, l) // a block uses at most its lane
	var next Amount
	switch {
	case u2 > l:
		d, _ := u128.MulDiv64(b, min(8*(u2-l), l), 8*l)
		if d.IsZero() {
			d = Amount{Lo: 1}
		}
		next = u128.SatAdd(b, d)
	case u2 < l:
		d, _ := u128.MulDiv64(b, min(8*(l-u2), l), 8*l)
		next = b.Sub(d)
	default:
		next = b
	}
	if next.Cmp(floor) < 0 {
		next = floor
	}
	return next
}

// emptyLaneBlocks runs n lane blocks in which nothing is due: the basefee
// falls toward its floor (a fixed point within a few hundred blocks, so
// the loop is short however large n is) and the default tip becomes 0.
func (s *laneState) emptyLaneBlocks(n uint64) {
	for ; n > 0; n-- {
		next := nextBasefee(s.basefee, 0, s.params.LaneTimerCycles, s.params.MinBasefee)
		if next == s.basefee {
			break
		}
		s.basefee = next
	}
	s.p50, s.lastCycles = Amount{}, 0
}
