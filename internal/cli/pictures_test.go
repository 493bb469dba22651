package cli

// pictures_test.go tests `mscclgo trace` and `mscclgo view` end to end:
// the files they write and their usage errors.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/trace"
)

func TestTraceCommand(t *testing.T) {
	t.Parallel()
	plan := "../../tests/ports/single_node/allgather.plan.json"
	cases := []struct {
		name string
		args []string
		// source is the trace's otherData.source; "" when the command fails.
		source string
		code   int
		stderr string
	}{
		{"model", []string{"trace", plan, "--size", "64K", "-o", "$DIR/t.json"}, "model h100-sxm", 0, ""},
		{"model a100", []string{"trace", plan, "--size", "64K", "--hw", "a100-sxm", "-o", "$DIR/t.json"}, "model a100-sxm", 0, ""},
		{"cpu", []string{"trace", plan, "--size", "64K", "--from", "cpu", "-o", "$DIR/t.json"}, "cpu backend", 0, ""},
		{"unknown source", []string{"trace", plan, "--from", "gpu"}, "", 2, `--from "gpu": want model or cpu`},
		{"unknown hardware", []string{"trace", plan, "--hw", "z80"}, "", 2, "--hw:"},
		{"bad size", []string{"trace", plan, "--size", "12Q"}, "", 2, "--size:"},
		{"no plan", []string{"trace"}, "", 2, "want one PLAN.json"},
		{"size the plan rejects", []string{"trace", plan, "--size", "100"}, "", 1, "allgather.plan.json: size 100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			code, _, stderr := run(t, dir, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.stderr)
			}
			if tc.source == "" {
				return
			}
			data, err := os.ReadFile(filepath.Join(dir, "t.json"))
			if err != nil {
				t.Fatal(err)
			}
			st, err := trace.Validate(data)
			if err != nil {
				t.Fatal(err)
			}
			// allgather.plan.json: 2 ranks of one thread block, 10 ops each.
			if st.Processes != 2 || st.Threads != 2 || st.Slices != 20 || st.Flows == 0 {
				t.Errorf("stats %+v, want 2 processes, 2 threads, 20 slices and flows", st)
			}
			if !strings.Contains(string(data), `"source":"`+tc.source+`"`) {
				t.Errorf("trace does not say its source is %q", tc.source)
			}
		})
	}
}

func TestViewCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, stderr := run(t, dir, "view", "../../tests/ports/single_node/allreduce_pipeline.plan.json", "--size", "256K", "--curve-max", "16M", "-o", "$DIR/p.html")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "p.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, want := range []string{`<pre id="selfcheck">`, "Predicted bus bandwidth", `<g class="series"`, "model h100-sxm", `"traceEvents"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Sizes 1K, 4K, ..., 16M: the points the plan accepts are drawn.
	if n := strings.Count(page, "<circle cx="); n == 0 || n > 8 {
		t.Errorf("%d curve points, want 1 to 8", n)
	}
	code, _, _ = run(t, dir, "view", "../../tests/ports/single_node/allreduce_pipeline.plan.json", "--curve-max", "0", "-o", "$DIR/q.html")
	if data, _ := os.ReadFile(filepath.Join(dir, "q.html")); code != 0 || strings.Contains(string(data), "Predicted bus bandwidth") {
		t.Errorf("--curve-max 0: exit %d, or the page has a curve", code)
	}
}

func TestModelPlot(t *testing.T) {
	t.Parallel()
	a, b := "../../tests/ports/single_node/allreduce.plan.json", "../../tests/ports/single_node/allreduce_pipeline.plan.json"
	dir := t.TempDir()
	code, stdout, stderr := run(t, dir, "model", a, b, "-b", "1K", "-e", "1M", "-f", "4", "--plot", "$DIR/p.svg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stdout, "6 sizes on h100-sxm"); n != 2 {
		t.Errorf("stdout %q: want a line per plan with 6 sizes", stdout)
	}
	data, err := os.ReadFile(filepath.Join(dir, "p.svg"))
	if err != nil {
		t.Fatal(err)
	}
	svg := string(data)
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d curves, want 2", n)
	}
	if n := strings.Count(svg, "<circle"); n != 12 {
		t.Errorf("%d points, want 12", n)
	}
	for _, name := range []string{"allreduce.plan.json (h100-sxm)", "allreduce_pipeline.plan.json (h100-sxm)"} {
		if !strings.Contains(svg, ">"+name+"</text>") {
			t.Errorf("legend lacks %q", name)
		}
	}
	if code, _, stderr := run(t, dir, "model", "--plot", "$DIR/q.svg"); code != 2 || !strings.Contains(stderr, "want at least one PLAN.json") {
		t.Errorf("no plan: exit %d, %q", code, stderr)
	}
}
