package algorithms

// alltoallv_test.go runs the bundled alltoallv algorithms, and a program
// that stages blocks through scratch in a pipeline, on the CPU backend
// over a table of counts matrices, checking every output byte against a
// direct all-to-all-v; and benchmarks the CPU backend against that
// direct copy and against the static alltoall plan.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// stagedStar sends every block through a one-chunk scratch inbox per
// sender, in a pipeline of 64-byte units: a block larger than the unit
// takes several iterations.
const stagedStar = `
n = param("world_size", 3)
CollectiveProgram("staged", AllToAllV(n, 2), n)
inbox = [Buffer(r, 2 * n) for r in range(n)]
for r in range(n):
    for p in range(n):
        if p == r:
            continue
        ch = MemoryChannel(p, r)
        tb = p
        ch.signal(tb = tb, data_sync = SyncType.none)
        ch.wait(tb = tb, data_sync = SyncType.after)
        for _ in Loop.iteration(unit = 64, num_chunks = 2):
            ch.put(inbox[p][2 * r:2 * r + 2], Rank(r).get_input_buffer()[2 * p:2 * p + 2], tb = tb)
        ch.signal(tb = tb, data_sync = SyncType.before)
        ch.wait(tb = tb, data_sync = SyncType.after)
        Rank(r).copy(Rank(r).get_output_buffer()[2 * p:2 * p + 2], inbox[r][2 * p:2 * p + 2], tb = tb)
        ch.signal(tb = tb, data_sync = SyncType.before)
        ch.wait(tb = tb, data_sync = SyncType.after)
    Rank(r).copy(Rank(r).get_output_buffer()[2 * r:2 * r + 1], Rank(r).get_input_buffer()[2 * r:2 * r + 1], tb = n)
    Rank(r).copy(Rank(r).get_output_buffer()[2 * r + 1:2 * r + 2], Rank(r).get_input_buffer()[2 * r + 1:2 * r + 2], tb = n)
`

// evalVarPlan evaluates a bundled algorithm (or the source src when not
// empty) with defines and loads its plan.
func evalVarPlan(t testing.TB, file, src string, defines map[string]string) *plan.Plan {
	t.Helper()
	var source starlib.Source = starlib.FSSource(FS, "algorithms")
	if src != "" {
		source = starlib.FSSource(fstest.MapFS{file: {Data: []byte(src)}}, "")
	}
	res, err := starlib.Eval(source, file, starlib.Options{Defines: defines})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	text, err := res.Programs[0].Plan()
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	p, err := plan.Load(text)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

// varTestPlan is an alltoallv program the tests run: a bundled
// algorithm (file) or the source src, with defines.
type varTestPlan struct {
	name, file, src string
	defines         map[string]string
}

// varTestPlans are the programs TestAllToAllVRuns and the GPU
// differential test run.
func varTestPlans() []varTestPlan {
	return []varTestPlan{
		{"single node", "alltoallv.star", "", map[string]string{"world_size": "4"}},
		{"single node, 3 instances", "alltoallv.star", "", map[string]string{"world_size": "3", "instances": "3"}},
		{"port channels", "alltoallv_port.star", "", map[string]string{"world_size": "4", "ranks_per_node": "2"}},
		{"scratch pipeline", "staged.star", stagedStar, map[string]string{"world_size": "3"}},
	}
}

// varTestMatrix is a named counts matrix generator over n ranks.
type varTestMatrix struct {
	name string
	m    func(n int) [][]int64
}

// varTestMatrices are the counts matrices the alltoallv tests run every
// plan of varTestPlans with.
func varTestMatrices() []varTestMatrix {
	return []varTestMatrix{
		{"all zeros", func(n int) [][]int64 { return executor.UniformMatrix(n, 0) }},
		{"one peer only", func(n int) [][]int64 {
			m := executor.UniformMatrix(n, 0)
			m[1][0] = 777
			return m
		}},
		{"very skewed", func(n int) [][]int64 {
			m := executor.RandomMatrix(n, 5, 9, 0)
			m[0][n-1] = 50000
			return m
		}},
		{"not multiples of the alignment", func(n int) [][]int64 { return executor.RandomMatrix(n, 11, 11, 0) }},
		{"every rank to itself only", func(n int) [][]int64 {
			m := executor.UniformMatrix(n, 0)
			for r := range n {
				m[r][r] = int64(3 + r)
			}
			return m
		}},
		// The scratch pipeline's unit is 64 bytes: this block is far
		// larger, and larger than what scratch would hold at the other
		// blocks' sizes.
		{"largest block larger than the scratch", func(n int) [][]int64 {
			m := executor.UniformMatrix(n, 2)
			m[2][0] = 100003
			return m
		}},
		{"moe routing", func(n int) [][]int64 {
			m, err := executor.MoE{Experts: 4 * n, TopK: 2, Tokens: 100, Hidden: 7, Seed: 3, Skew: 1.5}.Matrix(n)
			if err != nil {
				panic(err)
			}
			return m
		}},
	}
}

func TestAllToAllVRuns(t *testing.T) {
	t.Parallel()
	plans, cases := varTestPlans(), varTestMatrices()
	for _, pl := range plans {
		plan := evalVarPlan(t, pl.file, pl.src, pl.defines)
		if _, err := executor.NewVarPlan(plan); err != nil {
			t.Fatalf("%s: %v", pl.name, err)
		}
		for _, c := range cases {
			for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
				t.Run(fmt.Sprintf("%s/%s/%s", pl.name, c.name, dt.Name()), func(t *testing.T) {
					counts := executor.MatrixCounts(c.m(len(plan.GPUs)))
					cfg := harness.Config{Backend: cpu.New(), Plan: plan, Counts: counts, DType: dt, Options: executor.Options{Race: true}, Iters: 2, Strict: true}
					if _, err := harness.Run(context.Background(), cfg); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestAllToAllVCatchesWrongPlans checks that the byte check fails a plan
// that swaps two blocks.
func TestAllToAllVCatchesWrongPlans(t *testing.T) {
	t.Parallel()
	src := `
CollectiveProgram("wrong", AllToAllV(2), 2)
for r in range(2):
    # Both blocks of the input land on the rank itself, swapped.
    Rank(r).copy(Rank(r).get_output_buffer()[0:1], Rank(r).get_input_buffer()[1:2], tb = 0)
    Rank(r).copy(Rank(r).get_output_buffer()[1:2], Rank(r).get_input_buffer()[0:1], tb = 0)
`
	plan := evalVarPlan(t, "wrong.star", src, nil)
	counts := executor.MatrixCounts(executor.UniformMatrix(2, 8))
	_, err := harness.Run(context.Background(), harness.Config{Backend: cpu.New(), Plan: plan, Counts: counts, DType: executor.Float16, Iters: 1, Strict: true})
	var mm *harness.VarMismatch
	if !errors.As(err, &mm) {
		t.Fatalf("got %v, want a *harness.VarMismatch", err)
	}
}

// benchVarBackend runs plan bound to counts on backend, one Bind and one
// launch per iteration (fill and check outside the timer).
func benchVarBackend(b *testing.B, backend executor.Backend, p *plan.Plan, counts *executor.Counts) {
	vp, err := executor.NewVarPlan(p)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := vp.Bind(counts, 4)
	if err != nil {
		b.Fatal(err)
	}
	sess, err := backend.Open(inst, executor.Options{DType: executor.Float32})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	bufs := harness.VarBuffers(counts, 4)
	harness.FillVar(bufs, 0)
	b.SetBytes(counts.Total() * 4)
	b.ResetTimer()
	for range b.N {
		if _, err := vp.Bind(counts, 4); err != nil {
			b.Fatal(err)
		}
		if err := sess.Launch(context.Background(), bufs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if _, err := harness.CheckVar(bufs, counts, 4, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAllToAllV compares, at 8 ranks and 64 MiB sent in all
// (float32): the CPU backend running alltoallv.star with MoE counts
// against a direct Go all-to-all-v of the same data (ratio = time of
// CPU/direct), and the static alltoall plan against alltoallv with
// uniform counts (ratio = alltoallv/alltoall).
func BenchmarkAllToAllV(b *testing.B) {
	const n, total = 8, 64 << 20
	plan := evalVarPlan(b, "alltoallv.star", "", map[string]string{"world_size": "8"})
	moe, err := executor.CountsFor("moe:experts=16,topk=2,tokens=4096,hidden=256,seed=1", n)
	if err != nil {
		b.Fatal(err)
	}
	uniform := executor.MatrixCounts(executor.UniformMatrix(n, total/4/(n*n)))
	b.Run("cpu/moe", func(b *testing.B) { benchVarBackend(b, cpu.New(), plan, moe) })
	b.Run("direct/moe", func(b *testing.B) {
		bufs := harness.VarBuffers(moe, 4)
		harness.FillVar(bufs, 0)
		in, out := make([][]byte, n), make([][]byte, n)
		for r := range bufs {
			in[r], out[r] = bufs[r].Input, bufs[r].Output
		}
		b.SetBytes(moe.Total() * 4)
		b.ResetTimer()
		for range b.N {
			harness.DirectAllToAllV(in, out, moe, 4)
		}
	})
	b.Run("cpu/uniform", func(b *testing.B) { benchVarBackend(b, cpu.New(), plan, uniform) })
	b.Run("alltoall/uniform", func(b *testing.B) {
		static := evalVarPlan(b, "alltoall.star", "", map[string]string{"world_size": "8"})
		size := uint64(total / n)
		layout, err := executor.PlanLayout(static, size, executor.Float32, false)
		if err != nil {
			b.Fatal(err)
		}
		inst, err := executor.Instantiate(static, layout.Sizes)
		if err != nil {
			b.Fatal(err)
		}
		sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float32})
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		bufs := layout.Alloc()
		b.SetBytes(total)
		b.ResetTimer()
		for range b.N {
			if err := sess.Launch(context.Background(), bufs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
