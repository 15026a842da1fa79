package main

import (
	"bytes"
	"errors"
	"fmt"
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

// sameRun fails t unless got, a summary, has the counts, the height and
// the root of want's.
func sameRun(t *testing.T, what, want, got string) {
	t.Helper()
	wc, gc := counts(t, want), counts(t, got)
	for k := range wc {
		if wc[k] != gc[k] {
			t.Errorf("%s: %s: %q, uninterrupted %q", what, k, gc[k], wc[k])
		}
	}
	wh, wr := persisted(t, want)
	gh, gr := persisted(t, got)
	if wh != gh || wr != gr {
		t.Errorf("%s: height %s root %s; uninterrupted: height %s root %s", what, gh, gr, wh, wr)
	}
}

// TestDemoResume: a run stopped in the load blocks, in the drain, or not
// at all goes on with --resume to the uninterrupted run's counts, height
// and root, whatever temporary files a crash left beside the log.
func TestDemoResume(t *testing.T) {
	tmp := t.TempDir()
	ref := filepath.Join(tmp, "ref")
	code, want, errs := runDemo(t, append(resumable, "--quiet", "--dir", ref)...)
	if code != 0 {
		t.Fatalf("uninterrupted: exit %d: %s", code, errs)
	}
	for _, stop := range []string{" 30%", " 90%", ""} { // the load, the drain, the end
		dir := filepath.Join(tmp, "d"+strings.TrimSpace(stop))
		at := ""
		if stop != "" {
			at = interruptedRun(t, dir, stop, resumable...)
		} else {
			if err := os.CopyFS(dir, os.DirFS(ref)); err != nil {
				t.Fatal(err)
			}
			at, _ = persisted(t, want)
		}
		if stop == " 30%" {
			// Stopped again as it runs those blocks in memory: DIR is
			// left as it was.
			if again := interruptedRun(t, dir, " 10%", append(resumable, "--resume")...); again != at {
				t.Fatalf("interrupted while catching up with block %s, DIR holds the blocks up to %s", at, again)
			}
		}
		for _, name := range []string{"NEWEST.tmp", "00000000000000001000.snap.tmp"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, got, errs := runDemo(t, append(resumable, "--quiet", "--dir", dir, "--resume")...)
		if code != 0 {
			t.Fatalf("resumed after block %s: exit %d: %s", at, code, errs)
		}
		if r := table(t, got)["resumed after block"]; !strings.HasPrefix(r, commas(num(t, at))+" ") {
			t.Errorf("resumed row %q, want block %s", r, at)
		}
		sameRun(t, "resumed after block "+at, want, got)
	}
}

// dirBytes is every file of dir and its bytes.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range entries {
		b, err := os.ReadFile(filepath.Join(dir, x.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[x.Name()] = string(b)
	}
	return files
}

// A chain that another scenario made is refused, and left as it was, torn
// tail and all.
func TestDemoResumeRefusesAnotherRun(t *testing.T) {
	tmp := t.TempDir()
	mid := filepath.Join(tmp, "mid") // stopped in the load blocks
	interruptedRun(t, mid, " 30%", resumable...)
	seg := filepath.Join(mid, "00000000000000000001.wal")
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{0xa5}, 300)); err != nil { // a torn write
		t.Fatal(err)
	}
	f.Close()
	end := filepath.Join(tmp, "end") // the whole run
	if code, _, errs := runDemo(t, append(resumable, "--quiet", "--dir", end)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		dir   string
		other []string
		want  string
	}{
		{mid, []string{"--seed", "2"}, "whose root at height"}, // the same load heights, another state
		{mid, []string{"--actors", "101"}, "whose root at height"},
		{mid, []string{"--timers", "1"}, "whose root at height"},
		{mid, []string{"--blocks", "1000"}, "whose root at height"},
		{end, []string{"--seed", "2"}, "a block this scenario does not run"}, // the drain's heights differ
		{end, []string{"--timers", "1"}, "past this scenario's last block"},
	} {
		before := dirBytes(t, tc.dir)
		args := append(append(append([]string{}, resumable...), tc.other...), "--quiet", "--dir", tc.dir, "--resume")
		code, out, errs := runDemo(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "other flags or another seed") {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want 2 and %q", filepath.Base(tc.dir), tc.other, code, out, errs, tc.want)
		}
		after := dirBytes(t, tc.dir)
		for name, b := range before {
			if after[name] != b {
				t.Errorf("%s %v: %s changed (%d bytes, %d before)", filepath.Base(tc.dir), tc.other, name, len(after[name]), len(b))
			}
		}
		if len(after) != len(before) {
			t.Errorf("%s %v: files %d, %d before", filepath.Base(tc.dir), tc.other, len(after), len(before))
		}
	}
	// The right flags still go on with it (cutting the torn tail).
	if code, _, errs := runDemo(t, append(resumable, "--quiet", "--dir", mid, "--resume")...); code != 0 {
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
	// Each block committed to DIR, on stderr (unbuffered), for the parent
	// to check against what the log holds after the kill.
	committed = func(h uint64) { fmt.Fprintf(os.Stderr, "committed %d\n", h) }
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
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	lastCommit := regexp.MustCompile(`(?m)^committed (\d+)$`)
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
				// No block the killed run committed is lost (to the
				// kill: the page cache survives it, so an fsync missing
				// would not show here).
				h := 0
				if _, err := os.Stat(dir); err == nil {
					code, out, errs := cli("inspect", dir)
					if code != 0 {
						t.Fatalf("killed run %d: inspect: exit %d: %s%s", k+1, code, out, errs)
					}
					h = num(t, regexp.MustCompile(`height +(\d+)`).FindStringSubmatch(out)[1])
				}
				c := lastCommit.FindAllStringSubmatch(errb.String(), -1)
				if len(c) > 0 {
					height = max(height, num(t, c[len(c)-1][1]))
				}
				if h < height {
					t.Fatalf("killed run %d: the log holds the blocks up to %d, and %d was committed", k+1, h, height)
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
	sameRun(t, "after the kills", want, got)
	if code, out, errs := cli("verify", dir); code != 0 {
		t.Errorf("verify: exit %d: %s%s", code, out, errs)
	}
}
