package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerlane/timerlane/engine"
)

var small = []string{"--timers", "20000", "--actors", "200", "--quiet"}

func runDemo(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = demoCmd(args, &out, &errb)
	return code, out.String(), errb.String()
}

// rowRE matches a row of the summary: a label, two or more spaces, a value.
var rowRE = regexp.MustCompile(`^(\S.*?)\s{2,}(\S+)`)

// table parses the summary into label -> the row's text after the label.
func table(t *testing.T, out string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := rowRE.FindStringSubmatch(l); m != nil {
			rows[m[1]] = strings.TrimSpace(l[len(m[1]):])
		}
	}
	return rows
}

func num(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatalf("not a count: %q", s)
	}
	return n
}

func TestDemoSmall(t *testing.T) {
	code, out, errs := runDemo(t, small...)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	if errs != "" {
		t.Errorf("--quiet wrote to stderr:\n%s", errs)
	}
	rows := table(t, out)
	for _, label := range append(kindNames[:], "total", "actors", "transactions",
		"rejected TooManyTimers", "rejected DuplicateTimer", "load blocks", "drain blocks run",
		"empty blocks skipped", "final height", "peak pending", "heap at end of load",
		"heap per pending timer", "engine.Stats bytes", "engine.Stats per pending timer", "allocations",
		"end of block, load p50", "end of block, load p99", "end of block, load max",
		"end of block, drain p50", "end of block, drain p99", "end of block, drain max",
		"begin block max", "skip empty max", "wall time", "throughput") {
		if _, ok := rows[label]; !ok {
			t.Errorf("no row %q in:\n%s", label, out)
		}
	}
	// Conservation: every scheduled timer fired, was cancelled, or is
	// pending, in total and per kind (nothing is pending after the drain).
	total := strings.Fields(rows["total"])
	if len(total) != 4 {
		t.Fatalf("total row %q: want scheduled, fired, cancelled, pending", rows["total"])
	}
	sched, fired, canc, pend := num(t, total[0]), num(t, total[1]), num(t, total[2]), num(t, total[3])
	if sched != 20000 {
		t.Errorf("scheduled %d, want --timers 20000", sched)
	}
	if sched != fired+canc+pend {
		t.Errorf("scheduled %d != fired %d + cancelled %d + pending %d", sched, fired, canc, pend)
	}
	var sum [3]int
	for _, k := range kindNames {
		f := strings.Fields(rows[k])
		s, fi, c := num(t, f[0]), num(t, f[1]), num(t, f[2])
		if s != fi+c {
			t.Errorf("%s: scheduled %d != fired %d + cancelled %d", k, s, fi, c)
		}
		if s == 0 {
			t.Errorf("%s: none scheduled", k)
		}
		sum[0], sum[1], sum[2] = sum[0]+s, sum[1]+fi, sum[2]+c
	}
	if sum != [3]int{sched, fired, canc} {
		t.Errorf("kinds add up to %v, total row says %v", sum, total[:3])
	}
}

// counts are the rows that depend on the seed only, not on timing.
// engine.Stats bytes is not one: the id index splits its segments as its
// per-engine hash seed spreads the ids, so it may hold one more or less.
func counts(t *testing.T, out string) map[string]string {
	rows := table(t, out)
	c := map[string]string{}
	for _, label := range append(kindNames[:], "total", "transactions", "rejected TooManyTimers",
		"rejected DuplicateTimer", "drain blocks run", "empty blocks skipped", "final height",
		"peak pending") {
		c[label] = rows[label]
	}
	return c
}

func TestDemoDeterministic(t *testing.T) {
	seed := func(s string) map[string]string {
		code, out, errs := runDemo(t, append(small, "--seed", s)...)
		if code != 0 {
			t.Fatalf("seed %s: exit %d: %s", s, code, errs)
		}
		return counts(t, out)
	}
	a, b, c := seed("7"), seed("7"), seed("8")
	for k := range a {
		if a[k] != b[k] {
			t.Errorf("seed 7 twice: %q is %q then %q", k, a[k], b[k])
		}
	}
	same := true
	for k := range a {
		same = same && a[k] == c[k]
	}
	if same {
		t.Errorf("seeds 7 and 8 gave the same counts: %v", a)
	}
}

func TestDemoBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timers", "0"}, "--timers"},
		{[]string{"--timers", "-5"}, "--timers"},
		{[]string{"--timers", "lots"}, "-timers"},
		{[]string{"--actors", "0"}, "--actors"},
		{[]string{"--actors", "-1"}, "--actors"},
		{[]string{"--blocks", "-1"}, "--blocks"},
		{[]string{"--reserve", "-1"}, "--reserve"},
		{[]string{"--reserve", "100000001"}, "--reserve"},
		{[]string{"--seed", "-1"}, "-seed"},
		{[]string{"--nope"}, "-nope"},
		{[]string{"extra"}, `"extra"`},
		{[]string{"--timers", "10", "--dir", file}, "not a directory"},
		{[]string{"--dir", ""}, "--dir: empty"},
		{[]string{"--dir="}, "--dir: empty"},
		{[]string{"--timers"}, "-timers"},
		{[]string{"--resume"}, "--resume: needs --dir"},
	} {
		code, out, errs := runDemo(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %s named", tc.args, code, out, errs, tc.want)
		}
		// One line, as every other command's errors: the flag package's
		// own messages came with the whole usage after them.
		if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "timerlane demo: ") {
			t.Errorf("%v: stderr %q; want one line of timerlane demo", tc.args, errs)
		}
	}
}

// TestDemoInterrupted: an interrupt stops the run between blocks, says
// after which, closes --dir cleanly (it verifies at that height) and
// exits with status 130.
func TestDemoInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	stop := make(chan os.Signal, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // some blocks in: each one fsyncs
		stop <- os.Interrupt
	}()
	var out, errb bytes.Buffer
	code := demoUntil([]string{"--quiet", "--dir", dir}, stop, &out, &errb)
	if code != 130 || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 130 and no summary", code, out.String(), errb.String())
	}
	m := regexp.MustCompile(`interrupted after block (\d+)\n.*holds the blocks up to (\d+) `).FindStringSubmatch(errb.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("stderr %q", errb.String())
	}
	code, vout, verr := cli("verify", dir)
	if code != 0 || !strings.Contains(vout, "height "+m[1]+",") {
		t.Fatalf("verify: exit %d, %q %q; want height %s", code, vout, verr, m[1])
	}
}

func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/tmp/demo-1", "/tmp/demo-1"},
		{"sp ace/x y", "'sp ace/x y'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
	} {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDemoHelp(t *testing.T) {
	code, out, errs := runDemo(t, "--help")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"usage: timerlane demo", "-timers", "-actors", "-seed", "-blocks", "-quiet", "-reserve", "-resume"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// Progress to a file that is not a terminal is one plain line per 10%.
func TestDemoProgressPlain(t *testing.T) {
	code, _, errs := runDemo(t, "--timers", "5000", "--actors", "100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != 10 || !strings.Contains(lines[9], "100%") || strings.Contains(errs, "\r") {
		t.Errorf("want 10 plain lines ending at 100%%, got:\n%s", errs)
	}
}

// tierOf, which labels where the fired timers came from, must agree with
// the engine: schedule one timer at each distance and see which tier grew.
func TestTierOfMatchesEngine(t *testing.T) {
	cfg := engine.DefaultConfig()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const h = 5000 // inside an epoch, not at its start
	if err := e.BeginBlock(h); err != nil {
		t.Fatal(err)
	}
	tx, _ := e.Begin(actorAddr(1), 1)
	last := h/cfg.EpochLength*cfg.EpochLength + cfg.RingSize - 1 // the ring's last height
	for _, d := range []uint64{1, 256, last - h, last - h + 1, last - h + cfg.EpochLength*cfg.EpochCount,
		last - h + cfg.EpochLength*cfg.EpochCount + 1, 1_000_000} {
		before := e.Stats()
		if _, _, err := tx.Schedule(h+d, []byte("x")); err != nil {
			t.Fatal(err)
		}
		after := e.Stats()
		got := map[bool]int{true: kindRing}[after.InRing > before.InRing] +
			map[bool]int{true: kindEpoch}[after.InEpochs > before.InEpochs] +
			map[bool]int{true: kindOverflow}[after.InOverflow > before.InOverflow]
		if want := tierOf(cfg, h, h+d); got != want {
			t.Errorf("%d blocks ahead: the engine put it in tier %d, tierOf says %d", d, got, want)
		}
	}
}

// TestDemoReserve: --reserve changes memory only: the same counts as
// without it, and more engine memory held from the start.
func TestDemoReserve(t *testing.T) {
	const stats = "engine.Stats bytes"
	run := func(args ...string) (map[string]string, string) {
		code, out, errs := runDemo(t, append(small, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return counts(t, out), table(t, out)[stats]
	}
	plain, plainStats := run()
	reserved, reservedStats := run("--reserve", "50000")
	for k := range plain {
		if plain[k] != reserved[k] {
			t.Errorf("%q is %q with --reserve, %q without", k, reserved[k], plain[k])
		}
	}
	if plainStats == "" || plainStats == reservedStats {
		t.Errorf("--reserve 50000 left %s at %q", stats, plainStats)
	}
}
