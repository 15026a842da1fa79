package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	a     = `"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`
	sched = `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2}]}`
)

func replayString(t *testing.T, trace string) (code int, stdout, stderr string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.trace.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(trace), 0o644))
	var out, errb bytes.Buffer
	code = run([]string{"replay", p}, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReplayTraceErrors(t *testing.T) {
	tests := []struct {
		name, trace, want string
	}{
		{"not json", "{op", "line 1: not JSON"},
		{"not an object", `[1]`, "line 1: not a JSON object"},
		{"two values", `{"op":"end"} {}`, "line 1: more than one JSON value"},
		{"unknown op", `{"op":"jump"}`, `line 1: unknown op "jump"`},
		{"missing op", `{"height":1}`, `line 1: missing "op"`},
		{"unknown field", `{"op":"block","height":1,"colour":"red"}`, `line 1: op block: unknown field "colour"`},
		// The empty key is a key like any other (found by FuzzReplayMatchesModel).
		{"empty field name", `{"op":"config","":10}`, `line 1: op config: unknown field ""`},
		{"repeated key", `{"op":"block","height":1,"height":2}`, `line 1: repeated key "height"`},
		{"wrong type", `{"op":"block","height":"1"}`, "line 1: height: must be an integer, not a string"},
		{"object for an integer", `{"op":"block","height":{}}`, "line 1: height: must be an integer, not an object"},
		{"array for an integer", `{"op":"block","height":[1]}`, "line 1: height: must be an integer, not an array"},
		{"boolean for an integer", `{"op":"block","height":true}`, "line 1: height: must be an integer, not a boolean"},
		{"null for an integer", `{"op":"block","height":null}`, "line 1: height: must be an integer, not null"},
		{"number for an amount", `{"op":"fund","account":` + a + `,"amount":5}`, "line 1: amount: must be a decimal string, not a number"},
		{"number for the op", `{"op":5}`, "line 1: op must be a string, not a number"},
		{"fraction", `{"op":"block","height":1.5}`, "line 1: height: 1.5: must be an integer"},
		{"negative", `{"op":"block","height":-1}`, "out of range"},
		{"too big", `{"op":"block","height":9223372036854775808}`, "out of range 0 .. 2^63-1"},
		{"height zero", `{"op":"block","height":0}`, "line 1: block height 0"},
		{"bad address", `{"op":"tx","actor":"0xaa","nonce":1,"calls":[]}`, "line 1: actor: address of 1 bytes, want 20"},
		{"odd hex", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"0x123"}]}`, "line 2: calls[0]: payload: \"0x123\": odd number of hex digits"},
		{"no 0x", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2,"payload":"1234"}]}`, "must be 0x followed by hex digits"},
		{"unknown call", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"fly"}]}`, `line 2: calls[0]: unknown call "fly"`},
		{"fee field under fifo", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2,"gas_limit":5}]}`, `fee field "gas_limit" needs policy lane`},
		{"extend under fifo", `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"extend","timer":"x","expires_at":5}]}`, "call extend needs policy lane"},
		{"gba under fifo", `{"op":"gba","actor":` + a + `,"max_fee_per_cycle":"1","max_priority_fee_per_cycle":"1"}`, "op gba needs policy lane"},
		{"system under fifo", `{"op":"system","call":"cancel","timer_id":"0x00"}`, "op system needs policy lane"},
		{"lane key under fifo", `{"op":"config","lane_timer_cycles":5}`, "lane_timer_cycles: needs policy lane"},
		{"config not first", "{\"op\":\"fund\",\"account\":" + a + ",\"amount\":\"1\"}\n{\"op\":\"config\"}", "line 2: config must be the first op"},
		// FORMAT.md's bounds, in its words (a ring above 2^24 buckets is
		// within them and runs: docs/SPEC.md §11).
		{"bad layout", `{"op":"config","ring_size":3}`, "line 1: config: ring_size 3: must be a power of two, at least 2\n"},
		{"epoch longer than the ring", `{"op":"config","ring_size":8,"epoch_length":9}`, "line 1: config: epoch_length 9: must be in [1, ring_size 8]\n"},
		{"no epochs", `{"op":"config","epoch_count":0}`, "line 1: config: epoch_count 0: must be at least 1\n"},
		{"rollback before any block", `{"op":"rollback","to":1}`, "line 1: rollback to 1: no block has been committed"},
		{"rollback inside a block", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"rollback","to":1}`, "line 2: rollback inside open block 1"},
		{"rollback forward", "{\"op\":\"block\",\"height\":1}\n{\"op\":\"end\"}\n" + `{"op":"rollback","to":2}`, "line 3: rollback to 2: above the current height 1"},
		{"invalid UTF-8", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2,"label":"` + "\xff" + `"}]}`, "line 2: not valid UTF-8"},
		{"invalid UTF-8 in a comment", "# caf\xe9\n{\"op\":\"block\",\"height\":1}", "line 1: not valid UTF-8"},
		// encoding/json reads each lone surrogate as U+FFFD: two labels
		// would be one, two keys a "repeated" one.
		{"lone high surrogate", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":2,"label":"\ud800"}]}`, `line 2: \ud800: a UTF-16 high surrogate without its low half`},
		{"lone low surrogate in a key", `{"op":"end","\udc00":1}`, `line 1: \udc00: a UTF-16 low surrogate without its high half`},
		{"whitespace JSON does not have", "\u00a0{\"op\":\"block\",\"height\":1}", "line 1: not JSON: invalid character U+00A0 outside a string, at byte 0 of the line"},
		{"a character outside a string", "{\"op\":\"block\",\u2028\"height\":1}", "line 1: not JSON: invalid character U+2028 outside a string, at byte 14 of the line"},
		{"0X prefix", `{"op":"fund","account":"0XAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","amount":"1"}`, `line 1: account: "0XAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA": must be 0x followed by hex digits`},
		{"an ASCII error before a character outside a string", "{\"op\":@,\"height\":1}\u00a0", "line 1: not JSON: invalid character '@' looking for beginning of value"},
		{"rollback below the first block", "{\"op\":\"block\",\"height\":5}\n{\"op\":\"end\"}\n{\"op\":\"advance\",\"to\":9}\n" + `{"op":"rollback","to":3}`, "line 4: rollback to 3: block 3 was never committed"},
		{"epoch longer than ring", `{"op":"config","ring_size":4,"epoch_length":8}`, "epoch_length 8"},
		{"bad amount", `{"op":"fund","account":` + a + `,"amount":"01"}`, `amount: "01": must be a decimal string`},
		{"amount too big", `{"op":"fund","account":` + a + `,"amount":"340282366920938463463374607431768211456"}`, "out of range 0 .. 2^128-1"},
		{"block out of sequence", "{\"op\":\"block\",\"height\":5}\n{\"op\":\"end\"}\n{\"op\":\"block\",\"height\":7}", "line 3: block 7: expected height 6"},
		{"block inside block", "{\"op\":\"block\",\"height\":5}\n{\"op\":\"block\",\"height\":6}", "line 2: block 6: block 5 has not ended"},
		{"tx outside block", sched, "line 1: tx outside a block"},
		{"end without block", `{"op":"end"}`, "line 1: end without an open block"},
		{"ends inside block", "{\"op\":\"block\",\"height\":5}\n" + sched, "the trace ends inside block 5"},
		{"ends inside block, comments after", "{\"op\":\"block\",\"height\":5}\n" + sched + "\n\n# the end\n", "line 2: the trace ends inside block 5"},
		{"advance backwards", "{\"op\":\"advance\",\"to\":5}\n{\"op\":\"advance\",\"to\":5}", "line 2: advance to 5: not above the current height 5"},
		{"advance inside block", "{\"op\":\"block\",\"height\":5}\n{\"op\":\"advance\",\"to\":9}", "line 2: advance inside open block 5"},
		{"label never bound", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"cancel","timer":"nope"}]}`, `line 2: calls[0]: label "nope" was never bound`},
		{"label never bound in a handler script", `{"op":"handler","actor":` + a + `,"handler":"handle_timer","calls":[{"call":"cancel","timer":"nope"}]}` + "\n{\"op\":\"block\",\"height\":1}\n" + sched + "\n{\"op\":\"end\"}\n{\"op\":\"advance\",\"to\":9}",
			`line 5: in block 2, the script of handler "handle_timer" of actor 0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (line 1): calls[0]: label "nope" was never bound`},
		{"both ids", "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"cancel","timer":"x","timer_id":"0x00"}]}`, "give timer_id or timer, not both"},
		{"lane cap of 0", `{"op":"config","policy":"lane","max_cycles_per_fire_auction_phase":0}`, "line 1: config: max_cycles_per_fire_auction_phase 0: must be in [1, 2^60]"},
		{"update of the layout", `{"op":"config","policy":"lane"}` + "\n{\"op\":\"block\",\"height\":1}\n" + `{"op":"system","call":"update_config","config":{"ring_size":4}}`, "line 3: config.ring_size: update_config cannot change it"},
		{"invalid update", `{"op":"config","policy":"lane"}` + "\n{\"op\":\"block\",\"height\":1}\n" + `{"op":"system","call":"update_config","config":{"fairness_window_blocks":0}}`, "line 3: update_config: timerlane: invalid config: fairness_window_blocks 0: must be >= 1"},
		{"amount too large", `{"op":"config","policy":"lane"}` + "\n" + `{"op":"fund","account":` + a + `,"amount":"340282366920938463463374607431768211456"}`, "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := replayString(t, tt.trace)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, tt.want)
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr")
		})
	}
}

func TestReplayKeepsEventsBeforeAnError(t *testing.T) {
	trace := "# comment\n\n{\"op\":\"block\",\"height\":1}\n" + sched + "\n{\"op\":\"end\"}\n{\"op\":\"bogus\"}\n"
	code, stdout, stderr := replayString(t, trace)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "line 6: unknown op")
	require.Equal(t, 2, strings.Count(stdout, "\n"), "the call and block events stay printed")
}

func TestReplayUsage(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"replay"}, &out, &errb))
	require.Contains(t, errb.String(), "usage: timerlane replay TRACE")
	errb.Reset()
	require.Equal(t, 2, run([]string{"replay", filepath.Join(t.TempDir(), "missing")}, &out, &errb))
	require.Contains(t, errb.String(), "no such file")
	errb.Reset()
	require.Equal(t, 2, run([]string{"replay", t.TempDir()}, &out, &errb))
	require.Contains(t, errb.String(), "is a directory, not a trace")
	errb.Reset()
	require.Equal(t, 2, run([]string{"frobnicate"}, &out, &errb))
	require.Contains(t, errb.String(), `unknown command "frobnicate"`)
	require.Equal(t, 0, run([]string{"help"}, &out, &errb))
	require.Contains(t, out.String(), "timerlane replay TRACE")
}

func TestReplayIDNotThirtyTwoBytesIsUnknown(t *testing.T) {
	for _, id := range []string{"0x", "0x1234", "0x" + strings.Repeat("ab", 33)} {
		trace := "{\"op\":\"block\",\"height\":1}\n" + `{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"cancel","timer_id":"` + id + `"}]}` + "\n{\"op\":\"end\"}\n"
		code, stdout, stderr := replayString(t, trace)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, `"call":"cancel","ok":false,"error":"UnknownTimer"`, id)
	}
}
