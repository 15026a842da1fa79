// Package enginemodel is a deliberately simple model of the engine's rules
// (FORMAT.md, docs/SPEC.md) for differential tests and fuzz targets: random
// programs of blocks, user transactions and handler scripts run on the
// engine under any layout and on the model, and their logs must be
// identical. It is test support, not part of the engine.
//
// Programs hold blocks, user transactions (some reverting) and empty-block
// skips, with handlers that schedule, cancel and revert. Every call's
// outcome, every delivery and every block's figures go into a log.
package enginemodel

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/calendar/calendartest"
)

// ---- programs ----

const (
	callSchedule = iota
	callCancel
)

// mCall is one schedule or cancel call.
type mCall struct {
	kind    int
	rel     int64  // schedule: height = current block + rel (clamped to [0, 2^64-1])
	abs     uint64 // schedule: when non-zero, the height itself
	payload []byte
	target  mTarget // cancel
}

// mTarget names the timer a cancel call targets: an id that an earlier
// successful schedule returned (counted from the newest when fromEnd), or a
// fixed id that no schedule returns.
type mTarget struct {
	ref     int
	fromEnd bool
	unknown bool
	id      engine.TimerID
}

type mTx struct {
	actor  int
	nonce  uint64
	calls  []mCall
	revert bool
}

const (
	stepBlock = iota
	stepSkip
)

type mStep struct {
	kind int
	txs  []mTx  // block
	by   uint64 // skip: to the current height + by
}

// mScript is what a fired timer's handler does.
type mScript struct {
	nonce     uint64
	calls     []mCall
	fail      bool // the handler returns an error
	overCycle bool // it uses more cycles than its limit
	overCell  bool // it uses more cells than its limit
}

type Program struct {
	start     uint64 // the first block
	skipFirst bool   // reach start-1 with SkipEmpty before the first block
	steps     []mStep
	// script returns the script of the n-th fire (0-based, in firing order).
	script func(n int) mScript
}

var Actors = []engine.Address{
	{0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa},
	{0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb},
	{19: 1},
	{0: 1},
}

func actorIndex(a engine.Address) int {
	for i, x := range Actors {
		if x == a {
			return i
		}
	}
	return -1
}

func resolveHeight(cur uint64, c mCall) uint64 {
	switch {
	case c.abs != 0:
		return c.abs
	case c.rel < 0:
		return cur - min(cur, uint64(-c.rel))
	case cur > math.MaxUint64-uint64(c.rel):
		return math.MaxUint64
	}
	return cur + uint64(c.rel)
}

func (t mTarget) resolve(ids []engine.TimerID) engine.TimerID {
	if t.unknown || len(ids) == 0 {
		return t.id
	}
	k := t.ref % len(ids)
	if t.fromEnd {
		k = len(ids) - 1 - k
	}
	return ids[k]
}

// ---- the log ----

func logCall(where string, actor int, nonce uint64, k int, c mCall, id engine.TimerID, cost engine.Cost, errName string) string {
	kind := "schedule"
	if c.kind == callCancel {
		kind = "cancel"
	}
	if errName != "" {
		return fmt.Sprintf("%s a%d n%d #%d %s: %s", where, actor, nonce, k, kind, errName)
	}
	if c.kind == callCancel {
		return fmt.Sprintf("%s a%d n%d #%d cancel ok %d/%d", where, actor, nonce, k, cost.Cycles, cost.Cells)
	}
	return fmt.Sprintf("%s a%d n%d #%d schedule ok %x %d/%d", where, actor, nonce, k, id[:6], cost.Cycles, cost.Cells)
}

func logFire(id engine.TimerID, actor int, height, block uint64, handler string, payload []byte) string {
	return fmt.Sprintf("fire %x a%d h%d b%d %q %x", id[:6], actor, height, block, handler, payload)
}

func logTimer(id engine.TimerID, ok bool, actor int, height uint64, handler string, payload []byte) string {
	if !ok {
		return fmt.Sprintf("lookup %x: none", id[:6])
	}
	return fmt.Sprintf("lookup %x: a%d h%d %q %x", id[:6], actor, height, handler, payload)
}

// ---- the model ----

// route is a reference implementation of FORMAT.md's handler routing, built
// on encoding/json with the strict checks the contract adds.
func route(p []byte) (routed bool, handler string, body []byte) {
	t := bytes.Trim(p, " \t\r\n")
	if !utf8.Valid(p) || len(t) == 0 || t[0] != '{' || !json.Valid(p) {
		return false, "", nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return false, "", nil
	}
	hr, ok1 := m["_handler"]
	pr, ok2 := m["_payload"]
	if !ok1 || !ok2 || hr[0] != '"' || pr[0] != '"' {
		return false, "", nil
	}
	var h, b string
	if json.Unmarshal(hr, &h) != nil || json.Unmarshal(pr, &b) != nil {
		return false, "", nil
	}
	if len(b)%4 != 0 || strings.ContainsAny(b, "\r\n") {
		return false, "", nil
	}
	dec, err := base64.StdEncoding.DecodeString(b)
	if err != nil {
		return false, "", nil
	}
	return true, h, dec
}

func TimerID(actor engine.Address, height uint64, payload []byte, nonce uint64) engine.TimerID {
	k := sha3.NewLegacyKeccak256()
	k.Write(actor[:])
	binary.Write(k, binary.BigEndian, height)
	k.Write(payload)
	binary.Write(k, binary.BigEndian, nonce)
	var id engine.TimerID
	k.Sum(id[:0])
	return id
}

type modelTimer struct {
	id      engine.TimerID
	actor   int
	height  uint64
	seq     uint64
	handler string
	body    []byte
}

type modelState struct {
	pending map[engine.TimerID]modelTimer
	count   []int
	seq     uint64
}

func (s *modelState) clone() *modelState {
	c := &modelState{pending: make(map[engine.TimerID]modelTimer, len(s.pending)), count: slices.Clone(s.count), seq: s.seq}
	for k, v := range s.pending {
		c.pending[k] = v
	}
	return c
}

type model struct {
	cfg    engine.Config
	st     *modelState
	height uint64
	ids    []engine.TimerID // every id a schedule returned, in order
	fires  int
	log    []string
}

func (m *model) schedule(actor int, nonce uint64, height uint64, payload []byte) (engine.TimerID, engine.Cost, string) {
	var id engine.TimerID
	if height <= m.height {
		return id, engine.Cost{}, "HeightNotInFuture"
	}
	if len(payload) > int(m.cfg.MaxPayloadBytes) {
		return id, engine.Cost{}, "PayloadTooLarge"
	}
	routed, handler, body := route(payload)
	if routed && (len(handler) == 0 || len(handler) > int(m.cfg.MaxHandlerBytes)) {
		return id, engine.Cost{}, "InvalidHandler"
	}
	if !routed {
		handler, body = engine.DefaultHandler, payload
	}
	if m.st.count[actor] >= int(m.cfg.MaxTimersPerActor) {
		return id, engine.Cost{}, "TooManyTimers"
	}
	id = TimerID(Actors[actor], height, payload, nonce)
	if _, dup := m.st.pending[id]; dup {
		return engine.TimerID{}, engine.Cost{}, "DuplicateTimer"
	}
	m.st.seq++
	m.st.pending[id] = modelTimer{id: id, actor: actor, height: height, seq: m.st.seq, handler: handler, body: slices.Clone(body)}
	m.st.count[actor]++
	return id, engine.Cost{Cycles: m.cfg.ScheduleCycles, Cells: uint64(len(payload))}, ""
}

func (m *model) cancel(actor int, id engine.TimerID) (engine.Cost, string) {
	t, ok := m.st.pending[id]
	if !ok {
		return engine.Cost{}, "UnknownTimer"
	}
	if t.actor != actor {
		return engine.Cost{}, "NotOwner"
	}
	delete(m.st.pending, id)
	m.st.count[actor]--
	return engine.Cost{Cycles: m.cfg.CancelCycles}, ""
}

func (m *model) calls(where string, actor int, nonce uint64, calls []mCall) {
	for k, c := range calls {
		var (
			id   engine.TimerID
			cost engine.Cost
			name string
		)
		if c.kind == callSchedule {
			id, cost, name = m.schedule(actor, nonce, resolveHeight(m.height, c), c.payload)
			if name == "" {
				m.ids = append(m.ids, id)
			}
		} else {
			cost, name = m.cancel(actor, c.target.resolve(m.ids))
		}
		m.log = append(m.log, logCall(where, actor, nonce, k, c, id, cost, name))
	}
}

func (m *model) tx(tx mTx) {
	saved := m.st.clone()
	m.calls("tx", tx.actor, tx.nonce, tx.calls)
	if tx.revert {
		m.st = saved
		m.log = append(m.log, "revert")
	}
}

func (m *model) endBlock(p *Program) {
	var due []modelTimer
	for _, t := range m.st.pending {
		if t.height == m.height {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b modelTimer) int { return cmp.Compare(a.seq, b.seq) })
	for _, t := range due { // all out of the pending set before any fires
		delete(m.st.pending, t.id)
		m.st.count[t.actor]--
	}
	for _, t := range due {
		m.log = append(m.log, logFire(t.id, t.actor, t.height, m.height, t.handler, t.body))
		s := p.script(m.fires)
		m.fires++
		saved := m.st.clone()
		m.calls("handler", t.actor, s.nonce, s.calls)
		reverted := s.fail || s.overCycle || s.overCell
		if reverted {
			m.st = saved
		}
		m.log = append(m.log, fmt.Sprintf("fired %x reverted=%v", t.id[:6], reverted))
	}
	m.log = append(m.log, fmt.Sprintf("block %d fired=%d pending=%d", m.height, len(due), len(m.st.pending)))
}

func (m *model) after() {
	m.log = append(m.log, fmt.Sprintf("height %d pending %d of %v", m.height, len(m.st.pending), m.st.count))
	for k := max(0, len(m.ids)-6); k < len(m.ids); k++ {
		t, ok := m.st.pending[m.ids[k]]
		m.log = append(m.log, logTimer(m.ids[k], ok, t.actor, t.height, t.handler, t.body))
	}
}

func (m *model) block(p *Program, s mStep) {
	m.height++
	for _, tx := range s.txs {
		m.tx(tx)
	}
	m.endBlock(p)
}

func RunModel(cfg engine.Config, p *Program) []string {
	m := &model{cfg: cfg, st: &modelState{pending: map[engine.TimerID]modelTimer{}, count: make([]int, len(Actors))}}
	m.height = p.start - 1
	for _, s := range p.steps {
		if m.height == math.MaxUint64 {
			break
		}
		switch s.kind {
		case stepBlock:
			m.block(p, s)
		case stepSkip:
			to := resolveHeight(m.height, mCall{rel: int64(s.by)})
			for m.height < to {
				next := uint64(math.MaxUint64)
				for _, t := range m.st.pending {
					next = min(next, t.height)
				}
				if next > to {
					m.height = to
					break
				}
				m.height = next - 1
				m.block(p, mStep{})
			}
		}
		m.after()
	}
	return m.log
}

// ---- the engine ----

type engineRunner struct {
	e      *engine.Engine
	cfg    engine.Config
	p      *Program
	ids    []engine.TimerID
	fires  int
	log    []string
	failed error
}

func (r *engineRunner) fail(format string, args ...any) {
	if r.failed == nil {
		r.failed = fmt.Errorf(format, args...)
	}
}

func (r *engineRunner) calls(where string, tx engine.Tx, calls []mCall) {
	actor := actorIndex(tx.Actor())
	for k, c := range calls {
		var (
			id   engine.TimerID
			cost engine.Cost
			err  error
		)
		if c.kind == callSchedule {
			id, cost, err = tx.Schedule(resolveHeight(r.e.Height(), c), c.payload)
			if err == nil {
				r.ids = append(r.ids, id)
			}
		} else {
			cost, err = tx.Cancel(c.target.resolve(r.ids))
		}
		name := engine.ErrorName(err)
		if err != nil && name == "" {
			name = "unexpected error " + err.Error()
		}
		if err != nil && cost != (engine.Cost{}) {
			r.fail("failed call with cost %+v", cost)
		}
		r.log = append(r.log, logCall(where, actor, tx.Nonce(), k, c, id, cost, name))
	}
}

// Execute runs the script of the next fire (engine.Executor).
func (r *engineRunner) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	actor := actorIndex(d.Actor)
	r.log = append(r.log, logFire(d.TimerID, actor, d.Height, d.Block, string(d.Handler), d.Payload))
	switch from, ok := tx.FromTimer(); {
	case !ok || from != d.TimerID:
		r.fail("handler tx FromTimer = %x %v, want %x", from[:4], ok, d.TimerID[:4])
	case tx.Actor() != d.Actor || d.Sender != d.Actor:
		r.fail("handler tx actor %v, sender %v, delivery actor %v", tx.Actor(), d.Sender, d.Actor)
	case d.Origin != [32]byte{}:
		r.fail("origin %x", d.Origin)
	case d.CyclesLimit != r.cfg.CyclesPerFire || d.CellsLimit != r.cfg.CellsPerFire:
		r.fail("limits %d/%d", d.CyclesLimit, d.CellsLimit)
	case d.Block != r.e.Height():
		r.fail("delivery block %d at height %d", d.Block, r.e.Height())
	}
	if _, ok := r.e.Lookup(d.TimerID); ok {
		r.fail("a firing timer is still pending")
	}
	if err := tx.Commit(); !errors.Is(err, engine.ErrHandlerTx) {
		r.fail("handler tx Commit = %v", err)
	}
	s := r.p.script(r.fires)
	r.fires++
	tx.SetNonce(s.nonce)
	r.calls("handler", tx, s.calls)
	u := engine.Usage{Cycles: d.CyclesLimit / 2, Cells: 1}
	if s.overCycle {
		u.Cycles = d.CyclesLimit + 1
	}
	if s.overCell {
		u.Cells = d.CellsLimit + 1
	}
	if s.fail {
		return u, errors.New("script fails")
	}
	return u, nil
}

// Fired logs the outcome of each fire (engine.Observer).
func (r *engineRunner) Fired(d *engine.Delivery, res engine.FireResult) {
	r.log = append(r.log, fmt.Sprintf("fired %x reverted=%v", d.TimerID[:6], res.Reverted))
}

// block runs block h. quiet blocks (the empty blocks of a skip, which the
// engine may stop before at an epoch start) are logged only if they fire.
func (r *engineRunner) block(h uint64, s mStep, quiet bool) error {
	if err := r.e.BeginBlock(h); err != nil {
		return fmt.Errorf("BeginBlock(%d): %v", h, err)
	}
	for _, t := range s.txs {
		tx, err := r.e.Begin(Actors[t.actor], t.nonce)
		if err != nil {
			return fmt.Errorf("Begin: %v", err)
		}
		r.calls("tx", tx, t.calls)
		if t.revert {
			if err := tx.Revert(); err != nil {
				return fmt.Errorf("Revert: %v", err)
			}
			r.log = append(r.log, "revert")
		} else if err := tx.Commit(); err != nil {
			return fmt.Errorf("Commit: %v", err)
		}
		if _, _, err := tx.Schedule(h+1, nil); !errors.Is(err, engine.ErrTxClosed) {
			return fmt.Errorf("Schedule on a closed tx: %v", err)
		}
	}
	res, err := r.e.EndBlock(r)
	if err != nil {
		return fmt.Errorf("EndBlock: %v", err)
	}
	if err := r.e.Commit(); err != nil {
		return fmt.Errorf("Commit: %v", err)
	}
	if res.Height != h || res.Deferred != 0 || res.GC != 0 || res.Pending != r.e.Pending() {
		return fmt.Errorf("block %d: result %+v, Pending %d", h, res, r.e.Pending())
	}
	if !quiet || res.Fired > 0 {
		r.log = append(r.log, fmt.Sprintf("block %d fired=%d pending=%d", h, res.Fired, res.Pending))
	}
	return r.failed
}

// after logs what the model logs after each step and checks the engine's
// own accounting.
func (r *engineRunner) after() error {
	e := r.e
	counts := make([]int, len(Actors))
	sum, withTimers := 0, 0
	for i, a := range Actors {
		counts[i] = e.PendingOf(a)
		sum += counts[i]
		if counts[i] > 0 {
			withTimers++
		}
		if counts[i] > int(r.cfg.MaxTimersPerActor) {
			return fmt.Errorf("actor %d has %d timers, cap %d", i, counts[i], r.cfg.MaxTimersPerActor)
		}
	}
	r.log = append(r.log, fmt.Sprintf("height %d pending %d of %v", e.Height(), e.Pending(), counts))
	st := e.Stats()
	switch {
	case sum != e.Pending() || st.Pending != e.Pending():
		return fmt.Errorf("Pending %d, Stats %d, sum of PendingOf %d", e.Pending(), st.Pending, sum)
	case st.InRing+st.InEpochs+st.InOverflow != e.Pending():
		return fmt.Errorf("tiers hold %d+%d+%d timers, %d pending", st.InRing, st.InEpochs, st.InOverflow, e.Pending())
	case st.Actors < withTimers || r.cfg.RollbackDepth == 0 && st.Actors != withTimers:
		// With rollback on, the records of timers that ended in the last
		// blocks keep their actors too.
		return fmt.Errorf("the actor table holds %d Actors, %d have timers", st.Actors, withTimers)
	}
	for k := max(0, len(r.ids)-6); k < len(r.ids); k++ {
		t, ok := e.Lookup(r.ids[k])
		if ok && t.ID != r.ids[k] {
			return fmt.Errorf("Lookup(%x) returned %x", r.ids[k][:4], t.ID[:4])
		}
		r.log = append(r.log, logTimer(r.ids[k], ok, actorIndex(t.Actor), t.Height, t.Handler, t.Payload))
	}
	return nil
}

func RunEngine(cfg engine.Config, p *Program) ([]string, error) {
	e, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	r := &engineRunner{e: e, cfg: cfg, p: p}
	e.SetObserver(r)
	if p.skipFirst && p.start > 1 {
		if h, err := e.SkipEmpty(p.start - 1); err != nil || h != p.start-1 {
			return r.log, fmt.Errorf("SkipEmpty(%d) before the first block = %d, %v", p.start-1, h, err)
		}
	}
	started := false
	next := func() uint64 {
		if !started && !p.skipFirst {
			return p.start
		}
		return e.Height() + 1
	}
	for i, s := range p.steps {
		if started && e.Height() == math.MaxUint64 || !started && p.start-1 == math.MaxUint64 {
			break
		}
		var err error
		switch s.kind {
		case stepBlock:
			err = r.block(next(), s, false)
			started = true
		case stepSkip:
			from := e.Height()
			if !started && !p.skipFirst {
				from = p.start - 1
				if from > 0 {
					if _, err := e.SkipEmpty(from); err != nil {
						return r.log, err
					}
				}
				started = true
			}
			to := resolveHeight(from, mCall{rel: int64(s.by)})
			for err == nil && e.Height() < to {
				var h uint64
				h, err = e.SkipEmpty(to)
				switch {
				case err != nil:
				case h < from || h > to:
					err = fmt.Errorf("SkipEmpty(%d) from %d reached %d", to, from, h)
				case h < to:
					err = r.block(h+1, mStep{}, true)
				}
			}
			started = true
		}
		if err == nil {
			err = r.after()
		}
		if err != nil {
			return r.log, fmt.Errorf("step %d: %v", i, err)
		}
	}
	return r.log, r.failed
}

// ---- random programs ----

type gen struct {
	rng *rand.Rand
	cfg engine.Config
}

// payload draws from plain bytes (few values, so that ids collide), routing
// payloads with valid and invalid handlers and bodies, and near-misses of
// the routing rules.
func (g *gen) payload() []byte {
	r := g.rng
	switch r.IntN(10) {
	case 0, 1:
		return nil
	case 2, 3:
		p := make([]byte, 1+r.IntN(3))
		for i := range p {
			p[i] = byte(1 + r.IntN(3))
		}
		return p
	case 4:
		p := make([]byte, r.IntN(int(min(g.cfg.MaxPayloadBytes, 200))+3))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	return routingPayload(r, int(g.cfg.MaxHandlerBytes))
}

func routingPayload(r *rand.Rand, maxHandler int) []byte {
	handlers := []string{"tick", "h", "", "handle_timer", "αβγ", "a\"b\\c", "\x01ctl", "<&>", strings.Repeat("x", maxHandler), strings.Repeat("y", maxHandler+1), strings.Repeat("é", maxHandler/2+1)}
	h := handlers[r.IntN(len(handlers))]
	body := make([]byte, r.IntN(7))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	b64 := base64.StdEncoding.EncodeToString(body)
	switch r.IntN(12) {
	case 0:
		b64 = strings.TrimRight(b64, "=") // unpadded
	case 1:
		if len(b64) > 0 {
			b64 = b64[:1] + "\n" + b64[1:] // a newline: lenient decoders skip it
		}
	case 2:
		b64 = b64 + " "
	case 3:
		b64 = "===="
	case 4:
		b64 = "ab-_" // URL alphabet
	case 5:
		b64 = []string{"AB==", "AAB=", "QUJD", "Q===", "=AAA", "A=AA"}[r.IntN(6)] // non-canonical bits, misplaced '='
	}
	hj, _ := json.Marshal(h)
	pj, _ := json.Marshal(b64)
	var s string
	switch r.IntN(26) {
	case 0:
		s = fmt.Sprintf(`{"_payload":%s,"_handler":%s}`, pj, hj)
	case 1:
		s = fmt.Sprintf(" \n{\"_handler\": %s , \"_payload\" : %s}\t\r\n", hj, pj)
	case 2:
		s = fmt.Sprintf(`{"x":[1,{"_handler":"no"}],"_handler":%s,"y":null,"_payload":%s,"z":{"a":"}"}}`, hj, pj)
	case 3:
		s = fmt.Sprintf(`{"_handler":1,"_payload":%s,"_handler":%s}`, pj, hj) // the last repeat counts
	case 4:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s,"_handler":true}`, hj, pj)
	case 5:
		s = fmt.Sprintf(`{"_handler":%s}`, hj)
	case 6:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s} {}`, hj, pj)
	case 7:
		s = fmt.Sprintf(`[{"_handler":%s,"_payload":%s}]`, hj, pj)
	case 8:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s,"bad":"\xff"}`, hj, pj)
	case 9:
		s = fmt.Sprintf(`{"\u005fhandler":%s,"_payload":%s}`, hj, pj)
	case 10:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s,}`, hj, pj)
	case 11:
		s = fmt.Sprintf(`{"n":[-0,1E+2,0.5e-3,[[[{"k":[true,false,null]}]]]],"_handler":%s,"_payload":%s}`, hj, pj)
	case 12:
		bad := []string{"01", "+1", ".5", "1.", "tru", "nul", "-", "1e", "[1,]", "\"a\t\"", `"\x"`, `"\u12"`, "{}}", "NaN"}
		s = fmt.Sprintf(`{"v":%s,"_handler":%s,"_payload":%s}`, bad[r.IntN(len(bad))], hj, pj)
	case 13:
		s = fmt.Sprintf(`{"_handler":"h\/x\u00e9\ud83d\ude00","_payload":%s}`, pj)
	case 14:
		s = fmt.Sprintf(`{"_handler":"\ud800","_payload":%s}`, pj) // a lone surrogate
	case 15:
		s = fmt.Sprintf(`{"_handler ":%s,"_payload":%s}`, hj, pj)
	case 16:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":"%s"}`, hj, strings.ReplaceAll(b64, "A", `\u0041`))
	case 17:
		s = fmt.Sprintf("{\"_handler\":%s,\"_payload\":%s}\x00", hj, pj)
	case 18:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s`, hj, pj)
	case 19:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s,"_payload":%s}`, hj, pj, pj)
	default:
		s = fmt.Sprintf(`{"_handler":%s,"_payload":%s}`, hj, pj)
	}
	return []byte(s)
}

func (g *gen) call(inHandler bool) mCall {
	r := g.rng
	if r.IntN(100) < 35 {
		t := mTarget{ref: r.IntN(1 << 20), fromEnd: r.IntN(2) == 0}
		if t.fromEnd {
			t.ref = r.IntN(5)
		}
		if r.IntN(7) == 0 {
			t.unknown = true
			t.id[0], t.id[31] = byte(r.Uint32()), 0x5a
		}
		return mCall{kind: callCancel, target: t}
	}
	c := mCall{kind: callSchedule, payload: g.payload()}
	switch x := r.IntN(100); {
	case x < 8:
		c.rel = 0
	case x < 12:
		c.rel = -1 - r.Int64N(3)
	case x < 50:
		c.rel = 1 + r.Int64N(4)
	case x < 75:
		c.rel = 5 + r.Int64N(40)
	case x < 90:
		c.rel = 45 + r.Int64N(3000)
	case x < 95 && !inHandler:
		c.abs = 1_000_000 + r.Uint64N(1<<40)
	case x < 97 && !inHandler:
		c.abs = math.MaxUint64 - r.Uint64N(4)
	default:
		c.rel = 1 + r.Int64N(2)
	}
	return c
}

func (g *gen) calls(inHandler bool, n int) []mCall {
	out := make([]mCall, n)
	for i := range out {
		out[i] = g.call(inHandler)
		if i > 0 && g.rng.IntN(8) == 0 {
			out[i] = out[i-1] // the same call again: DuplicateTimer or a second cancel
		}
	}
	return out
}

func (g *gen) nonce() uint64 {
	if g.rng.IntN(4) == 0 {
		return g.rng.Uint64()
	}
	return uint64(g.rng.IntN(3))
}

// GenProgram draws a program of steps steps from r; the handler scripts
// are drawn from PCG streams of scriptSeed.
func GenProgram(r *rand.Rand, scriptSeed uint64, cfg engine.Config, steps int) *Program {
	g := &gen{rng: r, cfg: cfg}
	p := &Program{start: []uint64{1, 2, 1000, 1<<40 + 17}[r.IntN(4)], skipFirst: r.IntN(2) == 0}
	for range steps {
		if r.IntN(100) < 12 {
			by := 1 + r.Uint64N(30)
			if r.IntN(4) == 0 {
				by = 100 + r.Uint64N(5000)
			}
			p.steps = append(p.steps, mStep{kind: stepSkip, by: by})
			continue
		}
		var s mStep
		for range r.IntN(4) {
			s.txs = append(s.txs, mTx{actor: r.IntN(len(Actors)), nonce: g.nonce(), calls: g.calls(false, 1+r.IntN(4)), revert: r.IntN(5) == 0})
		}
		p.steps = append(p.steps, s)
	}
	p.script = func(n int) mScript {
		g := &gen{rng: rand.New(rand.NewPCG(scriptSeed, uint64(n)+2)), cfg: cfg}
		r := g.rng
		s := mScript{nonce: uint64(r.IntN(3)), fail: r.IntN(8) == 0, overCycle: r.IntN(25) == 0, overCell: r.IntN(25) == 0}
		if r.IntN(2) == 0 {
			s.calls = g.calls(true, 1+r.IntN(3))
		}
		return s
	}
	return p
}

var Layouts = [][3]uint64{{2, 1, 1}, {2, 2, 1}, {4, 2, 2}, {8, 3, 2}, {16, 8, 3}, {64, 64, 1}, {4096, 1024, 64}}

func WithLayout(cfg engine.Config, l [3]uint64) engine.Config {
	cfg.RingSize, cfg.EpochLength, cfg.EpochCount = l[0], l[1], l[2]
	return cfg
}

// Diff names the first entry where the model's log a and the engine's
// log b differ, or is "".
func Diff(a, b []string) string { return calendartest.DiffLogs(a, b) }
