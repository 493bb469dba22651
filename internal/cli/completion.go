package cli

// completion.go is `mscclgo completion bash|zsh|fish`: a shell completion
// script generated from the command tree (commands, their flags, the
// values some flags take), with file completion for .star and .json
// arguments and the bundled algorithm names.

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/algorithms"
)

// completionShells are the shells `mscclgo completion` writes scripts for.
var completionShells = []string{"bash", "zsh", "fish"}

// dtypeNames are the --dtype values offered by completion.
var dtypeNames = []string{"float16", "bfloat16", "float32", "int32"}

func completionCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: "Prints a completion script for the shell: commands, their flags, the values of\n" +
			"--dtype, --collective and --backend, .star and .json files and the bundled algorithm\n" +
			"names. Load it with\n" +
			"    source <(mscclgo completion bash)     # in ~/.bashrc\n" +
			"    source <(mscclgo completion zsh)      # in ~/.zshrc, after compinit\n" +
			"    mscclgo completion fish | source      # in ~/.config/fish/config.fish",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("completion: want one shell argument (%s), got %d", strings.Join(completionShells, ", "), c.NArg())
			}
			shell := c.Args().First()
			if !slices.Contains(completionShells, shell) {
				return usageErr("completion: unknown shell %q (want %s)", shell, strings.Join(completionShells, ", "))
			}
			names, err := algorithms.Names()
			if err != nil {
				return err
			}
			tree := completionTree(c.App.Commands, names)
			switch shell {
			case "bash":
				return writeBashCompletion(d.stdout, tree)
			case "zsh":
				return writeZshCompletion(d.stdout, tree)
			}
			return writeFishCompletion(d.stdout, tree)
		},
		OnUsageError: onUsageError,
	}
}

// compValues says how to complete a value: files with one of exts (every
// file when files is set), directories, and fixed words.
type compValues struct {
	files bool
	exts  []string
	dirs  bool
	words []string
	// label describes the words (for zsh and fish).
	label string
}

// any reports whether anything is completed.
func (v compValues) any() bool { return v.files || len(v.exts) > 0 || v.dirs || len(v.words) > 0 }

// compFlag is one flag of a command.
type compFlag struct {
	short, long []string // names without dashes
	usage       string
	takesValue  bool
	repeatable  bool
	placeholder string // the value's name in the usage (OUT, SIZE)
	values      compValues
}

// compCommand is one command with its flags and positional arguments.
type compCommand struct {
	name  string
	usage string
	flags []compFlag
	args  compValues
}

// completionTree turns the command tree into what the scripts complete.
func completionTree(commands []*cli.Command, algos []string) []compCommand {
	var names []string
	for _, c := range commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	var tree []compCommand
	for _, c := range commands {
		if c.Hidden {
			continue
		}
		cc := compCommand{name: c.Name, usage: c.Usage}
		switch {
		case c.Name == "help":
			cc.args = compValues{words: names, label: "command"}
		case c.Name == "completion":
			cc.args = compValues{words: completionShells, label: "shell"}
		case c.Name == "list":
			cc.args = compValues{words: algos, label: "bundled algorithm"}
		default:
			if strings.Contains(c.ArgsUsage, ".star") {
				cc.args.exts = append(cc.args.exts, ".star")
				cc.args.words, cc.args.label = algos, "bundled algorithm"
			}
			if strings.Contains(c.ArgsUsage, ".json") {
				cc.args.exts = append(cc.args.exts, ".json")
			}
		}
		for _, f := range c.Flags {
			if slices.Contains(f.Names(), "help") {
				continue
			}
			cc.flags = append(cc.flags, compFlagOf(f))
		}
		cc.flags = append(cc.flags, compFlag{short: []string{"h"}, long: []string{"help"}, usage: "show help"})
		tree = append(tree, cc)
	}
	return tree
}

// compFlagOf describes one flag; the values of a flag are known by its
// name.
func compFlagOf(f cli.Flag) compFlag {
	var cf compFlag
	for _, n := range f.Names() {
		if len(n) == 1 {
			cf.short = append(cf.short, n)
		} else {
			cf.long = append(cf.long, n)
		}
	}
	if df, ok := f.(cli.DocGenerationFlag); ok {
		cf.takesValue = df.TakesValue()
		cf.usage = df.GetUsage()
	}
	if _, ok := f.(*cli.StringSliceFlag); ok {
		cf.repeatable = true
	}
	cf.placeholder = "VALUE"
	if _, rest, ok := strings.Cut(cf.usage, "`"); ok {
		if name, _, ok := strings.Cut(rest, "`"); ok && name != "" {
			cf.placeholder = name
		}
	}
	cf.usage = strings.ReplaceAll(cf.usage, "`", "")
	if !cf.takesValue {
		return cf
	}
	switch f.Names()[0] {
	case "output":
		cf.values.files = true
	case "dir", "plans":
		cf.values.dirs = true
	case "dtype":
		cf.values = compValues{words: dtypeNames, label: "data type"}
	case "collective":
		cf.values = compValues{words: selectable(), label: "collective"}
	case "backend":
		cf.values = compValues{words: knownBackends, label: "backend"}
	}
	return cf
}

// dashed returns the flag's names with their dashes: -o --output.
func (f compFlag) dashed() []string {
	var out []string
	for _, s := range f.short {
		out = append(out, "-"+s)
	}
	for _, l := range f.long {
		out = append(out, "--"+l)
	}
	return out
}

// oneLine makes a usage text fit a one-line description.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func writeBashCompletion(w io.Writer, tree []compCommand) error {
	var b strings.Builder
	b.WriteString(`# bash completion for mscclgo, generated by "mscclgo completion bash".
# Load it in the current shell with
#     source <(mscclgo completion bash)
# or save it as ~/.local/share/bash-completion/completions/mscclgo.

# _mscclgo_files [EXT...]: complete the files ending in one of EXT, and
# directories to descend into; every file when no EXT is given.
_mscclgo_files() {
    local IFS=$'\n' ext
    compopt -o filenames 2>/dev/null
    if (( $# == 0 )); then
        COMPREPLY+=( $(compgen -f -- "$cur") )
        return 0
    fi
    COMPREPLY+=( $(compgen -d -- "$cur") )
    for ext in "$@"; do
        COMPREPLY+=( $(compgen -f -X "!*$ext" -- "$cur") )
    done
}

# _mscclgo_dirs: complete directories.
_mscclgo_dirs() {
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=( $(compgen -d -- "$cur") )
}

# _mscclgo: the completion function of mscclgo. The command is the first
# word after mscclgo that is not a flag.
_mscclgo() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" cmd="" i
    COMPREPLY=()
    if (( COMP_CWORD > 0 )); then
        prev="${COMP_WORDS[COMP_CWORD-1]}"
    fi
    # --flag=VALUE: bash splits it at "=".
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$prev" == "=" ]] && (( COMP_CWORD > 1 )); then
        prev="${COMP_WORDS[COMP_CWORD-2]}"
    fi
    for (( i = 1; i < COMP_CWORD; i++ )); do
        if [[ "${COMP_WORDS[i]}" != -* ]]; then
            cmd="${COMP_WORDS[i]}"
            break
        fi
    done
    case "$cmd" in
    "")
        if [[ "$cur" == -* ]]; then
            COMPREPLY=( $(compgen -W "-h --help -v --version" -- "$cur") )
        else
`)
	var names []string
	for _, c := range tree {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "            COMPREPLY=( $(compgen -W %q -- \"$cur\") )\n", strings.Join(names, " "))
	b.WriteString("        fi\n        ;;\n")
	for _, c := range tree {
		fmt.Fprintf(&b, "    %s)\n", c.name)
		var all, free []string
		var arms strings.Builder
		for _, f := range c.flags {
			all = append(all, f.dashed()...)
			switch {
			case !f.takesValue:
			case f.values.any():
				fmt.Fprintf(&arms, "        %s)\n", strings.Join(f.dashed(), "|"))
				arms.WriteString(indent("            ", append(bashValues(f.values), "return 0", ";;")...))
			default:
				free = append(free, f.dashed()...)
			}
		}
		if len(free) > 0 {
			// Flags whose value is free text: nothing to complete.
			fmt.Fprintf(&arms, "        %s)\n            return 0\n            ;;\n", strings.Join(free, "|"))
		}
		if arms.Len() > 0 {
			b.WriteString("        case \"$prev\" in\n" + arms.String() + "        esac\n")
		}
		fmt.Fprintf(&b, "        if [[ \"$cur\" == -* ]]; then\n            COMPREPLY=( $(compgen -W %q -- \"$cur\") )\n            return 0\n        fi\n", strings.Join(all, " "))
		b.WriteString(indent("        ", append(bashValues(c.args), ";;")...))
	}
	b.WriteString("    esac\n    return 0\n}\n\ncomplete -F _mscclgo mscclgo\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// bashValues returns the bash commands that complete v, one a line.
func bashValues(v compValues) []string {
	var lines []string
	switch {
	case v.files:
		lines = append(lines, "_mscclgo_files")
	case len(v.exts) > 0:
		lines = append(lines, "_mscclgo_files "+strings.Join(v.exts, " "))
	case v.dirs:
		lines = append(lines, "_mscclgo_dirs")
	}
	if len(v.words) > 0 {
		lines = append(lines, fmt.Sprintf("COMPREPLY+=( $(compgen -W %q -- \"$cur\") )", strings.Join(v.words, " ")))
	}
	return lines
}

// indent returns lines, each indented by prefix and ended by a newline.
func indent(prefix string, lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// zshQuote quotes s for zsh in single quotes.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// zshDesc makes s fit an _arguments or _describe description.
func zshDesc(s string) string {
	s = oneLine(s)
	return strings.NewReplacer("[", "(", "]", ")", "\\", "").Replace(s)
}

func writeZshCompletion(w io.Writer, tree []compCommand) error {
	var b strings.Builder
	b.WriteString(`#compdef mscclgo
# zsh completion for mscclgo, generated by "mscclgo completion zsh".
# Load it in the current shell (after compinit) with
#     source <(mscclgo completion zsh)
# or save it as _mscclgo in a directory of $fpath.

`)
	// Value helpers: one function per value kind used.
	helpers := map[string]string{}
	var helperOrder []string
	action := func(v compValues) string {
		if !v.any() {
			return " "
		}
		var alts []string
		switch {
		case v.files:
			alts = append(alts, "'files:file:_files'")
		case len(v.exts) > 0:
			var globs []string
			for _, e := range v.exts {
				globs = append(globs, "*"+e)
			}
			glob := globs[0]
			if len(globs) > 1 {
				glob = "(" + strings.Join(globs, "|") + ")"
			}
			alts = append(alts, fmt.Sprintf("'files:file:_files -g \"%s\"'", glob))
		case v.dirs:
			alts = append(alts, "'directories:directory:_files -/'")
		}
		if len(v.words) > 0 {
			alts = append(alts, zshQuote(fmt.Sprintf("words:%s:(%s)", v.label, strings.Join(v.words, " "))))
		}
		body := "_alternative " + strings.Join(alts, " ")
		name, ok := helpers[body]
		if !ok {
			name = fmt.Sprintf("_mscclgo_values_%d", len(helpers)+1)
			helpers[body] = name
			helperOrder = append(helperOrder, body)
		}
		return name
	}
	var cmds strings.Builder
	for _, c := range tree {
		fmt.Fprintf(&cmds, "        %s)\n            _arguments -s", c.name)
		for _, f := range c.flags {
			names := f.dashed()
			excl := "(" + strings.Join(names, " ") + ")"
			if f.repeatable {
				excl = "*"
			}
			if slices.Contains(f.long, "help") {
				excl = "(- *)"
			}
			for _, n := range names {
				spec := fmt.Sprintf("%s%s[%s]", excl, n, zshDesc(f.usage))
				if f.takesValue {
					spec += fmt.Sprintf(":%s:%s", zshDesc(f.placeholder), action(f.values))
				}
				fmt.Fprintf(&cmds, " \\\n                %s", zshQuote(spec))
			}
		}
		if c.args.any() {
			fmt.Fprintf(&cmds, " \\\n                %s", zshQuote("*:argument:"+action(c.args)))
		}
		cmds.WriteString(" && ret=0\n            ;;\n")
	}
	for i, body := range helperOrder {
		fmt.Fprintf(&b, "_mscclgo_values_%d() {\n    %s\n}\n\n", i+1, body)
	}
	b.WriteString(`_mscclgo() {
    local curcontext="$curcontext" state line ret=1
    local -a commands
    commands=(
`)
	for _, c := range tree {
		fmt.Fprintf(&b, "        %s\n", zshQuote(c.name+":"+zshDesc(c.usage)))
	}
	b.WriteString(`    )
    _arguments -C \
        '(- *)'{-h,--help}'[show help]' \
        '(- *)'{-v,--version}'[print the version]' \
        '1: :->command' \
        '*:: :->args' && ret=0
    case $state in
    command)
        _describe -t commands 'mscclgo command' commands && ret=0
        ;;
    args)
        case $words[1] in
`)
	b.WriteString(cmds.String())
	b.WriteString(`        esac
        ;;
    esac
    return ret
}

if [[ "$funcstack[1]" == "_mscclgo" ]]; then
    _mscclgo "$@"
else
    compdef _mscclgo mscclgo
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func writeFishCompletion(w io.Writer, tree []compCommand) error {
	var b strings.Builder
	b.WriteString(`# fish completion for mscclgo, generated by "mscclgo completion fish".
# Load it in the current shell with
#     mscclgo completion fish | source
# or save it as ~/.config/fish/completions/mscclgo.fish.

# __mscclgo_command prints the command: the first word after mscclgo that
# is not a flag.
function __mscclgo_command
    for w in (commandline -opc)[2..-1]
        switch $w
            case '-*'
            case '*'
                echo $w
                return 0
        end
    end
    return 1
end

# __mscclgo_using CMD: the command line's command is CMD.
function __mscclgo_using
    set -l cmd (__mscclgo_command)
    and test "$cmd" = "$argv[1]"
end

# __mscclgo_files EXT...: the files ending in one of EXT, and directories
# to descend into.
function __mscclgo_files
    for f in (__fish_complete_path (commandline -ct))
        set -l name (string split -f1 \t -- $f)
        if string match -q -- '*/' $name
            echo $name
            continue
        end
        for ext in $argv
            if string match -q -- "*$ext" $name
                echo $name
                break
            end
        end
    end
end

# __mscclgo_needs_command: the command line has no command yet.
function __mscclgo_needs_command
    not __mscclgo_command >/dev/null
end

complete -c mscclgo -e
complete -c mscclgo -f
complete -c mscclgo -n __mscclgo_needs_command -s h -l help -d 'show help'
complete -c mscclgo -n __mscclgo_needs_command -s v -l version -d 'print the version'
`)
	for _, c := range tree {
		fmt.Fprintf(&b, "complete -c mscclgo -n __mscclgo_needs_command -a %s -d %s\n", c.name, fishQuote(oneLine(c.usage)))
	}
	for _, c := range tree {
		cond := fishQuote("__mscclgo_using " + c.name)
		fmt.Fprintf(&b, "\n# %s\n", c.name)
		for _, f := range c.flags {
			var opts []string
			for _, s := range f.short {
				opts = append(opts, "-s "+s)
			}
			for _, l := range f.long {
				opts = append(opts, "-l "+l)
			}
			if f.takesValue {
				opts = append(opts, fishValues(f.values)...)
			}
			fmt.Fprintf(&b, "complete -c mscclgo -n %s %s -d %s\n", cond, strings.Join(opts, " "), fishQuote(oneLine(f.usage)))
		}
		a := c.args
		if len(a.exts) > 0 {
			fmt.Fprintf(&b, "complete -c mscclgo -n %s -a %s\n", cond, fishQuote("(__mscclgo_files "+strings.Join(a.exts, " ")+")"))
		}
		if len(a.words) > 0 {
			fmt.Fprintf(&b, "complete -c mscclgo -n %s -a %s -d %s\n", cond, fishQuote(strings.Join(a.words, " ")), fishQuote(a.label))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fishValues returns the complete options for a flag's value.
func fishValues(v compValues) []string {
	switch {
	case v.files:
		return []string{"-r", "-F"}
	case v.dirs:
		return []string{"-x", "-a", fishQuote("(__fish_complete_directories)")}
	case len(v.words) > 0:
		return []string{"-x", "-a", fishQuote(strings.Join(v.words, " "))}
	}
	return []string{"-x"}
}
