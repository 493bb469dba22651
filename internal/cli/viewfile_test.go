package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestViewBesidePlan checks where view writes its page without -o: on a
// terminal (any character device: /dev/null here) into PLAN.html beside
// the plan, printing the path; into a pipe or a file, to standard output.
func TestViewBesidePlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, stderr := run(t, dir, "eval", "allgather", "-D", "world_size=2", "-o", "$DIR/ag.json"); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	plan := filepath.Join(dir, "ag.json")
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var stderr bytes.Buffer
	if code := Run([]string{"mscclgo", "view", plan, "--curve-max", "0"}, strings.NewReader(""), devnull, &stderr); code != 0 {
		t.Fatalf("view on a character device: exit %d: %s", code, stderr.String())
	}
	if st, err := os.Stat(filepath.Join(dir, "ag.html")); err != nil || st.Size() < 1000 {
		t.Errorf("view on a character device wrote no page beside the plan: %v", err)
	}
	code, stdout, errs := run(t, dir, "view", plan, "--curve-max", "0")
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("view into a pipe: exit %d, stdout %.80q, stderr %s", code, stdout, errs)
	}
	for _, tt := range []struct{ arg, want string }{
		{"x/plan.json", "x/plan.html"}, {"algo.star", "algo.html"}, {"allreduce_packet", "allreduce_packet.html"},
	} {
		if got := besidePlan(tt.arg); got != tt.want {
			t.Errorf("besidePlan(%q) = %q, want %q", tt.arg, got, tt.want)
		}
	}
}
