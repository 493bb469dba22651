//go:build cuda

package cuda

// rank_test.go runs rank sessions (gpu.OpenRank) over this driver: each
// rank its own driver and device memory, the peers' buffers, scratch and
// counters reached through cuIpcGetMemHandle/cuIpcOpenMemHandle (on the
// fake driver, memory files), port channels through the proxy and
// loopback TCP; every rank's output must equal the CPU backend's
// single-process run.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

func TestRankSessions(t *testing.T) {
	cfg := gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return testNode.Open(0) }, Threads: testThreads()}
	for _, tc := range []struct {
		file  string
		hosts []int
	}{
		{file: "single_node/allreduce.plan.json"},
		{file: "single_node/allgather_pkt.plan.json"},
		{file: "single_node/allreduce_nvls_zero_copy.plan.json"},
		{file: "unit_tests/put/put_with_signal_and_flush_test.plan.json", hosts: []int{0, 1}},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			plan, err := executor.LoadFile(filepath.Join("../../tests/ports", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lay, err := harness.PlanLayout(plan, 1<<14, executor.Float32, plan.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			c := gputest.RankCase{Plan: plan, Layout: lay, Opts: executor.Options{DType: executor.Float32},
				Hosts: tc.hosts, Launches: 2, Dir: t.TempDir()}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			want, err := gputest.SingleCPU(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			got, errs := gputest.RunRanks(ctx, cfg, c)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := range want {
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d output differs from the CPU backend's (-want +got):\n%.2000s", r, diff)
				}
			}
		})
	}
}
