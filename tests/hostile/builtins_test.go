// Long builtins of the interpreter that never check for cancellation
// (list equality, which recursion makes as long as one likes): a signal
// or a limit ends the command anyway, with a named error, no traceback
// of Go's, and no output left behind.
package hostile

import (
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
	r.wantError(t, 1, 0, "eq.star: error: evaluation ran past the time limit of 1s (--max-time raises it)", "abandoned")
	if got := entries(t, dir); strings.Join(got, " ") != "eq.star" {
		t.Errorf("left behind: %v", got)
	}
}
