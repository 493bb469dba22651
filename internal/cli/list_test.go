package cli

// list_test.go tests mscclgo list, as text and as JSON.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/algorithms"
)

func TestList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names, err := algorithms.Names()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		absent []string
		stderr string
	}{
		{name: "all", args: []string{"list"}, stdout: append([]string{
			"allreduce_packet: single-node all-pairs AllReduce over the LL packet protocol, for small messages.\n  PARAM ",
			"  world_size             int     8        number of ranks (all on one node)\n",
			"  default set: ranks_per_node=2 world_size=2\n               ranks_per_node=4 world_size=4\n",
			"  max_message_size       int     18446744073709551615  largest message size",
			"  name                   string  \"\"  ",
			"  inplace                bool    True ",
		}, names...)},
		{name: "one", args: []string{"list", "allreduce_packet"}, stdout: []string{"allreduce_packet: "}, absent: []string{"allgather"}},
		{name: "with .star", args: []string{"list", "alltoall.star", "allgather"}, stdout: []string{"alltoall: ", "\n\nallgather: ", "inplace=true"}},
		{name: "unknown", args: []string{"list", "allreduce_pkt"}, code: ExitError, stderr: "mscclgo: allreduce_pkt: no bundled algorithm of that name (the bundled ones: allgather, "},
		{name: "unknown flag", args: []string{"list", "--yaml"}, code: ExitUsage, stderr: "mscclgo: unknown flag --yaml (see mscclgo list --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout does not contain %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout contains %q", s)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
		})
	}
}

func TestListJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := run(t, t.TempDir(), "list", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Algorithms []struct {
			Name    string `json:"name"`
			Summary string `json:"summary"`
			Params  []struct {
				Name    string          `json:"name"`
				Type    string          `json:"type"`
				Default json.RawMessage `json:"default"`
				Help    string          `json:"help"`
			} `json:"params"`
			DefaultSet []map[string]string `json:"default_set"`
		} `json:"algorithms"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	names, _ := algorithms.Names()
	if len(got.Algorithms) != len(names) {
		t.Fatalf("%d algorithms, want %d", len(got.Algorithms), len(names))
	}
	defaults := map[string]string{}
	for _, a := range got.Algorithms {
		if a.Summary == "" || len(a.Params) == 0 || len(a.DefaultSet) == 0 {
			t.Errorf("%s: incomplete: %+v", a.Name, a)
		}
		for _, p := range a.Params {
			defaults[a.Name+"."+p.Name] = p.Type + " " + string(p.Default)
		}
		if a.Name == "alltoall" && a.DefaultSet[3]["inplace"] != "true" {
			t.Errorf("alltoall default set: %v", a.DefaultSet)
		}
	}
	for key, want := range map[string]string{
		"allreduce_packet.world_size":     "int 8",
		"allreduce_packet.inplace":        "bool true",
		"allreduce_packet.name":           `string ""`,
		"allgather.max_message_size":      "int 18446744073709551615",
		"allreduce_hier_packet.nblocks":   "int 4",
		"allreduce_rsag.min_message_size": "int 1048577",
	} {
		if defaults[key] != want {
			t.Errorf("%s: %q, want %q", key, defaults[key], want)
		}
	}
}
