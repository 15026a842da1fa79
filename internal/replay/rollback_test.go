package replay

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/timerlane/timerlane/internal/trace"
)

// TestRollbackRandomTraces replays random traces full of rollbacks under
// both policies. Each rollback runs the chain again and checks the
// engine's own Rollback against it (rollback.go): any disagreement is an
// internal error, which fails the test. Trace errors (a rollback deeper
// than the chain, a cancel of a fired timer) are allowed.
func TestRollbackRandomTraces(t *testing.T) {
	rollbacks := 0
	for seed := range uint64(40) {
		tr := randomTrace(rand.New(rand.NewPCG(seed, 3)), seed%2 == 1)
		var out strings.Builder
		err := Run(strings.NewReader(tr), &out)
		var te *trace.Error
		if err != nil && !errors.As(err, &te) {
			t.Fatalf("seed %d: %v\ntrace:\n%s", seed, err, tr)
		}
		rollbacks += strings.Count(out.String(), `"rollback"`)
	}
	if rollbacks < 100 {
		t.Fatalf("only %d rollbacks ran", rollbacks)
	}
}

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
	for range 60 {
		switch k := r.IntN(10); {
		case k == 0: // also before the first block, which then starts at 1
			h += 1 + r.Uint64N(5)
			line(`{"op":"advance","to":%d}`, h)
		case k == 1 && h > 2:
			to := h - r.Uint64N(min(h-1, 7)) // to == h changes nothing
			line(`{"op":"rollback","to":%d}`, to)
			h = to
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
