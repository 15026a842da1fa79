package tracemodel_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/timerlane/timerlane/internal/replay"
	"github.com/timerlane/timerlane/internal/tracemodel"
)

// nRandom's default, 300 traces of each of the five variants, keeps the
// package's tests near 7 s on one core (7.2 s measured with taskset on one
// core, the test binary already built).
var nRandom = flag.Int("tracemodel.n", 300, "random traces of each generator variant in TestMatchesRandomTraces")

// result is what one side printed for a trace: its event lines and, for a
// trace error, the trace line the error names (0 if it names none).
type result struct {
	lines   []string
	err     error
	errLine int
}

// lineRE is FORMAT.md's trace error message, "line N: <what is wrong>".
var lineRE = regexp.MustCompile(`^line (\d+): `)

func newResult(out []byte, err error) result {
	r := result{err: err}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			r.lines = append(r.lines, l)
		}
	}
	if err != nil {
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
			r.errLine, _ = strconv.Atoi(m[1])
		}
	}
	return r
}

func runEngine(trace []byte) result {
	var out bytes.Buffer
	err := replay.Run(bytes.NewReader(trace), &out)
	return newResult(out.Bytes(), err)
}

func runModel(trace []byte) result {
	out, err := tracemodel.Run(trace)
	return newResult(out, err)
}

// event decodes an event line for comparison: every field counts except the
// engine's state root, which the model does not compute.
func event(line string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		return nil, err
	}
	delete(ev, "root")
	return ev, nil
}

// difference describes the first way the engine's result differs from the
// model's, or returns "" when they agree: the same events, field by field,
// and, for a trace error, the same trace line where the engine's message
// names one.
func difference(engine, model result) string {
	for i := range max(len(engine.lines), len(model.lines)) {
		var e, m string
		if i < len(engine.lines) {
			e = engine.lines[i]
		}
		if i < len(model.lines) {
			m = model.lines[i]
		}
		if !sameEvent(e, m) {
			return fmt.Sprintf("output line %d differs\n  engine: %s\n  model:  %s", i+1, orNone(e), orNone(m))
		}
	}
	switch {
	case (engine.err == nil) != (model.err == nil):
		return fmt.Sprintf("only one fails\n  engine: %v\n  model:  %v", engine.err, model.err)
	case engine.err != nil && engine.errLine != 0 && engine.errLine != model.errLine:
		return fmt.Sprintf("they fail on different lines\n  engine: %v\n  model:  %v", engine.err, model.err)
	}
	return ""
}

// sameEvent says whether an engine line and a model line print the same
// event. Most are equal as text once the root is cut; only the others are
// decoded and compared field by field, in any order.
func sameEvent(engine, model string) bool {
	if i := strings.Index(engine, `,"root":"`); i >= 0 {
		if j := strings.IndexByte(engine[i+len(`,"root":"`):], '"'); j >= 0 {
			if engine[:i]+engine[i+len(`,"root":"`)+j+1:] == model {
				return true
			}
		}
	} else if engine == model {
		return true
	}
	ee, errE := event(engine)
	me, errM := event(model)
	return errE == nil && errM == nil && reflect.DeepEqual(ee, me)
}

func orNone(line string) string {
	if line == "" {
		return "(no line)"
	}
	return line
}

func TestMatchesTestdata(t *testing.T) {
	dirs := []struct {
		path     string
		optional bool // the shared conformance traces live outside the repository
	}{
		{"../../testdata/fifo", false},
		{"../../testdata/lane", false},
		{"../../../shared/conformance/fifo", true},
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir.path); dir.optional && errors.Is(err, fs.ErrNotExist) {
			t.Logf("%s does not exist: skipped", dir.path)
			continue
		}
		paths, err := filepath.Glob(filepath.Join(dir.path, "*.trace.jsonl"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no traces in %s (%v)", dir.path, err)
		}
		for _, path := range paths {
			trace, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if d := difference(runEngine(trace), runModel(trace)); d != "" {
				t.Errorf("%s: %s", path, d)
			}
		}
	}
}

// TestMatchesRandomTraces compares the engine and the model on random
// traces of every generator variant. The seeds are fixed, so a run checks the
// same traces every time; a mismatch names its seed, and t.TempDir keeps the
// trace only while the test runs, so the message also says how to write it
// again.
func TestMatchesRandomTraces(t *testing.T) {
	variants := []struct {
		name string
		opt  tracemodel.GenOptions
	}{
		{"fifo", tracemodel.GenOptions{}},
		{"lane", tracemodel.GenOptions{Lane: true}},
		{"lane-tight", tracemodel.GenOptions{Lane: true, Tight: true}},
		{"fifo-far", tracemodel.GenOptions{Far: true}},
		{"lane-far", tracemodel.GenOptions{Lane: true, Far: true}},
	}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			failures := 0
			for i := range *nRandom {
				seed := uint64(vi)<<32 | uint64(i)
				trace := tracemodel.Generate(seed, v.opt)
				engine, model := runEngine(trace), runModel(trace)
				d := difference(engine, model)
				if d == "" && model.err != nil {
					// Both agree, but the comparison of a trace that stops
					// early is a weak one: Generate promises none.
					d = fmt.Sprintf("the generated trace is a trace error: %v", model.err)
				}
				if d == "" {
					continue
				}
				path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.trace.jsonl", v.name, seed))
				if err := os.WriteFile(path, trace, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Errorf("seed %d, trace %s (tracemodel.Generate(%d, %+v) writes it again): %s", seed, path, seed, v.opt, d)
				if failures++; failures == 5 {
					t.Fatalf("stopping after %d mismatches", failures)
				}
			}
		})
	}
}

// TestTraceErrors runs traces that end in a trace error: both sides must
// fail, on the same line, after printing the same events.
func TestTraceErrors(t *testing.T) {
	const (
		a = `"0x00000000000000000000000000000000000000a1"`
		b = `"0x00000000000000000000000000000000000000b2"`
	)
	lines := func(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }
	tests := []struct {
		name  string
		trace []byte
	}{
		{"unknown op", lines(`{"op":"block","height":1}`, `{"op":"nap"}`)},
		{"unknown field", lines(`{"op":"block","height":1,"colour":"red"}`)},
		{"unknown call field", lines(`{"op":"block","height":1}`, `{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"cancel","timer_id":"0x01","extra":1}]}`)},
		{"wrong type", lines(`{"op":"block","height":"1"}`)},
		{"float height", lines(`{"op":"block","height":1.0}`)},
		{"repeated key", lines(`{"op":"block","height":1,"height":1}`)},
		{"amount with a leading zero", lines(`{"op":"config","policy":"lane"}`, `{"op":"fund","account":`+a+`,"amount":"007"}`)},
		{"0X prefix", lines(`{"op":"block","height":1}`, `{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0X01"}]}`)},
		{"not JSON", lines(`# a comment`, ``, `{"op":"block",`)},
		{"config not first", lines(`{"op":"block","height":1}`, `{"op":"end"}`, `{"op":"config"}`)},
		{"bad layout", lines(`{"op":"config","ring_size":6}`)},
		{"lane key under fifo", lines(`{"op":"config","fairness_window_blocks":3}`)},
		{"fee field under fifo", lines(`{"op":"block","height":1}`, `{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":2,"gas_limit":5}]}`)},
		{"gba under fifo", lines(`{"op":"gba","actor":` + a + `,"max_fee_per_cycle":"default"}`)},
		{"block gap", lines(`{"op":"block","height":3}`, `{"op":"end"}`, `{"op":"block","height":5}`)},
		{"block zero", lines(`{"op":"block","height":0}`)},
		{"tx outside a block", lines(`{"op":"tx","actor":` + a + `,"nonce":1,"calls":[]}`)},
		{"advance backwards", lines(`{"op":"block","height":4}`, `{"op":"end"}`, `{"op":"advance","to":4}`)},
		{"advance inside a block", lines(`{"op":"block","height":1}`, `{"op":"advance","to":4}`)},
		{"ends inside a block", lines(`{"op":"block","height":1}`, `{"op":"tx","actor":`+a+`,"nonce":1,"calls":[]}`, `# trailing comment`, ``)},
		{"rollback above the height", lines(`{"op":"block","height":1}`, `{"op":"end"}`, `{"op":"rollback","to":2}`)},
		{"rollback below the first block", lines(`{"op":"block","height":5}`, `{"op":"end"}`, `{"op":"rollback","to":4}`)},
		{"unbound label in a tx, after a call", lines(`{"op":"block","height":1}`,
			`{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":3,"payload":"0x01"},{"call":"cancel","timer":"nope"}]}`)},
		{"label of a failed schedule", lines(`{"op":"block","height":1}`,
			`{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":1,"label":"x"},{"call":"cancel","timer":"x"}]}`)},
		{"unbound label in a fifo handler", lines(
			`{"op":"handler","actor":`+a+`,"handler":"handle_timer","calls":[{"call":"schedule","after":1},{"call":"cancel","timer":"nope"}]}`,
			`{"op":"block","height":1}`,
			`{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x01"},{"call":"schedule","height":2,"payload":"0x02"}]}`,
			`{"op":"end"}`, `{"op":"advance","to":5}`)},
		{"unbound label in a lane handler", lines(`{"op":"config","policy":"lane","gc_cost_per_timer":1}`,
			`{"op":"fund","account":`+a+`,"amount":"1000000000000"}`,
			`{"op":"fund","account":`+b+`,"amount":"1000000000000"}`,
			`{"op":"handler","actor":`+b+`,"handler":"handle_timer","calls":[{"call":"schedule","after":1},{"call":"cancel","timer":"nope"}]}`,
			`{"op":"block","height":1}`,
			// 0x02's payer has no funds: a collection the gc section prints before the fires
			`{"op":"tx","actor":`+a+`,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x01"},{"call":"schedule","height":2,"payload":"0x02","fee_payer":"0x00000000000000000000000000000000000000fe"}]}`,
			`{"op":"tx","actor":`+b+`,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x03"}]}`,
			`{"op":"end"}`, `{"op":"block","height":2}`, `{"op":"end"}`)},
		{"fund past 2^128-1", lines(`{"op":"config","policy":"lane"}`,
			`{"op":"fund","account":`+a+`,"amount":"340282366920938463463374607431768211455"}`,
			`{"op":"fund","account":`+a+`,"amount":"1"}`)},
		{"update of a fixed key", lines(`{"op":"config","policy":"lane"}`, `{"op":"block","height":1}`,
			`{"op":"system","call":"update_config","config":{"initial_lane_basefee":"5"}}`)},
		{"fairness window of 0", lines(`{"op":"config","policy":"lane","fairness_window_blocks":0}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			engine, model := runEngine(tc.trace), runModel(tc.trace)
			if engine.err == nil || model.err == nil {
				t.Errorf("expected a trace error from both\n  engine: %v\n  model:  %v", engine.err, model.err)
			}
			if d := difference(engine, model); d != "" {
				t.Errorf("%s\ntrace:\n%s", d, tc.trace)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	tests := []struct {
		payload string
		routed  bool
		handler string // when routed
		inner   string // when routed
	}{
		{``, false, "", ""},
		{`hello`, false, "", ""},
		{`{"_handler":"h1","_payload":"aGk="}`, true, "h1", "hi"},
		{" \n{\"_payload\":\"aGk=\",\"_handler\":\"h1\",\"x\":[1]}\t", true, "h1", "hi"}, // whitespace, order, extra keys
		{`{"_handler":"","_payload":""}`, true, "", ""},                                  // routes: InvalidHandler is the caller's check
		{`{"\u005fhandler":"h1","_payload":"aGk="}`, true, "h1", "hi"},                   // keys compare after unescaping
		{`{"_handler":"h1","_handler":"h2","_payload":"aGk="}`, true, "h2", "hi"},        // the last value counts
		{`{"_handler":"h1","_handler":7,"_payload":"aGk="}`, false, "", ""},              // ... even when not a string
		{`{"_HANDLER":"h1","_payload":"aGk="}`, false, "", ""},                           // exact key match
		{`{"_handler":null,"_payload":"aGk="}`, false, "", ""},
		{`{"_handler":"h1","_payload":"aGk"}`, false, "", ""},     // not padded
		{`{"_handler":"h1","_payload":"aG k="}`, false, "", ""},   // whitespace
		{`{"_handler":"h1","_payload":"aGk=\n"}`, false, "", ""},  // newline
		{`{"_handler":"h1","_payload":"aGl="}`, true, "h1", "hi"}, // non-zero padding bits are accepted
		{`{"_handler":"h\u00e9","_payload":"aGk="}`, true, "h\u00e9", "hi"},
		{`{"_handler":"\ud800","_payload":"aGk="}`, true, "\ufffd", "hi"}, // a lone surrogate decodes to U+FFFD
		{`{"_handler":"h1","_payload":"aGk="} {}`, false, "", ""},         // two values
		{`[{"_handler":"h1","_payload":"aGk="}]`, false, "", ""},
		{`{"x":{"_handler":"h1","_payload":"aGk="}}`, false, "", ""},                  // only top-level keys count
		{"{\"_handler\":\"h1\",\"_payload\":\"aGk=\",\"x\":\"\xff\"}", false, "", ""}, // not UTF-8
	}
	for _, tc := range tests {
		handler, inner, routed := tracemodel.Route([]byte(tc.payload))
		switch {
		case !tc.routed && (routed || handler != "handle_timer" || string(inner) != tc.payload):
			t.Errorf("Route(%q) = %q, %q, %v; want no routing", tc.payload, handler, inner, routed)
		case tc.routed && (!routed || handler != tc.handler || string(inner) != tc.inner):
			t.Errorf("Route(%q) = %q, %q, %v; want %q, %q", tc.payload, handler, inner, routed, tc.handler, tc.inner)
		}
	}
}

// TestTimerID checks the id derivation against ids the engine printed in
// testdata's expected files.
func TestTimerID(t *testing.T) {
	tests := []struct {
		actor   string
		height  uint64
		payload string
		nonce   uint64
		want    string
		source  string
	}{
		{"00000000000000000000000000000000000000a1", 2, "01", 1,
			"a17e371dc9734c63aa7806a69c6d077792e23993ecd7808a346e4ec214699ba4", "lane/17"},
		{"00000000000000000000000000000000000000a1", 5, "02", 1,
			"1fb4a6c7f95bc75fa94f92931ccca87f9b0940c7bd876a56fd8ed35c8649a013", "lane/17"},
		{"00000000000000000000000000000000000000b2", 5, "03", 1,
			"b870b8ac4a2d8f2746776f8bc545c807e249859a5bbec0ad005756665074c6e7", "lane/17"},
		// scheduled by a handler at block 5 with after 1, nonce 3
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 6, "01", 3,
			"2fc4a3b09fdaa97dcf4d1bb62a7eb39a8aa6db5fcf79b3f99bf345a7f91a24d1", "fifo/12"},
	}
	for _, tc := range tests {
		var actor [20]byte
		if _, err := hex.Decode(actor[:], []byte(tc.actor)); err != nil {
			t.Fatal(err)
		}
		payload, _ := hex.DecodeString(tc.payload)
		id := tracemodel.TimerID(actor, tc.height, payload, tc.nonce)
		if got := hex.EncodeToString(id[:]); got != tc.want {
			t.Errorf("%s: TimerID(0x%s, %d, 0x%s, %d) = 0x%s, want 0x%s", tc.source, tc.actor, tc.height, tc.payload, tc.nonce, got, tc.want)
		}
	}
}

func TestNextBasefee(t *testing.T) {
	u128Max, _ := new(big.Int).SetString("340282366920938463463374607431768211455", 10)
	tests := []struct {
		name          string
		basefee       string
		used, lane    uint64
		floor         uint64
		want          string
		wantIsU128Max bool
	}{
		{name: "empty lane falls an eighth", basefee: "1000", used: 0, lane: 2000000, floor: 1, want: "875"},
		{name: "full lane rises an eighth", basefee: "1000", used: 2000000, lane: 2000000, floor: 1, want: "1125"},
		{name: "at target, unchanged", basefee: "1000", used: 1000000, lane: 2000000, floor: 1, want: "1000"},
		{name: "fall rounds down: 10 to 9", basefee: "10", used: 0, lane: 1000, floor: 1, want: "9"},
		{name: "7 or less does not fall", basefee: "7", used: 0, lane: 1000, floor: 1, want: "7"},
		{name: "a rise is at least 1", basefee: "7", used: 1000, lane: 1000, floor: 1, want: "8"},
		{name: "0 rises to 1", basefee: "0", used: 1, lane: 1, floor: 0, want: "1"},
		{name: "odd lane, above target", basefee: "100", used: 2, lane: 3, floor: 1, want: "112"},
		{name: "odd lane, below target", basefee: "100", used: 1, lane: 3, floor: 1, want: "88"},
		{name: "small over-use is a small rise", basefee: "1000", used: 1001, lane: 2000, floor: 1, want: "1001"},
		{name: "the next floor lifts it", basefee: "10", used: 0, lane: 1000, floor: 20, want: "20"},
		{name: "saturates at 2^128-1", basefee: u128Max.String(), used: 1000, lane: 1000, floor: 1, wantIsU128Max: true},
	}
	for _, tc := range tests {
		b, _ := new(big.Int).SetString(tc.basefee, 10)
		got := tracemodel.NextBasefee(b, tc.used, tc.lane, new(big.Int).SetUint64(tc.floor))
		want := tc.want
		if tc.wantIsU128Max {
			want = u128Max.String()
		}
		if got.String() != want {
			t.Errorf("%s: NextBasefee(%s, %d, %d, %d) = %s, want %s", tc.name, tc.basefee, tc.used, tc.lane, tc.floor, got, want)
		}
	}
}

// TestGenerateIsDeterministic: a seed names one trace, so a failure's seed
// is enough to reproduce it.
func TestGenerateIsDeterministic(t *testing.T) {
	opt := tracemodel.GenOptions{Lane: true, Tight: true}
	if !bytes.Equal(tracemodel.Generate(7, opt), tracemodel.Generate(7, opt)) {
		t.Fatal("Generate(7) gave two traces")
	}
	if bytes.Equal(tracemodel.Generate(7, opt), tracemodel.Generate(8, opt)) {
		t.Fatal("Generate(7) and Generate(8) gave the same trace")
	}
}

// TestIndependent keeps the model independent of what it checks: its own
// files import nothing of this module (doc.go).
func TestIndependent(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, "github.com/timerlane/") {
				t.Errorf("%s imports %s: the model must not share code with the engine", name, path)
			}
		}
	}
}

// FuzzReplayMatchesModel mutates traces, the project's and generated ones,
// and requires the replay and the model to agree on each: the same events
// and, for a trace error, the same line. Traces that reach heights past
// fuzzMaxHeight are skipped: the model runs rollbacks and lane blocks one
// block at a time.
func FuzzReplayMatchesModel(f *testing.F) {
	for _, dir := range []string{"../../testdata/fifo", "../../testdata/lane"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.trace.jsonl"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	for i := range uint64(8) {
		f.Add(tracemodel.Generate(i, tracemodel.GenOptions{Lane: i%2 == 1, Tight: i%4 == 3, Far: i%4 == 2}))
	}
	f.Fuzz(func(t *testing.T, trace []byte) {
		if reachesFar(trace) {
			t.Skip()
		}
		if d := difference(runEngine(trace), runModel(trace)); d != "" {
			t.Fatalf("%s\ntrace:\n%s", d, trace)
		}
	})
}

// fuzzMaxHeight bounds the heights a fuzzed trace may reach.
const fuzzMaxHeight = 2_000

// reachesFar reports whether a block, advance or rollback op of trace
// names a height past fuzzMaxHeight.
func reachesFar(trace []byte) bool {
	for _, line := range bytes.Split(trace, []byte("\n")) {
		var op map[string]json.RawMessage
		if json.Unmarshal(line, &op) != nil {
			continue
		}
		for _, key := range []string{"height", "to"} {
			var n json.Number
			if v, ok := op[key]; ok && json.Unmarshal(v, &n) == nil {
				if f, err := n.Float64(); err == nil && f > fuzzMaxHeight {
					return true
				}
			}
		}
	}
	return false
}

// TestMatchesLaneBacklog compares the two on lane blocks whose due set is
// far larger than the lane: small timers and large ones, tips at random,
// so that the engine's walk takes candidates off a heap and prunes it of
// those the room left cannot hold, which Generate's few timers never
// reach. Variants add a fee payer whose funds run out during the walk
// (collected there), timers of gas limit 0 (the walk then sorts), and
// expiries that a small GC lane collects over several blocks.
func TestMatchesLaneBacklog(t *testing.T) {
	for seed := range uint64(16) {
		trace := laneBacklogTrace(seed)
		if d := difference(runEngine(trace), runModel(trace)); d != "" {
			path := filepath.Join(t.TempDir(), fmt.Sprintf("backlog-%d.trace.jsonl", seed))
			if err := os.WriteFile(path, trace, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Errorf("seed %d, trace %s: %s", seed, path, d)
		}
	}
}

// laneBacklogTrace writes 1,200 timers due at block 2 into a lane of 600 to
// 3,000 cycles: a fifth with gas limits of 5 to 40, the rest 150 to 1,000
// or the lane's size,
// and the blocks 2 to 4 that fire a few each; seed%4 picks the variant.
func laneBacklogTrace(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0xbac106))
	var b bytes.Buffer
	laneCycles := 600 + r.IntN(2401)
	gcCycles := 5000000
	if seed%4 == 3 {
		gcCycles = 300 // three collections a block at the default cost of 100
	}
	fmt.Fprintf(&b, `{"op":"config","policy":"lane","lane_timer_cycles":%d,"max_cycles_per_fire_auction_phase":%d,`+
		`"timer_gc_cycles":%d,"gc_cost_per_timer":100,`+
		`"initial_lane_basefee":"1","min_lane_basefee":"1","max_timers_per_actor":2000}`+"\n", laneCycles, laneCycles, gcCycles)
	const actors, each = 8, 150
	actor := func(a int) string { return fmt.Sprintf("0x%040x", 0xa0+a) }
	const poor = "0x00000000000000000000000000000000000000fe"
	// About the max_cost of one of its timers: some are collected as the
	// block starts, others when earlier fires spent part of the funds.
	fmt.Fprintf(&b, `{"op":"fund","account":"%s","amount":"%d"}`+"\n", poor, 1500+r.IntN(4500))
	for a := range actors {
		fmt.Fprintf(&b, `{"op":"fund","account":"%s","amount":"1000000000"}`+"\n", actor(a))
		fmt.Fprintf(&b, `{"op":"handler","actor":"%s","handler":"handle_timer","cycles":%d}`+"\n", actor(a), r.IntN(60))
	}
	b.WriteString(`{"op":"block","height":1}` + "\n")
	for a := range actors {
		fmt.Fprintf(&b, `{"op":"tx","actor":"%s","nonce":1,"calls":[`, actor(a))
		for k := range each {
			gas := 150 + r.IntN(min(851, laneCycles-149)) // within the per-fire cap
			if r.IntN(5) == 0 {
				gas = 5 + r.IntN(36)
			}
			extra := ""
			switch {
			case seed%4 == 1 && r.IntN(6) == 0:
				extra = `,"fee_payer":"` + poor + `"`
			case seed%4 == 2 && r.IntN(40) == 0:
				gas = 0
			case seed%4 == 3 && r.IntN(4) == 0:
				extra = fmt.Sprintf(`,"expires_at":%d`, 2+r.IntN(2))
			}
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"call":"schedule","height":2,"payload":"0x%04x","gas_limit":%d,"max_fee_per_cycle":"30","max_priority_fee_per_cycle":"%d"%s}`,
				k, gas, r.IntN(21), extra)
		}
		b.WriteString("]}\n")
	}
	b.WriteString(`{"op":"end"}` + "\n")
	for h := 2; h <= 4; h++ {
		fmt.Fprintf(&b, `{"op":"block","height":%d}`+"\n"+`{"op":"end"}`+"\n", h)
	}
	return b.Bytes()
}

// TestMatchesLanePrunes compares the two on blocks built for the walk's
// prune: one that drops every candidate left on the heap, one whose order
// makes many prunes find little to drop (groups, each led by a one-cycle
// timer that fires, of timers that fit only before it), the same with a
// timer of gas limit 1 among large ones (the heap, chosen by counting)
// and with one tip far above the others.
func TestMatchesLanePrunes(t *testing.T) {
	traces := map[string][]byte{
		"prune-all": pruneTrace(1000, []pruneTimer{{gas: 5, tip: 10, n: 100}, {gas: 600, tip: 5, n: 900}}),
		"groups":    pruneTrace(3000, pruneGroups(3000, 40, 300)),
		"gas-1": pruneTrace(1000, append([]pruneTimer{{gas: 1, tip: 1, n: 1}},
			pruneTimer{gas: 700, tip: 3, n: 2000}, pruneTimer{gas: 20, tip: 2, n: 40})),
		"whale": pruneTrace(1000, append([]pruneTimer{{gas: 20, tip: 1 << 40, n: 1}},
			pruneTimer{gas: 700, tip: 3, n: 2000}, pruneTimer{gas: 20, tip: 2, n: 40})),
	}
	for name, trace := range traces {
		if d := difference(runEngine(trace), runModel(trace)); d != "" {
			path := filepath.Join(t.TempDir(), name+".trace.jsonl")
			if err := os.WriteFile(path, trace, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s, trace %s: %s", name, path, d)
		}
	}
}

// pruneTimer is n timers of one gas limit and tip (an int64: a whale's
// tip passes 2^31).
type pruneTimer struct {
	gas int
	tip int64
	n   int
}

// pruneGroups is the groups of TestMatchesLanePrunes in a lane of l
// cycles: each a one-cycle timer and m timers of l - i cycles, the tips
// falling from group to group.
func pruneGroups(l, groups, m int) []pruneTimer {
	var ts []pruneTimer
	for i := range groups {
		tip := int64(2*(groups-i) + 3)
		ts = append(ts, pruneTimer{gas: 1, tip: tip, n: 1}, pruneTimer{gas: l - i, tip: tip - 1, n: m})
	}
	return ts
}

// pruneTrace writes the timers due at block 2 in a lane of l cycles whose
// handlers use one cycle each, and blocks 2 and 3.
func pruneTrace(l int, timers []pruneTimer) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"op":"config","policy":"lane","lane_timer_cycles":%d,"max_cycles_per_fire_auction_phase":%d,`+
		`"initial_lane_basefee":"1","min_lane_basefee":"1","max_timers_per_actor":100000}`+"\n", l, l)
	actor := "0x00000000000000000000000000000000000000a0"
	fmt.Fprintf(&b, `{"op":"fund","account":"%s","amount":"1000000000000000000000"}`+"\n", actor)
	fmt.Fprintf(&b, `{"op":"handler","actor":"%s","handler":"handle_timer","cycles":1}`+"\n", actor)
	b.WriteString(`{"op":"block","height":1}` + "\n")
	fmt.Fprintf(&b, `{"op":"tx","actor":"%s","nonce":1,"calls":[`, actor)
	k := 0
	for _, ts := range timers {
		for range ts.n {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"call":"schedule","height":2,"payload":"0x%06x","gas_limit":%d,"max_fee_per_cycle":"%d","max_priority_fee_per_cycle":"%d"}`,
				k, ts.gas, ts.tip+10, ts.tip)
			k++
		}
	}
	b.WriteString("]}\n" + `{"op":"end"}` + "\n")
	for h := 2; h <= 3; h++ {
		fmt.Fprintf(&b, `{"op":"block","height":%d}`+"\n"+`{"op":"end"}`+"\n", h)
	}
	return b.Bytes()
}
