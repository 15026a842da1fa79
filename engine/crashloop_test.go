package engine_test

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/killtest"
	"github.com/timerlane/timerlane/wal"
)

var crashKills = flag.Int("crashloop.kills", 0, "SIGKILLs of the crash loop (0: 20, or 5 with -short); CI runs 200")

const crashChildEnv = "TIMERLANE_CRASH_CHILD"

func crashConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.Policy, cfg.StateRoot = engine.PolicyLane, true
	cfg.RingSize, cfg.EpochLength, cfg.EpochCount = 16, 4, 4 // every tier and promotion in play
	cfg.Lane.LaneTimerCycles = 400_000
	cfg.SnapshotEvery = 25
	return cfg
}

// TestCrashLoop runs a load in a child process that commits blocks with an
// fsync each and prints each committed block's height and root, kills it
// with SIGKILL at random moments, and after each kill checks that the
// recovered engine is exactly at a committed block at or after the last
// one printed, with that block's root; then the load continues from there.
func TestCrashLoop(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("the child side runs in TestCrashLoopChild")
	}
	kills := killtest.Kills(*crashKills)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	roots := map[uint64]string{} // printed by a child: committed and durable
	// A kill before the child's first commit (a slow start on a loaded
	// machine) recovers the empty engine at height 0: its root is known.
	empty, err := engine.Open(t.TempDir(), crashConfig())
	require.NoError(t, err)
	root0 := empty.Root()
	roots[0] = hex.EncodeToString(root0[:])
	require.NoError(t, empty.Close())
	var last uint64
	rollbacks := 0
	floor := uint64(0) // the lowest block a recovery may give: last, or a rollback's target while it runs
	note := func(l string) {
		h, root, kind := parseCrashLine(t, l)
		if kind == "r" {
			floor = h
			return
		}
		if kind == "R" {
			// The log is at h: the blocks above are gone.
			require.Equal(t, roots[h], root, "rollback to %d", h)
			for x := range roots {
				if x > h {
					delete(roots, x)
				}
			}
			rollbacks++
		}
		roots[h], last, floor = root, h, h
	}
	for k := 0; k < kills; k++ {
		killtest.RunAndKill(t, "^TestCrashLoopChild$", crashChildEnv+"="+dir, time.Duration(20+r.IntN(180))*time.Millisecond, note)
		e, err := engine.Open(dir, crashConfig())
		require.NoError(t, err, "kill %d", k)
		h := e.Height()
		require.GreaterOrEqual(t, h, floor, "kill %d: recovered block %d, but block %d had been committed (and no rollback below it was under way)", k, h, last)
		root := e.Root()
		if want, ok := roots[h]; ok {
			require.Equal(t, want, hex.EncodeToString(root[:]), "kill %d: root of block %d", k, h)
		} else {
			require.Equal(t, last+1, h, "kill %d: recovered block %d was never committed", k, h)
		}
		require.NoError(t, e.Close())
		for x := range roots { // a later run may build these heights anew
			if x > h {
				delete(roots, x)
			}
		}
		roots[h], last, floor = hex.EncodeToString(root[:]), h, h
	}
	t.Logf("%d kills, %d rollbacks, last block %d", kills, rollbacks, last)
}

// parseCrashLine reads a child's line: "height root" for a committed
// block, "r height" before a rollback to height, "R height root" once it
// has returned.
func parseCrashLine(t *testing.T, l string) (h uint64, root, kind string) {
	f := strings.Fields(l)
	if len(f) > 0 && (f[0] == "r" || f[0] == "R") {
		kind, f = f[0], f[1:]
	}
	if kind == "r" {
		f = append(f, "")
	}
	require.Len(t, f, 2, "child printed %q", l)
	h, err := strconv.ParseUint(f[0], 10, 64)
	require.NoError(t, err)
	return h, f[1], kind
}

// TestCrashLoopChild is the load of TestCrashLoop, run in a child process
// until it is killed: it opens the engine in the directory it is given and
// commits blocks, printing each one's height and root once Commit returns.
func TestCrashLoopChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("run by TestCrashLoop")
	}
	e, err := engine.Open(dir, crashConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(3)
	}
	actors := []engine.Address{{1}, {2}, {3}, {4}}
	for _, a := range actors {
		e.Ledger().Credit(a, engine.Amount{Lo: 1 << 60})
	}
	w := bufio.NewWriter(os.Stdout)
	fork := uint64(os.Getpid()) // a fork after a reorg differs from the blocks it replaces
	for h := e.Height() + 1; ; h++ {
		r := rand.New(rand.NewPCG(h, fork))
		if err := e.BeginBlock(h); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		for range r.IntN(4) {
			a := actors[r.IntN(len(actors))]
			tx, _ := e.Begin(a, h)
			for k := range r.IntN(30) {
				tx.SetNonce(h<<8 | uint64(k))
				fees := &engine.Fees{}
				if r.IntN(2) == 0 {
					fees.Set, fees.GasLimit = engine.HasGasLimit, 20_000+r.Uint64N(200_000)
				}
				tx.ScheduleFees(h+1+r.Uint64N(200), []byte{byte(k), byte(h)}, fees)
			}
			tx.Commit()
		}
		if _, err := e.EndBlock(crashExec{}); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		if err := e.Commit(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		root := e.Root()
		fmt.Fprintf(w, "%d %x\n", h, root)
		w.Flush()
		// Now and then a reorg of up to 8 blocks, reported once the log is
		// back at its target; the blocks after it are a fork.
		if r.IntN(20) == 0 && h > 10 {
			to := h - 1 - r.Uint64N(8)
			fmt.Fprintf(w, "r %d\n", to) // a kill from here on may leave any block in to..h
			w.Flush()
			if err := e.Rollback(to); err != nil {
				fmt.Fprintln(os.Stderr, "child: rollback:", err)
				os.Exit(3)
			}
			root := e.Root()
			fmt.Fprintf(w, "R %d %x\n", to, root)
			w.Flush()
			h, fork = to, fork+1
		}
	}
}

type crashExec struct{}

func (crashExec) Execute(engine.Tx, *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{Cycles: 5_000}, nil
}

// TestOpenIsExclusive: a directory open in one engine refuses a second
// (wal.ErrLocked), which would interleave its records with the first's;
// the first goes on committing, and the directory opens again once it is
// closed, at the first's last block.
func TestOpenIsExclusive(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(dir, crashConfig())
	require.NoError(t, err)
	require.NoError(t, e.BeginBlock(1))
	_, err = e.EndBlock(&recorder{})
	require.NoError(t, err)
	_, err = engine.Open(dir, crashConfig())
	require.ErrorIs(t, err, wal.ErrLocked)
	require.NoError(t, e.Commit())
	require.NoError(t, e.Close())
	again, err := engine.Open(dir, crashConfig())
	require.NoError(t, err)
	require.Equal(t, uint64(1), again.Height())
	require.NoError(t, again.Close())
}

// TestOpenReadOnly: beside an engine that holds the directory, in the
// middle of a block, LogConfig and OpenReadOnly read the state of its last
// committed block, refuse every block call with ErrReadOnly and leave the
// directory as they found it; the writer goes on. A missing directory is
// an error, not created.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(dir, crashConfig())
	require.NoError(t, err)
	for h := uint64(1); h <= 3; h++ {
		require.NoError(t, e.BeginBlock(h))
		tx, err := e.Begin(engine.Address{byte(h)}, 0)
		require.NoError(t, err)
		_, _, err = tx.Schedule(h+5, []byte{byte(h)})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		_, err = e.EndBlock(&recorder{})
		require.NoError(t, err)
		require.NoError(t, e.Commit())
	}
	root := e.Root()
	require.NoError(t, e.BeginBlock(4)) // open, not committed
	before := dirFiles(t, dir)

	cfg, err := engine.LogConfig(dir)
	require.NoError(t, err)
	ro, err := engine.OpenReadOnly(dir, cfg)
	require.NoError(t, err)
	require.Equal(t, uint64(3), ro.Height())
	require.Equal(t, 3, ro.Pending())
	require.Equal(t, root, ro.Root())
	require.NoError(t, ro.CheckRoot())
	require.ErrorIs(t, ro.BeginBlock(4), engine.ErrReadOnly)
	_, err = ro.SkipEmpty(10)
	require.ErrorIs(t, err, engine.ErrReadOnly)
	require.ErrorIs(t, ro.Rollback(2), engine.ErrReadOnly)
	require.NoError(t, ro.Close())
	require.Equal(t, before, dirFiles(t, dir), "a read-only open changed the directory")

	_, err = e.EndBlock(&recorder{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.NoError(t, e.Close())

	missing := filepath.Join(t.TempDir(), "none")
	_, err = engine.OpenReadOnly(missing, cfg)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "OpenReadOnly created the directory")
}

// dirFiles is every file of dir and its bytes.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n.Name()))
		require.NoError(t, err)
		files[n.Name()] = string(b)
	}
	return files
}
