package cli

// list.go is `mscclgo list`: the bundled algorithms, their parameters and
// their shapes in the default plan set, as text or JSON.

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"go.starlark.net/starlark"

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
		return writeListJSON(d.stdout, infos)
	}
	return writeList(d.stdout, infos)
}

// writeList prints one block per algorithm: its name and summary, a table
// of its parameters, and its default-set shapes.
func writeList(w io.Writer, infos []algorithms.Info) error {
	for i, info := range infos {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %s\n", info.Name, info.Summary)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARAM\tTYPE\tDEFAULT\tHELP")
		for _, p := range info.Params {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Name, p.Default.Type(), p.Default, p.Help)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(info.Shapes) == 0 {
			fmt.Fprintln(w, "  default set: none")
			continue
		}
		for j, s := range info.Shapes {
			label := "  default set:"
			if j > 0 {
				label = strings.Repeat(" ", len(label))
			}
			fmt.Fprintf(w, "%s %s\n", label, defines(s.Params))
		}
	}
	return nil
}

// defines returns params as "k=v k=v", sorted by name, as -D takes them.
func defines(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + params[k]
	}
	return strings.Join(parts, " ")
}

// listJSON is the --json form of mscclgo list.
type listJSON struct {
	Algorithms []algorithmJSON `json:"algorithms"`
}

type algorithmJSON struct {
	Name    string      `json:"name"`
	Summary string      `json:"summary"`
	Params  []paramJSON `json:"params"`
	// DefaultSet holds the -D values of each default-set shape.
	DefaultSet []map[string]string `json:"default_set"`
}

type paramJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Default is the default as a JSON value of the parameter's type
	// (ints exactly, however large).
	Default json.RawMessage `json:"default"`
	Help    string          `json:"help"`
}

func writeListJSON(w io.Writer, infos []algorithms.Info) error {
	out := listJSON{Algorithms: []algorithmJSON{}}
	for _, info := range infos {
		a := algorithmJSON{Name: info.Name, Summary: info.Summary, Params: []paramJSON{}, DefaultSet: []map[string]string{}}
		for _, p := range info.Params {
			def, err := jsonValue(p.Default)
			if err != nil {
				return fmt.Errorf("%s: parameter %s: %w", info.Name, p.Name, err)
			}
			a.Params = append(a.Params, paramJSON{Name: p.Name, Type: p.Default.Type(), Default: def, Help: p.Help})
		}
		for _, s := range info.Shapes {
			a.DefaultSet = append(a.DefaultSet, s.Params)
		}
		out.Algorithms = append(out.Algorithms, a)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// jsonValue returns a parameter default (int, bool, string or float) as
// JSON.
func jsonValue(v starlark.Value) (json.RawMessage, error) {
	switch v := v.(type) {
	case starlark.Int:
		return json.RawMessage(v.String()), nil
	case starlark.Bool:
		return json.Marshal(bool(v))
	case starlark.String:
		return json.Marshal(string(v))
	case starlark.Float:
		return json.Marshal(float64(v))
	}
	return nil, fmt.Errorf("default of type %s", v.Type())
}
