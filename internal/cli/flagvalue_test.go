package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestValueFlagAtEnd runs every value flag of every command at the end of
// the line, alone and after a positional argument, and after -- : each is a
// usage error naming the flag, and nothing is written (a file named -- was
// the symptom). The list comes from the command definitions, so a new flag
// is covered without editing this test.
func TestValueFlagAtEnd(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	n := 0
	for _, c := range newApp(&deps{}).Commands {
		if c.SkipFlagParsing {
			continue
		}
		for _, f := range c.Flags {
			if _, isBool := f.(*cli.BoolFlag); isBool {
				continue
			}
			for _, name := range f.Names() {
				flag := "--" + name
				if len(name) == 1 {
					flag = "-" + name
				}
				for _, args := range [][]string{
					{c.Name, flag},
					{c.Name, "x.star", flag},
					{c.Name, flag, "--", "x.star"},
				} {
					n++
					t.Run(strings.Join(args, " "), func(t *testing.T) {
						code, stdout, stderr := run(t, dir, args...)
						want := "mscclgo: " + c.Name + ": flag " + flag + " needs a value"
						if code != ExitUsage || !strings.HasPrefix(stderr, want) || stdout != "" {
							t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and stderr starting %q", code, stdout, stderr, ExitUsage, want)
						}
						if _, err := os.Stat("--"); err == nil {
							t.Fatalf("a file named -- was written")
						}
					})
				}
			}
		}
	}
	if n < 3*20 {
		t.Errorf("only %d cases: the command tree lost its value flags?", n)
	}
}
