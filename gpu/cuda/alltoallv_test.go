//go:build cuda

package cuda

// alltoallv_test.go runs alltoallv plans through the CUDA backend (on the
// fake driver in `make gpu-test`): one session over calls with different
// counts, each call's operands resolved by the kernel from the table the
// host copies before the launch, every output byte checked against the
// direct all-to-all-v and against the CPU backend.

import (
	"bytes"
	"context"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

func TestAllToAllV(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		defines map[string]string
	}{
		{"alltoallv", map[string]string{"world_size": "3"}},
		{"alltoallv_port", map[string]string{"world_size": "4", "ranks_per_node": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan := gputest.AlgorithmPlan(t, tc.name, tc.defines)
			n := len(plan.GPUs)
			vp, err := executor.NewVarPlan(plan)
			if err != nil {
				t.Fatal(err)
			}
			skewed := executor.UniformMatrix(n, 3)
			skewed[n-1][0] = 5000
			calls := [][][]int64{executor.RandomMatrix(n, 1, 777, 0), executor.UniformMatrix(n, 0), skewed, executor.RandomMatrix(n, 5, 99, 1)}
			opts := executor.Options{DType: executor.Float32}
			var sess executor.Session
			var opened uint64
			defer func() {
				if sess != nil {
					sess.Close()
				}
			}()
			for i, m := range calls {
				c := executor.MatrixCounts(m)
				inst, err := vp.Bind(c, 4)
				if err != nil {
					t.Fatal(err)
				}
				if sess == nil || inst.ScratchBytes > opened {
					// A new session only when this call's scratch outgrew it.
					if sess != nil {
						sess.Close()
					}
					if sess, err = backend().Open(inst, opts); err != nil {
						t.Fatal(err)
					}
					opened = inst.ScratchBytes
				}
				got := harness.VarBuffers(c, 4)
				harness.FillVar(got, i)
				if err := sess.Launch(context.Background(), got); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if _, err := harness.CheckVar(got, c, 4, i); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				want := harness.VarBuffers(c, 4)
				harness.FillVar(want, i)
				cs, err := cpu.New().Open(inst, opts)
				if err != nil {
					t.Fatal(err)
				}
				err = cs.Launch(context.Background(), want)
				cs.Close()
				if err != nil {
					t.Fatalf("call %d: cpu: %v", i, err)
				}
				for r := range got {
					if !bytes.Equal(got[r].Output, want[r].Output) || !bytes.Equal(got[r].Input, want[r].Input) {
						t.Errorf("call %d: rank %d's buffers differ from the CPU backend's", i, r)
					}
				}
			}
		})
	}
}
