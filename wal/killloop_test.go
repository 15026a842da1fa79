package wal

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerlane/timerlane/internal/killtest"
)

var killLoopKills = flag.Int("killloop.kills", 0, "SIGKILLs of TestKillLoop (0: 20, or 5 with -short)")

// killChildEnv names the directory TestKillLoopChild writes.
const killChildEnv = "TIMERLANE_WAL_KILL_CHILD"

// TestKillLoop runs a writer in a child process, on the operating
// system's files, with segments of 512 bytes so that it rotates every few
// records (each rotation raising NEWEST), a snapshot now and then and a
// truncation now and then (lowering NEWEST when it removes the newest
// segment); kills it with SIGKILL at random moments; and after each kill
// opens the log, which must open without complaint (no false "newest
// segment missing", no damage), hold exactly the state after some record
// at or above the last one the child reported durable, and a NEWEST that
// names its newest segment. The next child goes on from there.
func TestKillLoop(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("the child side runs in TestKillLoopChild")
	}
	kills := killtest.Kills(*killLoopKills)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var floor, truncations uint64 // the lowest record a recovery may give
	for k := range kills {
		note := func(l string) {
			kind, h, ok := strings.Cut(l, " ")
			n, err := strconv.ParseUint(h, 10, 64)
			if !ok || err != nil {
				t.Fatalf("kill %d: the child printed %q", k, l)
			}
			switch kind {
			case "a", "r", "t": // appended; a truncation under way; done
				floor = n
			default:
				t.Fatalf("kill %d: the child printed %q", k, l)
			}
			if kind == "t" {
				truncations++
			}
		}
		killtest.RunAndKill(t, "^TestKillLoopChild$", killChildEnv+"="+dir, time.Duration(10+r.IntN(150))*time.Millisecond, note)
		l, err := Open(OS, dir, Options{Logf: quiet})
		if err != nil {
			t.Fatalf("kill %d: Open: %v", k, err)
		}
		got, err := checkRecovered(l)
		if err == nil && got.last < floor {
			err = fmt.Errorf("recovered record %d, below %d, which the child had made durable", got.last, floor)
		}
		if err == nil {
			err = newestNamesTheNewest(dir)
		}
		l.Close()
		if err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		floor = got.last
	}
	segs, _ := list(OS, dir)
	t.Logf("%d kills, %d truncations, last record %d, %d segments", kills, truncations, floor, len(segs.segs))
}

// newestNamesTheNewest checks that NEWEST holds the newest segment's first
// record, as Open leaves it.
func newestNamesTheNewest(dir string) error {
	ls, err := list(OS, dir)
	if err != nil {
		return err
	}
	n, err := readNewest(OS, dir)
	if err != nil {
		return err
	}
	if len(ls.segs) > 0 && n != ls.segs[len(ls.segs)-1].first {
		return fmt.Errorf("NEWEST %d, newest segment %s", n, ls.segs[len(ls.segs)-1].name)
	}
	return nil
}

// TestKillLoopChild is TestKillLoop's writer: it opens the log it is given
// and appends records until it is killed, printing "a H" once record H is
// durable, and, now and then, "r H" before a truncation to H and "t H"
// once it has returned (then a pause of up to 20 ms); a snapshot every 40
// records.
func TestKillLoopChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("run by TestKillLoop")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	l, err := Open(OS, dir, Options{SegmentSize: 512, Logf: quiet})
	if err != nil {
		fail(err)
	}
	w := bufio.NewWriter(os.Stdout)
	r := rand.New(rand.NewPCG(uint64(os.Getpid()), 4))
	for h := l.LastHeight() + 1; ; h++ {
		if err := l.Append(h, bodyFor(h)); err != nil {
			fail(err)
		}
		fmt.Fprintf(w, "a %d\n", h)
		if h%40 == 0 {
			if err := l.WriteSnapshot(h, strings.NewReader(string(stateFor(h)))); err != nil {
				fail(err)
			}
		}
		if r.IntN(25) == 0 && h > 12 {
			to := h - 1 - r.Uint64N(10)
			fmt.Fprintf(w, "r %d\n", to)
			w.Flush()
			if err := l.Truncate(to, writeState(to)); err != nil {
				fail(err)
			}
			fmt.Fprintf(w, "t %d\n", to)
			w.Flush()
			// A pause before the next record, whose rotation raises
			// NEWEST again: kills land after a truncation, where a
			// NEWEST it did not lower would name a removed segment.
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
			h = to
		}
		w.Flush()
	}
}
