package fuzz

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/calendar"
	"github.com/timerlane/timerlane/internal/calendar/calendartest"
	"github.com/timerlane/timerlane/internal/enginemodel"
	"github.com/timerlane/timerlane/internal/replay"
	"github.com/timerlane/timerlane/internal/trace"
)

// byteSource is a rand.Source that takes its choices from fuzz input: each
// Uint64 takes one byte for its top 8 bits (so that IntN(n) for small n is
// about byte*n/256) and fills the rest from a fixed PCG stream, which also
// takes over when the input runs out.
type byteSource struct {
	data []byte
	pcg  *rand.PCG
}

func newSource(data []byte) *rand.Rand {
	return rand.New(&byteSource{data: data, pcg: rand.NewPCG(0x7a11, uint64(len(data)))})
}

func (s *byteSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.pcg.Uint64()
	}
	b := s.data[0]
	s.data = s.data[1:]
	return uint64(b)<<56 | s.pcg.Uint64()>>8
}

// ---- FuzzTierMigration ----

var fuzzLayouts = []calendar.Layout{
	{RingSize: 2, EpochLength: 1, EpochCount: 1},
	{RingSize: 4, EpochLength: 2, EpochCount: 2},
	{RingSize: 16, EpochLength: 8, EpochCount: 3},
	{RingSize: 4096, EpochLength: 1024, EpochCount: 64},
}

// FuzzTierMigration: the first bytes choose a layout (ring 2..512, any
// epoch length and count 1..9), the scale of the heights and where the
// queue starts (at 0, mid-range, or close enough to 2^64-1 to reach it);
// the rest drive inserts, removes, steps, NextAfter jumps and big advances,
// checked against the model at every step. The same calendartest.Program then runs
// under a second, fixed layout and must deliver the same.
func FuzzTierMigration(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{3, 2, 1, 1, 10, 200, 30, 100, 150, 250, 90, 10})
	f.Add([]byte{8, 255, 8, 2, 0, 50, 100, 150, 200, 250, 255, 0, 128})
	f.Add([]byte{1, 0, 0, 6, 230, 240, 250, 10, 20, 200, 220, 240, 180, 170})
	f.Add(bytes.Repeat([]byte{7, 77, 177}, 40))
	f.Fuzz(fuzzTier)
}

func fuzzTier(t *testing.T, data []byte) {
	if len(data) < 4 {
		return
	}
	r := uint64(2) << (data[0] % 9)
	l := calendar.Layout{RingSize: r, EpochLength: 1 + uint64(data[1])%r, EpochCount: 1 + uint64(data[2])%9}
	scale := []uint64{4, 40, 300, 5000}[data[3]%4]
	p := calendartest.Program{Ops: min(600, 20+3*len(data)), Scale: scale, Limit: math.MaxUint64 - 1<<20}
	switch data[3] / 4 % 3 {
	case 1:
		p.Base = 1<<33 + uint64(data[3])
	case 2:
		p.Base, p.Limit = math.MaxUint64-4*scale-20, math.MaxUint64
	}
	log, err := p.RunWith(l, newSource(data[4:]))
	if err != nil {
		t.Fatalf("layout %+v: %v", l, err)
	}
	other := fuzzLayouts[data[0]%byte(len(fuzzLayouts))]
	log2, err := p.RunWith(other, newSource(data[4:]))
	if err != nil {
		t.Fatalf("layout %+v: %v", other, err)
	}
	if d := calendartest.DiffLogs(log, log2); d != "" {
		t.Fatalf("layouts %+v and %+v differ at %s", l, other, d)
	}
}

// ---- FuzzEngineOps ----

// FuzzEngineOps: the first bytes choose the limits and two layouts; the
// rest drive a calendartest.Program of blocks, transactions (schedule and cancel calls,
// reverts) and skips, with handlers that schedule, cancel, fail and overrun
// their limits. Both layouts and the model must log the same outcomes.
func FuzzEngineOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 6})
	f.Add([]byte{2, 0, 1, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{1, 4, 3, 5, 200, 100, 50, 25, 12, 6, 3, 1, 255, 128, 64, 32, 16, 8, 4, 2})
	f.Add(bytes.Repeat([]byte{0x42, 0x99, 0x07, 0xe0}, 30))
	f.Add(bytes.Repeat([]byte{3, 250, 90}, 50))
	f.Fuzz(fuzzEngine)
}

func fuzzEngine(t *testing.T, data []byte) {
	if len(data) < 4 {
		return
	}
	cfg := engine.DefaultConfig()
	cfg.MaxTimersPerActor = []uint32{1, 2, 3, 1024}[data[0]%4]
	cfg.MaxHandlerBytes = []uint32{6, 12, 256}[data[1]%3]
	cfg.MaxPayloadBytes = []uint32{48, 64, 1 << 20}[data[1]/3%3]
	cfg.RollbackDepth = []uint64{0, 3, engine.DefaultRollbackDepth}[data[0]/4%3]
	la := enginemodel.Layouts[int(data[2])%len(enginemodel.Layouts)]
	lb := enginemodel.Layouts[int(data[3])%len(enginemodel.Layouts)]
	if la == lb {
		lb = enginemodel.Layouts[(int(data[3])+1)%len(enginemodel.Layouts)]
	}
	h := fnv.New64a()
	h.Write(data)
	p := enginemodel.GenProgram(newSource(data[4:]), h.Sum64(), cfg, min(80, 4+len(data)/4))
	want := enginemodel.RunModel(cfg, p)
	for _, l := range [][3]uint64{la, lb} {
		got, err := enginemodel.RunEngine(enginemodel.WithLayout(cfg, l), p)
		if d := enginemodel.Diff(want, got); d != "" || err != nil {
			t.Fatalf("layout %v, limits %d/%d/%d: err %v; logs differ at %s", l, cfg.MaxTimersPerActor, cfg.MaxHandlerBytes, cfg.MaxPayloadBytes, err, d)
		}
	}
}

// ---- FuzzTraceParser ----

// errOutputLimit stops a replay that has printed enough: a trace may
// legitimately run for ever (a handler that reschedules itself, advanced
// to 2^62).
var errOutputLimit = errors.New("output limit")

type limitWriter struct {
	buf bytes.Buffer
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		panic(errOutputLimit)
	}
	return w.buf.Write(p)
}

// tooBig reports whether the trace's config asks for tiers so large that
// replaying would only measure the machine: ring_size up to 2^24 is valid,
// and a replay allocates its buckets (32 bytes each) and the stage's (one
// per height of an epoch) up front. An epoch_length set without a
// ring_size sets the ring to the power of two at or above it (replay's
// defaultLayout): an epoch_length near 2^59 alone made a ring of 2^24
// buckets and the stage's 2^24, 1.4 GB an execution, which the fuzzing
// engine's minimizer did not survive. Up to 2^13 of either still runs (a
// queue of 3 MB): the seed with epoch_length 5000 has a ring of 8192.
func tooBig(data []byte) bool {
	op, err := trace.NewReader(bytes.NewReader(data)).Next()
	if err != nil || op.Kind != "config" {
		return false
	}
	ints := op.Config.Ints
	return ints["ring_size"] > 1<<13 || ints["epoch_length"] > 1<<13 || ints["epoch_count"] > 1<<10
}

func checkTraceError(t *testing.T, what string, err error, lines int) {
	t.Helper()
	var te *trace.Error
	if !errors.As(err, &te) {
		t.Fatalf("%s: error %T %q is not a *trace.Error", what, err, err)
	}
	if te.Line < 1 || te.Line > lines+1 {
		t.Fatalf("%s: error on line %d of a %d-line trace: %v", what, te.Line, lines, err)
	}
}

// FuzzTraceParser feeds arbitrary bytes to the trace reader and to replay:
// neither may panic, every error is a *trace.Error naming a line of the
// input, every line replay prints is one JSON object, and a second replay
// prints the same.
func FuzzTraceParser(f *testing.F) {
	for _, s := range []string{
		"",
		"\n\n# comment only\n",
		`{"op":"block","height":1}` + "\n" + `{"op":"end"}`,
		`{"op":"config","ring_size":2,"epoch_length":1,"epoch_count":1,"max_timers_per_actor":2}` + "\n" +
			`{"op":"block","height":5}` + "\n" +
			`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":7,"payload":"0x01","label":"t"},{"call":"cancel","timer":"t"},{"call":"schedule","height":9}],"revert":false}` + "\n" +
			`{"op":"end"}` + "\n" + `{"op":"advance","to":20}`,
		`{"op":"handler","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","handler":"tick","cycles":5,"calls":[{"call":"schedule","after":1,"payload":"0x7b225f68616e646c6572223a227469636b222c225f7061796c6f6164223a22227d"}]}` + "\n" +
			`{"op":"block","height":1}` + "\n" +
			`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x7b225f68616e646c6572223a227469636b222c225f7061796c6f6164223a22227d"}]}` + "\n" +
			`{"op":"end"}` + "\n" + `{"op":"advance","to":4611686018427387904}`,
		`{"op":"block","height":1,"height":2}`,
		`{"op":"handler","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","handler":"handle_timer","calls":[{"call":"schedule","after":1,"label":"h"},{"call":"cancel","timer":"t"}]}` + "\n" +
			`{"op":"block","height":1}` + "\n" +
			`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"label":"t"},{"call":"schedule","height":3,"label":"t"}]}` + "\n" +
			`{"op":"end"}` + "\n" + `{"op":"advance","to":6}` + "\n" + `{"op":"rollback","to":2}` + "\n" +
			`{"op":"advance","to":4}` + "\n" + `{"op":"rollback","to":3}` + "\n" + `{"op":"advance","to":8}`,
		`{"op":"tx","actor":"0x00","nonce":-1,"calls":{}}`,
		`{"op":"block","height":9223372036854775808}`,
		`{"op":"config","policy":"lane","initial_lane_basefee":"1","priority_tier_multipliers":{"fast":2}}`,
		`{"op":"config","policy":"lane","activation_height":2,"lane_timer_cycles":300000,"timer_gc_cycles":5000,"gc_cost_per_timer":5000}` + "\n" +
			`{"op":"fund","account":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","amount":"100000000"}` + "\n" +
			`{"op":"gba","actor":"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","max_fee_per_cycle":"50","max_priority_fee_per_cycle":"2","tip_per_block_late":"1"}` + "\n" +
			`{"op":"block","height":1,"proposer":"0xcccccccccccccccccccccccccccccccccccccccc"}` + "\n" +
			`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":3,"label":"a","gas_limit":200000,"expires_at":5,"max_fee_per_cycle":"40","max_priority_fee_per_cycle":"90","priority_tier":"urgent","bid":"1"},{"call":"extend","timer":"a","expires_at":6}]}` + "\n" +
			`{"op":"tx","actor":"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","nonce":1,"calls":[{"call":"schedule","height":3,"fee_payer":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}` + "\n" +
			`{"op":"end"}` + "\n" + `{"op":"block","height":2}` + "\n" +
			`{"op":"system","call":"update_config","config":{"max_cycles_per_fire_auction_phase":100000,"priority_tier_multipliers":{"urgent":3000}}}` + "\n" +
			`{"op":"system","call":"cancel","timer_id":"0x01"}` + "\n" + `{"op":"end"}` + "\n" + `{"op":"advance","to":9}`,
		`{"op":"handler","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","handler":"\u0001\"","calls":[]}`,
		`{"op":"block","height":1}` + "\n" + `{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x7b225f68616e646c6572223a225c7530303031225c5c222c225f7061796c6f6164223a22227d"}]}` + "\n" + `{"op":"end"}` + "\n" + `{"op":"block","height":2}` + "\n" + `{"op":"end"}`,
		"{\"op\":\"end\"}\r\n\xff\xfe",
		`{"op":"config","ring_size":2}` + "\n" + `{"op":"advance","to":3}`,
		`{"op":"config","epoch_length":5000,"max_handler_bytes":9223372036854775807}` + "\n" + `{"op":"block","height":1}` + "\n" + `{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x7b225f68616e646c6572223a227469636b222c225f7061796c6f6164223a22227d"}]}` + "\n" + `{"op":"end"}` + "\n" + `{"op":"advance","to":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		r := trace.NewReader(bytes.NewReader(data))
		prev := 0
		for {
			op, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				checkTraceError(t, "Next", err, lines)
				break
			}
			if op.Line <= prev || op.Line > lines {
				t.Fatalf("op %q on line %d after line %d of %d", op.Kind, op.Line, prev, lines)
			}
			prev = op.Line
		}
		if tooBig(data) {
			return
		}
		w := &limitWriter{max: 256 << 10}
		limited, err := runReplay(data, w)
		if limited {
			return
		}
		if err != nil {
			checkTraceError(t, "replay.Run", err, lines)
		}
		// The same trace gives the same output, and stops on the same line.
		w2 := &limitWriter{max: w.max}
		if _, err2 := runReplay(data, w2); !bytes.Equal(w.buf.Bytes(), w2.buf.Bytes()) || (err == nil) != (err2 == nil) || errLine(err) != errLine(err2) {
			t.Fatalf("two replays differ: %v / %v\n%s\n----\n%s", err, err2, w.buf.Bytes(), w2.buf.Bytes())
		}
		sc := bufio.NewScanner(&w.buf)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("replay printed a line that is not a JSON object: %q: %v", sc.Bytes(), err)
			}
			if _, ok := m["ev"]; !ok {
				t.Fatalf("event without ev: %q", sc.Bytes())
			}
		}
	})
}

func errLine(err error) int {
	var te *trace.Error
	if errors.As(err, &te) {
		return te.Line
	}
	return 0
}

// runReplay runs replay.Run, telling whether it was stopped by the output
// limit; any other panic propagates and fails the fuzz target.
func runReplay(data []byte, w *limitWriter) (limited bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != errOutputLimit {
				panic(p)
			}
			limited = true
		}
	}()
	return false, replay.Run(bytes.NewReader(data), w)
}

// TestReplayErrorDeterministic: the same bad trace gives the same error
// line on every run.
func TestReplayErrorDeterministic(t *testing.T) {
	trace := []byte(`{"op":"config","ring_size":3,"epoch_length":0,"epoch_count":0}`)
	first := replay.Run(bytes.NewReader(trace), io.Discard)
	if first == nil {
		t.Fatal("a layout out of bounds accepted")
	}
	for range 50 {
		if err := replay.Run(bytes.NewReader(trace), io.Discard); err == nil || err.Error() != first.Error() {
			t.Fatalf("errors differ between runs: %q, then %q", first, err)
		}
	}
}
