package tracemodel

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
)

// GenOptions are the knobs of Generate. The zero value is the ordinary
// generator of session 45's audit (gen.py) under policy fifo.
type GenOptions struct {
	// Lane writes a policy "lane" trace: fees, tiers, agents, funds, system
	// ops and config updates.
	Lane bool
	// Tight is the audit's second generator (gen45.py), written to reach
	// the lane's per-fire funds checks and the in-flight due set: funds that
	// cover a few fires only, handler scripts that cancel and extend more
	// often than they schedule and are rewritten before most blocks, a
	// per-fire cap that may exceed the lane, a floor left below or above the
	// initial basefee.
	Tight bool
	// Far spreads heights (timers up to 1,000 blocks ahead, advances of up
	// to 1,100 blocks), as the audit's genfar.py did, for the skipping of
	// empty blocks and for TTLs.
	Far bool
}

// Three actors, a fourth account that only pays, and a proposer.
var (
	genActors = []string{
		"0x00000000000000000000000000000000000000a1",
		"0x00000000000000000000000000000000000000b2",
		"0x00000000000000000000000000000000000000c3",
	}
	genPayers   = append(slices.Clone(genActors), "0x00000000000000000000000000000000000000fe")
	genProposer = "0x0000000000000000000000000000000000000099"
)

// generator holds one trace being written.
type generator struct {
	r          *rand.Rand
	opt        GenOptions
	lines      [][]byte
	labels     []labelInfo // every schedule written, bound or not
	nonces     map[string]uint64
	fireCap    uint64 // per-fire cap the trace configured
	laneCycles uint64
}

// labelInfo is what a schedule call was given, enough to derive the id it
// would get, so that later calls can name it by id whether or not the
// schedule succeeded (naming a label never bound is a trace error).
type labelInfo struct {
	actor   string
	height  uint64
	payload []byte
	nonce   uint64
}

func (l labelInfo) id() string {
	var a [20]byte
	hex.Decode(a[:], []byte(l.actor[2:]))
	id := TimerID(a, l.height, l.payload, l.nonce)
	return hexString(id[:])
}

// Generate writes a random small trace (a few blocks, three actors, handler
// scripts with calls, reverts, rollbacks and advances; under the lane also
// fees, funds, agents and system instructions). The same seed and options
// give the same trace. The trace contains no trace error, by construction.
func Generate(seed uint64, opt GenOptions) []byte {
	g := &generator{
		r:       rand.New(rand.NewPCG(seed, 0x7472616365)),
		opt:     opt,
		nonces:  map[string]uint64{},
		fireCap: 550000,
	}
	g.write()
	return bytes.Join(append(g.lines, nil), []byte("\n"))
}

func (g *generator) emit(o ordered) {
	b, err := marshal(o)
	if err != nil {
		panic(err) // only strings, numbers, bools and ordered values are written
	}
	g.lines = append(g.lines, b)
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *generator, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func amount(n uint64) string { return strconv.FormatUint(n, 10) }

// routedPayload is a payload that routes to handler h with "hi".
func routedPayload(h string) []byte {
	return []byte(fmt.Sprintf(`{"_handler":%q,"_payload":"aGk="}`, h))
}

func (g *generator) payload() []byte {
	return pick(g, []byte{}, []byte{1}, []byte{2}, []byte{3}, routedPayload("h1"), routedPayload("h2"))
}

func (g *generator) write() {
	g.config()
	if g.opt.Lane {
		funds := []uint64{0, 1000, 20000, 1000000, 1000000000000, 1000000000000}
		if g.opt.Tight {
			funds = []uint64{0, 1000, 3000, 5000, 8000, 12000, 20000, 30000, 1000000, 1000000000000}
		}
		for _, p := range genPayers {
			if g.chance(0.85) {
				g.emit(ordered{{"op", "fund"}, {"account", p}, {"amount", amount(pick(g, funds...))}})
			}
		}
	}
	g.scripts()
	h := pick[uint64](g, 1, 1, 5)
	var committed []uint64
	nBlocks := 4 + g.r.IntN(7)
	for range nBlocks {
		if g.opt.Lane && g.chance(0.15) {
			g.agent()
		}
		rescript := 0.2
		if g.opt.Tight {
			rescript = 0.7 // scripts change under the timers already scheduled
		}
		if g.chance(rescript) {
			g.scripts()
		}
		g.block(h)
		committed = append(committed, h)
		switch {
		case g.chance(0.1) && len(committed) > 2:
			to := pick(g, committed[:len(committed)-1]...)
			g.emit(ordered{{"op", "rollback"}, {"to", to}})
			for len(committed) > 0 && committed[len(committed)-1] > to {
				committed = committed[:len(committed)-1]
			}
			h = to + 1
		case g.chance(0.15):
			steps := []uint64{1, 2, 3, 4}
			if g.opt.Far {
				steps = []uint64{1, 5, 17, 70, 300, 1100}
			}
			to := h + pick(g, steps...)
			g.emit(ordered{{"op", "advance"}, {"to", to}})
			for x := h + 1; x <= to; x++ {
				committed = append(committed, x)
			}
			h = to + 1
		default:
			h++
		}
	}
	last := uint64(3)
	if g.opt.Far {
		last = 1200
	}
	g.emit(ordered{{"op", "advance"}, {"to", h + last}})
}

func (g *generator) config() {
	cfg := ordered{{"op", "config"}}
	if g.opt.Lane {
		initial := pick[uint64](g, 1, 7, 8, 9, 10, 16, 100, 1000)
		g.laneCycles = pick[uint64](g, 1000, 2000, 3000, 10000)
		g.fireCap = pick(g, 500, 1000, g.laneCycles)
		// gen45 lets the cap exceed the lane now and then (SPEC §12.10
		// allows it since session 45).
		if !g.opt.Tight || g.chance(0.8) {
			g.fireCap = min(g.fireCap, g.laneCycles)
		}
		cfg = append(cfg, field{"policy", "lane"}, field{"lane_timer_cycles", g.laneCycles},
			field{"max_cycles_per_fire_auction_phase", g.fireCap},
			field{"gc_cost_per_timer", pick(g, 1, 100, 5000)},
			field{"timer_gc_cycles", pick(g, 0, 100, 10000, 5000000, 5000000)},
			field{"fairness_window_blocks", pick(g, 1, 2, 3, 5, 1000)},
			field{"max_ttl_blocks", pick(g, 0, 1, 2, 5, 100, 2592000)})
		if g.chance(0.3) {
			cfg = append(cfg, field{"activation_height", pick(g, 2, 3, 4, 6)})
		}
		if g.chance(0.3) {
			floor := pick[uint64](g, 0, 1, 5, 9)
			cfg = append(cfg, field{"min_lane_basefee", amount(floor)})
			// gen45 leaves the initial basefee below the floor half the time.
			if floor > initial && (!g.opt.Tight || g.chance(0.5)) {
				initial = floor
			}
		}
		cfg = append(cfg, field{"initial_lane_basefee", amount(initial)})
		if g.chance(0.3) {
			cfg = append(cfg, field{"priority_tier_multipliers", ordered{
				{"economy", pick(g, 0, 500, 800)}, {"urgent", pick(g, 2500, 3000)}}})
		}
		if g.chance(0.3) {
			cfg = append(cfg, field{"bid_deprecation_blocks", pick(g, 0, 1, 3)})
		}
	}
	if g.chance(0.3) {
		cfg = append(cfg, field{"max_timers_per_actor", pick(g, 1, 2, 3, 5)})
	}
	g.emit(cfg)
}

// feeFields adds random lane fee fields to a schedule for height h; in a
// handler script (h == 0) without expires_at, which is absolute there.
func (g *generator) feeFields(c ordered, h uint64) ordered {
	if !g.opt.Lane {
		return c
	}
	if g.chance(0.4) {
		c = append(c, field{"max_fee_per_cycle", amount(pick[uint64](g, 0, 1, 5, 8, 10, 12, 20, 100, 2000))})
	}
	if g.chance(0.4) {
		c = append(c, field{"max_priority_fee_per_cycle", amount(pick[uint64](g, 0, 1, 2, 3, 5, 10, 50))})
	}
	if g.chance(0.3) {
		c = append(c, field{"priority_tier", pick(g, tierNames[:]...)})
	}
	if g.chance(0.4) {
		c = append(c, field{"gas_limit", pick(g, 0, 100, 200, 300, 500, 700, 1000, g.fireCap, g.fireCap+1)})
	}
	if g.chance(0.25) && h > 0 {
		c = append(c, field{"expires_at", h + pick[uint64](g, 0, 1, 2, 3, 4, 7) - 1}) // h-1 .. h+6
	}
	if g.chance(0.3) {
		c = append(c, field{"fee_payer", pick(g, genPayers...)})
	}
	if g.chance(0.05) {
		c = append(c, field{"bid", "5"})
	}
	return c
}

func (g *generator) anyID() string { return pick(g, g.labels...).id() }

func (g *generator) handlerCalls() []ordered {
	schedule := 0.6
	if g.opt.Tight {
		schedule = 0.35 // more cancels and extends of timers likely due with it
	}
	calls := []ordered{} // [] and not null: calls is an array
	for range pick(g, 0, 0, 1, 1, 2) {
		r := g.r.Float64()
		switch {
		case r < schedule:
			c := ordered{{"call", "schedule"}, {"after", pick(g, 0, 1, 1, 2, 3)}, {"payload", hexString(g.payload())}}
			calls = append(calls, g.feeFields(c, 0))
		case r < 0.85 && len(g.labels) > 0:
			calls = append(calls, ordered{{"call", "cancel"}, {"timer_id", g.anyID()}})
		case g.opt.Lane && len(g.labels) > 0:
			calls = append(calls, ordered{{"call", "extend"}, {"timer_id", g.anyID()}, {"expires_at", pick(g, 5, 10, 20, 200)}})
		}
	}
	return calls
}

func (g *generator) scripts() {
	for _, a := range genActors {
		for _, name := range []string{"h1", "h2", "handle_timer"} {
			if !g.chance(0.4) {
				continue
			}
			o := ordered{{"op", "handler"}, {"actor", a}, {"handler", name},
				{"cycles", pick(g, 0, 10, 100, 300, 500, 600, 1000, 10000, g.fireCap, 550000, 550001)},
				{"calls", g.handlerCalls()}}
			if g.chance(0.2) {
				o = append(o, field{"cells", pick(g, 0, 550000, 550001)})
			}
			if g.chance(0.15) {
				o = append(o, field{"revert", true})
			}
			g.emit(o)
		}
	}
}

func (g *generator) agent() {
	a := pick(g, genActors...)
	if g.chance(0.3) {
		g.emit(ordered{{"op", "gba"}, {"actor", a}, {"max_fee_per_cycle", "default"}})
		return
	}
	g.emit(ordered{{"op", "gba"}, {"actor", a},
		{"max_fee_per_cycle", amount(pick[uint64](g, 5, 10, 50, 2000))},
		{"max_priority_fee_per_cycle", amount(pick[uint64](g, 0, 1, 3, 7))},
		{"tip_per_block_late", amount(pick[uint64](g, 0, 1, 2))}})
}

func (g *generator) block(h uint64) {
	b := ordered{{"op", "block"}, {"height", h}}
	if g.opt.Lane && g.chance(0.5) {
		b = append(b, field{"proposer", pick(g, genProposer, genPayers[0])})
	}
	g.emit(b)
	if g.opt.Lane && g.chance(0.2) {
		// Before the transactions too: a fifo-phase block prints a system
		// cancel's gc event where it happens, a lane block at its end.
		g.system()
	}
	for range pick(g, 0, 1, 1, 2, 3) {
		g.tx(h)
	}
	if g.opt.Lane {
		for range pick(g, 1, 1, 2) {
			if g.chance(0.3) {
				g.system()
			}
		}
	}
	g.emit(ordered{{"op", "end"}})
}

func (g *generator) tx(h uint64) {
	a := pick(g, genActors...)
	g.nonces[a] += pick[uint64](g, 1, 1, 1, 0) // a repeated nonce now and then
	ahead := []uint64{0, 1, 1, 2, 2, 3, 4}
	if g.opt.Far {
		ahead = []uint64{0, 1, 2, 3, 7, 8, 9, 16, 17, 31, 64, 100, 1000}
	}
	calls := []ordered{}
	for range 1 + g.r.IntN(4) {
		r := g.r.Float64()
		switch {
		case r < 0.65 || len(g.labels) == 0:
			info := labelInfo{actor: a, height: h + pick(g, ahead...), payload: g.payload(), nonce: g.nonces[a]}
			c := ordered{{"call", "schedule"}, {"height", info.height}, {"payload", hexString(info.payload)}}
			c = g.feeFields(c, info.height)
			c = append(c, field{"label", fmt.Sprintf("l%d", len(g.labels))})
			g.labels = append(g.labels, info)
			calls = append(calls, c)
		case r < 0.85:
			calls = append(calls, ordered{{"call", "cancel"}, {"timer_id", g.anyID()}})
		case g.opt.Lane:
			l := pick(g, g.labels...)
			calls = append(calls, ordered{{"call", "extend"}, {"timer_id", l.id()},
				{"expires_at", l.height + pick[uint64](g, 0, 1, 2, 4, 11) - 1}}) // height-1 .. height+10
		}
	}
	if g.opt.Lane && g.chance(0.15) {
		g.emit(ordered{{"op", "fund"}, {"account", pick(g, genPayers...)}, {"amount", amount(pick[uint64](g, 1, 500, 100000))}})
	}
	tx := ordered{{"op", "tx"}, {"actor", a}, {"nonce", g.nonces[a]}, {"calls", calls}}
	if g.chance(0.1) {
		tx = append(tx, field{"revert", true})
	}
	g.emit(tx)
}

func (g *generator) system() {
	r := g.r.Float64()
	switch {
	case r < 0.4 && len(g.labels) > 0:
		g.emit(ordered{{"op", "system"}, {"call", "cancel"}, {"timer_id", g.anyID()}})
	case r < 0.7 && len(g.labels) > 0:
		l := pick(g, g.labels...)
		g.emit(ordered{{"op", "system"}, {"call", "extend"}, {"timer_id", l.id()},
			{"expires_at", l.height + pick[uint64](g, 0, 2, 5, 50)}})
	default:
		var upd ordered
		maybe := func(key string, vals ...any) {
			if g.chance(0.4) {
				upd = append(upd, field{key, pick(g, vals...)})
			}
		}
		maybe("lane_timer_cycles", g.laneCycles, 2*g.laneCycles)
		maybe("min_lane_basefee", "1", "9", "20")
		maybe("max_ttl_blocks", 1, 3, 100)
		maybe("fairness_window_blocks", 1, 3)
		maybe("max_cycles_per_fire_auction_phase", 100, g.fireCap)
		maybe("gc_cost_per_timer", 1, 50)
		maybe("timer_gc_cycles", 0, 100, 100000)
		maybe("bid_deprecation_blocks", 0, 5)
		maybe("priority_tier_multipliers", ordered{{"fast", 3000}}, ordered{{"economy", 100}, {"standard", 2000}})
		if len(upd) > 0 {
			g.emit(ordered{{"op", "system"}, {"call", "update_config"}, {"config", upd}})
		}
	}
}
