package algorithms

// listtext.go writes the list of the bundled algorithms (Info) as
// `mscclgo list` prints it: as text, or as JSON.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"go.starlark.net/starlark"
)

// WriteList prints one block per algorithm: its name and summary, a table
// of its parameters, and its default-set shapes.
func WriteList(w io.Writer, infos []Info) error {
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

// listJSON is the JSON form of a list (mscclgo list --json).
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

// WriteListJSON writes infos as one JSON object (mscclgo list --json):
// each algorithm's name, summary, parameters (their defaults as JSON
// values of their types) and default-set shapes.
func WriteListJSON(w io.Writer, infos []Info) error {
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
