package cli

// completion.go is `mscclgo completion bash|zsh|fish`: a shell completion
// script generated from the command tree (commands, their flags, the
// values some flags take), with file completion for .star and .json
// arguments and the bundled algorithm names.

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/internal/complete"
)

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
				return usageErr("completion: want one shell argument (%s), got %d", strings.Join(complete.Shells, ", "), c.NArg())
			}
			shell := c.Args().First()
			if !slices.Contains(complete.Shells, shell) {
				return usageErr("completion: unknown shell %q (want %s)", shell, strings.Join(complete.Shells, ", "))
			}
			names, err := algorithms.Names()
			if err != nil {
				return err
			}
			tree := completionTree(c.App.Commands, names)
			return complete.Write(d.stdout, shell, tree)
		},
		OnUsageError: onUsageError,
	}
}

// completionTree turns the command tree into what the scripts complete.
func completionTree(commands []*cli.Command, algos []string) []complete.Command {
	var names []string
	for _, c := range commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	var tree []complete.Command
	for _, c := range commands {
		if c.Hidden {
			continue
		}
		cc := complete.Command{Name: c.Name, Usage: c.Usage}
		switch {
		case c.Name == "help":
			cc.Args = complete.Values{Words: names, Label: "command"}
		case c.Name == "completion":
			cc.Args = complete.Values{Words: complete.Shells, Label: "shell"}
		case c.Name == "list":
			cc.Args = complete.Values{Words: algos, Label: "bundled algorithm"}
		default:
			if strings.Contains(c.ArgsUsage, ".star") {
				cc.Args.Exts = append(cc.Args.Exts, ".star")
				cc.Args.Words, cc.Args.Label = algos, "bundled algorithm"
			}
			if strings.Contains(c.ArgsUsage, ".json") {
				cc.Args.Exts = append(cc.Args.Exts, ".json")
			}
		}
		for _, f := range c.Flags {
			if slices.Contains(f.Names(), "help") {
				continue
			}
			cc.Flags = append(cc.Flags, compFlagOf(f))
		}
		cc.Flags = append(cc.Flags, complete.Flag{Short: []string{"h"}, Long: []string{"help"}, Usage: "show help"})
		tree = append(tree, cc)
	}
	return tree
}

// compFlagOf describes one flag; the values of a flag are known by its
// name.
func compFlagOf(f cli.Flag) complete.Flag {
	var cf complete.Flag
	for _, n := range f.Names() {
		if len(n) == 1 {
			cf.Short = append(cf.Short, n)
		} else {
			cf.Long = append(cf.Long, n)
		}
	}
	if df, ok := f.(cli.DocGenerationFlag); ok {
		cf.TakesValue = df.TakesValue()
		cf.Usage = df.GetUsage()
	}
	if _, ok := f.(*cli.StringSliceFlag); ok {
		cf.Repeatable = true
	}
	cf.Placeholder = "VALUE"
	if _, rest, ok := strings.Cut(cf.Usage, "`"); ok {
		if name, _, ok := strings.Cut(rest, "`"); ok && name != "" {
			cf.Placeholder = name
		}
	}
	cf.Usage = strings.ReplaceAll(cf.Usage, "`", "")
	if !cf.TakesValue {
		return cf
	}
	switch f.Names()[0] {
	case "output":
		cf.Values.Files = true
	case "dir", "plans":
		cf.Values.Dirs = true
	case "dtype":
		cf.Values = complete.Values{Words: dtypeNames, Label: "data type"}
	case "collective":
		cf.Values = complete.Values{Words: selectable(), Label: "collective"}
	case "backend":
		cf.Values = complete.Values{Words: knownBackends, Label: "backend"}
	}
	return cf
}
