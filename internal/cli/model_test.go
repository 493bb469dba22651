package cli

// model_test.go tests mscclgo model: the predicted table of a sweep, a
// .star input, --fit on a results table, and the errors of bad flags and
// profiles; and select --hw on an installed-like directory.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/planset"
)

const nvlsPort = "../../tests/ports/single_node/allreduce_nvls_zero_copy.plan.json"

func TestModel(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.txt")
	writeFile(t, results, "#  size count type redop root time algbw busbw #wrong\n"+
		"     1024    512  half  sum  -1   9.00  0.11  0.20  0\n"+
		"  1048576 524288  half  sum  -1  14.00 74.90 131.0  0\n"+
		" 67108864 33554432 half sum  -1  300.0 223.7 391.5  0\n")
	writeFile(t, filepath.Join(dir, "bad.json"), `{"name": "x"}`)
	h100, err := model.LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	h100.Name, h100.SM = "nosm", nil
	nosm, err := h100.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "nosm.json"), string(nosm))
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []*regexp.Regexp
		stderr string
	}{
		{name: "sweep", args: []string{"model", nvlsPort, "-b", "1K", "-e", "4K"},
			stdout: []*regexp.Regexp{
				regexp.MustCompile(`# mscclgo model .*: plan "allreduce_nvls_zero_copy", collective allreduce, 8 ranks \(1 node\(s\) of 8\), protocol Simple`),
				regexp.MustCompile(`# predicted on h100-sxm .*graph launch, dtype half, in-place true, LL16`),
				regexp.MustCompile(`\n        1024           512      half     sum      -1     \d\.\d\d    0\.\d\d    0\.\d\d      -\n        2048 .*\n        4096 `),
				regexp.MustCompile(`# Avg bus bandwidth`),
			}},
		{name: "kernel launch costs more", args: []string{"model", nvlsPort, "--size", "1K", "--launch", "kernel"},
			stdout: []*regexp.Regexp{regexp.MustCompile(`kernel launch`), regexp.MustCompile(`\n        1024 .*     8\.\d\d  `)}},
		{name: "star input", args: []string{"model", "allreduce_packet", "-D", "world_size=4", "--size", "64K"},
			stdout: []*regexp.Regexp{regexp.MustCompile(`plan "allreduce_packet_4gpu", collective allreduce, 4 ranks`), regexp.MustCompile(`\n       65536 `)}},
		{name: "fit", args: []string{"model", nvlsPort, "--fit", results, "--params", "graph_launch_us,nvls_efficiency", "-o", filepath.Join(dir, "fitted.json")},
			stdout: []*regexp.Regexp{
				regexp.MustCompile(`fitted graph_launch_us, nvls_efficiency`),
				regexp.MustCompile(`\n        1024       9\.00       6\.\d\d   -2\d\.\d%  `),
				regexp.MustCompile(`# error before: median \d+\.\d%, worst \d+\.\d%; after: median \d+\.\d%, worst \d+\.\d%`),
				regexp.MustCompile(`# graph_launch_us +2 -> \d`),
			}},
		{name: "a100 has no NVLS", args: []string{"model", nvlsPort, "--size", "1M", "--hw", "a100-sxm"}, code: ExitError,
			stderr: "hardware profile a100-sxm has no NVLS"},
		{name: "unknown profile", args: []string{"model", nvlsPort, "--size", "1M", "--hw", "tpu"}, code: ExitError,
			stderr: `hardware profile "tpu": unknown (bundled: a100-sxm, h100-sxm`},
		{name: "bad profile file", args: []string{"model", nvlsPort, "--size", "1M", "--hw", "$DIR/bad.json"}, code: ExitError,
			stderr: "$DIR/bad.json: field params.launch_us: missing"},
		{name: "bad launch", args: []string{"model", nvlsPort, "--size", "1M", "--launch", "warp"}, code: ExitUsage,
			stderr: `--launch "warp": want graph or kernel`},
		{name: "no size", args: []string{"model", nvlsPort}, code: ExitUsage, stderr: "give a message size"},
		{name: "-o without --fit", args: []string{"model", nvlsPort, "--size", "1K", "-o", "x.json"}, code: ExitUsage, stderr: "-o and --params apply to --fit"},
		{name: "fit with sizes", args: []string{"model", nvlsPort, "--fit", results, "--size", "1K"}, code: ExitUsage, stderr: "--fit takes its sizes from the results file"},
		{name: "size the plan rejects", args: []string{"model", nvlsPort, "--size", "1000"}, code: ExitError, stderr: "not a multiple of buffer_alignment"},
		{name: "our kernel on one device", args: []string{"model", "allreduce_packet", "--size", "1K", "--kernel", "mscclgo", "--one-device", "--hw", "h200-sxm", "-d", "float32"},
			stdout: []*regexp.Regexp{
				regexp.MustCompile(`# kernel mscclgo: per-op costs of entry mscclgo_interp_f32_ll16 from the audit`),
				regexp.MustCompile(`# every rank on one GPU`),
				regexp.MustCompile(`\n        1024 `),
			}},
		{name: "unknown kernel", args: []string{"model", nvlsPort, "--size", "1K", "--kernel", "nccl"}, code: ExitUsage,
			stderr: `--kernel: kernel "nccl": unknown (want mscclpp or mscclgo)`},
		{name: "one device and ranks per node", args: []string{"model", nvlsPort, "--size", "1K", "--one-device", "--ranks-per-node", "4"}, code: ExitUsage,
			stderr: "--one-device places the ranks"},
		{name: "kernel without sm", args: []string{"model", nvlsPort, "--size", "1K", "--kernel", "mscclgo", "--hw", "$DIR/nosm.json"}, code: ExitError,
			stderr: "hardware profile nosm has no sm section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, re := range tt.stdout {
				if !re.MatchString(stdout) {
					t.Errorf("stdout does not match %s:\n%s", re, stdout)
				}
			}
			if want := strings.ReplaceAll(tt.stderr, "$DIR", dir); !strings.Contains(stderr, want) {
				t.Errorf("stderr %q, want it to contain %q", stderr, want)
			}
		})
	}
	data, err := os.ReadFile(filepath.Join(dir, "fitted.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"source": "fitted to `+results+` (3 points, mscclgo model --fit); was 2: `) {
		t.Errorf("fitted profile does not say graph_launch_us was fitted:\n%s", data)
	}
}

// TestSelectHW ranks two real plans by predicted time.
func TestSelectHW(t *testing.T) {
	dir := t.TempDir()
	plans := filepath.Join(dir, "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"allreduce.plan.json", "allreduce_nvls_zero_copy.plan.json"} {
		data, err := os.ReadFile(filepath.Join("../../tests/ports/single_node", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(plans, f), string(data))
	}
	idx := &planset.Index{Version: planset.IndexVersion, Plans: []planset.Entry{
		{File: "allreduce.plan.json", Name: "allreduce", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: true, MaxMessageSize: 1 << 30, InputChunks: 64, OutputChunks: 64, BufferAlignment: 16},
		{File: "allreduce_nvls_zero_copy.plan.json", Name: "allreduce_nvls_zero_copy", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: true, MaxMessageSize: ^uint64(0), InputChunks: 64, OutputChunks: 64, BufferAlignment: 16, NVLS: true},
	}}
	data, err := idx.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(plans, planset.IndexFile), string(data))
	t.Setenv("MSCCLGO_PLAN_PATH", "")
	base := []string{"select", "--plans", "$DIR/plans", "--dir", "$DIR/none", "-c", "allreduce", "-n", "8", "--in-place"}
	// Without --hw: the narrower range; with it, the faster plan.
	code, stdout, stderr := run(t, dir, append(base, "--size", "256M", "--nvls")...)
	if code != 0 || !strings.Contains(stdout, "plan: allreduce\n") {
		t.Errorf("select: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, dir, append(base, "--size", "256M", "--hw", "h100-sxm")...)
	if code != 0 || !regexp.MustCompile(`plan: allreduce_nvls_zero_copy\n.*predicted fastest of 2: \d+\.\d\d µs\n  1\. +\d+\.\d\d µs  allreduce_nvls_zero_copy\n  2\. +\d+\.\d\d µs  allreduce\n`).MatchString(stdout) {
		t.Errorf("select --hw h100-sxm: exit %d\n%s%s", code, stdout, stderr)
	}
	// A100 has no NVLS: the NVLS plan is not considered.
	code, stdout, stderr = run(t, dir, append(base, "--size", "256M", "--hw", "a100-sxm")...)
	if code != 0 || !strings.Contains(stdout, "plan: allreduce\n") || strings.Contains(stdout, "2. ") {
		t.Errorf("select --hw a100-sxm: exit %d\n%s%s", code, stdout, stderr)
	}
}
