// check and run agree: a plan `mscclgo check --size` accepts is not
// rejected by `mscclgo run` at that size, and the plans run rejects are
// rejected by check with the same reason.

package hostile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkReason is the first problem `mscclgo check` printed for plan, the
// plan's name left out.
func checkReason(t *testing.T, plan string, r result) string {
	t.Helper()
	for _, line := range strings.Split(r.stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, plan+": "); ok && !strings.HasPrefix(rest, "warning: ") {
			return rest
		}
	}
	t.Fatalf("check printed no problem for %s:\n%s", plan, r.stdout)
	return ""
}

// runReason is the error `mscclgo run` printed for plan, the plan's name
// left out.
func runReason(t *testing.T, plan string, r result) string {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "mscclgo: "+plan+": "); ok {
			return rest
		}
	}
	t.Fatalf("run printed no error naming %s:\n%s", plan, r.stderr)
	return ""
}

func TestCheckAndRunAgree(t *testing.T) {
	t.Parallel()
	// Each case edits the project's pipeline test plan (one rank, a
	// pipeline copying input chunk 0 to output chunk 0).
	tests := []struct {
		name  string
		edit  func(t *testing.T, m map[string]any) string // returns the plan text
		size  string
		dtype string
		want  string // in the reason
	}{
		{name: "pipeline unit_size 1 on a reduction", size: "2M", want: "re: 1 bytes is not a whole number of 2-byte half elements (pipeline unit_size 1, iteration 0)",
			edit: func(t *testing.T, m map[string]any) string {
				pipe := planObj(planTB0Ops(m)[0])
				pipe["ops"] = []any{planReduceOp()}
				planObj(pipe, "iter_context")["unit_size"] = 1
				return planTreeText(t, m)
			}},
		{name: "pipeline unit_size 7 on a reduction", size: "2M", want: "re: 7 bytes is not a whole number",
			edit: func(t *testing.T, m map[string]any) string {
				pipe := planObj(planTB0Ops(m)[0])
				pipe["ops"] = []any{planReduceOp()}
				planObj(pipe, "iter_context")["unit_size"] = 7
				return planTreeText(t, m)
			}},
		{name: "pipeline unit_size 2 on a float32 reduction", size: "64K", dtype: "float32", want: "re: 2 bytes is not a whole number of 4-byte float elements",
			edit: func(t *testing.T, m map[string]any) string {
				pipe := planObj(planTB0Ops(m)[0])
				pipe["ops"] = []any{planReduceOp()}
				planObj(pipe, "iter_context")["unit_size"] = 2
				return planTreeText(t, m)
			}},
		{name: "LL packets at an odd offset", size: "40", want: "LL packets at byte 20 of rank 0's scratch are not 8-byte aligned",
			edit: func(t *testing.T, m map[string]any) string {
				m["buffer_alignment"] = 2
				g := planRank0(m)
				g["input_chunks"], g["output_chunks"], g["scratch_chunks"] = 4, 4, 4
				setPlanTB0Ops(m, map[string]any{"name": "cpkt", "src_buff": planOperand("i", 1), "dst_buff": planOperand("s", 1)})
				return planTreeText(t, m)
			}},
		{name: "LL packets in the upper half of double scratch", size: "10", want: "plus the double-buffer half 20 (every second launch)",
			edit: func(t *testing.T, m map[string]any) string {
				m["buffer_alignment"], m["protocol"], m["use_double_scratch_buffer"] = 2, "LL", true
				planRank0(m)["scratch_chunks"] = 1
				setPlanTB0Ops(m, map[string]any{"name": "cpkt", "src_buff": planOperand("i", 0), "dst_buff": planOperand("s", 0)})
				return planTreeText(t, m)
			}},
		{name: "reuse_resources pipeline beyond scratch", size: "1536K", want: "beyond rank 0's scratch of 67108864 bytes",
			edit: func(t *testing.T, m map[string]any) string {
				m["reuse_resources"] = true
				planRank0(m)["scratch_chunks"] = 64
				pipe := planObj(planTB0Ops(m)[0])
				planObj(pipe, "iter_context")["unit_size"] = 1536 << 10
				planObj(pipe, "ops", 0)["dst_buff"] = planOperand("s", 63)
				return planTreeText(t, m)
			}},
		{name: "duplicate key", size: "4K", want: `key "name" given twice in one object`,
			edit: func(t *testing.T, m map[string]any) string {
				return strings.Replace(planTreeText(t, m), `"name": "barrier_test",`, `"name": "barrier_test", "name": "other",`, 1)
			}},
		{name: "unknown collective", size: "4K", want: `collective = "broadcast": want one of`,
			edit: func(t *testing.T, m map[string]any) string {
				m["collective"] = "broadcast"
				return planTreeText(t, m)
			}},
		{name: "invalid UTF-8 in name", size: "4K", want: "invalid UTF-8 (byte 0xff) in a string",
			edit: func(t *testing.T, m map[string]any) string {
				return strings.Replace(planTreeText(t, m), `"name": "barrier_test"`, "\"name\": \"b\xffarrier_test\"", 1)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "plan.json", tt.edit(t, loadPlanTree(t, testdataPlan)))
			checkArgs := []string{"check", "plan.json", "--size", tt.size}
			runArgs := []string{"run", "plan.json", "--size", tt.size}
			if tt.dtype != "" {
				checkArgs = append(checkArgs, "--dtype", tt.dtype)
				runArgs = append(runArgs, "--dtype", tt.dtype)
			}
			c := mscclgo(t, dir, checkArgs...)
			c.wantError(t, 1, 512<<20)
			r := mscclgo(t, dir, runArgs...)
			r.wantError(t, 1, 512<<20)
			if t.Failed() {
				return
			}
			cr, rr := checkReason(t, "plan.json", c), runReason(t, "plan.json", r)
			if d := cmp.Diff(cr, rr); d != "" {
				t.Errorf("check and run give different reasons (-check +run):\n%s", d)
			}
			if !strings.Contains(rr, tt.want) {
				t.Errorf("reason %q lacks %q", rr, tt.want)
			}
		})
	}
}

// TestCheckAndRunAcceptTheFixedPlans: the same edits with valid values
// pass both.
func TestCheckAndRunAcceptTheFixedPlans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(m map[string]any)
		size string
	}{
		{name: "pipeline unit_size 2 on a reduction", size: "64K", edit: func(m map[string]any) {
			pipe := planObj(planTB0Ops(m)[0])
			pipe["ops"] = []any{planReduceOp()}
			planObj(pipe, "iter_context")["unit_size"] = 2
		}},
		{name: "LL packets at an aligned offset", size: "48", edit: func(m map[string]any) {
			m["buffer_alignment"] = 4
			g := planRank0(m)
			g["input_chunks"], g["output_chunks"], g["scratch_chunks"] = 4, 4, 4
			setPlanTB0Ops(m, map[string]any{"name": "cpkt", "src_buff": planOperand("i", 1), "dst_buff": planOperand("s", 1)})
		}},
		{name: "reuse_resources pipeline inside scratch", size: "1536K", edit: func(m map[string]any) {
			m["reuse_resources"] = true
			planRank0(m)["scratch_chunks"] = 64
			pipe := planObj(planTB0Ops(m)[0])
			planObj(pipe, "iter_context")["unit_size"] = 1 << 20
			planObj(pipe, "ops", 0)["dst_buff"] = planOperand("s", 63)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := loadPlanTree(t, testdataPlan)
			tt.edit(m)
			writePlanTree(t, dir, "plan.json", m)
			if c := mscclgo(t, dir, "check", "plan.json", "--size", tt.size); c.code != 0 || !strings.Contains(c.stdout, "plan.json: ok") {
				t.Errorf("check: exit %d\n%s%s", c.code, c.stdout, c.stderr)
			}
			if r := mscclgo(t, dir, "run", "plan.json", "--size", tt.size, "-n", "2"); r.code != 0 {
				t.Errorf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
