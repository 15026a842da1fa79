package tracemodel

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"unicode/utf8"
)

// Figures FORMAT.md fixes for every policy.
const (
	fireCellsLimit = 550000 // the cells limit of every fire (CIP-5 §5.2)
	scheduleCycles = 1000
	cancelCycles   = 500 // cancel and extend
	storageMax     = 1 << 20
	zeroAddress    = "0x0000000000000000000000000000000000000000"
	zeroOrigin     = "0x0000000000000000000000000000000000000000000000000000000000000000"
)

// tierNames are the priority tiers, indexed as laneParams.tiers.
var tierNames = [4]string{"economy", "standard", "fast", "urgent"}

const standardTier = 1

// config is what the config op fixes for the whole trace: a rollback does
// not touch it, and SYS_UPDATE_TIMER_CONFIG cannot change it (SPEC §12.9).
type config struct {
	lane           bool   // policy "lane"
	activation     uint64 // the lane runs from this height (0: from the start)
	maxTimers      uint64
	maxPayload     uint64
	maxHandler     uint64
	fifoCap        uint64 // max_cycles_per_fire: cycles limit of a fifo fire
	initialBasefee *big.Int
}

// laneParams are the lane's parameters that SYS_UPDATE_TIMER_CONFIG may
// change. A value type (amounts are never changed in place), so that
// assigning one copies it.
type laneParams struct {
	laneCycles     uint64 // lane_timer_cycles
	gcBudget       uint64 // timer_gc_cycles
	gcCost         uint64 // gc_cost_per_timer
	fireCap        uint64 // max_cycles_per_fire_auction_phase
	window         uint64 // fairness_window_blocks
	maxTTL         uint64 // max_ttl_blocks
	bidDeprecation uint64 // bid_deprecation_blocks
	minBasefee     *big.Int
	tiers          [4]uint64 // per-mille multipliers, by tierNames
}

// timer is a pending timer with the fee fields its schedule stated; the
// ones it did not state are resolved when used (SPEC §12.1).
type timer struct {
	id      string // "0x" + lower-case hex, the key of the pending set
	actor   string
	height  uint64
	seq     uint64 // schedule order, for fifo
	handler string
	payload []byte // what the handler receives

	payer     string // "" for the actor
	gas       uint64
	hasGas    bool
	expiresAt uint64
	hasExpiry bool
	maxFee    *big.Int // nil when not stated
	tip       *big.Int // nil when not stated; clamped, and a tier applied, at schedule
}

// call is one parsed entry of a tx's or a handler script's calls.
type call struct {
	kind    string // schedule, cancel, extend
	height  uint64 // schedule in a tx
	after   uint64 // schedule in a handler script
	payload []byte
	label   string
	labeled bool

	timerID string // cancel, extend by id: "0x" + hex, any length
	ref     string // cancel, extend by label
	byLabel bool
	expires uint64 // extend

	payer     string
	gas       uint64
	hasGas    bool
	expiresAt uint64 // schedule's expires_at
	hasExpiry bool
	maxFee    *big.Int
	tip       *big.Int
	tier      int
	hasTier   bool // priority_tier given: it expands at the schedule
	bid       bool
}

// script is what a handler op says executing a handler does.
type script struct {
	cycles uint64
	cells  uint64
	revert bool
	calls  []call
	line   int // of the handler op, for errors in its calls
}

var defaultScript = script{cycles: 10000}

type scriptKey struct{ actor, handler string }

// agent is a custom Gas Bidding Agent (the gba op).
type agent struct {
	maxFee, tip, late *big.Int
}

// fire is one entry of the fairness window.
type fire struct {
	height uint64
	actor  string
}

// state is everything a rollback restores (FORMAT.md: pending timers, lane
// figures, handler nonces, scripts and agents; SPEC §11 adds balances and
// the fairness window). Its maps and slices are copied by clone; the values
// in them are never changed in place.
type state struct {
	height  uint64
	open    bool // inside block ... end
	pending map[string]timer
	seq     uint64
	ledger  map[string]*big.Int
	scripts map[scriptKey]script
	agents  map[string]agent
	nonces  map[string]uint64 // the actor's latest tx nonce

	params      laneParams
	next        *laneParams // the update that takes effect next block, if any
	basefee     *big.Int    // lane basefee (under policy lane)
	p50         *big.Int    // p50 tip of the last lane block
	laneStarted bool
	fires       []fire // fairness window: the lane's fires, oldest first
	windowFrom  uint64 // fires of blocks below it have left the window

	proposer    string
	sysCancels  []string // timers SYS_CANCEL_TIMER collected in this block
	blockEvents int      // events of the open block, for advance
}

func (s state) clone() state {
	c := s
	c.pending = maps.Clone(s.pending)
	c.ledger = maps.Clone(s.ledger)
	c.scripts = maps.Clone(s.scripts)
	c.agents = maps.Clone(s.agents)
	c.nonces = maps.Clone(s.nonces)
	c.fires = slices.Clone(s.fires)
	c.sysCancels = slices.Clone(s.sysCancels)
	if s.next != nil {
		n := *s.next
		c.next = &n
	}
	return c
}

// nextParams are the parameters of the next block: the pending update's, or
// the current ones.
func (s *state) nextParams() laneParams {
	if s.next != nil {
		return *s.next
	}
	return s.params
}

func (s *state) balance(account string) *big.Int {
	if b, ok := s.ledger[account]; ok {
		return b
	}
	return new(big.Int)
}

func (s *state) pendingOf(actor string) uint64 {
	var n uint64
	for _, t := range s.pending {
		if t.actor == actor {
			n++
		}
	}
	return n
}

// capCount is what counts toward actor's cap: its pending timers, but
// for a lane block's due set while its handlers run (FORMAT.md's end of
// block takes the due timers out; SPEC §12.5).
func (m *model) capCount(actor string) uint64 {
	var n uint64
	for _, t := range m.s.pending {
		if t.actor == actor && !m.inflight[t.id] {
			n++
		}
	}
	return n
}

type model struct {
	cfg       config
	opsSeen   bool // an op ran: a config op is now too late
	s         state
	labels    map[string]string // label -> timer id; never rolled back
	snapshots map[uint64]state  // the state right after each block ended, by height
	started   bool              // a block has begun (or advance ran from 1)
	first     uint64            // the first block's height
	inflight  map[string]bool   // the lane's due set while its handlers run
	out       []ordered         // the events printed so far
	line      int               // the line of the op running, for errors found as it runs
}

func newModel() *model {
	return &model{
		cfg: config{
			maxTimers:      1024,
			maxPayload:     1048576,
			maxHandler:     256,
			fifoCap:        550000,
			initialBasefee: big.NewInt(1000),
		},
		s: state{
			pending: map[string]timer{},
			ledger:  map[string]*big.Int{},
			scripts: map[scriptKey]script{},
			agents:  map[string]agent{},
			nonces:  map[string]uint64{},
			params: laneParams{
				laneCycles: 2000000,
				gcBudget:   5000000,
				gcCost:     5000,
				fireCap:    250000,
				window:     1000,
				maxTTL:     2592000,
				minBasefee: big.NewInt(1),
				tiers:      [4]uint64{800, 1000, 1500, 2500},
			},
			p50: new(big.Int),
		},
		labels:    map[string]string{},
		snapshots: map[uint64]state{},
	}
}

// Run replays trace as `timerlane replay` would and returns the events it
// prints, as JSON Lines without `root` fields. On a trace error it returns
// the events printed before the error and a *TraceError.
func Run(trace []byte) ([]byte, error) {
	m := newModel()
	err := m.run(trace)
	var buf bytes.Buffer
	for _, ev := range m.out {
		b, merr := marshal(ev)
		if merr != nil {
			return nil, merr
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), err
}

func (m *model) run(trace []byte) error {
	lastOp := 0
	for i, raw := range bytes.Split(trace, []byte("\n")) {
		line := i + 1
		// SPEC §11: the whole trace is UTF-8, comments included.
		if !utf8.Valid(raw) {
			return &TraceError{Line: line, Msg: "not UTF-8"}
		}
		text := bytes.Trim(raw, " \t\r\n") // JSON's whitespace only (SPEC §11)
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		lastOp = line
		m.line = line
		v, err := decodeLine(text)
		if err != nil {
			return &TraceError{Line: line, Msg: err.Error()}
		}
		r := &reader{line: line}
		if err := m.op(r.object("", v)); err != nil {
			return err
		}
	}
	if m.s.open {
		return &TraceError{Line: lastOp, Msg: "the trace ends inside a block"}
	}
	return nil
}

func (m *model) failf(format string, args ...any) error {
	return &TraceError{Line: m.line, Msg: fmt.Sprintf(format, args...)}
}

func (m *model) emit(ev ordered) {
	m.out = append(m.out, ev)
	m.s.blockEvents++
}

// laneActive says whether the lane runs block h (CIP-1 §13.2).
func (m *model) laneActive(h uint64) bool {
	return m.cfg.lane && h >= m.cfg.activation
}

// startBasefee is the basefee the lane starts at under p: the initial
// basefee, or the floor if that is above it (SPEC §12.7).
func (m *model) startBasefee(p laneParams) *big.Int {
	if m.cfg.initialBasefee.Cmp(p.minBasefee) < 0 {
		return p.minBasefee
	}
	return m.cfg.initialBasefee
}

// fireCapNow is the per-fire cycles cap of the current block's phase.
func (m *model) fireCapNow() uint64 {
	if m.laneActive(m.s.height) {
		return m.s.params.fireCap
	}
	return m.cfg.fifoCap
}

func (m *model) op(o object) error {
	o.require("op")
	kind, _ := o.str("op")
	if o.r.err != nil {
		return o.r.err
	}
	o.name = kind // messages name the op: "block.height: missing"
	if kind != "config" {
		m.opsSeen = true
	}
	switch kind {
	case "config":
		return m.opConfig(o)
	case "fund":
		return m.opFund(o)
	case "handler":
		return m.opHandler(o)
	case "gba":
		return m.opGBA(o)
	case "block":
		return m.opBlock(o)
	case "tx":
		return m.opTx(o)
	case "system":
		return m.opSystem(o)
	case "end":
		return m.opEnd(o)
	case "advance":
		return m.opAdvance(o)
	case "rollback":
		return m.opRollback(o)
	}
	o.r.failf("unknown op %q", kind)
	return o.r.err
}

func (m *model) opConfig(o object) error {
	if m.opsSeen {
		o.r.failf("config only as the first op, at most once")
		return o.r.err
	}
	m.opsSeen = true
	if policy, ok := o.str("policy"); ok {
		switch policy {
		case "fifo":
		case "lane":
			m.cfg.lane = true
		default:
			o.failf("policy", "%q: not fifo or lane", policy)
		}
	}
	// The tier layout changes no event; only its bounds matter here.
	ring, hasRing := o.int("ring_size")
	epochLen, hasEpochLen := o.int("epoch_length")
	epochCount, hasEpochCount := o.int("epoch_count")
	if hasRing && (ring < 2 || ring&(ring-1) != 0) {
		o.failf("ring_size", "%d: not a power of two >= 2", ring)
	}
	// SPEC §11: a layout value left out fits the one that is set, so
	// epoch_length is bounded by ring_size only when both are given.
	if hasEpochLen && (epochLen < 1 || hasRing && epochLen > ring) {
		o.failf("epoch_length", "%d: not in 1 .. ring_size", epochLen)
	}
	if hasEpochCount && epochCount < 1 {
		o.failf("epoch_count", "0: must be >= 1")
	}
	if v, ok := o.int("max_timers_per_actor"); ok {
		m.cfg.maxTimers = v
	}
	if v, ok := o.int("max_payload_bytes"); ok {
		m.cfg.maxPayload = v
	}
	if v, ok := o.int("max_handler_bytes"); ok {
		m.cfg.maxHandler = v
	}
	for _, k := range []string{"activation_height", "max_cycles_per_fire", "initial_lane_basefee"} {
		if o.has(k) && !m.cfg.lane {
			o.failf(k, "not a key of policy fifo")
		}
	}
	if v, ok := o.int("activation_height"); ok {
		m.cfg.activation = v
	}
	if v, ok := o.int("max_cycles_per_fire"); ok {
		if v < 1 {
			o.failf("max_cycles_per_fire", "0: must be >= 1")
		}
		m.cfg.fifoCap = v
	}
	if v, ok := o.amount("initial_lane_basefee"); ok {
		m.cfg.initialBasefee = v
	}
	// Under fifo every other key is a trace error (SPEC §11): readLaneKeys
	// then reads nothing and done refuses them as unknown.
	if m.cfg.lane {
		readLaneKeys(o, &m.s.params)
		m.s.basefee = m.startBasefee(m.s.params)
	}
	return o.done()
}

// readLaneKeys sets the lane parameters o names (in a config op or in an
// update_config), checking SPEC §12.10's bounds.
func readLaneKeys(o object, p *laneParams) {
	bounded := func(key string, lo, hi uint64, dst *uint64) {
		if v, ok := o.int(key); ok {
			if v < lo || v > hi {
				o.failf(key, "%d: not in [%d, %d]", v, lo, hi)
			}
			*dst = v
		}
	}
	bounded("lane_timer_cycles", 1, 1<<60, &p.laneCycles)
	bounded("timer_gc_cycles", 0, 1<<60, &p.gcBudget)
	bounded("gc_cost_per_timer", 0, 1<<60, &p.gcCost)
	bounded("max_cycles_per_fire_auction_phase", 1, 1<<60, &p.fireCap)
	bounded("fairness_window_blocks", 1, maxInt, &p.window)
	bounded("max_ttl_blocks", 0, maxInt, &p.maxTTL)
	bounded("bid_deprecation_blocks", 0, maxInt, &p.bidDeprecation)
	if v, ok := o.amount("min_lane_basefee"); ok {
		p.minBasefee = v
	}
	// SPEC §12.9: the object names only the tiers it changes.
	if t, ok := o.sub("priority_tier_multipliers"); ok {
		for i, name := range tierNames {
			if v, ok := t.int(name); ok {
				if v > 1000000 {
					t.failf(name, "%d: above 1000000", v)
				}
				p.tiers[i] = v
			}
		}
		t.done()
	}
}

func (m *model) opFund(o object) error {
	o.require("account", "amount")
	account, _ := o.address("account")
	amount, _ := o.amount("amount")
	if err := o.done(); err != nil {
		return err
	}
	if !m.cfg.lane {
		return nil // accepted, no effect (FORMAT.md)
	}
	b := new(big.Int).Add(m.s.balance(account), amount)
	if b.Cmp(u128Max()) > 0 {
		return m.failf("fund: the balance of %s would pass 2^128-1", account)
	}
	m.s.ledger[account] = b
	return nil
}

func (m *model) opHandler(o object) error {
	o.require("actor", "handler")
	actor, _ := o.address("actor")
	name, _ := o.str("handler")
	sc := defaultScript
	sc.line = m.line
	if v, ok := o.int("cycles"); ok {
		sc.cycles = v
	}
	if v, ok := o.int("cells"); ok {
		sc.cells = v
	}
	sc.revert, _ = o.boolean("revert")
	calls, _ := o.array("calls")
	for i, c := range calls {
		sc.calls = append(sc.calls, m.parseCall(o.r, fmt.Sprintf("handler.calls[%d]", i), c, true))
	}
	if err := o.done(); err != nil {
		return err
	}
	m.s.scripts[scriptKey{actor, name}] = sc
	return nil
}

func (m *model) opGBA(o object) error {
	if !m.cfg.lane {
		o.r.failf("gba: not under policy fifo")
	}
	o.require("actor", "max_fee_per_cycle")
	actor, _ := o.address("actor")
	maxFee, _ := o.str("max_fee_per_cycle")
	isDefault := maxFee == "default"
	if !isDefault {
		o.require("max_priority_fee_per_cycle")
	}
	// The default agent has no fees: its other fields are checked and mean
	// nothing (SPEC §12.3).
	tip, _ := o.amount("max_priority_fee_per_cycle")
	late, hasLate := o.amount("tip_per_block_late")
	if !hasLate {
		late = new(big.Int)
	}
	var a agent
	if !isDefault {
		a = agent{tip: tip, late: late}
		a.maxFee, _ = o.amountText("max_fee_per_cycle", maxFee)
	}
	if err := o.done(); err != nil {
		return err
	}
	if isDefault {
		delete(m.s.agents, actor)
	} else {
		m.s.agents[actor] = a
	}
	return nil
}

// parseCall reads one entry of a tx's calls (inScript false) or of a handler
// script's (true: `after` instead of `height`).
func (m *model) parseCall(r *reader, name string, v any, inScript bool) call {
	o := r.object(name, v)
	o.require("call")
	kind, _ := o.str("call")
	c := call{kind: kind, tier: standardTier}
	switch kind {
	case "schedule":
		if inScript {
			o.require("after")
			c.after, _ = o.int("after")
		} else {
			o.require("height")
			c.height, _ = o.int("height")
		}
		c.payload, _ = o.bytes("payload")
		c.label, c.labeled = o.str("label")
		for _, k := range []string{"fee_payer", "gas_limit", "expires_at", "max_fee_per_cycle",
			"max_priority_fee_per_cycle", "priority_tier", "bid"} {
			if o.has(k) && !m.cfg.lane {
				o.failf(k, "fee field under policy fifo")
			}
		}
		c.payer, _ = o.address("fee_payer")
		c.gas, c.hasGas = o.int("gas_limit")
		c.expiresAt, c.hasExpiry = o.int("expires_at")
		c.maxFee, _ = o.amount("max_fee_per_cycle")
		c.tip, _ = o.amount("max_priority_fee_per_cycle")
		if tier, ok := o.str("priority_tier"); ok {
			c.hasTier = true
			c.tier = slices.Index(tierNames[:], tier)
			if c.tier < 0 {
				o.failf("priority_tier", "%q: not a tier", tier)
			}
		}
		// bid: a decimal string or a JSON integer (SPEC §11); never used.
		if v, ok := o.m["bid"]; ok {
			if _, isStr := v.(string); isStr {
				_, c.bid = o.amount("bid")
			} else {
				_, c.bid = o.int("bid")
			}
		}
	case "cancel", "extend":
		if kind == "extend" {
			if !m.cfg.lane {
				o.failf("call", "extend under policy fifo")
			}
			o.require("expires_at")
			c.expires, _ = o.int("expires_at")
		}
		if o.has("timer_id") == o.has("timer") {
			o.failf("timer_id", "exactly one of timer_id and timer")
		}
		if id, ok := o.bytes("timer_id"); ok {
			c.timerID = hexString(id)
		}
		c.ref, c.byLabel = o.str("timer")
	default:
		o.failf("call", "%q: unknown call", kind)
	}
	o.done()
	return c
}

func (m *model) opBlock(o object) error {
	o.require("height")
	h, _ := o.int("height")
	proposer, _ := o.address("proposer")
	if err := o.done(); err != nil {
		return err
	}
	switch {
	case m.s.open:
		return m.failf("block %d: the block %d is still open", h, m.s.height)
	case !m.started && h < 1:
		return m.failf("block 0: the first block must be >= 1")
	case m.started && h != m.s.height+1:
		return m.failf("block %d: the next block is %d", h, m.s.height+1)
	}
	m.beginBlock(h, proposer)
	return nil
}

func (m *model) beginBlock(h uint64, proposer string) {
	s := &m.s
	if s.next != nil {
		s.params = *s.next // SYS_UPDATE_TIMER_CONFIG takes effect (SPEC §12.9)
		s.next = nil
	}
	s.height = h
	s.open = true
	s.proposer = proposer
	s.sysCancels = nil
	s.blockEvents = 0
	if !m.started {
		m.started = true
		m.first = h
	}
	if !m.cfg.lane {
		return
	}
	if !m.laneActive(h) {
		s.basefee = m.startBasefee(s.params)
	} else if !s.laneStarted {
		// The lane's first block: the window starts empty (SPEC §12.6).
		s.laneStarted = true
		s.basefee = m.startBasefee(s.params)
		s.p50 = new(big.Int)
		s.fires = nil
	}
}

func (m *model) opTx(o object) error {
	o.require("actor", "nonce", "calls")
	actor, _ := o.address("actor")
	nonce, _ := o.int("nonce")
	revert, _ := o.boolean("revert")
	raw, _ := o.array("calls")
	calls := make([]call, len(raw))
	for i, c := range raw {
		calls[i] = m.parseCall(o.r, fmt.Sprintf("tx.calls[%d]", i), c, false)
	}
	if err := o.done(); err != nil {
		return err
	}
	if !m.s.open {
		return m.failf("tx outside a block")
	}
	s := &m.s
	s.nonces[actor] = nonce
	savedPending, savedSeq := maps.Clone(s.pending), s.seq
	for i, c := range calls {
		if err := m.call(actor, nonce, i, c, ""); err != nil {
			return err
		}
	}
	if revert {
		s.pending, s.seq = savedPending, savedSeq
		m.emit(ordered{{"ev", "revert"}, {"height", s.height}, {"actor", actor}, {"nonce", nonce}})
	}
	return nil
}

// resolve returns the id a cancel or extend names.
func (m *model) resolve(c call) (string, error) {
	if !c.byLabel {
		return c.timerID, nil
	}
	id, ok := m.labels[c.ref]
	if !ok {
		return "", m.failf("label %q was never bound", c.ref)
	}
	return id, nil
}

// call runs one call of a tx (fromTimer "") or of the handler of the timer
// fromTimer, and prints its event. Its error is a trace error.
func (m *model) call(actor string, nonce uint64, index int, c call, fromTimer string) error {
	s := &m.s
	h := s.height
	ev := ordered{{"ev", "call"}, {"height", h}, {"actor", actor}, {"nonce", nonce}, {"index", index}, {"call", c.kind}}
	var errName string
	switch c.kind {
	case "schedule":
		var ok ordered
		var err error
		ok, errName, err = m.schedule(actor, nonce, c, fromTimer != "")
		if err != nil {
			return err
		}
		ev = append(ev, ok...)
	case "cancel", "extend":
		id, err := m.resolve(c)
		if err != nil {
			return err
		}
		t, pending := s.pending[id]
		switch {
		case !pending || m.inflight[id]:
			errName = "UnknownTimer"
		case t.actor != actor:
			errName = "NotOwner"
		case c.kind == "extend" && !m.extendOK(t, c.expires):
			errName = "InvalidExpiry"
		case c.kind == "extend":
			t.expiresAt, t.hasExpiry = c.expires, true
			s.pending[id] = t
		default:
			delete(s.pending, id)
		}
		if errName == "" {
			ev = append(ev, field{"ok", true}, field{"cycles", cancelCycles}, field{"cells", 0})
		}
	}
	if errName != "" {
		ev = append(ev, field{"ok", false}, field{"error", errName})
	}
	if fromTimer != "" {
		ev = append(ev, field{"from_timer", fromTimer})
	}
	m.emit(ev)
	return nil
}

// schedule runs a schedule call: the fields of a successful call's event,
// or the name of its error (FORMAT.md's precedence, SPEC §12.2's lane checks
// between InvalidHandler and TooManyTimers).
func (m *model) schedule(actor string, nonce uint64, c call, inScript bool) (ordered, string, error) {
	s := &m.s
	h := s.height
	height := c.height
	if inScript {
		height = h + c.after // both at most 2^63-1: no wrap
	}
	handler, payload, routed := Route(c.payload)
	var actorBytes [20]byte
	hex.Decode(actorBytes[:], []byte(actor[2:]))
	idBytes := TimerID(actorBytes, height, c.payload, nonce)
	id := hexString(idBytes[:])
	p := s.params
	b := s.basefee
	switch {
	case height <= h:
		return nil, "HeightNotInFuture", nil
	case uint64(len(c.payload)) > m.cfg.maxPayload:
		return nil, "PayloadTooLarge", nil
	case len(c.payload) > storageMax:
		// SPEC, notes on FORMAT.md: a limit above 1 MiB runs as 1 MiB, and a
		// payload only the trace's limit allows is a trace error.
		return nil, "", m.failf("a payload of %d bytes is beyond the engine's 1 MiB", len(c.payload))
	case routed && (len(handler) == 0 || uint64(len(handler)) > m.cfg.maxHandler):
		return nil, "InvalidHandler", nil
	case c.bid && h >= satAdd(m.cfg.activation, p.bidDeprecation):
		return nil, "TimerArgDeprecated", nil
	case c.hasGas && c.gas > m.fireCapNow():
		return nil, "GasLimitTooHigh", nil
	case c.hasExpiry && (c.expiresAt < height || c.expiresAt > satAdd(height, p.maxTTL)):
		return nil, "InvalidExpiry", nil
	case c.maxFee != nil && c.maxFee.Cmp(b) < 0:
		return nil, "TimerRejectedBelowBasefee", nil
	case m.capCount(actor) >= m.cfg.maxTimers:
		return nil, "TooManyTimers", nil
	}
	if _, dup := s.pending[id]; dup {
		return nil, "DuplicateTimer", nil
	}
	ok := ordered{{"ok", true}, {"timer_id", id}, {"cycles", scheduleCycles}, {"cells", len(c.payload)}}
	stated := c.tip
	if c.hasTier {
		// SPEC §12.2, CIP-1 §7.3: the tier expands at the call into a
		// stated tip, its multiplier times the stated one or, without
		// one, the default agent's now (the previous block's p50).
		base := c.tip
		if base == nil {
			base = s.p50
		}
		stated = new(big.Int).Quo(new(big.Int).Mul(base, new(big.Int).SetUint64(p.tiers[c.tier])), big.NewInt(1000))
	}
	tip := stated
	if stated != nil {
		// Clamp (SPEC §12.2 step 6): the tip may not pass max fee - basefee,
		// max fee being the stated one or the default agent's 2 × basefee.
		maxFee := c.maxFee
		if maxFee == nil {
			maxFee = defaultMaxFee(b)
		}
		room := new(big.Int).Sub(maxFee, b)
		if stated.Cmp(room) > 0 {
			tip = room
			// Below activation the clamp applies and the event does not show it.
			if m.laneActive(h) {
				ok = append(ok, field{"stated_priority_fee", stated.String()}, field{"clamped_priority_fee", room.String()})
			}
		}
	}
	s.seq++
	s.pending[id] = timer{
		id: id, actor: actor, height: height, seq: s.seq, handler: handler, payload: payload,
		payer: c.payer, gas: c.gas, hasGas: c.hasGas, expiresAt: c.expiresAt, hasExpiry: c.hasExpiry,
		maxFee: c.maxFee, tip: tip,
	}
	if c.labeled {
		m.labels[c.label] = id
	}
	return ok, "", nil
}

// defaultMaxFee is the default agent's max fee: 2 × basefee, saturating.
func defaultMaxFee(b *big.Int) *big.Int {
	return minBig(new(big.Int).Lsh(b, 1), u128Max())
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return 1<<64 - 1
	}
	return a + b
}

func minBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// expiry is the timer's expires_at, or its height + max_ttl_blocks,
// saturating (SPEC §12.1).
func (m *model) expiry(t timer) uint64 {
	if t.hasExpiry {
		return t.expiresAt
	}
	return satAdd(t.height, m.s.params.maxTTL)
}

// extendOK: an extend never shortens, and stays within the TTL from the
// timer's height (SPEC §12.2).
func (m *model) extendOK(t timer, to uint64) bool {
	return to >= m.expiry(t) && to >= t.height && to <= satAdd(t.height, m.s.params.maxTTL)
}

func (m *model) opSystem(o object) error {
	if !m.cfg.lane {
		o.r.failf("system: not under policy fifo")
	}
	o.require("call")
	kind, _ := o.str("call")
	var id string
	var expires uint64
	var next laneParams
	switch kind {
	case "cancel", "extend":
		o.require("timer_id")
		b, _ := o.bytes("timer_id")
		id = hexString(b)
		if kind == "extend" {
			o.require("expires_at")
			expires, _ = o.int("expires_at")
		}
	case "update_config":
		o.require("config")
		next = m.s.nextParams() // two updates in one block both count (SPEC §12.9)
		if c, ok := o.sub("config"); ok {
			readLaneKeys(c, &next)
			c.done() // any other key is one an update cannot change
		}
	default:
		o.failf("call", "%q: unknown system call", kind)
	}
	if err := o.done(); err != nil {
		return err
	}
	if !m.s.open {
		return m.failf("system outside a block")
	}
	s := &m.s
	// A system instruction that fails prints nothing and changes nothing.
	switch kind {
	case "cancel":
		if _, ok := s.pending[id]; ok {
			delete(s.pending, id)
			s.sysCancels = append(s.sysCancels, id)
			if !m.laneActive(s.height) {
				// A fifo block has no gc section: its events come in the
				// order things happen (FORMAT.md).
				m.emit(ordered{{"ev", "gc"}, {"height", s.height}, {"timer_id", id}, {"reason", "system_cancel"}})
			}
		}
	case "extend":
		if t, ok := s.pending[id]; ok && m.extendOK(t, expires) {
			t.expiresAt, t.hasExpiry = expires, true
			s.pending[id] = t
		}
	case "update_config":
		s.next = &next
	}
	return nil
}

// runHandler runs the script of t's handler with the given cycles limit. It
// returns whether the handler reverted and the cycles it used; these come
// from the script as stated (SPEC §11: its cycles are all its execution
// uses, its calls included), so they are returned also when one of its calls
// stops the replay with a trace error.
func (m *model) runHandler(t timer, cyclesLimit uint64) (bool, uint64, error) {
	s := &m.s
	sc, ok := s.scripts[scriptKey{t.actor, t.handler}]
	if !ok {
		sc = defaultScript
	}
	reverted := sc.revert || sc.cycles > cyclesLimit || sc.cells > fireCellsLimit
	nonce := s.nonces[t.actor]
	savedPending, savedSeq := maps.Clone(s.pending), s.seq
	for i, c := range sc.calls {
		if err := m.call(t.actor, nonce, i, c, t.id); err != nil {
			var te *TraceError
			if errors.As(err, &te) {
				err = &TraceError{Line: te.Line, Msg: fmt.Sprintf("%s (block %d, handler %q of %s, scripted on line %d)",
					te.Msg, s.height, t.handler, t.actor, sc.line)}
			}
			return reverted, sc.cycles, err
		}
	}
	if reverted {
		s.pending, s.seq = savedPending, savedSeq
		m.emit(ordered{{"ev", "revert"}, {"height", s.height}, {"actor", t.actor}, {"nonce", nonce}})
	}
	return reverted, sc.cycles, nil
}

func (m *model) fireEvent(t timer, cyclesLimit uint64) ordered {
	return ordered{{"ev", "fire"}, {"height", m.s.height}, {"timer_id", t.id}, {"actor", t.actor},
		{"handler", t.handler}, {"payload", hexString(t.payload)}, {"cycles_limit", cyclesLimit},
		{"cells_limit", fireCellsLimit}, {"origin", zeroOrigin}, {"sender", t.actor}}
}

func (m *model) opEnd(o object) error {
	if err := o.done(); err != nil {
		return err
	}
	if !m.s.open {
		return m.failf("end outside a block")
	}
	return m.endBlock()
}

func (m *model) endBlock() error {
	s := &m.s
	var err error
	if m.laneActive(s.height) {
		err = m.endLane()
	} else {
		err = m.endFifo()
	}
	if err != nil {
		return err
	}
	s.open = false
	m.snapshots[s.height] = s.clone()
	return nil
}

// endFifo is CIP-5's end of block (FORMAT.md, SPEC §8): the due timers
// leave the pending set first, then fire in schedule order.
func (m *model) endFifo() error {
	s := &m.s
	h := s.height
	var due []timer
	for _, t := range s.pending {
		if t.height == h {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b timer) int { return cmpUint(a.seq, b.seq) })
	for _, t := range due {
		delete(s.pending, t.id)
	}
	gcs := s.sysCancels // printed as they happened
	for _, t := range due {
		m.emit(m.fireEvent(t, m.cfg.fifoCap))
		if _, _, err := m.runHandler(t, m.cfg.fifoCap); err != nil {
			return err
		}
	}
	m.emit(ordered{{"ev", "block"}, {"height", h}, {"fired", len(due)}, {"deferred", 0},
		{"gc", len(gcs)}, {"pending", len(s.pending)}})
	if m.cfg.lane {
		// Before activation the basefee between blocks follows the next
		// block's floor (SPEC §12.7).
		s.basefee = m.startBasefee(s.nextParams())
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *model) opAdvance(o object) error {
	o.require("to")
	to, _ := o.int("to")
	if err := o.done(); err != nil {
		return err
	}
	s := &m.s
	if s.open {
		return m.failf("advance inside a block")
	}
	var h uint64 // advance before any block starts at height 1
	if m.started {
		h = s.height
	} else {
		m.snapshots[0] = s.clone() // where a rollback into the run starts from
	}
	if to <= h {
		return m.failf("advance to %d: not above the current height %d", to, h)
	}
	for h < to {
		h++
		// A run of blocks in which nothing can happen changes nothing but the
		// height (SPEC §2), so it is skipped, as far as the block before the
		// next due timer.
		if m.canSkip(h, to) {
			target := to
			if next, ok := m.nextDue(h); ok && next-1 < target {
				target = next - 1
			}
			if target >= h {
				s.height = target
				if !m.started {
					m.started = true
					m.first = 1
				}
				m.snapshots[target] = s.clone()
				h = target
				continue
			}
		}
		printed := len(m.out)
		m.beginBlock(h, "")
		if err := m.endBlock(); err != nil {
			return err
		}
		if s.blockEvents == 1 { // only its block line: advance prints none
			m.out = m.out[:printed]
		}
	}
	return nil
}

func (m *model) nextDue(h uint64) (uint64, bool) {
	var next uint64
	found := false
	for _, t := range m.s.pending {
		if t.height >= h && (!found || t.height < next) {
			next, found = t.height, true
		}
	}
	return next, found
}

// canSkip says whether block h (and the ones after it, up to the next due
// timer) would change nothing but the height.
func (m *model) canSkip(h, to uint64) bool {
	s := &m.s
	if s.next != nil {
		return false
	}
	for _, t := range s.pending {
		if t.height < h { // a deferred timer waits: every block has a due set
			return false
		}
	}
	if !m.cfg.lane || !m.laneActive(to) {
		return true
	}
	if !s.laneStarted || !m.laneActive(h) {
		return false
	}
	// An empty lane block still moves the basefee (u = 0) and resets p50.
	next := NextBasefee(s.basefee, 0, s.params.laneCycles, s.params.minBasefee)
	return next.Cmp(s.basefee) == 0 && s.p50.Sign() == 0
}

func (m *model) opRollback(o object) error {
	o.require("to")
	to, _ := o.int("to")
	if err := o.done(); err != nil {
		return err
	}
	s := &m.s
	switch {
	case s.open:
		return m.failf("rollback inside a block")
	case !m.started || to < m.first || to > s.height:
		return m.failf("rollback to %d: no such committed block", to)
	}
	target, ok := m.snapshots[to]
	if !ok {
		// to lies inside a skipped run of empty blocks: run them again from
		// the run's start, silently.
		var base uint64
		for k := range m.snapshots {
			if k < to && k >= base {
				base = k
			}
		}
		m.s = m.snapshots[base].clone()
		printed := len(m.out)
		for hh := base + 1; hh <= to; hh++ {
			m.beginBlock(hh, "")
			if err := m.endBlock(); err != nil {
				return err
			}
		}
		m.out = m.out[:printed]
		target = m.s
	}
	m.s = target.clone()
	for k := range m.snapshots {
		if k > to {
			delete(m.snapshots, k)
		}
	}
	m.out = append(m.out, ordered{{"ev", "rollback"}, {"height", to}, {"to", to}, {"pending", len(m.s.pending)}})
	return nil
}
