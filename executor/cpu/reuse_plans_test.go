package cpu_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// goldenDir holds the plans made by the MSCCL++ DSL (../shared/golden).
const goldenDir = "../../../shared/golden"

// TestPlansLaunchBoundary runs the static launch-boundary check
// (executor.CheckReuse, mscclgo check's warning) over every plan of the
// project and every golden plan: a collective with a defined result
// must pass it (the race detector over three launches agrees:
// TestPortPlans), and the plan of every op with no collective, whose
// ops nothing orders, must not.
func TestPlansLaunchBoundary(t *testing.T) {
	t.Parallel()
	files := portPlans(t)
	golden, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	files = append(files, golden...)
	warned := map[string]bool{}
	for _, file := range files {
		p, err := executor.LoadFile(file)
		if err != nil && !plan.IsWarning(err) {
			continue // TestPortPlans, executor's TestGoldenPlans
		}
		lay, inst, err := instantiate(p, executor.Float32)
		if err != nil {
			continue
		}
		rs := executor.CheckReuse(inst)
		name := filepath.ToSlash(file)
		warned[name] = len(rs) > 0
		if lay.Checked() && len(rs) > 0 {
			t.Errorf("%s: %d access(es) race across the launch boundary; the first: %v", name, len(rs), rs[0])
		}
	}
	if len(golden) == 0 {
		t.Logf("no golden plans in %s: the project's plans only", goldenDir)
	}
	const racy = "../../tests/testdata/every_builtin.plan.json"
	if got, ok := warned[racy]; !ok || !got {
		t.Errorf("%s: checked %v, warned %v; want a warning", racy, ok, got)
	}
	n := 0
	for f := range warned {
		if strings.HasPrefix(f, goldenDir) {
			n++
		}
	}
	if len(golden) > 0 && n == 0 {
		t.Errorf("no golden plan was checked")
	}
	t.Logf("%d plans checked, %d of them golden", len(warned), n)
}
