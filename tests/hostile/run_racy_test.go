//go:build !race

// The race report of run names the plan. The plan's two thread blocks
// really write the same bytes at once, which the Go race detector would
// flag in the child process: built without -race only.

package hostile

import (
	"strings"
	"testing"
)

func TestRunRaceReportNamesPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := loadPlanTree(t, testdataPlan)
	tbs := planNode(m, "gpus", 0, "threadblocks").([]any)
	tb1 := map[string]any{"id": 1, "ops": []any{planCopyOp()}, "channels": []any{}, "remote_buffer_refs": []any{}}
	planObj(m, "gpus", 0)["threadblocks"] = append(tbs, tb1)
	writePlanTree(t, dir, "racy.json", m)
	r := mscclgo(t, dir, "run", "racy.json", "--size", "4K", "--race", "-n", "2")
	r.wantError(t, 4, 512<<20, "mscclgo: racy.json: size 4096, launch 0: race: ")
	for _, line := range strings.Split(r.stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "mscclgo: "); ok && !strings.HasPrefix(rest, "racy.json: ") {
			t.Errorf("stderr line %q does not start with the plan", line)
		}
	}
}
