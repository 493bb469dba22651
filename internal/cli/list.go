package cli

// list.go is `mscclgo list`: the bundled algorithms, their parameters and
// their shapes in the default plan set, as text or JSON.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/algorithms"
)

func listCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the bundled algorithms, their parameters and their default shapes",
		ArgsUsage: "[NAME...]",
		Description: "Lists every bundled algorithm (or the NAMEs given): a one-line summary, the\n" +
			"parameters it declares (what mscclgo eval NAME -D name=value accepts, as eval NAME --params\n" +
			"prints them) and its shapes in the default plan set (the -D values mscclgo install uses).\n" +
			"--json prints the same as one JSON object.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"},
		},
		Action:       func(c *cli.Context) error { return runList(c, d) },
		OnUsageError: onUsageError,
	}
}

func runList(c *cli.Context, d *deps) error {
	infos, err := algorithms.List()
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		var names []string
		for _, info := range infos {
			names = append(names, info.Name)
		}
		var keep []algorithms.Info
		for _, arg := range c.Args().Slice() {
			i := slices.Index(names, strings.TrimSuffix(arg, ".star"))
			if i < 0 {
				return fmt.Errorf("%s: no bundled algorithm of that name (the bundled ones: %s)", arg, strings.Join(names, ", "))
			}
			keep = append(keep, infos[i])
		}
		infos = keep
	}
	if c.Bool("json") {
		return algorithms.WriteListJSON(d.stdout, infos)
	}
	return algorithms.WriteList(d.stdout, infos)
}
