// Package cli is the mscclgo command line: Run parses the arguments, runs
// one command (eval, check, run, model, install, select, list, trace,
// view, completion, help) and returns the process's exit status, one of
// the stable statuses that docs/cli.md documents. main calls nothing else.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/internal/termtext"
)

// Version is the mscclgo version printed by --version.
const Version = "0.1.0"

// deps are the process resources a command uses, swapped in tests.
type deps struct {
	// args is the whole command line, for the hand-over to the worker.
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// unknownCommand is set when the command line names no command.
	unknownCommand bool
}

// newApp builds the application; commands are data.
func newApp(d *deps) *cli.App {
	app := &cli.App{
		Name:            "mscclgo",
		Usage:           "compile and run MSCCL++ collective algorithms written in Starlark",
		Version:         Version,
		Reader:          d.stdin,
		Writer:          d.stdout,
		ErrWriter:       d.stderr,
		HideHelpCommand: true,
		CommandNotFound: func(c *cli.Context, name string) {
			hint := ""
			if near := nearestCommand(c.App, name); near != "" {
				hint = fmt.Sprintf("; did you mean %q?", near)
			}
			fmt.Fprintf(d.stderr, "mscclgo: unknown command %q%s (run mscclgo --help for the list)\n", name, hint)
			d.unknownCommand = true
		},
		OnUsageError: onUsageError,
		// The app has its own help command, so urfave/cli adds no
		// --help flag by itself.
		Flags: []cli.Flag{cli.HelpFlag},
		Commands: []*cli.Command{
			evalCommand(d),
			installCommand(d),
			selectCommand(d),
			checkCommand(d),
			runCommand(d),
			modelCommand(d),
			synthCommand(d),
			listCommand(d),
			traceCommand(d),
			viewCommand(d),
			completionCommand(d),
			versionCommand(d),
			helpCommand(),
		},
		// Errors are printed by Run, which also maps them to exit statuses.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	for _, c := range app.Commands {
		// No `mscclgo CMD help` subcommand: there, help is an argument
		// (mscclgo eval help looks for a script named help); mscclgo help CMD
		// prints the help.
		c.HideHelpCommand = true
	}
	return app
}

// Run runs the command line args and returns the process exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	d := &deps{args: args, stdin: stdin, stdout: stdout, stderr: stderr}
	app := newApp(d)
	// urfave/cli prints help (and --version) through app.Writer: wrapped
	// to the terminal's width. Commands write to d.stdout.
	help := termtext.NewWriter(stdout, termtext.Width(stdout), helpWrapped)
	defer help.Flush()
	app.Writer = help
	args, err := interspersed(app, args)
	if err != nil {
		printError(stderr, err.Error())
		return ExitUsage
	}
	err = app.Run(args)
	if d.unknownCommand {
		return ExitUsage
	}
	if err == nil {
		return ExitOK
	}
	var reported *reportedError
	if errors.As(err, &reported) {
		return reported.code
	}
	var ee *exitError
	if errors.As(err, &ee) {
		printError(stderr, err.Error())
		return ee.code
	}
	printError(stderr, err.Error())
	return ExitError
}

// helpWrapped reports whether the help section under heading is wrapped:
// the flag and command lists, whose lines urfave/cli builds from the
// flags' and commands' usage strings (the descriptions are broken by
// hand).
func helpWrapped(heading string) bool {
	return strings.HasSuffix(heading, "OPTIONS:") || heading == "COMMANDS:"
}

// Bounds of a printed error: a line longer than maxErrorLine bytes, or a
// message of more than maxErrorLines lines, is cut with a note of what
// was left out (a rank table of a million entries must not print
// megabytes).
const (
	maxErrorLine  = 4096
	maxErrorLines = 500
)

// printError prints msg as mscclgo's error, within the bounds above.
func printError(w io.Writer, msg string) {
	fmt.Fprintf(w, "mscclgo: %s\n", termtext.Cap(msg, maxErrorLine, maxErrorLines))
}

// dashed is a flag name as typed: -s, --size.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// nearestCommand returns the visible command whose name (or alias) is
// closest to name, within two edits, or "".
func nearestCommand(app *cli.App, name string) string {
	var names, cmds []string
	for _, c := range app.Commands {
		if !c.Hidden {
			for _, n := range c.Names() {
				names, cmds = append(names, n), append(cmds, c.Name)
			}
		}
	}
	if i := termtext.Nearest(name, names, 2); i >= 0 {
		return cmds[i]
	}
	return ""
}

// versionCommand is `mscclgo version`, which prints what --version prints.
func versionCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the mscclgo version (as mscclgo --version)",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("version: want no arguments, got %d", c.NArg())
			}
			fmt.Fprintf(d.stdout, "%s version %s\n", c.App.Name, c.App.Version)
			return nil
		},
		OnUsageError: onUsageError,
	}
}

// reportedError is an error whose message a command already printed.
type reportedError struct{ code int }

func (e *reportedError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// interspersed rewrites args so that flags given after a command's
// positional arguments are parsed too (urfave/cli v2 stops at the first
// positional): `eval algo.star -o plan.json` becomes
// `eval -o plan.json algo.star`. A flag that takes a value but ends the
// line (or is followed by --) is an error naming the flag: the rewritten
// line would hand it the -- that separates the positional arguments.
// The flags are checked here, as they were typed (checkFlags), before
// urfave/cli parses them.
func interspersed(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args, checkAppFlags(args[1:])
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	flags := []string{}
	var given []givenFlag
	var positional []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.Contains(a[:2], "=") && takesValue[a[1:2]] && !takesValue[strings.SplitN(a[1:], "=", 2)[0]] {
			// -Dn=4: a one-letter flag glued to its value.
			flags = append(flags, a[:2], a[2:])
			given = append(given, givenFlag{typed: a[:2], name: a[1:2], value: a[2:], hasValue: true})
			continue
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			g := givenFlag{typed: a}
			g.typed, g.value, g.hasValue = strings.Cut(a, "=")
			g.name = strings.TrimLeft(g.typed, "-")
			if !g.hasValue && takesValue[g.name] {
				if i+1 == len(rest) || rest[i+1] == "--" {
					return nil, fmt.Errorf("%s: flag %s needs a value (%s %s VALUE; see mscclgo %s --help)", cmd.Name, a, cmd.Name, a, cmd.Name)
				}
				i++
				flags = append(flags, rest[i])
				g.value, g.hasValue = rest[i], true
			}
			given = append(given, g)
			continue
		}
		positional = append(positional, a)
	}
	if !cmd.SkipFlagParsing {
		if err := checkFlags(cmd, given); err != nil {
			return nil, err
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, nil
}

// helpCommand is `mscclgo help [COMMAND]`: the app's help, or the
// command's (as `mscclgo COMMAND --help` prints it).
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "print the list of commands, or the help of one command",
		ArgsUsage: "[COMMAND]",
		Description: "mscclgo help prints what mscclgo --help prints; mscclgo help COMMAND prints what\n" +
			"mscclgo COMMAND --help prints.",
		// help parses its --help itself: urfave/cli would print the
		// app's help for it.
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			switch len(args) {
			case 0:
				return cli.ShowAppHelp(c)
			case 1:
				name := args[0]
				if name == "--help" || name == "-h" {
					name = "help"
				}
				if c.App.Command(name) == nil {
					return usageErr("help: unknown command %q (run mscclgo --help for the list)", name)
				}
				return cli.ShowCommandHelp(c, name)
			}
			return usageErr("help: want at most one COMMAND, got %d arguments", len(args))
		},
		OnUsageError: onUsageError,
	}
}

// onUsageError turns a flag parsing error into a usage error, without
// printing help on standard output (where a plan may be going).
func onUsageError(c *cli.Context, err error, _ bool) error {
	if c != nil && c.Command != nil && c.Command.Name != "" && (c.App == nil || c.Command.Name != c.App.Name) {
		return usageErr("%v (see mscclgo %s --help)", err, c.Command.Name)
	}
	return usageErr("%v (see mscclgo --help)", err)
}
