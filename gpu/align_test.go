package gpu

import (
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// TestCheckAlignment: operands the device would access misaligned are
// refused with the op's position; aligned ones pass.
func TestCheckAlignment(t *testing.T) {
	reg := func(off uint64) executor.Region {
		return executor.Region{Buffer: plan.Scratch, Offset: off, Size: 64, Switch: -1}
	}
	inst := func(op executor.OpInstance, double bool, scratch uint64) *executor.Instance {
		return &executor.Instance{
			Plan:         &plan.Plan{UseDoubleScratch: double},
			ScratchBytes: scratch,
			Ranks:        []executor.RankInstance{{TBs: []executor.TBInstance{{ID: 3, Ops: []executor.OpInstance{op}}}}},
		}
	}
	cpkt := func(src, dst uint64) executor.OpInstance {
		return executor.OpInstance{Type: plan.OpCopyPacket, Path: "op 1", Src: []executor.Region{reg(src)}, Dst: []executor.Region{reg(dst)}}
	}
	re := executor.OpInstance{Type: plan.OpReduce, Path: "op 2", Src: []executor.Region{reg(0), reg(6)}, Dst: []executor.Region{reg(0)}}
	for _, c := range []struct {
		name         string
		inst         *executor.Instance
		packet, elem uint64
		want         string // "" for no error
	}{
		{"aligned LL16", inst(cpkt(4, 8), false, 1024), 16, 2, ""},
		{"LL16 packets at 8", inst(cpkt(0, 4), false, 1024), 16, 2, "rank 0 tb 3 op 1 cpkt: destination 0: packets at 8 are not 16-byte aligned"},
		{"LL8 packets at 8", inst(cpkt(0, 4), false, 1024), 8, 2, ""},
		{"raw payload", inst(cpkt(2, 8), false, 1024), 16, 2, "source 0: offset 2 is not a multiple of 4 bytes"},
		{"reduce of fp16 at 6", inst(re, false, 1024), 16, 2, ""},
		{"reduce of fp32 at 6", inst(re, false, 1024), 16, 4, "op 2 re: source 1: offset 6 is not a multiple of 4 bytes"},
		{"double scratch half", inst(cpkt(0, 8), true, 1048), 16, 2, "half of scratch (524 bytes)"},
	} {
		err := checkAlignment(c.inst, c.packet, c.elem)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
