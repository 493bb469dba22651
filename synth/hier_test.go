package synth

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestHier synthesizes hierarchically on several nodes (every program
// verified on the CPU backend inside Synthesize) and checks the composed
// trees' rate against the cut bound: the rail ring and the node trees
// reach it wherever the network binds.
func TestHier(t *testing.T) {
	for _, tc := range []struct {
		example, hw string
		nodes       int
		coll        Collective
		minPack     float64
		group       int // the shards per thread block wanted (0: any)
	}{
		{"dgx-h100", "h100-sxm", 2, ReduceScatter, 0.9, 0},
		{"dgx-h100", "h100-sxm", 3, AllReduce, 0.9, 0},
		{"pcie-2socket", "a100-pcie", 2, AllReduce, 0.5, 0},
		// 5 nodes of allreduce: 4 shards per thread block, so two groups
		// spread around the ring (nodes 0, 2, 4 and 1, 3).
		{"dgx-h100", "h100-sxm", 5, AllReduce, 0.9, 4},
	} {
		t.Run(fmt.Sprintf("%s_x%d/%s", tc.example, tc.nodes, tc.coll), func(t *testing.T) {
			tp := load(t, tc.example, tc.hw, tc.nodes)
			o := quick(tc.coll, tp, tc.example)
			o.Rounds = 6
			res, err := Synthesize(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			r := res.Packing.Rate / boundRate(tc.coll, tp)
			p := res.Points[len(res.Points)-1]
			t.Logf("packing %.3f of the bound; modelled %.3f at %d bytes; %d variants; %v", r, p.BoundUS/p.TimeUS, p.Size, len(res.Variants), res.Elapsed)
			if tc.group > 0 && !strings.Contains(string(res.Star), fmt.Sprintf("\nGROUP = %d\n", tc.group)) {
				t.Errorf("the program's GROUP is not %d", tc.group)
			}
			if tc.group > 0 {
				return // more thread blocks than gpu-emu holds at once
			}
			if r < tc.minPack {
				t.Errorf("packing at %.3f of the bound, want at least %.2f", r, tc.minPack)
			}
			emuRun(t, res.Programs[0].Plan)
		})
	}
}
