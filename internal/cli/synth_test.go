package cli

// synth_test.go tests mscclgo synth (the link table, a program written,
// evaluated and checked again, the report, bad topologies) and model
// --topo.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ringTopo = `{"name": "ring3", "vertices": [{"name": "gpu0", "kind": "gpu"}, {"name": "gpu1", "kind": "gpu"},
  {"name": "gpu2", "kind": "gpu"}],
 "links": [{"from": "gpu0", "to": "gpu1", "type": "nvlink", "count": 2},
  {"from": "gpu1", "to": "gpu2", "type": "nvlink", "count": 2},
  {"from": "gpu2", "to": "gpu0", "type": "nvlink", "count": 1}]}
`

func TestSynth(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ring.json"), ringTopo)
	writeFile(t, filepath.Join(dir, "bad.txt"), "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNVX\t X \n")
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"links", []string{"synth", "--topo", "$DIR/ring.json", "--hw", "v100-sxm2", "--links"}, 0,
			"link gpu0 gpu1 40\nlink gpu0 gpu2 20\nlink gpu1 gpu0 40\nlink gpu1 gpu2 40\nlink gpu2 gpu0 20\nlink gpu2 gpu1 40\n", ""},
		{"links of a bundled example", []string{"synth", "--topo", "dgx-h100", "--hw", "h100-sxm", "--links", "--nodes", "2"}, 0,
			"link n0.gpu0 n0.nvswitch 369.9\nlink n0.gpu0 n0.railnic0 47\n", ""},
		{"bad cell", []string{"synth", "allgather", "--topo", "$DIR/bad.txt", "--hw", "v100-sxm2"}, ExitError,
			"", `$DIR/bad.txt:3: GPU1 to GPU0: unknown cell "NVX"`},
		{"no topology", []string{"synth", "allgather"}, ExitUsage, "", "--topo is required"},
		{"unknown collective", []string{"synth", "alltoall", "--topo", "$DIR/ring.json", "--hw", "v100-sxm2"}, ExitUsage, "", `collective "alltoall"`},
		{"unknown profile", []string{"synth", "allgather", "--topo", "$DIR/ring.json", "--hw", "tpu"}, ExitError, "", `GPU profile "tpu": unknown`},
		{"model on a topology", []string{"model", "allgather", "-D", "world_size=8", "--topo", "dgx1-v100", "--hw", "v100-sxm2", "-s", "1M"}, 0,
			"# on the links of topology dgx1-v100", ""},
		{"model: ranks differ", []string{"model", "allgather", "-D", "world_size=4", "--topo", "dgx1-v100", "--hw", "v100-sxm2", "-s", "1M"}, ExitError,
			"", "the plan has 4 ranks, the topology 8 GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tc.args...)
			want := strings.ReplaceAll(tc.stderr, "$DIR", dir)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
		})
	}
}

// TestSynthWrites: the program written evaluates again to checked plans.
func TestSynthWrites(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ring.json"), ringTopo)
	code, stdout, stderr := run(t, dir, "synth", "allreduce", "--topo", "$DIR/ring.json", "--hw", "v100-sxm2", "-o", "$DIR/ar.star", "--report")
	if code != 0 {
		t.Fatalf("synth: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "verified on the CPU backend") || !strings.Contains(stdout, "bound (us)") {
		t.Errorf("summary or report missing:\n%s\n%s", stdout, stderr)
	}
	text, err := os.ReadFile(filepath.Join(dir, "ar.star"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# synth_allreduce_ring: allreduce for", "TREE_SETS = [", "def reduce(base, count, parent, unit, then_broadcast, how, tb):", "Cut lower bound"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("ar.star lacks %q", want)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, dir, "eval", "$DIR/ar.star", "-o", "$DIR/plans/"); code != 0 {
		t.Fatalf("eval: exit %d\n%s", code, stderr)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "plans"))
	for _, e := range ents {
		if code, out, _ := run(t, dir, "check", filepath.Join(dir, "plans", e.Name())); code != 0 {
			t.Errorf("check %s: %s", e.Name(), out)
		}
	}
}
