package cpu

import (
	"context"
	"runtime"
	"testing"

	"github.com/mscclgo/mscclgo/plan"
)

// TestSteadyLaunchAllocations bounds what a launch of an opened session
// allocates once it has run: the block buffers of reductions and packets
// (64 KiB per thread block) belong to the session, so a steady launch of
// four unpacking thread blocks allocates much less than one of them, in
// few allocations per thread block (the launch's bookkeeping).
func TestSteadyLaunchAllocations(t *testing.T) {
	const size, tbs = 64 << 10, 4
	bl := newBuilder(2, 2*size)
	part := uint64(size / tbs)
	for k := uint64(0); k < tbs; k++ {
		bl.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, k*part, part)), rs(R(1, scr, k*part, part))))
		bl.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, k*part, part)), rs(L(out, k*part, part))))
	}
	s := openT(t, bl.inst, opts(), schedule{})
	bb := bufs(2, size, size)
	launch := func() {
		if err := s.Launch(context.Background(), bb); err != nil {
			t.Fatal(err)
		}
	}
	launch()
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		launch()
	}
	runtime.ReadMemStats(&after)
	perLaunch := (after.TotalAlloc - before.TotalAlloc) / runs
	if perLaunch >= bufBlock {
		t.Errorf("a steady launch allocates %d bytes, want under %d (one block buffer)", perLaunch, bufBlock)
	}
	allocs := testing.AllocsPerRun(runs, launch)
	t.Logf("a steady launch: %d bytes in %.0f allocations", perLaunch, allocs)
	if max := 100.0 * 2 * tbs; allocs > max {
		t.Errorf("a steady launch makes %.0f allocations, want at most %.0f", allocs, max)
	}
}
