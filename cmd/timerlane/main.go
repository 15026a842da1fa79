// Command timerlane runs the timerlane engine: `replay` drives it from a
// conformance trace, `demo` runs a million-timer scenario and prints what
// it measured, inspect, verify, prove and wal repair work on the directory
// of an engine that persists (demo --dir), verify-proof checks a proof
// that prove printed, and version names the build.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/timerlane/timerlane/internal/replay"
	"github.com/timerlane/timerlane/internal/trace"
)

const usage = `timerlane: chain-native timers for the Cowboy Actor Message Scheduler

Usage:
  timerlane replay TRACE      replay a conformance trace (JSON Lines; - for stdin)
                              and print its events as JSON Lines on stdout
  timerlane demo [flags]      run the million-timer scenario and print a summary
                              (timerlane demo --help lists the flags; --dir DIR persists,
                              and --resume goes on with a run stopped or killed)
  timerlane inspect DIR       height, pending timers, state root, log files of DIR
  timerlane verify DIR        recover DIR, checking every stored state root
  timerlane prove DIR ID      a proof that timer ID is (or is not) pending, as JSON
  timerlane verify-proof ROOT ID PROOF [VALUE_HASH]
                              check such a proof with nothing else
  timerlane wal repair DIR    make DIR's log openable again: cut out or truncate
                              at damage, set damaged snapshots aside
  timerlane version           the build: module version, commit, Go version
  timerlane help [COMMAND]    print this text, or COMMAND's

Exit status: 0 on success; 2 on a bad trace, bad flags, a bad config or a
DIR that holds no log; 1 on any other failure (a damaged log, I/O).
`

func main() {
	// What the log reports (a torn tail cut) reads as the commands' own
	// lines do, without the log package's timestamp.
	log.SetFlags(0)
	log.SetPrefix("timerlane: ")
	out := &errWriter{w: os.Stdout}
	code := run(os.Args[1:], out, os.Stderr)
	if out.err != nil && code == 0 {
		// The output is lost (a full disk, a closed pipe): not a success.
		fmt.Fprintf(os.Stderr, "timerlane: writing the output: %v\n", out.err)
		code = 1
	}
	os.Exit(code)
}

// errWriter keeps the first error of the writes to w.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// commands are the commands run knows, for help COMMAND.
var commands = []string{"replay", "demo", "inspect", "verify", "prove", "verify-proof", "wal", "version"}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "replay":
		return replayCmd(args[1:], stdout, stderr)
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	case "inspect":
		return inspectCmd(args[1:], stdout, stderr)
	case "verify":
		return verifyCmd(args[1:], stdout, stderr)
	case "prove":
		return proveCmd(args[1:], stdout, stderr)
	case "verify-proof":
		return verifyProofCmd(args[1:], stdout, stderr)
	case "wal":
		return walCmd(args[1:], stdout, stderr)
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) == 1 || isHelp(args[1]) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		if !slices.Contains(commands, args[1]) {
			fmt.Fprintf(stderr, "timerlane help: unknown command %q\n\n%s", args[1], usage)
			return 2
		}
		return run(append(args[1:], "--help"), stdout, stderr) // help wal repair too
	}
	fmt.Fprintf(stderr, "timerlane: unknown command %q\n\n%s", args[0], usage)
	return 2
}

const versionUsage = "usage: timerlane version\n\nPrints the build: the module's version, the Go version that built it and\nthe commit it was built from (\"modified\" when the clone had changes),\nas the Go toolchain stamped them. A bug report wants this line.\n"

func versionCmd(args []string, stdout, stderr io.Writer) int {
	if _, code, ok := checkArgs("version", args, nil, versionUsage, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintln(stdout, buildLine(debug.ReadBuildInfo()))
	return 0
}

// buildLine is version's line from the build information the Go
// toolchain stamps into the binary (ok false: none, as under go run of
// some builds).
func buildLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "timerlane (unknown build) " + runtime.Version()
	}
	version, commit, dirty := bi.Main.Version, "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if version == "" {
		version = "(devel)"
	}
	line := "timerlane " + version + " " + bi.GoVersion
	if commit != "" {
		line += " (commit " + commit
		if dirty {
			line += ", modified"
		}
		line += ")"
	}
	return line
}

const replayUsage = "usage: timerlane replay TRACE\n\nReplays the trace (shared/conformance/FORMAT.md) and prints one JSON event per line.\nTRACE may be - for standard input.\nExit status: 0 done; 2 a bad trace, or a TRACE that cannot be opened\n(one line on stderr); 1 any other failure (I/O).\n"

func replayCmd(args []string, stdout, stderr io.Writer) int {
	args, code, ok := checkArgs("replay", args, []string{"TRACE"}, replayUsage, stdout, stderr)
	if !ok {
		return code
	}
	var in io.Reader = os.Stdin
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintf(stderr, "timerlane replay: %s\n", msg(err))
			return 2
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			fmt.Fprintf(stderr, "timerlane replay: %s is a directory, not a trace\n", args[0])
			return 2
		}
		in = f
	}
	if err := replay.Run(in, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		var te *trace.Error
		if errors.As(err, &te) {
			return 2
		}
		return 1
	}
	return 0
}
