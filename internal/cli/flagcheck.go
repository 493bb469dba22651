package cli

// flagcheck.go checks a command line's flags as they were typed, before
// urfave/cli parses them, so that every mistake is worded here, naming
// the flag as the user typed it, and no message of the parser is reworded.

import (
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// givenFlag is one flag of a command line.
type givenFlag struct {
	typed    string // the flag as typed, without its value: -s, --size
	name     string // without dashes
	value    string
	hasValue bool
}

// parsed reports whether the parser would take g as a flag to look up: a
// name, neither empty nor with a third dash or an "=" (which it calls bad
// syntax in its own words).
func (g givenFlag) parsed() bool {
	return g.name != "" && g.name[0] != '-' && len(g.typed)-len(g.name) <= 2
}

// checkFlags checks the flags given to cmd, in order: each must be one
// of cmd's (or the help flag), and the value of a number or duration flag
// must parse as the parser parses it; then no flag may be given under two
// of its names.
func checkFlags(cmd *cli.Command, given []givenFlag) error {
	byName := map[string]cli.Flag{"h": cli.HelpFlag, "help": cli.HelpFlag}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	see := " (see mscclgo " + cmd.Name + " --help)"
	used := map[string]bool{}
	for _, g := range given {
		if !g.parsed() {
			continue
		}
		f, ok := byName[g.name]
		if !ok {
			return usageErr("unknown flag %s%s", g.typed, see)
		}
		used[g.name] = true
		if g.hasValue && !validValue(f, g.value) {
			return usageErr("flag %s: invalid value %q%s", g.typed, g.value, see)
		}
	}
	for _, f := range cmd.Flags {
		first := ""
		for _, n := range f.Names() {
			if !used[n] {
				continue
			}
			if first != "" {
				return usageErr("flag %s given twice (as %s and %s): give it once%s", dashed(first), dashed(n), dashed(first), see)
			}
			first = n
		}
	}
	return nil
}

// validValue reports whether value parses as the value of f, for the
// flags whose values the parser checks (numbers and durations); a
// boolean's value is left to the parser.
func validValue(f cli.Flag, value string) bool {
	var err error
	switch f.(type) {
	case *cli.IntFlag:
		_, err = strconv.ParseInt(value, 0, strconv.IntSize)
	case *cli.Uint64Flag:
		_, err = strconv.ParseUint(value, 0, 64)
	case *cli.DurationFlag:
		_, err = time.ParseDuration(value)
	}
	return err == nil
}

// checkAppFlags checks the flags before the command (args, after the
// program's name): --help and --version.
func checkAppFlags(args []string) error {
	for _, a := range args {
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return nil
		}
		typed, _, _ := strings.Cut(a, "=")
		g := givenFlag{typed: typed, name: strings.TrimLeft(typed, "-")}
		if !g.parsed() {
			continue
		}
		switch g.name {
		case "h", "help", "v", "version":
		default:
			return usageErr("unknown flag %s (see mscclgo --help)", g.typed)
		}
	}
	return nil
}
