package trace

// trace_test.go tests the writer on CPU timelines of the project's small
// plans (a slice per executed op, flows from signals to waits, a valid
// file), a golden trace, and the validator on broken traces.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

var update = flag.Bool("update", false, "rewrite the golden traces under testdata/")

// record runs the plan file on the CPU backend at size bytes and returns
// its timeline and plan.
func record(t *testing.T, file string, size uint64) (*timeline.Timeline, *plan.Plan) {
	t.Helper()
	p, err := executor.LoadFile(file)
	if err != nil && !plan.IsWarning(err) {
		t.Fatal(err)
	}
	lay, err := executor.PlanLayout(p, size, executor.Float32, p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := cpu.Record(context.Background(), inst, executor.Options{DType: executor.Float32}, lay.Alloc())
	if err != nil {
		t.Fatal(err)
	}
	return tl, p
}

// executedOps counts the ops a run executes: a pipeline counts its body
// once per iteration.
func executedOps(inst *executor.Instance) int {
	n := 0
	for _, ri := range inst.Ranks {
		for _, tb := range ri.TBs {
			for _, op := range tb.Ops {
				if op.Type == plan.OpPipeline {
					n += op.Iterations * len(op.Body)
				} else {
					n++
				}
			}
		}
	}
	return n
}

func TestTraceOfPlans(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		size uint64
		// kinds are the flow kinds the trace must have.
		kinds []string
	}{
		{"../tests/ports/single_node/allgather.plan.json", 1 << 14, []string{"signal"}},
		{"../tests/ports/single_node/allgather_pkt.plan.json", 1 << 14, []string{"packet"}},
		{"../tests/ports/single_node/allreduce_pipeline.plan.json", 1 << 16, []string{"signal"}},
		{"../tests/ports/unit_tests/barrier_test.plan.json", 1 << 14, []string{"barrier"}},
		{"../tests/ports/unit_tests/semaphore.plan.json", 1 << 14, []string{"semaphore"}},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			t.Parallel()
			tl, plan := record(t, tc.file, tc.size)
			lay, _ := executor.PlanLayout(plan, tc.size, executor.Float32, plan.Inplace)
			inst, _ := executor.Instantiate(plan, lay.Sizes)
			var buf bytes.Buffer
			if err := Write(&buf, tl); err != nil {
				t.Fatal(err)
			}
			st, err := Validate(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			tbs := 0
			for _, ri := range inst.Ranks {
				tbs += len(ri.TBs)
			}
			want := Stats{Processes: len(inst.Ranks), Threads: tbs, Slices: executedOps(inst), Flows: len(tl.Flows)}
			if d := cmp.Diff(want, st); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
			// Every flow goes from a releasing op to an op that waits, and
			// every wait on a channel has a flow into it.
			var f File
			if err := json.Unmarshal(buf.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			into := map[int]int{}
			for _, fl := range tl.Flows {
				kinds[fl.Kind] = true
				into[fl.To]++
				from, to := tl.Slices[fl.From], tl.Slices[fl.To]
				if from.End > to.Start && (fl.Kind != "barrier" || from.Start > to.Start) {
					t.Errorf("flow %s: %s %s ends at %g, after %s %s starts at %g", fl.Kind, from.Op, from.Name, from.End, to.Op, to.Name, to.Start)
				}
				if fl.Kind == "signal" && (!strings.Contains(from.Name, "signal") && from.Name != "pws" && from.Name != "pwsf" || !strings.Contains(to.Name, "wait")) {
					t.Errorf("signal flow from %s (%s) to %s (%s)", from.Op, from.Name, to.Op, to.Name)
				}
			}
			for i, s := range tl.Slices {
				if strings.HasSuffix(s.Name, "wait") && into[i] == 0 {
					t.Errorf("rank %d tb %d %s %s: no flow into the wait", s.Rank, s.TB, s.Op, s.Name)
				}
			}
			for _, k := range tc.kinds {
				if !kinds[k] {
					t.Errorf("no %s flow; kinds %v", k, kinds)
				}
			}
		})
	}
}

// TestGolden compares the trace of a small plan with testdata; -update
// rewrites it.
func TestGolden(t *testing.T) {
	t.Parallel()
	tl, _ := record(t, "../tests/ports/single_node/allgather.plan.json", 1<<14)
	var buf bytes.Buffer
	if err := Write(&buf, tl); err != nil {
		t.Fatal(err)
	}
	golden := "testdata/allgather.trace.json"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./trace -update to write it)", err)
	}
	if d := cmp.Diff(string(want), buf.String()); d != "" {
		t.Errorf("%s (-want +got):\n%s", golden, d)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	const meta = `{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}},
		{"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"tb 0"}},`
	const two = `{"ph":"X","name":"a","pid":0,"tid":0,"ts":0,"dur":1},
		{"ph":"X","name":"b","pid":0,"tid":1,"ts":2,"dur":1},`
	cases := []struct {
		name, events string
		want         Stats
		err          string // a substring of the error; "" for valid
	}{
		{"valid", meta + two + `{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.5},
			{"ph":"f","bp":"e","name":"signal","cat":"flow","id":1,"pid":0,"tid":1,"ts":2.5}`,
			Stats{Processes: 1, Threads: 1, Slices: 2, Flows: 1}, ""},
		{"nested slices", `{"ph":"X","name":"a","pid":0,"tid":0,"ts":0,"dur":4},{"ph":"X","name":"b","pid":0,"tid":0,"ts":1,"dur":2}`,
			Stats{Slices: 2}, ""},
		{"missing ph", `{"name":"a","pid":0,"tid":0,"ts":0}`, Stats{}, "traceEvents[0]: ph: missing"},
		{"unknown ph", `{"ph":"Q","name":"a","pid":0,"tid":0,"ts":0}`, Stats{}, `ph "Q": not a Trace Event phase`},
		{"no dur", `{"ph":"X","name":"a","pid":0,"tid":0,"ts":0}`, Stats{}, "dur: a complete event needs"},
		{"string ts", `{"ph":"X","name":"a","pid":0,"tid":0,"ts":"0","dur":1}`, Stats{}, "ts: missing or not a number"},
		{"fractional pid", `{"ph":"X","name":"a","pid":0.5,"tid":0,"ts":0,"dur":1}`, Stats{}, "pid: missing or not an integer"},
		{"metadata without name", `{"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{}}`, Stats{}, "args.name: thread_name needs"},
		{"overlap", `{"ph":"X","name":"a","pid":0,"tid":0,"ts":0,"dur":2},{"ph":"X","name":"b","pid":0,"tid":0,"ts":1,"dur":2}`,
			Stats{}, "traceEvents[1]: complete event [1, 3] on pid 0 tid 0 overlaps traceEvents[0]"},
		{"flow without finish", two + `{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.5}`,
			Stats{}, "flow signal id 1: 1 starts and 0 finishes"},
		{"flow with two starts", two + `{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.5},
			{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.6},
			{"ph":"f","bp":"e","name":"signal","cat":"flow","id":1,"pid":0,"tid":1,"ts":2.5}`,
			Stats{}, "2 starts and 1 finishes"},
		{"flow backwards", two + `{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":1,"ts":2.5},
			{"ph":"f","bp":"e","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.5}`,
			Stats{}, "finishes at 0.5, before its start at 2.5"},
		{"flow outside slices", two + `{"ph":"s","name":"signal","cat":"flow","id":1,"pid":0,"tid":0,"ts":0.5},
			{"ph":"f","bp":"e","name":"signal","cat":"flow","id":1,"pid":0,"tid":1,"ts":7}`,
			Stats{}, "at 7 on pid 0 tid 1: no complete event encloses it"},
		{"flow without id", two + `{"ph":"s","name":"signal","cat":"flow","pid":0,"tid":0,"ts":0.5}`,
			Stats{}, "id: a flow event needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := Validate([]byte(`{"traceEvents":[` + tc.events + `]}`))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if tc.err == "" {
				if d := cmp.Diff(tc.want, st); d != "" {
					t.Errorf("stats (-want +got):\n%s", d)
				}
			}
		})
	}
	if _, err := Validate([]byte(`{"events":[]}`)); err == nil || !strings.Contains(err.Error(), "no traceEvents array") {
		t.Errorf("object without traceEvents: %v", err)
	}
	if st, err := Validate([]byte(`[{"ph":"X","name":"a","pid":0,"tid":0,"ts":0,"dur":1}]`)); err != nil || st.Slices != 1 {
		t.Errorf("array form: %+v, %v", st, err)
	}
}
