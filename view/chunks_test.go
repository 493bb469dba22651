package view

import (
	"testing"
)

// TestChunkFlow checks the chunk flow of two all-gathers, where rank r's
// output chunk c must end up holding rank c's data, written once, and
// of the LL all-pairs all-reduce, whose first step writes scratch only
// and whose last writes the (in-place) input only.
func TestChunkFlow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		steps int
		// first and last are the only buffers the first and last
		// steps write; "" for an all-gather (checked chunk by chunk).
		first, last string
	}{
		{"../tests/ports/single_node/allgather.plan.json", 1, "", ""},
		{"testdata/allgather_hier_2x8gpu.plan.json", 3, "", ""},
		{"testdata/allreduce_packet_8gpu.plan.json", 3, "scratch", "input"},
	} {
		_, tl, inst := page(t, tc.file, 1<<16)
		cf := ChunkFlowOf(tl, inst)
		if cf.Steps != tc.steps || cf.Ranks != tl.Ranks || cf.Clipped != 0 {
			t.Errorf("%s: %d steps of %d ranks, %d clipped; want %d of %d, 0", tc.file, cf.Steps, cf.Ranks, cf.Clipped, tc.steps, tl.Ranks)
		}
		if tc.first != "" {
			for _, m := range cf.Moves {
				if m.Step == 0 && m.Dst.Buffer != tc.first || m.Step == cf.Steps-1 && m.Dst.Buffer != tc.last {
					t.Errorf("%s: step %d writes %+v", tc.file, m.Step, m.Dst)
				}
			}
			continue
		}
		writes := map[[2]int]int{}
		for _, m := range cf.Moves {
			if m.Dst.Buffer != "output" || m.Dst.Count != 1 || m.Color != m.Dst.Chunk || len(m.Origin) != 1 || m.Reduce || len(m.Src) != 1 {
				t.Errorf("%s: step %d: %s writes %+v from %+v (colour of rank %d), want one output chunk holding the data of the rank of its index", tc.file, m.Step, m.Op, m.Dst, m.Src, m.Color)
			}
			writes[[2]int{m.Dst.Rank, m.Dst.Chunk}]++
		}
		for r := range tl.Ranks {
			for c := range tl.Ranks {
				if n := writes[[2]int{r, c}]; (c == r && n != 0) || (c != r && n != 1) {
					t.Errorf("%s: output chunk %d of rank %d written %d times", tc.file, c, r, n)
				}
			}
		}
	}
}
