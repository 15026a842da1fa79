package main

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// resumable is a small scenario that --dir makes slow enough to stop in
// the middle (an fsync per block): 100 load blocks, then about 2,000
// drain blocks.
var resumable = []string{"--timers", "5000", "--actors", "100"}

// persisted returns the height and root of the summary's last line.
func persisted(t *testing.T, out string) (height, root string) {
	t.Helper()
	m := regexp.MustCompile(`persisted to .*: height (\d+), root (0x[0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no 'persisted to' line in:\n%s", out)
	}
	return m[1], m[2]
}

// stopAt is the demo's stderr in a test: it sends an interrupt once the
// progress says pct, which depends on the operations run only, so that
// the run stops after the same block every time.
type stopAt struct {
	mu   sync.Mutex
	pct  string
	stop chan os.Signal
	sent bool
	buf  bytes.Buffer
}

func (w *stopAt) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent && strings.Contains(w.buf.String(), w.pct) {
		w.sent = true
		w.stop <- os.Interrupt
	}
	return len(p), nil
}

// interruptedRun runs the demo with args on dir until its progress says
// pct and returns the height of the chain it leaves in dir.
func interruptedRun(t *testing.T, dir, pct string, args ...string) string {
	t.Helper()
	w := &stopAt{pct: pct, stop: make(chan os.Signal, 1)}
	var out bytes.Buffer
	code := demoUntil(append(args, "--dir", dir), w.stop, &out, w)
	m := regexp.MustCompile(`holds the blocks up to (\d+) `).FindStringSubmatch(w.buf.String())
	if code != 130 || m == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, w.buf.String())
	}
	return m[1]
}

func TestDemoResume(t *testing.T) {
	code, want, errs := runDemo(t, append(resumable, "--quiet", "--dir", filepath.Join(t.TempDir(), "ref"))...)
	if code != 0 {
		t.Fatalf("uninterrupted: exit %d: %s", code, errs)
	}
	dir := filepath.Join(t.TempDir(), "d")
	at := interruptedRun(t, dir, " 30%", resumable...) // in the load blocks
	if at == "0" {
		t.Fatal("stopped before block 1")
	}
	// Stopped again as it runs those blocks in memory: DIR is left as it was.
	if again := interruptedRun(t, dir, " 10%", append(resumable, "--resume")...); again != at {
		t.Fatalf("interrupted while catching up with block %s, DIR holds the blocks up to %s", at, again)
	}
	code, got, errs := runDemo(t, append(resumable, "--quiet", "--dir", dir, "--resume")...)
	if code != 0 {
		t.Fatalf("resumed: exit %d: %s", code, errs)
	}
	if r := table(t, got)["resumed after block"]; !strings.HasPrefix(r, at+" ") && !strings.HasPrefix(r, commas(num(t, at))+" ") {
		t.Errorf("resumed row %q, want block %s", r, at)
	}
	wc, gc := counts(t, want), counts(t, got)
	for k := range wc {
		if wc[k] != gc[k] {
			t.Errorf("%s: %q resumed, %q uninterrupted", k, gc[k], wc[k])
		}
	}
	wh, wr := persisted(t, want)
	gh, gr := persisted(t, got)
	if wh != gh || wr != gr {
		t.Errorf("resumed: height %s root %s; uninterrupted: height %s root %s", gh, gr, wh, wr)
	}
}

// A chain that another scenario made is refused, and left as it was.
func TestDemoResumeRefusesAnotherRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	at := interruptedRun(t, dir, " 30%", resumable...)
	_, before, _ := cli("inspect", dir)
	for _, other := range [][]string{
		{"--seed", "2"},      // the same load heights, another state there
		{"--actors", "101"},  // the same
		{"--timers", "1"},    // ends before the chain's height
		{"--blocks", "1000"}, // the same heights up to the chain's, another state
	} {
		args := append(append(append([]string{}, resumable...), other...), "--quiet", "--dir", dir, "--resume")
		code, out, errs := runDemo(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, "holds a chain") || !strings.Contains(errs, "other flags or another seed") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the chain refused", other, code, out, errs)
		}
	}
	if _, after, _ := cli("inspect", dir); after != before || !strings.Contains(after, "height   "+at+"\n") {
		t.Errorf("inspect before the refusals:\n%s\nafter:\n%s", before, after)
	}
	// The right flags still go on with it.
	if code, _, errs := runDemo(t, append(resumable, "--quiet", "--dir", dir, "--resume")...); code != 0 {
		t.Fatalf("resumed after the refusals: exit %d: %s", code, errs)
	}
}

// demoChildEnv carries the demo's arguments to TestDemoChild, which runs
// the demo in a child process of the crash loop.
const demoChildEnv = "TIMERLANE_DEMO_CHILD"

func TestDemoChild(t *testing.T) {
	args := os.Getenv(demoChildEnv)
	if args == "" {
		t.Skip("the child of TestDemoCrashLoop")
	}
	os.Exit(demoCmd(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// TestDemoCrashLoop kills `demo --dir DIR --resume` with SIGKILL at random
// moments and starts it again, as a crash loop would, then lets it finish:
// it ends at the uninterrupted run's height and root, with its counts. A
// run that ends before its kill ends the loop: the kills come within the
// first third of the uninterrupted run's time, so that some land on any
// disk.
func TestDemoCrashLoop(t *testing.T) {
	start := time.Now()
	code, want, errs := runDemo(t, append(resumable, "--quiet", "--dir", filepath.Join(t.TempDir(), "ref"))...)
	whole := time.Since(start) // the kills come within it, whatever the disk's speed
	if code != 0 {
		t.Fatalf("uninterrupted: exit %d: %s", code, errs)
	}
	dir := filepath.Join(t.TempDir(), "d")
	args := append(resumable, "--quiet", "--dir", dir, "--resume")
	kills := 8
	if testing.Short() {
		kills = 3
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var got string
	height, killed := 0, 0
	for k := 0; ; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDemoChild$")
		cmd.Env = append(os.Environ(), demoChildEnv+"="+strings.Join(args, "\x1f"))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			if errors.Is(err, syscall.ENOEXEC) {
				t.Skipf("the test binary cannot start itself as a child (%v)", err)
			}
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		if k < kills {
			select {
			case err = <-done:
			case <-time.After(20*time.Millisecond + time.Duration(r.Int64N(int64(whole)/3))):
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				killed++
				// No block the killed run committed is lost.
				h := 0
				if code, out, _ := cli("inspect", dir); code == 0 {
					h = num(t, regexp.MustCompile(`height +(\d+)`).FindStringSubmatch(out)[1])
				}
				if h < height {
					t.Fatalf("killed run %d: the log holds the blocks up to %d, after %d before it", k+1, h, height)
				}
				height = h
				t.Logf("killed run %d: the log holds the blocks up to %d", k+1, h)
				continue
			}
		} else {
			err = <-done
		}
		if err != nil {
			t.Fatalf("run %d: %v, stderr:\n%s", k+1, err, errb.String())
		}
		got = out.String()
		break
	}
	if killed == 0 {
		t.Fatalf("every run ended before its kill (the uninterrupted one took %v)", whole)
	}
	wc, gc := counts(t, want), counts(t, got)
	for k := range wc {
		if wc[k] != gc[k] {
			t.Errorf("%s: %q after the kills, %q uninterrupted", k, gc[k], wc[k])
		}
	}
	wh, wr := persisted(t, want)
	gh, gr := persisted(t, got)
	if wh != gh || wr != gr {
		t.Errorf("after the kills: height %s root %s; uninterrupted: height %s root %s", gh, gr, wh, wr)
	}
	if code, out, errs := cli("verify", dir); code != 0 {
		t.Errorf("verify: exit %d: %s%s", code, out, errs)
	}
}
