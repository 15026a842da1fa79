package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"unsafe"

	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/prefetch"
	"github.com/timerlane/timerlane/internal/radix"
	"github.com/timerlane/timerlane/merkle"
	"github.com/timerlane/timerlane/ring"
)

// The state root (docs/STATE_ROOT.md): a merkle.Tree whose leaves are
//
//   - one per pending timer: key = its id, value = keccak256(timerEncoding);
//   - one per fairness-window entry: key = keccak256("tl/fair" ||
//     height[8] || actor[20]), value = keccak256(0x02 || fires[8]);
//   - one for the scheduler: key = keccak256("timerlane/scheduler"), value =
//     keccak256(schedulerEncoding): height, sequence, configuration, lane
//     figures.
//
// Nothing in it depends on the tier layout, on memory or on the order in
// which the same state was reached. The tree is updated incrementally: the
// engine notes which timers a block touched and rehashes only those.

// Value tags: the first byte of each leaf's encoding.
const (
	tagTimer     = 0x01
	tagFairness  = 0x02
	tagScheduler = 0x03
)

var keyScheduler = keccak([]byte("timerlane/scheduler"))

// SchedulerKey is the key of the scheduler's leaf in the state tree,
// keccak256("timerlane/scheduler") (docs/STATE_ROOT.md §4): no timer has
// it, so a proof for it says nothing of any timer. A verifier with only a
// root, a key and a proof uses it to refuse that key as a timer id.
func SchedulerKey() TimerID { return keyScheduler }

// stateRoot keeps the tree and what the open block changed.
type stateRoot struct {
	tree  *merkle.Tree
	dirty []TimerID    // timers added, removed or changed since the last flush
	order []radix.Item // flushRoot's order of dirty, and its scratch
	spare []radix.Item
	buf   []byte
	h     hash.Hash
	sum   [32]byte
	// stale says the tree is out of date and dirty does not say where:
	// the next flush builds a new tree from the whole state (rebuildTree).
	// Recovery sets it when a tail of records changed more timers than a
	// rebuild costs.
	stale bool
}

func newStateRoot() *stateRoot {
	return &stateRoot{tree: merkle.New(), h: sha3.NewLegacyKeccak256()}
}

func (s *stateRoot) hash(b []byte) [32]byte {
	s.h.Reset()
	s.h.Write(b)
	s.h.Sum(s.sum[:0])
	return s.sum
}

// dirtyFree is how many changes beyond twice the pending timers the state
// root may hold unhashed between blocks before Commit hashes them (see
// Commit): the list stays proportional to the state, not to its history.
const dirtyFree = 1 << 16

// dirtyBound is the length of the list of unhashed changes beyond which
// Commit hashes them.
func (e *Engine) dirtyBound() int { return 2*e.pending + dirtyFree }

// touch notes that timer id changed (added, removed or updated).
func (e *Engine) touch(id *TimerID) {
	if e.root != nil {
		e.root.dirty = append(e.root.dirty, *id)
	}
	if e.dur != nil {
		e.dur.journalTouch(id)
	}
}

// touchAll notes that timers is changed, as touch does; with neither a
// tree nor a log to hear of it, it reads no record.
func (e *Engine) touchAll(is []uint32) {
	if e.root == nil && e.dur == nil {
		return
	}
	for _, i := range is {
		e.touch(&e.recs.At(i).id)
	}
}

// Root returns the state root of the current state: between blocks, that of
// the last committed block (or of the empty blocks SkipEmpty ran). It is
// the zero hash when Config.StateRoot is off.
func (e *Engine) Root() [32]byte {
	if e.root == nil {
		return [32]byte{}
	}
	e.flushRoot(rootKeep)
	return e.root.tree.Root()
}

// scratchRoot computes the state root from a full walk of the state, with
// a new tree, trusting no cached hash.
func (e *Engine) scratchRoot() [32]byte {
	t := merkle.New()
	h := &stateRoot{h: sha3.NewLegacyKeccak256()}
	e.eachLeaf(func(_ string, key *[32]byte, enc []byte) { t.Set(*key, h.hash(enc)) })
	return t.Root()
}

// rebuildTree replaces the tree with one built from the whole state, for
// a tree that is stale.
func (e *Engine) rebuildTree() {
	s := e.root
	s.tree, s.stale = merkle.New(), false
	e.eachLeaf(func(_ string, key *[32]byte, enc []byte) { s.tree.Set(*key, s.hash(enc)) })
}

// ErrRootMismatch is CheckRoot's finding: the maintained root is not the
// root of the state.
var ErrRootMismatch = errors.New("timerlane: the state root does not match the state")

// CheckRoot recomputes the state root from the whole state with a new
// tree, trusting no cached hash (in particular those a snapshot's tree
// image brought in at recovery), and reports ErrRootMismatch if it is not
// Root(). It costs a Keccak-256 per leaf and per tree node: O(pending).
func (e *Engine) CheckRoot() error {
	if e.root == nil {
		return nil
	}
	if got, want := e.scratchRoot(), e.Root(); got != want {
		return fmt.Errorf("%w: %x from the state, %x maintained", ErrRootMismatch, got, want)
	}
	return nil
}

// Prove returns a proof that timer id is pending (with the value hash its
// leaf holds) or is not, against Root(); merkle.Verify checks it with
// nothing else. pending is true only for a pending timer: an id that is
// the key of another leaf (the scheduler's, a fairness entry's) is not
// one, and its proof shows that leaf, so it proves no absence either
// (timer ids and those keys share the tree's key space:
// docs/STATE_ROOT.md §3, §4a). With Config.StateRoot off there is no
// tree to prove against: the proof is empty and pending false, whatever
// the timer's state (ask Pending or the id's timer instead).
func (e *Engine) Prove(id TimerID) (proof merkle.Proof, value [32]byte, pending bool) {
	if e.root == nil {
		return merkle.Proof{}, value, false
	}
	e.flushRoot(rootKeep)
	e.root.tree.Root()
	if _, timer := e.ids.get(&id); timer {
		value, pending = e.root.tree.Get(id)
	}
	return e.root.tree.Prove(id), value, pending
}

func keccak(b []byte) [32]byte {
	h := sha3.NewLegacyKeccak256()
	h.Write(b)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// rootKeep is the capacity of the list of changes that a flush for Root
// keeps: blocks of up to 65,536 changes reuse it.
const rootKeep = 1 << 16

// flushRoot brings the tree up to the current state, keeping the list of
// changes for reuse if its capacity is at most keep.
func (e *Engine) flushRoot(keep int) {
	s := e.root
	if s.stale {
		e.rebuildTree() // its scheduler leaf too
		s.dirty = dropLarge(s.dirty, keep)
		return
	}
	// In the order of the ids' first 8 bytes, consecutive changes share
	// the upper part of their paths, which then stays in cache, and a
	// timer changed twice mostly comes up twice in a row (then once is enough).
	order := s.order[:0]
	for k := range s.dirty {
		order = append(order, radix.Item{Key: binary.BigEndian.Uint64(s.dirty[k][:8]), Pos: uint32(k)})
	}
	order, s.spare = radix.Sort(order, s.spare, ^uint64(0))
	// In that order the ids lie at random in the list: the loop loads
	// each id lookAhead places before lookupAhead reads it for its slot
	// (at two million changes, a flush took 2.9 s without loading ahead,
	// 2.0 with the slots alone).
	dirty := func(k int) *TimerID { return &s.dirty[order[k].Pos] }
	for k, it := range order {
		if j := k + 3*lookAhead; j < len(order) {
			prefetch.Line(unsafe.Pointer(dirty(j)))
		}
		e.lookupAhead(dirty, k, len(order))
		id := &s.dirty[it.Pos]
		if k > 0 && *id == s.dirty[order[k-1].Pos] {
			continue
		}
		if i, ok := e.ids.get(id); ok {
			s.buf = e.appendTimer(s.buf[:0], i)
			s.tree.Set(*id, s.hash(s.buf))
		} else {
			s.tree.Delete(*id)
		}
	}
	s.order = order[:0]
	// A bulk load (a million timers in a block) must not leave 32 MB
	// behind; a list of up to keep changes is reused.
	if cap(s.dirty) > keep {
		s.order, s.spare = nil, nil
	}
	s.dirty = dropLarge(s.dirty, keep)
	s.buf = e.appendScheduler(s.buf[:0])
	s.tree.Set(keyScheduler, s.hash(s.buf))
}

// dropLarge empties the list of changes, keeping its room if that is at
// most keep.
func dropLarge(dirty []TimerID, keep int) []TimerID {
	if cap(dirty) > keep {
		return nil
	}
	return dirty[:0]
}

// appendFairKey appends the preimage of a fairness-window entry's key:
// "tl/fair" || height[8] || actor[20]. At 35 bytes it is shorter than any
// timer id's preimage (36 bytes and more), so that no timer an actor can
// schedule has an entry's key for its id (docs/STATE_ROOT.md §3).
func appendFairKey(b []byte, height uint64, actor *Address) []byte {
	b = append(b, fairLabel...)
	b = binary.BigEndian.AppendUint64(b, height)
	return append(b, actor[:]...)
}

// fairLabel starts a fairness entry's key preimage.
const fairLabel = "tl/fair"

// appendFairValue appends a fairness entry's leaf encoding: 0x02 || fires[8].
func appendFairValue(b []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, tagFairness), n)
}

func (e *Engine) fairKey(height uint64, actor *Address) [32]byte {
	e.root.buf = appendFairKey(e.root.buf[:0], height, actor)
	return e.root.hash(e.root.buf)
}

func (e *Engine) fairValue(n uint64) [32]byte {
	e.root.buf = appendFairValue(e.root.buf[:0], n)
	return e.root.hash(e.root.buf)
}

// fairAdded and fairExpired keep the fairness leaves in step with the
// window.
func (e *Engine) fairAdded(height uint64, actor uint32, n uint64) {
	if e.root == nil || e.root.stale {
		return
	}
	k := e.fairKey(height, &e.actors.at(actor).addr)
	e.root.tree.Set(k, e.fairValue(n))
}

func (e *Engine) fairExpired(height uint64, actor uint32, _ uint64) {
	if e.root == nil || e.root.stale {
		return
	}
	e.root.tree.Delete(e.fairKey(height, &e.actors.at(actor).addr))
}

// appendTimer appends the canonical encoding of pending timer i:
//
//	0x01 || actor[20] || height[8] || seq[8]
//	|| len(handler)[4] || handler || len(payload)[4] || payload
//	|| fields[1] || the fields present, in this order: fee_payer[20],
//	   gas_limit[8], expires_at[8], max_fee[16], max_priority_fee[16], tier[1]
//
// big-endian throughout; handler empty for the default handle_timer;
// fields is the FeeField bit set without HasBid.
func (e *Engine) appendTimer(b []byte, i uint32) []byte {
	r := e.recs.At(i)
	b = append(b, tagTimer)
	b = append(b, e.actors.at(r.actor).addr[:]...)
	b = binary.BigEndian.AppendUint64(b, r.height)
	b = binary.BigEndian.AppendUint64(b, r.seq)
	handler, payload := e.bytesOf(r)
	b = binary.BigEndian.AppendUint32(b, uint32(len(handler)))
	b = append(b, handler...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	f := e.feeOf(r)
	if f == nil {
		return append(b, 0)
	}
	set := f.Set &^ HasBid
	b = append(b, byte(set))
	if set&HasFeePayer != 0 {
		b = append(b, f.FeePayer[:]...)
	}
	if set&HasGasLimit != 0 {
		b = binary.BigEndian.AppendUint64(b, f.GasLimit)
	}
	if set&HasExpiresAt != 0 {
		b = binary.BigEndian.AppendUint64(b, f.ExpiresAt)
	}
	if set&HasMaxFee != 0 {
		b = appendAmount(b, f.MaxFee)
	}
	if set&HasMaxPriorityFee != 0 {
		b = appendAmount(b, f.MaxPriorityFee)
	}
	if set&HasTier != 0 {
		b = append(b, byte(f.Tier))
	}
	return b
}

func appendAmount(b []byte, a Amount) []byte {
	b = binary.BigEndian.AppendUint64(b, a.Hi)
	return binary.BigEndian.AppendUint64(b, a.Lo)
}

// appendScheduler appends the canonical encoding of the scheduler's state:
//
//	0x03 || height[8] || started[1] || next_seq[8]
//	|| limits: max_timers_per_actor[4] max_payload_bytes[4]
//	   max_handler_bytes[4] cycles_per_fire[8] cells_per_fire[8]
//	   schedule_cycles[8] cancel_cycles[8]
//	|| policy[1] || activation_height[8] || initial_lane_basefee[16]
//	|| len(system_deployers)[4] || each address[20]
//	|| lane_started[1] || basefee[16] || p50_tip[16] || last_lane_cycles[8]
//	|| params (in force) || update_pending[1] || params (pending, if any)
//
// where params = lane_timer_cycles[8] gc_cycles[8] gc_cost_per_timer[8]
// max_cycles_per_fire_auction_phase[8] fairness_window_blocks[8]
// max_ttl_blocks[8] bid_deprecation_blocks[8] min_lane_basefee[16]
// multipliers[4×8] (standard, economy, fast, urgent). The tier layout is
// not in it.
func (e *Engine) appendScheduler(b []byte) []byte {
	c := &e.cfg
	b = append(b, tagScheduler)
	b = binary.BigEndian.AppendUint64(b, e.height)
	b = append(b, boolByte(e.started))
	b = binary.BigEndian.AppendUint64(b, e.seq)
	b = binary.BigEndian.AppendUint32(b, c.MaxTimersPerActor)
	b = binary.BigEndian.AppendUint32(b, c.MaxPayloadBytes)
	b = binary.BigEndian.AppendUint32(b, c.MaxHandlerBytes)
	for _, v := range []uint64{c.CyclesPerFire, c.CellsPerFire, c.ScheduleCycles, c.CancelCycles} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, byte(c.Policy))
	b = binary.BigEndian.AppendUint64(b, c.ActivationHeight)
	b = appendAmount(b, c.InitialBasefee)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.SystemDeployers)))
	for _, a := range c.SystemDeployers {
		b = append(b, a[:]...)
	}
	s := &e.lane
	b = append(b, boolByte(e.laneStarted()))
	b = appendAmount(b, s.basefee)
	b = appendAmount(b, s.p50)
	b = binary.BigEndian.AppendUint64(b, s.lastCycles)
	b = appendParams(b, &s.params)
	if s.update == nil {
		return append(b, 0)
	}
	return appendParams(append(b, 1), s.update)
}

func appendParams(b []byte, p *LaneParams) []byte {
	for _, v := range []uint64{p.LaneTimerCycles, p.GCCycles, p.GCCostPerTimer, p.MaxCyclesPerFireAuction,
		p.FairnessWindowBlocks, p.MaxTTLBlocks, p.BidDeprecationBlocks} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = appendAmount(b, p.MinBasefee)
	for _, m := range p.TierMultipliers {
		b = binary.BigEndian.AppendUint64(b, m)
	}
	return b
}

// laneStarted reports whether a lane block has begun: the lane's figures
// then hold its state rather than their initial values.
func (e *Engine) laneStarted() bool { return e.started && e.laneActive(e.height) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Leaf is one leaf of the state root's tree: its key and the encoding
// whose Keccak-256 is its value hash (docs/STATE_ROOT.md).
type Leaf struct {
	Kind     string // "timer", "fairness" or "scheduler"
	Key      [32]byte
	Encoding []byte
}

// Leaves lists every leaf of the current state, whether or not
// Config.StateRoot is on, in no particular order: for inspection, test
// vectors and roots computed from scratch.
func (e *Engine) Leaves() []Leaf {
	var out []Leaf
	e.eachLeaf(func(kind string, key *[32]byte, enc []byte) {
		out = append(out, Leaf{Kind: kind, Key: *key, Encoding: slices.Clone(enc)})
	})
	return out
}

// eachLeaf calls f with every leaf of the current state, as Leaves lists
// them; enc is valid only until f returns.
func (e *Engine) eachLeaf(f func(kind string, key *[32]byte, enc []byte)) {
	var buf []byte
	// Only pending timers: during an end of block the deferred list still
	// holds the timers taken to fire in it, and a timer cancelled in the
	// open transaction stays in its tier until the commit unlinks it.
	timer := func(i uint32) {
		if j, ok := e.ids.get(&e.recs.At(i).id); ok && j == i {
			buf = e.appendTimer(buf[:0], i)
			f("timer", (*[32]byte)(&e.recs.At(i).id), buf)
		}
	}
	e.q.Walk(func(x ring.Entry, _ calendar.Tier) { timer(x.Val) })
	for _, i := range e.lane.deferred {
		timer(i)
	}
	e.lane.window.Walk(func(h uint64, a uint32, n uint64) {
		buf = appendFairKey(buf[:0], h, &e.actors.at(a).addr)
		key := keccak(buf)
		buf = appendFairValue(buf[:0], n)
		f("fairness", &key, buf)
	})
	buf = e.appendScheduler(buf[:0])
	f("scheduler", &keyScheduler, buf)
}
