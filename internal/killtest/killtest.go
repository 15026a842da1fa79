// Package killtest is test support for the crash loops: it runs one test
// of the current test binary as a child process and kills it with SIGKILL
// at a chosen moment, handing every line the child printed to the caller,
// so that the loop can tell what the child had made durable.
package killtest

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Kills is the number of kills a loop runs: n, its flag's value, if set;
// else 20, or 5 with -short.
func Kills(n int) int {
	switch {
	case n > 0:
		return n
	case testing.Short():
		return 5
	}
	return 20
}

// RunAndKill runs the test named child (a pattern for -test.run) of the
// current test binary with env added to its environment, passes note each
// line it prints on stdout, kills it with SIGKILL after d, then passes
// note the lines still in its pipe, and waits for it. The child must run
// until it is killed: one that has ended fails the test.
func RunAndKill(t testing.TB, child, env string, d time.Duration, note func(line string)) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+child)
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) {
			// go test -exec qemu-…: the binary runs only under its emulator.
			t.Skipf("the test binary cannot start itself as a child (%v): built for another architecture?", err)
		}
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(d)
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			note(l)
		case <-deadline:
			break read
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing the child (it runs until killed; see its stderr): %v", err)
	}
	// Every line printed before the kill, read to the pipe's end before
	// Wait, which closes the pipe once the child is gone: waiting first
	// lost lines still in it (a loaded CI run of session 38 missed 43
	// committed blocks and failed).
	for l := range lines {
		note(l)
	}
	cmd.Wait()
}
