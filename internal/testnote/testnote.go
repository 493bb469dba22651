// Package testnote lets a test binary say something that plain
// `go test ./...` shows: a passing package's output is printed only with
// -v, so a note that tests were skipped (the MSCCL++ reference plans are
// missing beside the checkout) would otherwise go unseen, and a package
// whose tests take minutes would leave the terminal silent. Only test
// binaries import it: Announce for a note, Run (or Heartbeat) in TestMain
// for a package that takes more than half a minute.
package testnote

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Announce prints msg on standard error and, without -v, also where the go
// command that runs this test binary writes its own standard error, when
// that is a terminal or a pipe (Linux; see goStderr). Call it from
// TestMain, after flag.Parse.
func Announce(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	if testing.Verbose() {
		return
	}
	if f := goStderr(); f != nil {
		fmt.Fprintln(f, msg)
		f.Close()
	}
}

// Heartbeat writes msg with the time elapsed ("nccl: 30 s: MSG") where
// the go command that runs this test binary writes its own standard error
// (as Announce does, and only there: not into the test's output), every
// interval until stop is called, so that a package whose tests take
// minutes does not leave plain `go test ./...` silent meanwhile. It writes
// nothing when this binary's output already goes there (go test in the
// package's directory streams it) or when that is neither a terminal nor
// a pipe. Call it from TestMain and stop it after m.Run.
func Heartbeat(pkg, msg string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if f := goStderr(); f != nil {
					fmt.Fprintf(f, "%s: %.0f s: %s\n", pkg, now.Sub(start).Seconds(), msg)
					f.Close()
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// goStderr opens the standard error of the go command that runs this test
// binary (Linux only), or returns nil: when the parent is not `go`, when
// this binary's output already goes where the go command writes (go test
// in a package directory streams it), or when that is neither a terminal
// nor a pipe (appending to a file the go command writes at its own offset
// could be overwritten).
func goStderr() *os.File {
	ppid := os.Getppid()
	proc := func(name string) string { return fmt.Sprintf("/proc/%d/%s", ppid, name) }
	comm, err := os.ReadFile(proc("comm"))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	target, err := os.Stat(proc("fd/2"))
	if err != nil || target.Mode()&(os.ModeCharDevice|os.ModeNamedPipe) == 0 {
		return nil
	}
	if own, err := os.Stderr.Stat(); err == nil {
		for _, fd := range []string{"fd/1", "fd/2"} {
			if fi, err := os.Stat(proc(fd)); err == nil && os.SameFile(own, fi) {
				return nil
			}
		}
	}
	f, err := os.OpenFile(proc("fd/2"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}

// HeartbeatInterval is how often Run's heartbeat speaks: below the 30 s
// a person waits before wondering whether go test hangs.
const HeartbeatInterval = 25 * time.Second

// Run runs m's tests with a Heartbeat ("PKG: 25 s: still testing") and
// returns m.Run's exit code: the TestMain of a package whose tests take
// more than half a minute is
//
//	func TestMain(m *testing.M) {
//		os.Exit(testnote.Run(m, "tests"))
//	}
func Run(m *testing.M, pkg string) int {
	stop := Heartbeat(pkg, "still testing", HeartbeatInterval)
	defer stop()
	return m.Run()
}
