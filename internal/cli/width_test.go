package cli

import (
	"bytes"
	"strings"
	"testing"
)

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
				if (strings.HasSuffix(section, "OPTIONS:") || section == "COMMANDS:") && len(line) > defaultWidth && strings.Contains(strings.TrimSpace(line), " ") {
					t.Errorf("%d columns in %s: %q", len(line), section, line)
				}
			}
		})
	}
}

func TestWrapLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		width      int
		want       string
	}{
		{"short", "   --x   a b", 20, "   --x   a b"},
		{"hanging", "   --x   aaa bbb ccc ddd", 20, "   --x   aaa bbb ccc\n         ddd"},
		{"wide names", "   --long-flag-name VALUE   aaa bbb", 20, "   --long-flag-name VALUE\n         aaa bbb"},
		{"text", "  aaa bbb ccc", 9, "  aaa bbb\n  ccc"},
		{"long word", "  aaaaaaaaaaaa b", 6, "  aaaaaaaaaaaa\n  b"},
	}
	for _, tt := range tests {
		if got := wrapLine(tt.line, tt.width); got != tt.want {
			t.Errorf("%s: wrapLine(%q, %d) =\n%q\nwant\n%q", tt.name, tt.line, tt.width, got, tt.want)
		}
	}
}

func TestFit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{{"allreduce_packet", 20, "allreduce_packet"}, {"allreduce_packet", 10, "allredu..."}, {"abcdef", 3, "abc"}, {"αβγδεζ", 5, "αβ..."}} {
		if got := fit(tt.s, tt.n); got != tt.want {
			t.Errorf("fit(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
