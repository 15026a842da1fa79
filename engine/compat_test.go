package engine_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// Format compatibility: a node upgraded in place must open the directory
// its older binary wrote and go on from it as that binary would have.
// testdata/compat holds logs written by earlier versions of the engine
// (testdata/compat/README says which and how). Each was written by
// TestWriteCompatFixture: blocks 1 to compatOpenAt under compatLoad,
// then closed, copied as the fixture, reopened by the same binary and run
// on, with a rollback across the reopen, to compatLast; expected.txt holds
// what that binary reported. TestCompatFixtures opens a copy with today's
// engine and must report the same, line for line: the state at the
// reopen, then each block's pending count, root and fired timers.
//
// When the formats change, a new fixture joins these, and the old ones
// keep passing or the change says why they cannot.

const (
	compatOpenAt   = 24 // the fixture's last block
	compatRollAt   = 28 // after this block, a rollback ...
	compatRollTo   = 20 // ... to here, below the reopen: RollbackDepth 8
	compatLast     = 34
	compatActivate = 6 // the lane's first block
	compatWriteEnv = "TIMERLANE_WRITE_COMPAT"
)

var (
	compatActors = []engine.Address{{0xa1}, {0xa2}, {0xa3}}
	compatSystem = engine.Address{0x5e}
	// compatTick routes to handler "tick", which schedules it again.
	compatTick = []byte(`{"_handler":"tick","_payload":"dGljaw=="}`)
)

// compatConfig is the configuration a fixture was written under, with
// policy p (the fixture's name begins with it): the lane from
// compatActivate with a budget small enough to defer, the state root, a
// snapshot every six records, rollbacks 8 blocks deep, and a layout small
// enough that the timers cross every tier (the layout is not state).
func compatConfig(p engine.Policy) engine.Config {
	cfg := engine.DefaultConfig()
	cfg.Policy, cfg.ActivationHeight, cfg.StateRoot = p, compatActivate, true
	cfg.RingSize, cfg.EpochLength, cfg.EpochCount = 16, 4, 4
	cfg.Lane.LaneTimerCycles, cfg.Lane.MaxCyclesPerFireAuction = 300_000, 100_000
	cfg.SnapshotEvery = 6
	// Open keeps twice the rollback depth replayable, so it starts from
	// the snapshot of block 6 and replays from there (with the default
	// depth, 256, it would replay every record and read no snapshot).
	cfg.RollbackDepth = 8
	cfg.SystemDeployers = []engine.Address{compatSystem}
	return cfg
}

// compatRand is splitmix64: a sequence fixed here, not by a library that
// may change its streams.
type compatRand uint64

func (r *compatRand) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// compatLoad drives blocks: it remembers the timers it scheduled since it
// was made (nothing across a reopen, in the writer as in the reader), and
// fork changes the blocks built again after the rollback.
type compatLoad struct {
	ids  []engine.TimerID
	fork uint64
}

// block runs block h whole and returns the timers it fired, in order.
func (l *compatLoad) block(e *engine.Engine, h uint64) ([]engine.TimerID, error) {
	r := compatRand(h*1_000_003 + l.fork)
	if err := e.BeginBlock(h); err != nil {
		return nil, err
	}
	for k, a := range compatActors {
		tx, err := e.Begin(a, h<<4|uint64(k))
		if err != nil {
			return nil, err
		}
		for j := range 4 {
			x := r.next()
			height := h + 1 + x%5 // the ring
			switch j {
			case 1:
				height = h + 20 + x%40 // the epoch tier, in the small layout
			case 2:
				height = h + 1_000_000 + x%1000 // the overflow tree
			}
			if h == 3 && k == 0 && j == 3 {
				height = 1<<64 - 1
			}
			payload := []byte{byte(h), byte(k), byte(j)}
			switch x >> 60 % 4 {
			case 0:
				payload = compatTick
			case 1:
				payload = nil
			}
			fees := &engine.Fees{}
			if e.Config().Policy == engine.PolicyLane && h >= compatActivate-2 && x>>58%2 == 0 {
				fees.Set = engine.HasGasLimit | engine.HasMaxFee | engine.HasMaxPriorityFee | engine.HasExpiresAt | engine.HasTier
				fees.GasLimit = 10_000 + x%40_000
				fees.MaxFee = engine.Amount{Lo: 2_000 + x%20_000}
				fees.MaxPriorityFee = engine.Amount{Lo: x % 700}
				fees.ExpiresAt = height + x%30
				fees.Tier = engine.PriorityTier(x >> 40 % 4)
			}
			s, err := tx.ScheduleFees(height, payload, fees)
			if err == nil {
				l.ids = append(l.ids, s.ID)
			}
		}
		if n := len(l.ids); n > 6 {
			tx.Cancel(l.ids[n-6]) // refused when not the actor's or gone: refusals are behaviour too
			if e.Config().Policy == engine.PolicyLane && h >= compatActivate {
				tx.Extend(l.ids[n-5], h+40)
			}
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	if h%7 == 0 && len(l.ids) > 3 {
		e.SystemCancel(compatSystem, l.ids[len(l.ids)-3])
	}
	if h == compatActivate+4 {
		e.SystemUpdateConfig(compatSystem, compatUpdate(e.LaneParams()))
	}
	x := &compatExec{load: l}
	if _, err := e.EndBlock(x); err != nil {
		return nil, err
	}
	return x.fired, e.Commit()
}

// compatUpdate is the SYS_UPDATE_TIMER_CONFIG the load issues once.
func compatUpdate(p engine.LaneParams) engine.LaneParams {
	p.LaneTimerCycles = 360_000
	return p
}

type compatExec struct {
	load  *compatLoad
	fired []engine.TimerID
}

func (x *compatExec) Execute(tx engine.Tx, d *engine.Delivery) (engine.Usage, error) {
	x.fired = append(x.fired, d.TimerID)
	if string(d.Handler) == "tick" && d.Block < compatLast {
		if s, err := tx.ScheduleFees(d.Block+3, compatTick, &engine.Fees{}); err == nil {
			x.load.ids = append(x.load.ids, s.ID)
		}
	}
	return engine.Usage{Cycles: 9_000 + uint64(len(d.Payload))}, nil
}

// compatOpen opens dir under compatConfig with every actor funded (the
// ledger is the embedder's, not the engine's state).
func compatOpen(dir string, p engine.Policy) (*engine.Engine, error) {
	e, err := engine.Open(dir, compatConfig(p))
	if err != nil {
		return nil, err
	}
	for _, a := range compatActors {
		e.Ledger().Credit(a, engine.Amount{Lo: 1 << 40})
	}
	return e, nil
}

func compatState(e *engine.Engine) string {
	root := e.Root()
	return fmt.Sprintf("%d pending=%d basefee=%s root=%x", e.Height(), e.Pending(), e.Basefee(), root)
}

func compatBlockLine(e *engine.Engine, fired []engine.TimerID) string {
	h := sha256.New()
	for _, id := range fired {
		h.Write(id[:])
	}
	return fmt.Sprintf("block %s fired=%d/%x", compatState(e), len(fired), h.Sum(nil)[:8])
}

// compatRun reopens dir and runs it on from compatOpenAt to compatLast,
// with the rollback, returning one line per step.
func compatRun(dir string, p engine.Policy) ([]string, error) {
	e, err := compatOpen(dir, p)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	lines := []string{"open " + compatState(e)}
	l := &compatLoad{}
	for h := e.Height() + 1; h <= compatLast; h++ {
		fired, err := l.block(e, h)
		if err != nil {
			return lines, fmt.Errorf("block %d: %w", h, err)
		}
		lines = append(lines, compatBlockLine(e, fired))
		if h == compatRollAt && l.fork == 0 {
			if err := e.Rollback(compatRollTo); err != nil {
				return lines, fmt.Errorf("rollback to %d: %w", compatRollTo, err)
			}
			lines = append(lines, "rollback "+compatState(e))
			h, l.fork, l.ids = compatRollTo, 1, nil
		}
	}
	return lines, e.Close()
}

// TestWriteCompatFixture writes a fixture into the directory named by
// $TIMERLANE_WRITE_COMPAT, whose name begins with its policy ("fifo-" or
// "lane-"), with the binary this file is built into: copy this file into
// an older tree's engine/ and run it there (testdata/compat/README).
func TestWriteCompatFixture(t *testing.T) {
	out := os.Getenv(compatWriteEnv)
	if out == "" {
		t.Skip("set " + compatWriteEnv + "=DIR to write a fixture")
	}
	p, err := compatPolicy(out)
	require.NoError(t, err)
	work := t.TempDir()
	e, err := compatOpen(work, p)
	require.NoError(t, err)
	l := &compatLoad{}
	for h := uint64(1); h <= compatOpenAt; h++ {
		_, err := l.block(e, h)
		require.NoError(t, err, "block %d", h)
	}
	require.NoError(t, e.Close())
	require.NoError(t, os.CopyFS(filepath.Join(out, "log"), os.DirFS(work)))
	require.NoError(t, os.Remove(filepath.Join(out, "log", "LOCK"))) // the lock's name, held by no one
	lines, err := compatRun(work, p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, "expected.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// compatPolicy is the policy a fixture's directory name begins with.
func compatPolicy(dir string) (engine.Policy, error) {
	switch name := filepath.Base(dir); {
	case strings.HasPrefix(name, "fifo-"):
		return engine.PolicyFIFO, nil
	case strings.HasPrefix(name, "lane-"):
		return engine.PolicyLane, nil
	default:
		return 0, fmt.Errorf("fixture %q: the name must begin with fifo- or lane-", name)
	}
}

// TestCompatFixtures: today's engine opens each fixture's log and goes on
// exactly as the binary that wrote it did.
func TestCompatFixtures(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "compat", "*", "expected.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, exp := range fixtures {
		fixture := filepath.Dir(exp)
		t.Run(filepath.Base(fixture), func(t *testing.T) {
			p, err := compatPolicy(fixture)
			require.NoError(t, err)
			want := readLines(t, exp)
			dir := filepath.Join(t.TempDir(), "log")
			require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(fixture, "log"))))

			// What a tool reads from the log alone: the configuration
			// that is state, under the default tier layout and durability.
			cfg, err := engine.LogConfig(dir)
			require.NoError(t, err)
			wantCfg := compatConfig(p)
			wantCfg.RingSize, wantCfg.EpochLength, wantCfg.EpochCount = cfg.RingSize, cfg.EpochLength, cfg.EpochCount
			wantCfg.SnapshotEvery, wantCfg.RollbackDepth = cfg.SnapshotEvery, cfg.RollbackDepth
			if p == engine.PolicyLane {
				wantCfg.Lane = compatUpdate(wantCfg.Lane)
			}
			require.Equal(t, wantCfg, cfg, "the configuration the log holds")

			got, err := compatRun(dir, p)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// readLines is the lines of the file at path.
func readLines(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
