// Package trace reads the conformance trace format of
// shared/conformance/FORMAT.md: JSON Lines of ops, strictly typed. Every
// malformed line is an error naming the line and what is wrong with it.
package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Address is a 20-byte account or actor address.
type Address = [20]byte

// Op is one line of a trace.
type Op struct {
	Line int
	Kind string // config, fund, handler, gba, block, tx, system, end, advance, rollback

	Config *Config // config

	Account Address // fund
	Amount  string  // fund: decimal

	Actor   Address // handler, gba, tx
	Handler string  // handler
	Cycles  uint64  // handler
	Cells   uint64  // handler
	Revert  bool    // handler, tx
	Calls   []Call  // handler, tx
	Nonce   uint64  // tx

	Height      uint64  // block
	Proposer    Address // block
	HasProposer bool

	To uint64 // advance, rollback

	GBA    *GBA        // gba
	System *SystemCall // system
}

// Call is one entry of a tx's or handler's calls.
type Call struct {
	Index    int
	Kind     string // schedule, cancel, extend
	Height   uint64 // schedule in a tx
	After    uint64 // schedule in a handler script
	Payload  []byte
	Label    string
	HasLabel bool // "" is a label like any other

	TimerID  []byte // cancel, extend: by id
	Timer    string // cancel, extend: by label
	ByLabel  bool
	Expires  uint64 // extend
	Fee      Fee    // schedule, policy lane
	HasFee   bool
	InScript bool
}

// Fee holds the lane fields of a schedule call; nil pointers are absent.
type Fee struct {
	FeePayer       *Address
	GasLimit       *uint64
	ExpiresAt      *uint64
	MaxFee         *string
	MaxPriorityFee *string
	PriorityTier   string
	Bid            *string
}

// GBA is a gba op: a custom agent's bid, or Default to restore the default.
type GBA struct {
	Default        bool
	MaxFee         string
	MaxPriorityFee string
	TipPerBlock    string
}

// SystemCall is a system op.
type SystemCall struct {
	Call    string // cancel, extend, update_config
	TimerID []byte
	Expires uint64
	Config  *Config
}

// Config is a config op (or the config of update_config).
type Config struct {
	Policy           string // fifo (default) or lane
	ActivationHeight *uint64
	Ints             map[string]uint64 // layout, limits and lane integers
	Amounts          map[string]string // lane amounts (decimal strings)
	TierMultipliers  map[string]uint64 // per-mille
}

var layoutKeys = []string{"ring_size", "epoch_length", "epoch_count", "max_timers_per_actor", "max_payload_bytes", "max_handler_bytes"}

var laneIntKeys = []string{"lane_timer_cycles", "timer_gc_cycles", "max_cycles_per_fire_auction_phase", "max_cycles_per_fire", "fairness_window_blocks", "max_ttl_blocks", "bid_deprecation_blocks", "gc_cost_per_timer"}

var laneAmountKeys = []string{"initial_lane_basefee", "min_lane_basefee"}

// notUpdatable are the config keys that SYS_UPDATE_TIMER_CONFIG cannot
// change: the policy and its activation, the tier layout, the CIP-5
// limits, the fifo phase's per-fire limit and the lane's starting basefee.
var notUpdatable = append([]string{"policy", "activation_height", "initial_lane_basefee", "max_cycles_per_fire"}, layoutKeys...)

var tiers = []string{"economy", "standard", "fast", "urgent"}

// Reader reads ops one line at a time, so that a replay prints the events
// of the good lines before it meets a bad one.
type Reader struct {
	r    *bufio.Reader
	line int
	nOps int
	lane bool // fee fields, gba, extend and system are allowed
	done bool
}

// NewReader returns a Reader of the trace in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 1<<16)}
}

// Error is a trace error: the line and what is wrong with it.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Errorf returns an *Error for line.
func Errorf(line int, format string, args ...any) error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Next returns the next op, or io.EOF after the last line.
func (t *Reader) Next() (*Op, error) {
	for !t.done {
		b, err := t.r.ReadBytes('\n')
		if err == io.EOF {
			t.done = true
			if len(b) == 0 {
				break
			}
		} else if err != nil {
			return nil, fmt.Errorf("reading trace: %w", err)
		}
		t.line++
		if !utf8.Valid(b) {
			return nil, &Error{Line: t.line, Msg: "not valid UTF-8"}
		}
		// JSON's whitespace only: any other character opens a line that is
		// not JSON, and that is an error, not something to skip.
		s := strings.Trim(string(b), " \t\r\n")
		if s == "" || s[0] == '#' {
			continue
		}
		op, err := t.parse([]byte(s))
		if err != nil {
			return nil, &Error{Line: t.line, Msg: err.Error()}
		}
		t.nOps++
		return op, nil
	}
	return nil, io.EOF
}

func (t *Reader) parse(line []byte) (*Op, error) {
	o, err := decodeObject(line)
	if err != nil {
		return nil, err
	}
	kv, ok := o.get("op")
	if !ok {
		return nil, errors.New(`missing "op"`)
	}
	kind, err := str(kv)
	if err != nil {
		return nil, fmt.Errorf("op %v", err)
	}
	op := &Op{Line: t.line, Kind: kind}
	p := fields{o: o}
	switch kind {
	case "config":
		if t.nOps > 0 {
			return nil, errors.New("config must be the first op, and come at most once")
		}
		op.Config = p.config(o, false)
		if p.err == nil {
			t.lane = op.Config.Policy == "lane"
		}
	case "fund":
		op.Account = p.address("account", true)
		op.Amount = p.amount("amount", true)
	case "handler":
		op.Actor = p.address("actor", true)
		op.Handler = p.str("handler", true)
		op.Cycles = p.intOr("cycles", 10000)
		op.Cells = p.intOr("cells", 0)
		op.Revert = p.boolean("revert")
		op.Calls = p.calls(t.lane, true)
	case "gba":
		if !t.lane {
			return nil, errors.New("op gba needs policy lane")
		}
		op.Actor = p.address("actor", true)
		op.GBA = &GBA{TipPerBlock: "0"}
		if v, ok := o.get("max_fee_per_cycle"); ok && string(v) == `"default"` {
			op.GBA.Default = true
		} else {
			op.GBA.MaxFee = p.amount("max_fee_per_cycle", true)
		}
		if op.GBA.Default {
			p.amount("max_priority_fee_per_cycle", false)
		} else {
			op.GBA.MaxPriorityFee = p.amount("max_priority_fee_per_cycle", true)
		}
		if o.has("tip_per_block_late") {
			op.GBA.TipPerBlock = p.amount("tip_per_block_late", true)
		}
	case "block":
		op.Height = p.int("height", true)
		if o.has("proposer") {
			op.Proposer, op.HasProposer = p.address("proposer", true), true
		}
		if p.err == nil && op.Height == 0 {
			return nil, errors.New("block height 0: heights start at 1")
		}
	case "tx":
		op.Actor = p.address("actor", true)
		op.Nonce = p.int("nonce", true)
		op.Calls = p.calls(t.lane, false)
		op.Revert = p.boolean("revert")
	case "system":
		if !t.lane {
			return nil, errors.New("op system needs policy lane")
		}
		op.System = p.system(o)
	case "end":
	case "advance", "rollback":
		op.To = p.int("to", true)
	default:
		return nil, fmt.Errorf("unknown op %q", short(kind))
	}
	if p.err != nil {
		return nil, p.err
	}
	if k, ok := o.unknown(); ok {
		return nil, fmt.Errorf("op %s: unknown field %q", kind, short(k))
	}
	return op, nil
}

// fields reads typed members of one object, keeping the first error.
type fields struct {
	o      *object
	err    error
	prefix string
}

func (p *fields) fail(k string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%s%s: %v", p.prefix, k, err)
	}
}

func (p *fields) raw(k string, required bool) (json.RawMessage, bool) {
	v, ok := p.o.get(k)
	if !ok && required {
		if p.err == nil {
			p.err = fmt.Errorf("%smissing field %q", p.prefix, k)
		}
	}
	return v, ok
}

func (p *fields) int(k string, required bool) uint64 {
	v, ok := p.raw(k, required)
	if !ok {
		return 0
	}
	n, err := integer(v)
	if err != nil {
		p.fail(k, err)
	}
	return n
}

func (p *fields) intOr(k string, def uint64) uint64 {
	if !p.o.has(k) {
		p.o.get(k)
		return def
	}
	return p.int(k, true)
}

func (p *fields) intPtr(k string) *uint64 {
	if !p.o.has(k) {
		return nil
	}
	n := p.int(k, true)
	return &n
}

func (p *fields) str(k string, required bool) string {
	v, ok := p.raw(k, required)
	if !ok {
		return ""
	}
	s, err := str(v)
	if err != nil {
		p.fail(k, err)
	}
	return s
}

func (p *fields) boolean(k string) bool {
	v, ok := p.raw(k, false)
	if !ok {
		return false
	}
	b, err := boolean(v)
	if err != nil {
		p.fail(k, err)
	}
	return b
}

func (p *fields) hex(k string, required bool) []byte {
	v, ok := p.raw(k, required)
	if !ok {
		return nil
	}
	b, err := hexBytes(v)
	if err != nil {
		p.fail(k, err)
	}
	return b
}

func (p *fields) address(k string, required bool) Address {
	v, ok := p.raw(k, required)
	if !ok {
		return Address{}
	}
	a, err := address(v)
	if err != nil {
		p.fail(k, err)
	}
	return a
}

func (p *fields) amount(k string, required bool) string {
	v, ok := p.raw(k, required)
	if !ok {
		return ""
	}
	s, err := amount(v)
	if err != nil {
		p.fail(k, err)
	}
	return s
}

func (p *fields) amountPtr(k string) *string {
	if !p.o.has(k) {
		return nil
	}
	s := p.amount(k, true)
	return &s
}

// bidPtr reads the deprecated bid: a decimal string, as FORMAT.md spells
// every token amount, or a JSON integer, as CIP-5 §9.7 types it. FORMAT.md
// gives bid no type of its own and its value is never used (docs/SPEC.md
// §11): either spelling is accepted, and nothing else.
func (p *fields) bidPtr() *string {
	v, ok := p.o.vals["bid"]
	if !ok || len(v) == 0 || v[0] == '"' {
		return p.amountPtr("bid")
	}
	s := strconv.FormatUint(p.int("bid", true), 10)
	return &s
}

func (p *fields) calls(lane, script bool) []Call {
	v, ok := p.raw("calls", !script)
	if !ok || p.err != nil {
		return nil
	}
	var items []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &items) != nil {
		p.fail("calls", fmt.Errorf("must be an array, not %s", typeName(v)))
		return nil
	}
	calls := make([]Call, 0, len(items))
	for i, item := range items {
		c, err := parseCall(item, i, lane, script)
		if err != nil {
			if p.err == nil {
				p.err = fmt.Errorf("calls[%d]: %v", i, err)
			}
			return nil
		}
		calls = append(calls, c)
	}
	return calls
}

var feeKeys = []string{"fee_payer", "gas_limit", "expires_at", "max_fee_per_cycle", "max_priority_fee_per_cycle", "priority_tier", "bid"}

func parseCall(raw json.RawMessage, index int, lane, script bool) (Call, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return Call{}, err
	}
	p := fields{o: o}
	c := Call{Index: index, InScript: script}
	c.Kind = p.str("call", true)
	if p.err != nil {
		return c, p.err
	}
	switch c.Kind {
	case "schedule":
		if script {
			c.After = p.int("after", true)
		} else {
			c.Height = p.int("height", true)
		}
		if o.has("payload") {
			c.Payload = p.hex("payload", true)
		}
		if o.has("label") {
			c.Label, c.HasLabel = p.str("label", true), true
		}
		for _, k := range feeKeys {
			if o.has(k) {
				if !lane {
					return c, fmt.Errorf("fee field %q needs policy lane", k)
				}
				c.HasFee = true
			}
		}
		if c.HasFee {
			f := &c.Fee
			if o.has("fee_payer") {
				a := p.address("fee_payer", true)
				f.FeePayer = &a
			}
			f.GasLimit = p.intPtr("gas_limit")
			f.ExpiresAt = p.intPtr("expires_at")
			f.MaxFee = p.amountPtr("max_fee_per_cycle")
			f.MaxPriorityFee = p.amountPtr("max_priority_fee_per_cycle")
			f.Bid = p.bidPtr()
			if o.has("priority_tier") {
				f.PriorityTier = p.str("priority_tier", true)
				if p.err == nil && !contains(tiers, f.PriorityTier) {
					return c, fmt.Errorf("priority_tier %q: must be economy, standard, fast or urgent", short(f.PriorityTier))
				}
			}
		}
	case "cancel", "extend":
		if c.Kind == "extend" && !lane {
			return c, errors.New("call extend needs policy lane")
		}
		switch {
		case o.has("timer_id") && o.has("timer"):
			return c, errors.New("give timer_id or timer, not both")
		case o.has("timer_id"):
			c.TimerID = p.hex("timer_id", true)
		case o.has("timer"):
			c.Timer, c.ByLabel = p.str("timer", true), true
		default:
			return c, errors.New(`missing field "timer_id" (or "timer")`)
		}
		if c.Kind == "extend" {
			c.Expires = p.int("expires_at", true)
		}
	default:
		return c, fmt.Errorf("unknown call %q", short(c.Kind))
	}
	if p.err != nil {
		return c, p.err
	}
	if k, ok := o.unknown(); ok {
		return c, fmt.Errorf("call %s: unknown field %q", c.Kind, short(k))
	}
	return c, nil
}

func (p *fields) system(o *object) *SystemCall {
	s := &SystemCall{Call: p.str("call", true)}
	if p.err != nil {
		return nil
	}
	switch s.Call {
	case "cancel":
		s.TimerID = p.hex("timer_id", true)
	case "extend":
		s.TimerID = p.hex("timer_id", true)
		s.Expires = p.int("expires_at", true)
	case "update_config":
		v, ok := p.raw("config", true)
		if !ok {
			return nil
		}
		co, err := decodeObject(v)
		if err != nil {
			p.fail("config", err)
			return nil
		}
		cp := fields{o: co, prefix: "config."}
		for _, k := range notUpdatable {
			if co.has(k) && p.err == nil {
				p.err = fmt.Errorf("config.%s: update_config cannot change it", k)
				return nil
			}
		}
		s.Config = cp.config(co, true)
		if cp.err != nil && p.err == nil {
			p.err = cp.err
		}
		if k, ok := co.unknown(); ok && p.err == nil {
			p.err = fmt.Errorf("config: unknown field %q", short(k))
		}
	default:
		p.fail("call", fmt.Errorf("unknown system call %q", short(s.Call)))
	}
	return s
}

// config reads a config op, or with update the config of an update_config
// system call, which is of the lane's parameters.
func (p *fields) config(o *object, update bool) *Config {
	c := &Config{Policy: "fifo", Ints: map[string]uint64{}, Amounts: map[string]string{}}
	if update {
		c.Policy = "lane"
	} else if o.has("policy") {
		c.Policy = p.str("policy", true)
		if p.err == nil && c.Policy != "fifo" && c.Policy != "lane" {
			p.fail("policy", fmt.Errorf("%q: must be fifo or lane", short(c.Policy)))
		}
	}
	if o.has("activation_height") {
		c.ActivationHeight = p.intPtr("activation_height")
	}
	for _, k := range layoutKeys {
		if o.has(k) {
			c.Ints[k] = p.int(k, true)
		}
	}
	lane := c.Policy == "lane"
	if c.ActivationHeight != nil && !lane && p.err == nil {
		p.fail("activation_height", errors.New("needs policy lane"))
	}
	for _, k := range laneIntKeys {
		if o.has(k) {
			if !lane && p.err == nil {
				p.fail(k, errors.New("needs policy lane"))
			}
			c.Ints[k] = p.int(k, true)
		}
	}
	for _, k := range laneAmountKeys {
		if o.has(k) {
			if !lane && p.err == nil {
				p.fail(k, errors.New("needs policy lane"))
			}
			c.Amounts[k] = p.amount(k, true)
		}
	}
	if v, ok := p.raw("priority_tier_multipliers", false); ok && p.err == nil {
		if !lane {
			p.fail("priority_tier_multipliers", errors.New("needs policy lane"))
			return c
		}
		mo, err := decodeObject(v)
		if err != nil {
			p.fail("priority_tier_multipliers", err)
			return c
		}
		mp := fields{o: mo, prefix: p.prefix + "priority_tier_multipliers."}
		c.TierMultipliers = map[string]uint64{}
		for _, t := range tiers {
			if mo.has(t) {
				c.TierMultipliers[t] = mp.int(t, true)
			}
		}
		if mp.err != nil {
			p.err = mp.err
		} else if k, ok := mo.unknown(); ok {
			p.fail("priority_tier_multipliers", fmt.Errorf("unknown tier %q", short(k)))
		}
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
