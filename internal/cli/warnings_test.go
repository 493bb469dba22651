package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestEvalWarnings: eval warns, with the .star line, about what the
// MSCCL++ executor cannot run (MSCCL++'s own allreduce example at 16 ranks
// fuses 15 channel ids into one op, past the executor's 8, and 16 operands
// into one reduce), still writes the plan, and with --strict writes none.
func TestEvalWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := ports + "/single_node/allreduce.star"
	code, _, stderr := run(t, dir, "eval", src, "-D", "num_gpus=16", "-o", "$DIR/ar.json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`(?m)^\S*allreduce\.star:41:18: warning: rlxsignal has 15 channel ids: the MSCCL\+\+ executor reads at most 8 per op \(program "allreduce" rank 0 tb 0 op 1, and 127 more\)$`,
		`(?m)^\S*allreduce\.star:54:50: warning: rres has 16 sources and 16 destinations: the MSCCL\+\+ executor holds at most 10 on a side`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("stderr does not match %s:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ar.json")); err != nil {
		t.Errorf("the plan was not written: %v", err)
	}
	code, _, stderr = run(t, dir, "eval", src, "-D", "num_gpus=16", "-o", "$DIR/strict.json", "--strict")
	if code != ExitError || !regexp.MustCompile(`allreduce\.star:41:18: error: rlxsignal has 15 channel ids`).MatchString(stderr) {
		t.Errorf("--strict: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "strict.json")); !os.IsNotExist(err) {
		t.Errorf("--strict wrote the plan (stat: %v)", err)
	}
	// Within the limits: no warning.
	if code, _, stderr := run(t, dir, "eval", src, "-D", "num_gpus=8", "-o", "$DIR/ar8.json", "--strict"); code != 0 || stderr != "" {
		t.Errorf("8 ranks: exit %d, stderr %q", code, stderr)
	}
}
