package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
	"golang.org/x/crypto/sha3"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/merkle"
	"github.com/timerlane/timerlane/wal"
)

// storeBlocks writes a store of blocks blocks, each scheduling per
// timers far ahead, with the state root on and no snapshot, in one
// segment, and returns its directory and the segment's path.
func storeBlocks(t *testing.T, blocks, per int) (dir, seg string) {
	t.Helper()
	dir = t.TempDir()
	cfg := engine.DefaultConfig()
	cfg.StateRoot = true
	cfg.SnapshotEvery = 0
	e, err := engine.Open(dir, cfg)
	require.NoError(t, err)
	k := 0
	for b := 1; b <= blocks; b++ {
		require.NoError(t, e.BeginBlock(uint64(b)))
		for range per {
			tx, err := e.Begin(engine.Address{byte(k), byte(k >> 8)}, 1)
			require.NoError(t, err)
			_, _, err = tx.Schedule(1000+uint64(k), []byte(fmt.Sprint(k)))
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			k++
		}
		_, err = e.EndBlock(noHandlers{})
		require.NoError(t, err)
		require.NoError(t, e.Commit())
	}
	require.NoError(t, e.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	return dir, segs[0]
}

// flipInRecord flips a bit of the body of the k-th record (from 0) of
// segment seg: past its 32-byte header, each record is its length (4
// bytes), its checksum (8) and that many bytes: kind, height, body.
func flipInRecord(t *testing.T, seg string, k int) {
	t.Helper()
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	off := 32
	for range k {
		off += 12 + int(binary.LittleEndian.Uint32(b[off:]))
	}
	b[off+30] ^= 0x10
	require.NoError(t, os.WriteFile(seg, b, 0o644))
}

// TestEngineErrorsNameTheCommandOnce: an error of the engine (here a
// record whose checksum holds but whose body does not decode, as a bug
// that wrote it would leave) reads "timerlane verify: record 2: bad log
// record: ...", not "timerlane verify: record 2: timerlane: bad log
// record: ...".
func TestEngineErrorsNameTheCommandOnce(t *testing.T) {
	dir, seg := storeBlocks(t, 3, 2)
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	off := 32 + 12 + int(binary.LittleEndian.Uint32(b[32:])) // record 1
	n := int(binary.LittleEndian.Uint32(b[off:]))
	body := b[off+12 : off+12+n]
	body[0] = 1 // raw, and past the kind and height, nothing a block writes
	for i := 9; i < len(body); i++ {
		body[i] = 0xff
	}
	binary.LittleEndian.PutUint64(b[off+4:], xxh3.Hash(body))
	require.NoError(t, os.WriteFile(seg, b, 0o644))
	for _, cmd := range []string{"verify", "inspect"} {
		code, out, errs := cli(cmd, dir)
		require.Equal(t, 1, code, "%s: %s", cmd, errs)
		require.Empty(t, out)
		require.True(t, strings.HasPrefix(errs, "timerlane "+cmd+": record 2: bad log record: "), "%s: %s", cmd, errs)
		require.NotContains(t, errs, "timerlane: ", cmd)
	}
}

// TestDoubleDashEndsFlags: after "--" an argument that begins with "-", or
// is "help", names a directory, as the flag package has it.
func TestDoubleDashEndsFlags(t *testing.T) {
	dir, _ := storeBlocks(t, 2, 1)
	t.Chdir(filepath.Dir(dir))
	for _, name := range []string{"-d", "help"} {
		require.NoError(t, os.Rename(dir, name))
		dir = name
		code, out, errs := cli("verify", "--", name)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "ok: ")
		code, out, errs = cli("inspect", "--", name)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "height   2")
		code, out, errs = cli("wal", "repair", "--", name)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "nothing to repair")
	}
	code, _, errs := cli("verify", "-d")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "timerlane verify: -d: unknown flag (the command takes none; -- ends the flags)")
	code, _, errs = cli("verify", "--", "a", "b")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `timerlane verify: unexpected argument "b"`)
	code, out, _ := cli("verify", "--help", "--", "x")
	require.Equal(t, 0, code)
	require.Contains(t, out, "usage: timerlane verify")
}

// TestDemoRefusalChangesNothing: demo --dir refuses a directory that holds
// a chain already, and leaves it as it was: here its log ends in a torn
// tail, which opening it for writing would cut.
func TestDemoRefusalChangesNothing(t *testing.T) {
	dir, seg := storeBlocks(t, 3, 2)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0, 0, 1, 7, 42}) // a record cut short
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before := filesOf(t, dir)
	code, _, stderr := cli("demo", "--timers", "10", "--quiet", "--dir", dir)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "already holds a chain at height 3")
	require.Equal(t, before, filesOf(t, dir), "a refused demo --dir changed the directory")
}

// TestEmptyLogIsInspectable: a log that holds no block yet (a node that
// crashed in its first Commit) opens at height 0, for the store commands
// as for engine.Open. Damage in block 1 is not repaired into such a log:
// wal repair refuses, and the directory keeps every record.
func TestEmptyLogIsInspectable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir, seg string)
	}{
		{"header only", func(t *testing.T, _, seg string) { require.NoError(t, os.Truncate(seg, 32)) }},
		{"block 1 torn", func(t *testing.T, _, seg string) { require.NoError(t, os.Truncate(seg, 40)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, seg := storeBlocks(t, 3, 2)
			tc.damage(t, dir, seg)
			for _, args := range [][]string{{"inspect", dir}, {"verify", dir}, {"prove", dir, "0x" + strings.Repeat("00", 32)}} {
				code, out, stderr := cli(args...)
				require.Equal(t, 0, code, "%s: %s", args[0], stderr)
				if args[0] == "inspect" {
					require.Contains(t, out, "height   0")
				}
			}
		})
	}
}

// TestProveNonTimerKey: the key of the scheduler's leaf (STATE_ROOT.md)
// is no timer id, and no proof says whether a timer of that id is
// pending: prove says so (exit 1) rather than print a proof of presence
// with "pending": false, which verify-proof rejects both ways.
func TestProveNonTimerKey(t *testing.T) {
	dir, _ := storeBlocks(t, 1, 2)
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte("timerlane/scheduler"))
	key := engine.SchedulerKey()
	require.Equal(t, h.Sum(nil), key[:], "SchedulerKey is keccak256(\"timerlane/scheduler\")")
	code, out, stderr := cli("prove", dir, key.String())
	require.Equal(t, 1, code, out)
	require.Contains(t, stderr, "is not a timer id")
}

// TestVerifyProofNonTimerKey: a genuine proof of the scheduler's leaf
// holds in the tree, but verify-proof refuses the key as a timer id
// rather than say "the timer is pending" (exit 1, and why).
func TestVerifyProofNonTimerKey(t *testing.T) {
	dir, _ := storeBlocks(t, 1, 2)
	cfg := engine.DefaultConfig()
	cfg.StateRoot = true
	e, err := engine.OpenReadOnly(dir, cfg)
	require.NoError(t, err)
	key := engine.SchedulerKey()
	proof, _, pending := e.Prove(key)
	require.False(t, pending)
	var value [32]byte
	for _, l := range e.Leaves() {
		if l.Kind == "scheduler" {
			h := sha3.NewLegacyKeccak256()
			h.Write(l.Encoding)
			h.Sum(value[:0])
		}
	}
	root := e.Root()
	require.NoError(t, e.Close())
	require.NoError(t, merkle.Verify(root, key, &value, proof), "the leaf is in the tree")
	enc, err := proof.MarshalBinary()
	require.NoError(t, err)
	code, out, stderr := cli("verify-proof", fmt.Sprintf("0x%x", root), key.String(), fmt.Sprintf("0x%x", enc), fmt.Sprintf("0x%x", value))
	require.Equal(t, 1, code, out)
	require.Empty(t, out)
	require.Contains(t, stderr, "is not a timer id: it is the key of the scheduler's leaf")
}

// TestHelpIsConsistent: every command prints its usage on stdout, exit
// status 0, when asked (-h, --help, help), in any position.
func TestHelpIsConsistent(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "-h"}, {"demo", "--help"}, {"demo", "help"}, {"demo", "--quiet", "--help"},
		{"prove", "DIR", "--help"}, {"prove", "DIR", "ID", "-h"}, {"inspect", "DIR", "--help"},
		{"replay", "trace.jsonl", "-h"}, {"verify-proof", "--help"}, {"wal", "repair", "--help"}, {"wal", "-h"},
		{"help", "demo"}, {"help", "inspect"}, {"help", "wal", "repair"}, {"version", "-h"}, {"help", "version"},
	} {
		code, stdout, stderr := cli(args...)
		require.Equal(t, 0, code, "%q: %s", args, stderr)
		name := args[0]
		if name == "help" {
			name = args[1]
		}
		require.Contains(t, stdout, "usage: timerlane "+name, "%q", args)
		require.Empty(t, stderr, "%q", args)
	}
}

// TestArgumentErrors: a wrong argument list gets one line saying what is
// wrong (then the usage), exit status 2; they printed the usage alone.
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect"}, "timerlane inspect: missing DIR\n"},
		{[]string{"inspect", "a", "b"}, `timerlane inspect: unexpected argument "b"`},
		{[]string{"verify", "--all", "d"}, "timerlane verify: --all: unknown flag"},
		{[]string{"prove", "d"}, "timerlane prove: missing TIMER_ID\n"},
		{[]string{"verify-proof", "0x00", "0x00"}, "timerlane verify-proof: missing PROOF\n"},
		{[]string{"verify-proof", "a", "b", "c", "d", "e"}, `unexpected argument "e"`},
		{[]string{"replay", "--bogus"}, "timerlane replay: --bogus: unknown flag"},
		{[]string{"wal"}, "timerlane wal: missing command (repair)"},
		{[]string{"wal", "repair"}, "timerlane wal repair: missing DIR\n"},
		{[]string{"help", "bogus"}, `timerlane help: unknown command "bogus"`},
		{[]string{"prove", "d", "0xzz"}, "TIMER_ID: U+007A 'z' is not a hex digit (at character 3)"},
		{[]string{"prove", "d", "0x123"}, "TIMER_ID: an odd number of hex digits (3)"},
	} {
		code, out, errs := cli(tc.args...)
		require.Equal(t, 2, code, "%q: %s", tc.args, errs)
		require.Empty(t, out, "%q", tc.args)
		require.True(t, strings.HasPrefix(errs, "timerlane "), "%q: %s", tc.args, errs)
		require.Contains(t, errs, tc.want, "%q", tc.args)
	}
}

// TestRepairSaysWhereTheLogEnds: damage in block 2 of 5, with no snapshot
// to start from, loses blocks 2 to 5; wal repair names the height the log
// recovers to now.
func TestRepairSaysWhereTheLogEnds(t *testing.T) {
	dir, seg := storeBlocks(t, 5, 2)
	flipInRecord(t, seg, 1)
	code, out, stderr := cli("wal", "repair", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "truncated")
	require.Contains(t, out, "recovers to height 1 ")
	code, out, _ = cli("wal", "repair", dir)
	require.Equal(t, 0, code)
	require.Equal(t, "nothing to repair\n", out)
}

// TestRepairRefusesToEmptyTheLog: damage in block 1, with no snapshot,
// would leave only the empty log: wal repair refuses (exit 1, saying
// why) and the directory keeps every file as it was.
func TestRepairRefusesToEmptyTheLog(t *testing.T) {
	dir, seg := storeBlocks(t, 3, 2)
	flipInRecord(t, seg, 0)
	before, err := os.ReadFile(seg)
	require.NoError(t, err)
	code, out, stderr := cli("wal", "repair", dir)
	require.Equal(t, 1, code, out)
	require.Contains(t, stderr, "would leave no state to recover, so repair stops here")
	after, err := os.ReadFile(seg)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// TestRepairTornFirstSegment: a directory holding only a first segment
// whose header a crash cut short (no record) verifies as a log with no
// block, and wal repair removes that segment, as Open would, and says the
// log holds no block: exit 0 (it said "the repaired log does not open",
// exit 1: session 39's CLI audit). A segment of other bytes is damage:
// verify fails and repair refuses, touching nothing.
func TestRepairTornFirstSegment(t *testing.T) {
	seg := "00000000000000000001.wal"
	for _, tc := range []struct {
		name    string
		data    []byte
		verify  int
		repair  int
		out     string
		segLeft bool
	}{
		{"empty", nil, 0, 0, "the log now holds no block\n", false},
		{"other bytes", bytes.Repeat([]byte("not a log "), 500), 1, 1, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, seg), tc.data, 0o644))
			code, _, stderr := cli("verify", dir)
			require.Equal(t, tc.verify, code, stderr)
			code, out, stderr := cli("wal", "repair", dir)
			require.Equal(t, tc.repair, code, stderr)
			if tc.out != "" {
				require.Contains(t, out, tc.out)
			}
			_, err := os.Stat(filepath.Join(dir, seg))
			require.Equal(t, tc.segLeft, err == nil, "%v", err)
		})
	}
}

// TestVerifyWithoutRoots: a log written with the state root off stores no
// roots, and verify says it checked none; one written with it on, that it
// checked them.
func TestVerifyWithoutRoots(t *testing.T) {
	on, _ := storeBlocks(t, 2, 1)
	code, out, stderr := cli("verify", on)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "every stored root checked")

	dir := t.TempDir()
	e, err := engine.Open(dir, engine.DefaultConfig())
	require.NoError(t, err)
	require.NoError(t, e.BeginBlock(1))
	_, err = e.EndBlock(noHandlers{})
	require.NoError(t, err)
	require.NoError(t, e.Commit())
	require.NoError(t, e.Close())
	code, out, stderr = cli("verify", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "no root to check")
	require.NotContains(t, out, "every stored root checked")
}

// TestReadBesideANode: a read that finds a file gone that it listed (a
// running node removed an old snapshot meanwhile) is tried again, up to
// readTries times; any other error is not.
func TestReadBesideANode(t *testing.T) {
	dir, _ := storeBlocks(t, 1, 1)
	real := openLog
	t.Cleanup(func() { openLog = real })
	for _, tc := range []struct {
		name  string
		fails int   // tries that fail before one that reads
		err   error // what they fail with
		code  int
		tries int
	}{
		{"gone once", 1, fs.ErrNotExist, 0, 2},
		{"gone every time", readTries, fs.ErrNotExist, 1, readTries},
		{"damaged", 1, errors.New("damaged"), 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			openLog = func(dir string, checkEvery bool) (*engine.Engine, error) {
				if tries++; tries <= tc.fails {
					return nil, fmt.Errorf("open %s/00000000000000000009.snap: %w", dir, tc.err)
				}
				return real(dir, checkEvery)
			}
			code, _, stderr := cli("inspect", dir)
			require.Equal(t, tc.code, code, stderr)
			require.Equal(t, tc.tries, tries)
			// Only a file gone every time is blamed on a writer beside.
			require.Equal(t, tc.code == 1 && errors.Is(tc.err, fs.ErrNotExist), strings.Contains(stderr, goneHint), stderr)
		})
	}
}

// TestReadWaitsBetweenTries: a read that begins inside a rollback fails
// at once (wal.ErrChanged); openDir waits before it reads again, 10 ms
// then 40, so that its tries do not all fall inside the same rollback
// (session 43's third review: three tries back to back gave up inside a
// rollback of 30 ms, which engine.OpenReadOnly alone outlasted).
func TestReadWaitsBetweenTries(t *testing.T) {
	dir, _ := storeBlocks(t, 1, 1)
	real := openLog
	t.Cleanup(func() { openLog = real })
	start, tries := time.Now(), 0
	openLog = func(dir string, checkEvery bool) (*engine.Engine, error) {
		if tries++; time.Since(start) < 30*time.Millisecond { // a rollback of 30 ms
			return nil, fmt.Errorf("read: %w", wal.ErrChanged)
		}
		return real(dir, checkEvery)
	}
	code, _, stderr := cli("inspect", dir)
	require.Equal(t, 0, code, stderr)
	require.GreaterOrEqual(t, tries, 2)
}

// TestInspectListsLeftovers: inspect lists the files a crash can leave
// beside the log (a snapshot or a segment being written), which a node's
// next Open removes.
func TestInspectListsLeftovers(t *testing.T) {
	dir, _ := storeBlocks(t, 1, 1)
	for _, name := range []string{"00000000000000000001.wal.tmp", "00000000000000000001.snap.tmp"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	code, out, stderr := cli("inspect", dir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "00000000000000000001.wal.tmp")
	require.Contains(t, out, "00000000000000000001.snap.tmp")
}

// TestBuildLine: version's line from the toolchain's build information.
func TestBuildLine(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-compiler", Value: "gc"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"a clone, clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261207071455-d1f3a8cf28f9"}, Settings: vcs("d1f3a8cf28f996e8872781aca69224d534e3e88e", "false")},
			"timerlane v0.0.0-20261207071455-d1f3a8cf28f9 go1.26.8 (commit d1f3a8cf28f996e8872781aca69224d534e3e88e)"},
		{"a clone with changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261207071455-d1f3a8cf28f9+dirty"}, Settings: vcs("d1f3a8cf28f996e8872781aca69224d534e3e88e", "true")},
			"timerlane v0.0.0-20261207071455-d1f3a8cf28f9+dirty go1.26.8 (commit d1f3a8cf28f996e8872781aca69224d534e3e88e, modified)"},
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"timerlane v1.2.3 go1.26.8"},
		{"no vcs stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"timerlane (devel) go1.26.8"},
		{"an empty version", &debug.BuildInfo{GoVersion: "go1.26.8"}, "timerlane (devel) go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, buildLine(tc.bi, true))
		})
	}
	require.Equal(t, "timerlane (unknown build) "+runtime.Version(), buildLine(nil, false))

	code, out, errs := cli("version")
	require.Equal(t, 0, code, errs)
	require.True(t, strings.HasPrefix(out, "timerlane "), out)
	require.Contains(t, out, runtime.Version())
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	code, _, errs = cli("version", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `timerlane version: unexpected argument "extra"`)
}

// TestReadDirError: a DIR that names no directory is a usage error (exit
// status 2, "holds no log"); one that cannot be read is a failure (1), as
// a damaged log is (an unreadable directory gave 2: operations audit).
func TestReadDirError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&fs.PathError{Op: "open", Path: "d", Err: syscall.ENOENT}, 2},
		{&fs.PathError{Op: "open", Path: "d", Err: syscall.ENOTDIR}, 2},
		{&fs.PathError{Op: "open", Path: "d", Err: syscall.EACCES}, 1},
		{&fs.PathError{Op: "readdirent", Path: "d", Err: syscall.EIO}, 1},
	} {
		err := readDirError(tc.err)
		require.Equal(t, tc.code, dirFailure(err), "%v", tc.err)
		require.ErrorIs(t, err, tc.err.(*fs.PathError).Err)
	}
	// Through the commands: a file is no directory.
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, cmd := range [][]string{{"inspect", file}, {"verify", file}, {"prove", file, "0x00"}, {"wal", "repair", file}} {
		code, _, stderr := cli(cmd...)
		require.Equal(t, 2, code, "%q: %s", cmd, stderr)
	}
	if os.Geteuid() != 0 { // root reads any directory
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		code, _, stderr := cli("inspect", dir)
		require.Equal(t, 1, code, stderr)
	}
}
