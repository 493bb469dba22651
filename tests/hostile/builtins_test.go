// Long builtins of the interpreter that never check for cancellation
// (list equality, which recursion makes as long as one likes): a signal
// or a limit ends the command anyway, with a named error, no traceback
// of Go's, and no output left behind.

package hostile

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// hugeEquality compares two distinct lists of 10^12 elements each.
const hugeEquality = `l = [0] * 1000
m = [0] * 1000
for i in range(3):
    l = [l] * 1000
    m = [m] * 1000
print("comparing")
x = l == m
`

// TestSignalDuringLongBuiltin: SIGTERM and SIGINT during == of two
// lists of 10^12 elements end eval -o with 143 or 130.
func TestSignalDuringLongBuiltin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		want string
	}{{syscall.SIGTERM, 143, "interrupted by SIGTERM"}, {syscall.SIGINT, 130, "interrupted by SIGINT"}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "eq.star", hugeEquality)
			r := start(t, dir, "eval", "eq.star", "-o", "out.json")
			r.waitUntil(t, "the comparison", func() bool { return strings.Contains(r.stderr.String(), "comparing") })
			r.signal(t, c.sig)
			res := r.wait(t)
			res.wantError(t, c.code, 0, c.want, "abandoned")
			if got := entries(t, dir); strings.Join(got, " ") != "eq.star" {
				t.Errorf("left behind: %v", got)
			}
		})
	}
}

// TestTimeLimitInLongBuiltin: --max-time stops the same comparison.
func TestTimeLimitInLongBuiltin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "eq.star", hugeEquality)
	r := mscclgo(t, dir, "eval", "eq.star", "--max-time", "1s", "-o", "out.json")
	r.wantError(t, 1, 0, "eq.star:7:7: error: evaluation ran past the time limit of 1s (--max-time raises it)", "abandoned")
	if got := entries(t, dir); strings.Join(got, " ") != "eq.star" {
		t.Errorf("left behind: %v", got)
	}
}

// TestDefaultBudgetUnderAddressLimit: under an 8 GB address-space cap
// (ulimit -v), whose headroom is far below the 4 GiB default budget once
// the process has reserved its start-up address space, the default budget
// follows the cap: values too large for it are named errors, not the Go
// runtime's fatal out of memory.
func TestDefaultBudgetUnderAddressLimit(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, script, want string }{
		{"list doubling", "x = [1]\nfor i in range(40):\n    x = x + x\n", "list + list of"},
		{"format doubling", "s = 'ab'\nfor i in range(40):\n    s = '{}{}'.format(s, s)\n", "s.star:3:"},
		{"percent doubling", "s = 'ab'\nfor i in range(40):\n    s = '%s%s' % (s, s)\n", "s.star:3:"},
		{"split", "s = 'a ' * (1 << 25)\nx = s.split()\n", "split of a string of 67108864 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "s.star", c.script)
			r := mscclgoLimited(t, dir, 8000000, "eval", "s.star", "-o", "out.json")
			// Which check fires first (the whole result's, one
			// operand's text, or, on a loaded machine, the heap
			// watcher's) depends on the budget and the moment: each
			// names the line, the size and the budget.
			r.wantError(t, 1, 0, c.want, "by default a third of what this process may still use, bounded by the address-space limit (ulimit -v)", "--max-memory sets the budget")
			if !strings.Contains(r.stderr, "would need about") && !strings.Contains(r.stderr, "evaluation grew to about") {
				t.Errorf("the error names no size:\n%s", clip(r.stderr))
			}
			if got := entries(t, dir); strings.Join(got, " ") != "s.star" {
				t.Errorf("left behind: %v", got)
			}
		})
	}
}

// mscclgoLimited is mscclgo under an address-space limit of kb kilobytes
// (a shell's ulimit -v before it starts the command).
func mscclgoLimited(t *testing.T, dir string, kb int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	// The same process as mscclgo's, started through a shell that sets
	// the limit and then becomes it.
	cmd := command(ctx, dir, args...)
	cmd.Path = "/bin/sh"
	cmd.Args = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, kb), os.Args[0]}, args...)
	return runToEnd(t, ctx, cmd, args)
}
