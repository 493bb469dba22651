package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/internal/termtext"
)

// TestUsageWording checks the wording of command-line mistakes: the flag
// as it was typed, every missing flag at once, a suggestion for a
// mistyped command, and the version command.
func TestUsageWording(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // the whole standard output
		stderr string // the whole standard error
	}{
		{name: "two forms", args: []string{"run", "x.star", "-s", "1K", "--size", "2K"}, code: ExitUsage,
			stderr: "mscclgo: flag --size given twice (as -s and --size): give it once (see mscclgo run --help)\n"},
		{name: "unknown flag, two dashes", args: []string{"eval", "--bogus", "x.star"}, code: ExitUsage,
			stderr: "mscclgo: unknown flag --bogus (see mscclgo eval --help)\n"},
		{name: "unknown flag, one dash", args: []string{"eval", "x.star", "-bogus"}, code: ExitUsage,
			stderr: "mscclgo: unknown flag -bogus (see mscclgo eval --help)\n"},
		{name: "invalid value", args: []string{"run", "x.star", "-s", "1K", "--iters", "x"}, code: ExitUsage,
			stderr: "mscclgo: flag --iters: invalid value \"x\" (see mscclgo run --help)\n"},
		{name: "invalid value with =", args: []string{"run", "x.star", "-s", "1K", "-n=1.5"}, code: ExitUsage,
			stderr: "mscclgo: flag -n: invalid value \"1.5\" (see mscclgo run --help)\n"},
		{name: "int out of range", args: []string{"run", "x.star", "--iters", "99999999999999999999"}, code: ExitUsage,
			stderr: "mscclgo: flag --iters: invalid value \"99999999999999999999\" (see mscclgo run --help)\n"},
		{name: "invalid factor", args: []string{"run", "x.star", "-b", "1K", "-e", "4K", "-f", "-2"}, code: ExitUsage,
			stderr: "mscclgo: flag -f: invalid value \"-2\" (see mscclgo run --help)\n"},
		{name: "invalid duration", args: []string{"run", "x.star", "--timeout", "soon"}, code: ExitUsage,
			stderr: "mscclgo: flag --timeout: invalid value \"soon\" (see mscclgo run --help)\n"},
		{name: "the first mistake", args: []string{"run", "x.star", "--iters", "x", "--bogus"}, code: ExitUsage,
			stderr: "mscclgo: flag --iters: invalid value \"x\" (see mscclgo run --help)\n"},
		{name: "two forms, alias first", args: []string{"eval", "x.star", "--output", "a", "-o", "b"}, code: ExitUsage,
			stderr: "mscclgo: flag --output given twice (as -o and --output): give it once (see mscclgo eval --help)\n"},
		{name: "one form twice", args: []string{"eval", "--bogus2", "x.star", "--bogus2"}, code: ExitUsage,
			stderr: "mscclgo: unknown flag --bogus2 (see mscclgo eval --help)\n"},
		{name: "unknown flag before the command", args: []string{"--bogus", "eval"}, code: ExitUsage,
			stderr: "mscclgo: unknown flag --bogus (see mscclgo --help)\n"},
		{name: "unknown flag with a value", args: []string{"list", "--format=yaml"}, code: ExitUsage,
			stderr: "mscclgo: unknown flag --format (see mscclgo list --help)\n"},
		{name: "select missing all", args: []string{"select"}, code: ExitUsage,
			stderr: "mscclgo: select: missing --collective (-c) NAME, --world-size (-n) N, --size SIZE (see mscclgo select --help)\n"},
		{name: "select missing two", args: []string{"select", "-c", "allreduce"}, code: ExitUsage,
			stderr: "mscclgo: select: missing --world-size (-n) N, --size SIZE (see mscclgo select --help)\n"},
		{name: "select alltoallv needs no size", args: []string{"select", "-c", "AllToAllV"}, code: ExitUsage,
			stderr: "mscclgo: select: missing --world-size (-n) N (see mscclgo select --help)\n"},
		{name: "did you mean", args: []string{"evl"}, code: ExitUsage,
			stderr: "mscclgo: unknown command \"evl\"; did you mean \"eval\"? (run mscclgo --help for the list)\n"},
		{name: "nothing near", args: []string{"frobnicate"}, code: ExitUsage,
			stderr: "mscclgo: unknown command \"frobnicate\" (run mscclgo --help for the list)\n"},
		{name: "version", args: []string{"version"}, stdout: "mscclgo version " + Version + "\n"},
		{name: "--version", args: []string{"--version"}, stdout: "mscclgo version " + Version + "\n"},
		{name: "version with an argument", args: []string{"version", "x"}, code: ExitUsage,
			stderr: "mscclgo: version: want no arguments, got 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestLongErrorCapped runs a command whose error would repeat a huge
// value: the printed line is bounded.
func TestLongErrorCapped(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run([]string{"mscclgo", "eval", strings.Repeat("y", 100000) + ".star"}, nil, &stdout, &stderr)
	if code == ExitOK {
		t.Fatalf("eval of a missing file succeeded")
	}
	if n := stderr.Len(); n > maxErrorLine+200 {
		t.Errorf("error of %d bytes printed, want at most about %d:\n%.300s", n, maxErrorLine, stderr.String())
	}
	if !strings.Contains(stderr.String(), "bytes more)") {
		t.Errorf("the cut is not said: %.300s", stderr.String())
	}
}

// TestHelpWrapped checks every command's help when standard output is not
// a terminal: the OPTIONS and COMMANDS lines fit in 80 columns, and the
// wrapping keeps every word of urfave/cli's unwrapped help, in order.
func TestHelpWrapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := []string{""}
	for _, c := range newApp(&deps{}).Commands {
		names = append(names, c.Name)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			args := []string{"--help"}
			if name != "" {
				args = []string{name, "--help"}
			}
			code, got, _ := run(t, dir, args...)
			if code != ExitOK {
				t.Fatalf("exit %d", code)
			}
			var raw bytes.Buffer
			d := &deps{stdin: strings.NewReader(""), stdout: &raw, stderr: &raw}
			if err := newApp(d).Run(append([]string{"mscclgo"}, args...)); err != nil {
				t.Fatal(err)
			}
			if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(raw.String()), " ") {
				t.Errorf("the wrapped help lost or moved words:\n%s\nunwrapped:\n%s", got, raw.String())
			}
			section := ""
			for _, line := range strings.Split(got, "\n") {
				if line != "" && line[0] != ' ' {
					section = line
				}
				if (strings.HasSuffix(section, "OPTIONS:") || section == "COMMANDS:") && len(line) > termtext.DefaultWidth && strings.Contains(strings.TrimSpace(line), " ") {
					t.Errorf("%d columns in %s: %q", len(line), section, line)
				}
			}
		})
	}
}
