package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/timerlane/timerlane/engine"
)

// TestStoreCommands: prove and verify-proof on a directory an engine wrote,
// for a pending timer and an absent one; inspect, verify and wal repair.
func TestStoreCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := engine.DefaultConfig()
	cfg.StateRoot = true
	e, err := engine.Open(dir, cfg)
	require.NoError(t, err)
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(engine.Address{0xaa}, 1)
	require.NoError(t, err)
	id, _, err := tx.Schedule(50, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, err = e.EndBlock(noHandlers{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	root := e.Root()
	require.NoError(t, e.Close())

	code, out, _ := cli("inspect", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "pending  1")
	require.Contains(t, out, "a timer  "+id.String()+" ") // the one pending, for prove
	code, out, _ = cli("verify", dir)
	require.Equal(t, 0, code, out)

	type proof struct {
		Root, TimerID, ValueHash, Proof string
		Pending                         bool
	}
	parse := func(s string) proof {
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &raw))
		p := proof{Root: raw["root"].(string), TimerID: raw["timer_id"].(string), Proof: raw["proof"].(string), Pending: raw["pending"].(bool)}
		if v, ok := raw["value_hash"]; ok {
			p.ValueHash = v.(string)
		}
		return p
	}
	code, out, _ = cli("prove", dir, id.String())
	require.Equal(t, 0, code)
	p := parse(out)
	require.True(t, p.Pending)
	require.Equal(t, "0x"+hex.EncodeToString(root[:]), p.Root)
	code, _, _ = cli("verify-proof", p.Root, p.TimerID, p.Proof, p.ValueHash)
	require.Equal(t, 0, code)
	code, _, _ = cli("verify-proof", p.Root, p.TimerID, p.Proof) // it is not absent
	require.Equal(t, 1, code)
	bad := []byte(p.Proof)
	bad[len(bad)-1] ^= 1 // a flipped hex digit
	code, _, _ = cli("verify-proof", p.Root, p.TimerID, string(bad), p.ValueHash)
	require.Equal(t, 1, code)

	absent := engine.TimerID{7}
	code, out, _ = cli("prove", dir, absent.String())
	require.Equal(t, 0, code)
	p = parse(out)
	require.False(t, p.Pending)
	code, _, _ = cli("verify-proof", p.Root, p.TimerID, p.Proof)
	require.Equal(t, 0, code)

	code, out, _ = cli("wal", "repair", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to repair")
	code, _, _ = cli("prove", dir, "0x12")
	require.Equal(t, 2, code)
	code, _, _ = cli("inspect", t.TempDir())
	require.Equal(t, 2, code, "a directory without a log is a bad argument")
}

// TestDirArguments: a DIR that is missing, a file, a flag, or a directory
// without a log is a usage error (exit 2) for every command that takes
// one, and wal repair creates nothing (it made the whole path, with a
// LOCK file, and said "nothing to repair"); demo --dir refuses a
// directory holding files that are not the engine's.
func TestDirArguments(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "afile")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	junk := filepath.Join(tmp, "junk")
	require.NoError(t, os.Mkdir(junk, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(junk, "000001.wal"), []byte("hello"), 0o644))
	missing := filepath.Join(tmp, "missing", "deep")
	for _, dir := range []string{missing, file, junk, "--bogus"} {
		for _, args := range [][]string{{"inspect", dir}, {"verify", dir}, {"prove", dir, "0x" + strings.Repeat("12", 32)}, {"wal", "repair", dir}} {
			code, _, stderr := cli(args...)
			require.Equal(t, 2, code, "%q: %s", args, stderr)
		}
	}
	_, err := os.Stat(filepath.Join(tmp, "missing"))
	require.True(t, os.IsNotExist(err), "wal repair created the path")
	entries, err := os.ReadDir(junk)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no LOCK file in a directory that holds no log")
	// Asked for, usage is the output (exit 0); given wrong arguments, an
	// error (exit 2), naming an unknown subcommand.
	for _, args := range [][]string{{"wal", "repair", "--help"}, {"wal", "--help"}, {"inspect", "-h"}, {"verify", "--help"}, {"prove", "help"}, {"verify-proof", "--help"}, {"replay", "--help"}} {
		code, stdout, stderr := cli(args...)
		require.Equal(t, 0, code, "%q", args)
		require.Contains(t, stdout, "usage: timerlane "+args[0], "%q", args)
		require.Empty(t, stderr, "%q", args)
	}
	for _, args := range [][]string{{"wal"}, {"wal", "repair"}, {"inspect"}, {"prove", "x"}, {"verify-proof", "a"}, {"replay"}} {
		code, stdout, stderr := cli(args...)
		require.Equal(t, 2, code, "%q", args)
		require.Empty(t, stdout, "%q", args)
		require.Contains(t, stderr, "usage: timerlane "+args[0], "%q", args)
	}
	for _, args := range [][]string{{"wal", "fix", junk}, {"wal", "fix", "--help"}} {
		code, stdout, stderr := cli(args...)
		require.Equal(t, 2, code, "%q", args)
		require.Empty(t, stdout, "%q", args)
		require.Contains(t, stderr, `unknown command "fix"`, "%q", args)
		require.Contains(t, stderr, "usage: timerlane wal", "%q", args)
	}
	code, _, stderr := cli("replay", "-h", "extra")
	require.Equal(t, 0, code, "asked for, as by every command")
	require.Empty(t, stderr)
	code, _, stderr = cli("demo", "--timers", "100", "--quiet", "--dir", junk)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "000001.wal")
}

// A failed write of the output is a failure: the events are lost.
func TestErrWriterKeepsTheFirstError(t *testing.T) {
	w := &errWriter{w: failingWriter{}}
	_, err := fmt.Fprintln(w, "event")
	require.Error(t, err)
	require.ErrorIs(t, w.err, errFull)
}

var errFull = errors.New("no space left on device")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errFull }

// TestStoreCommandsAfterDemo: inspect and verify read the configuration
// of a directory a demo wrote, whose state is in a snapshot.
func TestStoreCommandsAfterDemo(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"demo", "--timers", "3000", "--quiet", "--dir", dir}, &out, &errb), errb.String())
	snaps, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	require.NoError(t, err)
	require.NotEmpty(t, snaps, "the demo's log holds a snapshot")
	for _, cmd := range []string{"inspect", "verify"} {
		out.Reset()
		errb.Reset()
		require.Equal(t, 0, run([]string{cmd, dir}, &out, &errb), "%s: %s", cmd, errb.String())
	}
}

// TestStoreCommandsReadOnly: inspect, verify and prove read a directory
// that an engine holds open, and one whose log ends in a torn tail, and
// change nothing in it.
func TestStoreCommandsReadOnly(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(dir, engine.DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, e.BeginBlock(1))
	tx, err := e.Begin(engine.Address{0xbb}, 1)
	require.NoError(t, err)
	id, _, err := tx.Schedule(9, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	_, err = e.EndBlock(noHandlers{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())

	check := func(when string) {
		t.Helper()
		before := filesOf(t, dir)
		for _, args := range [][]string{{"inspect", dir}, {"verify", dir}, {"prove", dir, id.String()}} {
			var out, errb bytes.Buffer
			require.Equal(t, 0, run(args, &out, &errb), "%s, %s: %s", when, args[0], errb.String())
			if args[0] == "inspect" {
				require.Contains(t, out.String(), "pending  1", when)
			}
		}
		require.Equal(t, before, filesOf(t, dir), "%s: the commands changed the directory", when)
	}
	check("beside the open engine")
	require.NoError(t, e.Close())

	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0, 0, 1, 7, 42}) // a record cut short
	require.NoError(t, err)
	require.NoError(t, f.Close())
	check("with a torn tail")
}

// filesOf is every file of dir and its bytes.
func filesOf(t *testing.T, dir string) map[string]string {
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

// TestVerifyChecksEveryFile: verify reads every file whole, also those
// recovery does not (here the newest snapshot: with the rollback depth's
// records to keep, recovery starts from the older one), and names a
// damaged one (exit 1); wal repair sets it aside, after which verify
// passes and the state is the same.
func TestVerifyChecksEveryFile(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"demo", "--timers", "20000", "--actors", "500", "--blocks", "1500", "--quiet", "--dir", dir}, &out, &errb), errb.String())
	snaps, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(snaps), 2, "the demo's log holds two snapshots")
	newest := snaps[len(snaps)-1]
	code, before, stderr := cli("verify", dir)
	require.Equal(t, 0, code, stderr)

	data, err := os.ReadFile(newest)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x10
	require.NoError(t, os.WriteFile(newest, data, 0o644))
	code, _, stderr = cli("verify", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, filepath.Base(newest))
	require.Contains(t, stderr, "1 file(s) that recovery did not read")

	code, out2, stderr := cli("wal", "repair", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out2, "set aside "+filepath.Base(newest))
	code, after, stderr := cli("verify", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, before, after, "the same state, height and root")
}

// cli runs the command with args and returns its exit status, stdout and
// stderr.
func cli(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// noHandlers is an Executor whose handlers do nothing.
type noHandlers struct{}

func (noHandlers) Execute(engine.Tx, *engine.Delivery) (engine.Usage, error) {
	return engine.Usage{}, nil
}
