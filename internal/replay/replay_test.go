package replay

import (
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/timerlane/timerlane/internal/trace"
)

// TestScriptErrorStopsTheOutput: a handler script's trace error (a label
// never bound) stops the replay at that call (FORMAT.md: "the replay stops
// ... Events already printed stay printed"): the fire line of its timer
// and the calls before the failing one are the last events; the timer
// due after it in the same block, and the block line, are not printed.
func TestScriptErrorStopsTheOutput(t *testing.T) {
	const a, b = `"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"`
	// Under fifo B's timer fires after A's and must not show; under the
	// lane it fires first (equal priority, lower timer_id).
	for _, c := range []struct {
		config string
		fires  int
	}{{"", 1}, {`{"op":"config","policy":"lane"}` + "\n" +
		`{"op":"fund","account":` + a + `,"amount":"1000000000000000"}` + "\n" + `{"op":"fund","account":` + b + `,"amount":"1000000000000000"}` + "\n", 2}} {
		config := c.config
		tr := config + `{"op":"handler","actor":` + a + `,"handler":"handle_timer","calls":[{"call":"schedule","after":1,"payload":"0x55"},{"call":"cancel","timer":"nope"}]}` + "\n" +
			"{\"op\":\"block\",\"height\":1}\n" +
			`{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2}]}` + "\n" +
			`{"op":"tx","actor":` + b + `,"nonce":1,"calls":[{"call":"schedule","height":2}]}` + "\n" +
			"{\"op\":\"end\"}\n{\"op\":\"block\",\"height\":2}\n{\"op\":\"end\"}\n"
		var out strings.Builder
		err := Run(strings.NewReader(tr), &out)
		var te *trace.Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), `label "nope" was never bound`) {
			t.Fatalf("err = %v, want the script's trace error", err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		n := len(lines)
		fireA := n >= 2 && strings.HasPrefix(lines[n-2], `{"ev":"fire","height":2,`) && strings.Contains(lines[n-2], `"actor":"0xaaaa`)
		callA := strings.HasPrefix(lines[n-1], `{"ev":"call","height":2,`) && strings.Contains(lines[n-1], `"from_timer"`)
		if !fireA || !callA || strings.Count(out.String(), `"ev":"fire"`) != c.fires {
			t.Fatalf("printed\n%s\nwant A's fire and its first call last, no block line for block 2", out.String())
		}
	}
}

// TestScriptErrorAfterACollection: a lane block whose GC lane collects a
// timer and whose first fire's script meets a trace error prints the gc
// event, then the fire, and stops: the fires the replay holds behind the
// block's gc section (a collection may come after fires) are printed in
// that order when it stops too.
func TestScriptErrorAfterACollection(t *testing.T) {
	const a, b = `"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"`
	tr := `{"op":"config","policy":"lane","initial_lane_basefee":"1"}` + "\n" +
		`{"op":"fund","account":` + a + `,"amount":"1000000000"}` + "\n" + // b has nothing: its timer is collected
		`{"op":"handler","actor":` + a + `,"handler":"handle_timer","calls":[{"call":"cancel","timer":"nope"}]}` + "\n" +
		"{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2}]}` + "\n" +
		`{"op":"tx","actor":` + b + `,"nonce":1,"calls":[{"call":"schedule","height":2}]}` + "\n" +
		"{\"op\":\"end\"}\n{\"op\":\"block\",\"height\":2}\n{\"op\":\"end\"}\n"
	var out strings.Builder
	if err := Run(strings.NewReader(tr), &out); err == nil || !strings.Contains(err.Error(), `label "nope" was never bound`) {
		t.Fatalf("err = %v, want the script's trace error", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if n := len(lines); n < 2 || !strings.HasPrefix(lines[n-2], `{"ev":"gc","height":2,`) || !strings.HasPrefix(lines[n-1], `{"ev":"fire","height":2,`) {
		t.Fatalf("the output ends\n%s\nwant the gc event, then the fire", strings.Join(lines[max(0, len(lines)-2):], "\n"))
	}
}

// TestEmptyLabel: "" is a label like any other: a schedule binds it and a
// cancel names it.
func TestEmptyLabel(t *testing.T) {
	tr := "{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"label":""},{"call":"cancel","timer":""}]}` +
		"\n{\"op\":\"end\"}\n"
	var out strings.Builder
	if err := Run(strings.NewReader(tr), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"index":1,"call":"cancel","ok":true`) || !strings.Contains(out.String(), `"pending":0`) {
		t.Fatalf("the cancel of label \"\" did not cancel:\n%s", out.String())
	}
}

// TestFundUnderFifo: fund has no effect under fifo (FORMAT.md), so balances
// that would pass 2^128-1 are no error there; under the lane they are.
func TestFundUnderFifo(t *testing.T) {
	const funds = `{"op":"fund","account":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","amount":"340282366920938463463374607431768211455"}` + "\n" +
		`{"op":"fund","account":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","amount":"1"}` + "\n"
	if err := Run(strings.NewReader(funds), io.Discard); err != nil {
		t.Fatalf("fifo: %v", err)
	}
	err := Run(strings.NewReader(`{"op":"config","policy":"lane"}`+"\n"+funds), io.Discard)
	var te *trace.Error
	if !errors.As(err, &te) || te.Line != 3 {
		t.Fatalf("lane: err = %v, want a trace error on line 3", err)
	}
}

// TestBeyondStorageBounds: values FORMAT.md allows above what the engine
// stores run as the engine's largest where no event can tell (a layout;
// 2^32 timers per actor), identically, roots included; a max_payload_bytes
// above the largest payload stored runs too, and only a payload between
// the two is a trace error, which names both.
func TestBeyondStorageBounds(t *testing.T) {
	const body = "{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":3,"payload":"0x0102"},{"call":"schedule","height":2000000,"payload":"0x03"}]}` +
		"\n{\"op\":\"end\"}\n{\"op\":\"advance\",\"to\":2000001}\n"
	run := func(config string) string {
		var out strings.Builder
		if err := Run(strings.NewReader(config+"\n"+body), &out); err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		return out.String()
	}
	beyond := run(`{"op":"config","ring_size":1073741824,"epoch_length":1048576,"epoch_count":2097152,"max_timers_per_actor":1099511627776,"max_payload_bytes":2097152,"max_handler_bytes":9223372036854775807}`)
	largest := run(`{"op":"config","ring_size":16777216,"epoch_length":1048576,"epoch_count":1048576,"max_timers_per_actor":4294967295,"max_payload_bytes":1048576,"max_handler_bytes":4294967295}`)
	if beyond != largest || strings.Count(beyond, `"ev":"fire"`) != 2 {
		t.Fatalf("beyond the bounds:\n%s\nat them:\n%s", beyond, largest)
	}

	tr := `{"op":"config","max_payload_bytes":2097152}` + "\n{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":3,"payload":"0x` + strings.Repeat("ab", 1<<20+1) + `"}]}` + "\n"
	err := Run(strings.NewReader(tr), io.Discard)
	var te *trace.Error
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "line 3: calls[0]: a payload of 1048577 bytes: max_payload_bytes 2097152 allows it") {
		t.Fatalf("err = %v, want a trace error naming both bounds", err)
	}
}

// TestLayoutDefaultsFitWhatIsSet: a config that sets ring_size or
// epoch_length alone, within FORMAT.md's bounds, runs, its other value
// fitted to it, and prints what the default layout prints (a layout
// changes no event; roots included); one that sets both out of bounds is
// still an error.
func TestLayoutDefaultsFitWhatIsSet(t *testing.T) {
	const body = "{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":3},{"call":"schedule","height":70000,"payload":"0x01"}]}` +
		"\n{\"op\":\"end\"}\n{\"op\":\"advance\",\"to\":70000}\n"
	var want strings.Builder
	if err := Run(strings.NewReader(body), &want); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config string
		ok     bool
	}{
		{`{"op":"config","ring_size":2}`, true},
		{`{"op":"config","ring_size":512}`, true},
		{`{"op":"config","epoch_length":8192}`, true},
		{`{"op":"config","epoch_length":5000}`, true},
		{`{"op":"config","epoch_length":1,"epoch_count":1}`, true},
		{`{"op":"config","ring_size":3}`, false},
		{`{"op":"config","ring_size":0}`, false},
		{`{"op":"config","epoch_length":0}`, false},
		{`{"op":"config","ring_size":2,"epoch_length":4}`, false},
	} {
		var out strings.Builder
		err := Run(strings.NewReader(tc.config+"\n"+body), &out)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.config, err)
		case tc.ok && out.String() != want.String():
			t.Errorf("%s: printed\n%s\nwant\n%s", tc.config, out.String(), want.String())
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted", tc.config)
		}
	}
}

// TestHandlerLimitAboveAnyPayload: max_handler_bytes has no upper bound
// (FORMAT.md bounds only the layout): a trace may raise it for room, and a
// handler longer than the default 256 bytes then routes.
func TestHandlerLimitAboveAnyPayload(t *testing.T) {
	handler := strings.Repeat("h", 300)
	payload := `{"_handler":"` + handler + `","_payload":""}`
	tr := "{\"op\":\"block\",\"height\":1}\n" +
		`{"op":"tx","actor":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x` + hex.EncodeToString([]byte(payload)) + `"}]}` +
		"\n{\"op\":\"end\"}\n{\"op\":\"block\",\"height\":2}\n{\"op\":\"end\"}\n"
	for _, tc := range []struct {
		config string
		fires  bool
	}{
		{"", false},
		{`{"op":"config","max_handler_bytes":300}` + "\n", true},
		{`{"op":"config","max_handler_bytes":1000000}` + "\n", true},
		{`{"op":"config","max_handler_bytes":9223372036854775807}` + "\n", true},
	} {
		var out strings.Builder
		if err := Run(strings.NewReader(tc.config+tr), &out); err != nil {
			t.Fatalf("%q: %v", tc.config, err)
		}
		fired := strings.Contains(out.String(), `"handler":"`+handler+`"`)
		refused := strings.Contains(out.String(), `"error":"InvalidHandler"`)
		if fired != tc.fires || refused == tc.fires {
			t.Errorf("%q: printed\n%s", tc.config, out.String())
		}
	}
}
