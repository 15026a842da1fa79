package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/internal/trace"
)

// TestRollbackRandomTraces replays random traces full of rollbacks under
// both policies, twice: with the engine's Rollback and the replay's undo
// logs, and running the chain again from its start for every rollback,
// which also checks the engine's Rollback against the chain run again
// (rollback.go; a disagreement is an internal error). Both ways must
// print the same, byte for byte. Trace errors (a cancel of a fired
// timer) are allowed, at the same line both ways.
func TestRollbackRandomTraces(t *testing.T) {
	rollbacks, deep := 0, 0
	for seed := range uint64(60) {
		tr := randomTrace(rand.New(rand.NewPCG(seed, 3)), seed%2 == 1)
		fast, fastErr := runWith(t, tr, true)
		slow, slowErr := runWith(t, tr, false)
		var te *trace.Error
		if slowErr != nil && !errors.As(slowErr, &te) {
			t.Fatalf("seed %d: %v\ntrace:\n%s", seed, slowErr, tr)
		}
		if fast != slow || fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Fatalf("seed %d: undoing printed\n%s(%v)\nrunning again\n%s(%v)\ntrace:\n%s", seed, fast, fastErr, slow, slowErr, tr)
		}
		rollbacks += strings.Count(fast, `"rollback"`)
		deep += strings.Count(tr, "# deep")
	}
	if rollbacks < 150 || deep < 10 {
		t.Fatalf("only %d rollbacks ran, %d of them deep", rollbacks, deep)
	}
}

// runWith replays tr, with fastRollback set to fast.
func runWith(t *testing.T, tr string, fast bool) (string, error) {
	t.Cleanup(func() { fastRollback = true })
	fastRollback = fast
	var out strings.Builder
	err := Run(strings.NewReader(tr), &out)
	return out.String(), err
}

// randomTrace writes 80 random ops: blocks of transactions that schedule
// and cancel, advances, rollbacks (some deeper than the engine's
// RollbackDepth, past a long advance), and between blocks the ops whose
// state the engine's Rollback leaves to the replay: handler scripts that
// schedule and revert, and under the lane funds and agents.
func randomTrace(r *rand.Rand, lane bool) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	actors := []string{"0x00000000000000000000000000000000000000a1", "0x00000000000000000000000000000000000000a2"}
	if lane {
		line(`{"op":"config","policy":"lane","initial_lane_basefee":"10","lane_timer_cycles":600000,"fairness_window_blocks":4}`)
		for _, a := range actors {
			line(`{"op":"fund","account":"%s","amount":"100000000000"}`, a)
		}
	}
	h, labels, nonce := uint64(0), 0, 0
	for range 80 {
		switch k := r.IntN(14); {
		case k == 0: // also before the first block, which then starts at 1
			h += 1 + r.Uint64N(5)
			if r.IntN(3) == 0 {
				h += 300
			}
			line(`{"op":"advance","to":%d}`, h)
		case k == 1 && h > 2:
			to := h - r.Uint64N(min(h-1, 7)) // to == h changes nothing
			if h > 300 && r.IntN(3) == 0 {
				to = h - 257 - r.Uint64N(h-257)
				line(`# deep`)
			}
			line(`{"op":"rollback","to":%d}`, to)
			h = to
		case k == 2:
			line(`{"op":"handler","actor":"%s","handler":"handle_timer","revert":%v,"calls":[{"call":"schedule","after":%d,"payload":"0x%02x"}]}`,
				actors[r.IntN(2)], r.IntN(4) == 0, 1+r.IntN(6), r.IntN(256))
		case k == 3 && lane:
			if r.IntN(2) == 0 {
				line(`{"op":"gba","actor":"%s","max_fee_per_cycle":"default","max_priority_fee_per_cycle":"0"}`, actors[r.IntN(2)])
			} else {
				line(`{"op":"gba","actor":"%s","max_fee_per_cycle":"%d","max_priority_fee_per_cycle":"%d"}`, actors[r.IntN(2)], 10+r.IntN(30), r.IntN(5))
			}
		case k == 4 && lane:
			line(`{"op":"fund","account":"%s","amount":"%d"}`, actors[r.IntN(2)], r.IntN(1_000_000_000))
		default:
			h++
			line(`{"op":"block","height":%d}`, h)
			for range r.IntN(3) {
				nonce++
				var calls []string
				for range 1 + r.IntN(4) {
					if labels > 0 && r.IntN(3) == 0 {
						calls = append(calls, fmt.Sprintf(`{"call":"cancel","timer":"t%d"}`, r.IntN(labels)))
						continue
					}
					calls = append(calls, fmt.Sprintf(`{"call":"schedule","height":%d,"payload":"0x%02x","label":"t%d"}`, h+1+r.Uint64N(8), r.IntN(256), labels))
					labels++
				}
				line(`{"op":"tx","actor":"%s","nonce":%d,"calls":[%s]}`, actors[r.IntN(2)], nonce, strings.Join(calls, ","))
			}
			line(`{"op":"end"}`)
		}
	}
	return b.String()
}

// TestRollbackIntoALeadingAdvance: an advance before any block runs the
// empty blocks from height 1, so a rollback may go to any of them, under
// both policies, and the chain goes on from there as if it had advanced
// only that far. A rollback to the current height changes nothing and
// prints the root of the current block.
func TestRollbackIntoALeadingAdvance(t *testing.T) {
	for _, config := range []string{"", `{"op":"config","policy":"lane"}` + "\n"} {
		for to := uint64(1); to <= 3; to++ {
			rolled := config + "{\"op\":\"advance\",\"to\":3}\n" + fmt.Sprintf(`{"op":"rollback","to":%d}`, to) +
				fmt.Sprintf("\n{\"op\":\"block\",\"height\":%d}\n{\"op\":\"end\"}\n", to+1)
			direct := config + fmt.Sprintf("{\"op\":\"advance\",\"to\":%d}\n{\"op\":\"block\",\"height\":%d}\n{\"op\":\"end\"}\n", to, to+1)
			var a, b strings.Builder
			if err := Run(strings.NewReader(rolled), &a); err != nil {
				t.Fatalf("%q: %v", rolled, err)
			}
			if err := Run(strings.NewReader(direct), &b); err != nil {
				t.Fatalf("%q: %v", direct, err)
			}
			lines := strings.SplitAfter(a.String(), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], fmt.Sprintf(`{"ev":"rollback","height":%d,`, to)) || lines[1] != b.String() {
				t.Fatalf("%q printed\n%s; want a rollback line, then\n%s", rolled, a.String(), b.String())
			}
		}
	}
	var out strings.Builder
	if err := Run(strings.NewReader("{\"op\":\"block\",\"height\":1}\n{\"op\":\"end\"}\n{\"op\":\"rollback\",\"to\":1}\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	root := lines[0][strings.Index(lines[0], `"root"`):]
	if len(lines) != 3 || lines[1] != `{"ev":"rollback","height":1,"to":1,"pending":0,`+root {
		t.Fatalf("rollback to the current height printed\n%s", out.String())
	}
}

// TestDeepRollback: FORMAT.md bounds no rollback's depth, so a rollback
// past the engine's RollbackDepth (256) is the chain run again: the events
// after it are those of a trace that never went past the target, under
// both policies.
func TestDeepRollback(t *testing.T) {
	const a = `"0x00000000000000000000000000000000000000a1"`
	for _, config := range []string{"", `{"op":"config","policy":"lane"}` + "\n" + `{"op":"fund","account":` + a + `,"amount":"1000000000000000"}` + "\n"} {
		start := config + "{\"op\":\"block\",\"height\":1}\n" +
			`{"op":"tx","actor":` + a + `,"nonce":1,"calls":[{"call":"schedule","height":3},{"call":"schedule","height":350,"payload":"0x01"},{"call":"schedule","height":700,"payload":"0x02"}]}` +
			"\n{\"op\":\"end\"}\n"
		rest := "{\"op\":\"block\",\"height\":6}\n{\"op\":\"end\"}\n{\"op\":\"advance\",\"to\":800}\n"
		rolled := start + "{\"op\":\"advance\",\"to\":400}\n{\"op\":\"rollback\",\"to\":5}\n" + rest
		prefix := start + "{\"op\":\"advance\",\"to\":5}\n"
		var got, want, head strings.Builder
		if err := Run(strings.NewReader(rolled), &got); err != nil {
			t.Fatalf("%s: %v", rolled, err)
		}
		if err := Run(strings.NewReader(prefix+rest), &want); err != nil {
			t.Fatal(err)
		}
		if err := Run(strings.NewReader(prefix), &head); err != nil {
			t.Fatal(err)
		}
		after := strings.SplitAfterN(got.String(), `{"ev":"rollback"`, 2)
		if len(after) != 2 {
			t.Fatalf("no rollback line in\n%s", got.String())
		}
		tail := after[1][strings.Index(after[1], "\n")+1:]
		if wantTail := strings.TrimPrefix(want.String(), head.String()); tail != wantTail {
			t.Fatalf("after a rollback 395 blocks deep:\n%s\nwant\n%s", tail, wantTail)
		}
		if !strings.Contains(after[1], `"to":5,"pending":2,`) || strings.Count(tail, `"ev":"fire"`) != 2 {
			t.Fatalf("the rollback did not bring back the timers at 350 and 700:\n%s", got.String())
		}
	}
}

// BenchmarkRollbackTrace: one op replays a trace of 3,000 blocks, each a
// transaction of 10 schedules, with a rollback of 2 blocks every 20
// blocks; undo=false runs the chain again for every rollback, as every
// rollback did before the undo logs.
func BenchmarkRollbackTrace(b *testing.B) {
	var tr strings.Builder
	h := uint64(0)
	for k := 1; k <= 3000; k++ {
		h++
		var calls []string
		for i := range 10 {
			calls = append(calls, fmt.Sprintf(`{"call":"schedule","height":%d,"payload":"0x%04x"}`, h+1+uint64(i*7%300), i))
		}
		fmt.Fprintf(&tr, "{\"op\":\"block\",\"height\":%d}\n", h)
		fmt.Fprintf(&tr, "{\"op\":\"tx\",\"actor\":\"0x%040x\",\"nonce\":%d,\"calls\":[%s]}\n{\"op\":\"end\"}\n", 0xab, k, strings.Join(calls, ","))
		if k%20 == 0 {
			h -= 2
			fmt.Fprintf(&tr, "{\"op\":\"rollback\",\"to\":%d}\n", h)
		}
	}
	for _, fast := range []bool{true, false} {
		b.Run(fmt.Sprintf("undo=%v", fast), func(b *testing.B) {
			b.Cleanup(func() { fastRollback = true })
			fastRollback = fast
			for b.Loop() {
				if err := Run(strings.NewReader(tr.String()), io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRollbackAfterTrim: over a chain of 2,000 blocks the replay keeps
// marks and undo entries for the engine's reach only (RollbackDepth
// blocks), not for every block; rollbacks around that reach, the marks
// trimmed or not, print what running the chain again prints.
func TestRollbackAfterTrim(t *testing.T) {
	var tr strings.Builder
	tr.WriteString(`{"op":"config","policy":"lane","initial_lane_basefee":"10"}` + "\n")
	a := fmt.Sprintf("0x%040x", 0xa1)
	fmt.Fprintf(&tr, "{\"op\":\"fund\",\"account\":\"%s\",\"amount\":\"1000000000000000\"}\n", a)
	h := uint64(0)
	blocks := func(n int) {
		for range n {
			h++
			fmt.Fprintf(&tr, "{\"op\":\"block\",\"height\":%d}\n", h)
			fmt.Fprintf(&tr, "{\"op\":\"tx\",\"actor\":\"%s\",\"nonce\":%d,\"calls\":[{\"call\":\"schedule\",\"height\":%d,\"payload\":\"0x%06x\"}]}\n{\"op\":\"end\"}\n", a, h, h+3, h)
			if h%7 == 0 {
				fmt.Fprintf(&tr, "{\"op\":\"handler\",\"actor\":\"%s\",\"handler\":\"handle_timer\",\"cycles\":%d}\n", a, 1000+h)
			}
		}
	}
	blocks(2000)
	for _, back := range []uint64{1, 100, 255, 256, 257, 300, 2} {
		h -= back
		fmt.Fprintf(&tr, "{\"op\":\"rollback\",\"to\":%d}\n", h)
		blocks(10)
	}
	fast, fastErr := runWith(t, tr.String(), true)
	slow, slowErr := runWith(t, tr.String(), false)
	require.NoError(t, fastErr)
	require.NoError(t, slowErr)
	require.Equal(t, slow, fast)

	rn := newRunner(bufio.NewWriter(io.Discard))
	require.NoError(t, rn.replay(strings.NewReader(tr.String())))
	require.Less(t, len(rn.marks), 600, "marks kept")
	require.Less(t, len(rn.undo), 700, "undo entries kept")
	require.Less(t, len(rn.ledger.log), 1800, "ledger changes kept")
}
