package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/timerlane/timerlane/engine"
	"github.com/timerlane/timerlane/internal/vfs"
	"github.com/timerlane/timerlane/merkle"
	"github.com/timerlane/timerlane/wal"
)

// The commands on a directory written by an engine opened with --dir
// (engine.Open): inspect, verify, prove and wal repair; and verify-proof,
// which checks prove's output alone.

// openDir opens the engine in dir read-only under the configuration its
// log holds: nothing in dir changes, and a running node may hold it; with
// checkEvery, recovery checks every record's root.
func openDir(dir string, checkEvery bool) (*engine.Engine, error) {
	if err := logDir(dir); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		e, err := openLog(dir, checkEvery)
		if err == nil || !readAgain(err) {
			return e, err
		}
		if try == readTries {
			return nil, gone(err)
		}
		waitToRead(try)
	}
}

// waitToRead waits before read try+1: 10 ms, then 40. A read that begins
// inside a rollback fails at once (wal's ROLLBACKS), and tries back to
// back all fell inside the same one (session 43's third review).
func waitToRead(try int) { time.Sleep(10 * time.Millisecond << (2 * (try - 1))) }

// readTries is how many times openDir reads a log whose files go missing
// or change as it reads them: beside a running node, which removes its
// older snapshots and segments as it writes new ones, a read that lists a
// file and then opens it can find it gone (a file missing from the
// listing is never looked for, so this is the only way to that error),
// and one that reads a segment as the node rolls back finds it cut
// (wal.ErrChanged).
const readTries = 3

// readAgain reports whether err is one that reading again can clear.
func readAgain(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, wal.ErrChanged)
}

// goneHint ends the error of a read whose files kept going missing.
const goneHint = "a node writing the directory removes its older files as it goes, and cuts its log to roll back; run again"

// gone is the error of a read whose files were still going missing at its
// last try.
func gone(err error) error { return fmt.Errorf("%w (%d tries: %s)", err, readTries, goneHint) }

// openLog is one try of openDir; tests replace it.
var openLog = func(dir string, checkEvery bool) (*engine.Engine, error) {
	cfg, err := engine.LogConfig(dir)
	if errors.Is(err, engine.ErrEmptyLog) {
		// No block yet (a node that crashed in its first Commit, or what
		// wal repair leaves after damage in block 1): the state is the
		// empty one at height 0, whatever the configuration.
		cfg, err = engine.DefaultConfig(), nil
		cfg.StateRoot = true
	}
	if err != nil {
		return nil, err
	}
	cfg.CheckEveryRoot = checkEvery
	return engine.OpenReadOnly(dir, cfg)
}

// errBadDir is a DIR argument that names no engine's log: a usage error
// (exit status 2), where a damaged log is a failure (1).
var errBadDir = errors.New("bad directory")

// logName is a segment's or a snapshot's file name (wal/doc.go, Files).
var logName = regexp.MustCompile(`^[0-9]{20}\.(wal|snap)$`)

// logDir checks that dir is a directory holding a log: a segment or a
// snapshot. It writes nothing.
func logDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return readDirError(err)
	}
	for _, e := range entries {
		if logName.MatchString(e.Name()) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s holds no log (no NNNNNNNNNNNNNNNNNNNN.wal segment or .snap snapshot)", errBadDir, dir)
}

// readDirError is the error of a DIR argument that cannot be listed: a
// usage error if it names no directory; a failure (exit status 1) if it
// does, but cannot be read (permissions, I/O), as a damaged log is.
func readDirError(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", errBadDir, err)
	}
	return err
}

// dirFailure is the exit status of an error opening a DIR argument.
func dirFailure(err error) int {
	if errors.Is(err, errBadDir) {
		return 2
	}
	return 1
}

const inspectUsage = "usage: timerlane inspect DIR\n\nPrints the height, pending timers and state root of the engine in DIR\n(recovering it first), and its log's segments and snapshots. It opens DIR\nread-only: nothing in it changes, and it works beside a running node\n(showing its last block written whole).\n"

func inspectCmd(args []string, stdout, stderr io.Writer) int {
	args, code, ok := checkArgs("inspect", args, []string{"DIR"}, inspectUsage, stdout, stderr)
	if !ok {
		return code
	}
	e, err := openDir(args[0], false)
	if err != nil {
		fmt.Fprintf(stderr, "timerlane inspect: %s\n", msg(err))
		return dirFailure(err)
	}
	defer e.Close()
	fmt.Fprintf(stdout, "height   %d\npending  %d\nroot     %s\nrecords  %d\n", e.Height(), e.Pending(), rootOf(e), e.Durable())
	// One pending timer's id, the lowest, for a user to try prove on.
	var first *[32]byte
	for _, l := range e.Leaves() {
		if l.Kind == "timer" && (first == nil || bytes.Compare(l.Key[:], first[:]) < 0) {
			first = &l.Key
		}
	}
	if first != nil {
		fmt.Fprintf(stdout, "a timer  0x%x (timerlane prove DIR ID proves it pending)\n", *first)
	}
	names, err := os.ReadDir(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "timerlane inspect: %s\n", msg(err))
		return 1
	}
	var files []string
	for _, d := range names {
		name, note := d.Name(), ""
		switch {
		case strings.HasSuffix(name, ".corrupt"):
			note = "  (damaged, set aside by wal repair)"
		case strings.HasSuffix(name, ".tmp"):
			note = "  (left by a crash; the next writable open removes it)"
		case !wal.IsLogFile(name) || name == "LOCK":
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue
		}
		files = append(files, fmt.Sprintf("%-33s %12d bytes%s", name, info.Size(), note))
	}
	sort.Strings(files)
	fmt.Fprintln(stdout, "files")
	for _, f := range files {
		fmt.Fprintln(stdout, "  "+f)
	}
	return 0
}

const verifyUsage = "usage: timerlane verify DIR\n\nRecovers the engine in DIR from its snapshot and every record after it,\nchecking the state root stored in each record and the snapshot's, then\nrecomputes the root from the whole state, trusting no cached hash, and\nreads every other snapshot and segment whole, reporting any damaged one\n(exit status 1). It opens DIR read-only, as inspect does.\n"

func verifyCmd(args []string, stdout, stderr io.Writer) int {
	args, code, ok := checkArgs("verify", args, []string{"DIR"}, verifyUsage, stdout, stderr)
	if !ok {
		return code
	}
	e, err := openDir(args[0], true)
	if err != nil {
		fmt.Fprintf(stderr, "timerlane verify: %s\n", msg(err))
		return dirFailure(err)
	}
	defer e.Close()
	if err := e.CheckRoot(); err != nil {
		fmt.Fprintf(stderr, "timerlane verify: %s\n", msg(err))
		return 1
	}
	root := e.Root()
	// Recovery reads the newest snapshot and the log after it; the older
	// files, kept for rollbacks and fallbacks, are checked too.
	damaged, err := wal.Check(vfs.OS, args[0], wal.Options{})
	for try := 2; readAgain(err) && try <= readTries; try++ {
		waitToRead(try - 1)
		damaged, err = wal.Check(vfs.OS, args[0], wal.Options{}) // see readTries
	}
	if readAgain(err) {
		err = gone(err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "timerlane verify: %s\n", msg(err))
		return 1
	}
	if len(damaged) > 0 {
		for _, d := range damaged {
			fmt.Fprintf(stderr, "timerlane verify: %v\n", d)
		}
		fmt.Fprintf(stderr, "timerlane verify: the state recovered (height %d, root 0x%x) checks out, but %d file(s) that recovery did not read are damaged: a rollback or a fallback that needs them would fail; timerlane wal repair DIR sets damaged snapshots aside and rewrites or drops such segments, which the state does not need\n", e.Height(), root, len(damaged))
		return 1
	}
	checked := "every stored root checked, and the root recomputed from the state"
	switch {
	case e.Height() == 0:
		checked = "the log holds no block yet"
	case e.Stats().RootsChecked == 0:
		checked = "the log stores no root to check (written with the state root off)"
	}
	fmt.Fprintf(stdout, "ok: %s; every file checked whole; %d records, height %d, root %s\n", checked, e.Durable(), e.Height(), rootOf(e))
	return 0
}

const proveUsage = "usage: timerlane prove DIR TIMER_ID\n\nPrints a proof that the timer is pending in the engine in DIR (or that it\nis not), against the state root, as JSON; timerlane verify-proof checks it.\n"

func proveCmd(args []string, stdout, stderr io.Writer) int {
	args, code, ok := checkArgs("prove", args, []string{"DIR", "TIMER_ID"}, proveUsage, stdout, stderr)
	if !ok {
		return code
	}
	id, err := hex32(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "timerlane prove: TIMER_ID: %s\n", msg(err))
		return 2
	}
	e, err := openDir(args[0], false)
	if err != nil {
		fmt.Fprintf(stderr, "timerlane prove: %s\n", msg(err))
		return dirFailure(err)
	}
	defer e.Close()
	proof, value, pending := e.Prove(id)
	if !pending && proof.Kind == merkle.Present {
		// The id is the key of another leaf (the scheduler's, a fairness
		// entry's: STATE_ROOT.md §4a): no timer has it, and no proof of
		// absence exists for it.
		fmt.Fprintf(stderr, "timerlane prove: 0x%x is not a timer id: it is the key of another leaf of the state tree (the scheduler's or a fairness entry's), so there is no proof that it is or is not pending\n", id)
		return 1
	}
	enc, err := proof.MarshalBinary()
	if err != nil {
		fmt.Fprintf(stderr, "timerlane prove: %s\n", msg(err))
		return 1
	}
	root := e.Root()
	fmt.Fprintf(stdout, "{\"root\":\"0x%x\",\"timer_id\":\"0x%x\",\"pending\":%v", root, id, pending)
	if pending {
		fmt.Fprintf(stdout, ",\"value_hash\":\"0x%x\"", value)
	}
	fmt.Fprintf(stdout, ",\"proof\":\"0x%x\"}\n", enc)
	return 0
}

const verifyProofUsage = "usage: timerlane verify-proof ROOT TIMER_ID PROOF [VALUE_HASH]\n\nChecks a proof printed by timerlane prove, with nothing but its arguments:\nwith VALUE_HASH, that the timer is pending with that leaf value; without,\nthat it is not pending. Exit status 0 if the proof holds, 1 if not (also\nfor the scheduler leaf's key, which is no timer id; a fairness entry's key,\nwhich no timer id can equal either, cannot be told from one here: pass ids\nof scheduled timers).\n"

func verifyProofCmd(args []string, stdout, stderr io.Writer) int {
	args, code, ok := checkArgs("verify-proof", args, []string{"ROOT", "TIMER_ID", "PROOF", "[VALUE_HASH]"}, verifyProofUsage, stdout, stderr)
	if !ok {
		return code
	}
	root, err := hex32(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "timerlane verify-proof: ROOT: %s\n", msg(err))
		return 2
	}
	id, err := hex32(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "timerlane verify-proof: TIMER_ID: %s\n", msg(err))
		return 2
	}
	raw, err := hexBytes(args[2])
	if err != nil {
		fmt.Fprintf(stderr, "timerlane verify-proof: PROOF: %s\n", msg(err))
		return 2
	}
	if id == engine.SchedulerKey() {
		// Its leaf is always in the tree: a proof of it would read as
		// "the timer is pending" (as prove, refuse it).
		fmt.Fprintf(stderr, "timerlane verify-proof: TIMER_ID: 0x%x is not a timer id: it is the key of the scheduler's leaf of the state tree (docs/STATE_ROOT.md §4a)\n", id)
		return 1
	}
	var p merkle.Proof
	if err := p.UnmarshalBinary(raw); err != nil {
		fmt.Fprintf(stderr, "timerlane verify-proof: PROOF: %s\n", msg(err))
		return 1
	}
	var value *[32]byte
	if len(args) == 4 {
		v, err := hex32(args[3])
		if err != nil {
			fmt.Fprintf(stderr, "timerlane verify-proof: VALUE_HASH: %s\n", msg(err))
			return 2
		}
		value = &v
	}
	if err := merkle.Verify(root, id, value, p); err != nil {
		fmt.Fprintf(stderr, "timerlane verify-proof: the proof does not hold: %s\n", msg(err))
		return 1
	}
	if value != nil {
		fmt.Fprintln(stdout, "ok: the timer is pending under this root")
	} else {
		fmt.Fprintln(stdout, "ok: the timer is not pending under this root")
	}
	return 0
}

const walUsage = "usage: timerlane wal repair DIR\n\nMakes the log in DIR openable again and prints what it did. Damage among\nrecords the newest valid snapshot covers is cut out, keeping every later\nblock; a damaged segment header is rebuilt from its name and first record,\nand a segment whose name disagrees with its header and first record takes\nthe header's name (or goes, if it is a copy of the segment of that name);\ndamaged snapshots are set aside as NAME.corrupt; a torn tail is cut;\ndamaged segments older than the newest snapshot are dropped; NEWEST,\nwhich names the newest segment begun, is rebuilt from the segments there\nare when it is damaged or that segment is lost. Damage anywhere else\ntruncates the log at the first damaged record: the blocks after it are\nlost, so run it only when that is what you want. A directory that would\nbe left with no state to recover, or with only the empty one (damage in\nthe first block of a log without a snapshot), is not touched.\n"

func walCmd(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && isHelp(args[0]):
		fmt.Fprint(stdout, walUsage)
		return 0
	case len(args) == 0:
		fmt.Fprintf(stderr, "timerlane wal: missing command (repair)\n\n%s", walUsage)
		return 2
	case args[0] != "repair":
		fmt.Fprintf(stderr, "timerlane wal: unknown command %q\n\n%s", args[0], walUsage)
		return 2
	}
	pos, code, ok := checkArgs("wal repair", args[1:], []string{"DIR"}, walUsage, stdout, stderr)
	if !ok {
		return code
	}
	if err := logDir(pos[0]); err != nil { // Repair would create it
		fmt.Fprintf(stderr, "timerlane wal repair: %s\n", msg(err))
		return 2
	}
	// What it does is printed below: not logged on stderr too.
	actions, err := wal.Repair(vfs.OS, pos[0], wal.Options{Logf: func(string, ...any) {}})
	if err != nil {
		fmt.Fprintf(stderr, "timerlane wal repair: %s\n", msg(err))
		return 1
	}
	if len(actions) == 0 {
		fmt.Fprintln(stdout, "nothing to repair")
		return 0
	}
	for _, a := range actions {
		fmt.Fprintln(stdout, a)
	}
	// Say where the log now ends: a cut loses every block after it.
	lost := ""
	for _, a := range actions {
		if a.Action == "truncated" || a.Action == "removed" || a.Action == "set aside" || a.Action == "lowered" {
			lost = ": any block it held above that is gone"
		}
	}
	if logDir(pos[0]) != nil {
		// Only a first segment that a crash in its rotation left, with no
		// record, was there: what Open does to it too.
		fmt.Fprintf(stdout, "the log now holds no block%s\n", lost)
		return 0
	}
	e, err := openDir(pos[0], false)
	if err != nil {
		fmt.Fprintf(stderr, "timerlane wal repair: the repaired log does not open: %s\n", msg(err))
		return 1
	}
	defer e.Close()
	fmt.Fprintf(stdout, "the log now recovers to height %d (root %s)%s\n", e.Height(), rootOf(e), lost)
	return 0
}

// rootOf is e's state root in hex, or, for a log that holds no block
// yet, says there is none: the root of the empty state depends on the
// configuration, which such a log does not hold (openDir).
func rootOf(e *engine.Engine) string {
	if e.Height() == 0 {
		return "none (no block yet)"
	}
	r := e.Root()
	return "0x" + hex.EncodeToString(r[:])
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "help" }

// checkArgs checks the positional arguments of command cmd against names
// (optional ones in brackets, last): -h, --help or help among them prints
// the usage text on stdout and returns 0; too few or too many, or a flag
// (these commands take none; "-" alone is an argument, standard input),
// prints one line saying which, then the usage, on stderr and returns 2.
// After "--" every argument is positional, as for the flag package: a DIR
// named "-d" or "help". ok says the arguments are fine and the command
// goes on with pos, args without the "--".
func checkArgs(cmd string, args, names []string, text string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	opts, rest := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		opts, rest = args[:i], args[i+1:]
	}
	if slices.ContainsFunc(opts, isHelp) {
		fmt.Fprint(stdout, text)
		return nil, 0, false
	}
	pos = append(slices.Clip(opts), rest...)
	need := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			need++
		}
	}
	var why string
	for _, a := range opts {
		if len(a) > 1 && a[0] == '-' {
			why = a + ": unknown flag (the command takes none; -- ends the flags)"
			break
		}
	}
	switch {
	case why != "":
	case len(pos) < need:
		why = "missing " + names[len(pos)]
	case len(pos) > len(names):
		why = fmt.Sprintf("unexpected argument %q", pos[len(names)])
	}
	if why == "" {
		return pos, 0, true
	}
	fmt.Fprintf(stderr, "timerlane %s: %s\n\n%s", cmd, why, text)
	return nil, 2, false
}

// msg is err's text without the "timerlane: " that the engine's errors
// begin with: the command's lines already begin with "timerlane CMD: ".
func msg(err error) string { return strings.TrimPrefix(err.Error(), "timerlane: ") }

func hexBytes(s string) ([]byte, error) {
	if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return nil, errors.New("want 0x followed by hex digits")
	}
	b, err := hex.DecodeString(s[2:])
	var ib hex.InvalidByteError
	switch {
	case errors.As(err, &ib):
		return nil, fmt.Errorf("%#U is not a hex digit (at character %d)", rune(ib), 3+strings.IndexByte(s[2:], byte(ib)))
	case errors.Is(err, hex.ErrLength):
		return nil, fmt.Errorf("an odd number of hex digits (%d): each byte takes two", len(s)-2)
	}
	return b, err
}

func hex32(s string) ([32]byte, error) {
	var out [32]byte
	b, err := hexBytes(s)
	if err != nil {
		return out, err
	}
	if len(b) != 32 {
		return out, fmt.Errorf("%d bytes, want 32", len(b))
	}
	return [32]byte(b), nil
}
