// Plans for the run and check tests, made by editing the project's test
// plans (executor/testdata) as JSON.

package hostile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// testdataPlan is executor/testdata/pipeline_test.json: one rank whose
// thread block 0 copies input chunk 0 to output chunk 0 in a pipeline.
const testdataPlan = "../../executor/testdata/pipeline_test.json"

// loadPlanTree decodes a plan file into a tree, keeping numbers exact.
func loadPlanTree(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// planTreeText encodes a plan tree.
func planTreeText(t *testing.T, m map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// planNode walks a plan tree by keys and indices.
func planNode(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// planObj is planNode for an object.
func planObj(v any, path ...any) map[string]any { return planNode(v, path...).(map[string]any) }

// planRank0 returns the rank of a plan tree.
func planRank0(m map[string]any) map[string]any { return planObj(m, "gpus", 0) }

// planTB0Ops returns the ops of thread block 0 of rank 0.
func planTB0Ops(m map[string]any) []any {
	return planNode(m, "gpus", 0, "threadblocks", 0, "ops").([]any)
}

// setPlanTB0Ops replaces the ops of thread block 0 of rank 0.
func setPlanTB0Ops(m map[string]any, ops ...any) {
	planObj(m, "gpus", 0, "threadblocks", 0)["ops"] = ops
}

// planOperand is a local operand of one chunk.
func planOperand(buf string, index int) []any {
	return []any{map[string]any{"type": buf, "index": index, "size": 1}}
}

// planReduceOp sums input chunk 0 and output chunk 0 into output chunk 0.
func planReduceOp() map[string]any {
	return map[string]any{"name": "re",
		"src_buff": append(planOperand("i", 0), planOperand("o", 0)...),
		"dst_buff": planOperand("o", 0)}
}

// planCopyOp copies input chunk 0 to output chunk 0.
func planCopyOp() map[string]any {
	return map[string]any{"name": "copy", "src_buff": planOperand("i", 0), "dst_buff": planOperand("o", 0)}
}

// planTwoRanks makes a one-rank plan tree a two-rank one: rank 1 a copy of
// rank 0 with id 1.
func planTwoRanks(t *testing.T, m map[string]any) {
	t.Helper()
	var r1 map[string]any
	if err := json.Unmarshal([]byte(planTreeText(t, planRank0(m))), &r1); err != nil {
		t.Fatal(err)
	}
	r1["id"] = 1
	m["gpus"] = append(m["gpus"].([]any), r1)
}

// writePlanTree writes a plan tree to dir/name and returns name.
func writePlanTree(t *testing.T, dir, name string, m map[string]any) string {
	t.Helper()
	writeFile(t, dir, name, planTreeText(t, m))
	return name
}

// evalBundledPlan compiles a bundled algorithm into dir/name with mscclgo eval.
func evalBundledPlan(t *testing.T, dir, name, algorithm string, defines ...string) string {
	t.Helper()
	args := []string{"eval", algorithm, "-o", filepath.Join(dir, name)}
	for _, d := range defines {
		args = append(args, "-D", d)
	}
	if r := mscclgo(t, dir, args...); r.code != 0 {
		t.Fatalf("mscclgo %v: exit %d\n%s", args, r.code, r.stderr)
	}
	return name
}
