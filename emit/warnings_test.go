package emit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// TestWarnings covers each warning on hand-built programs.
func TestWarnings(t *testing.T) {
	file := "algo.star"
	at := func(line int32) syntax.Position { return syntax.MakePosition(&file, line, 1) }
	cp := func(line int32) *ir.Op {
		return &ir.Op{Kind: plan.OpCopy, Pos: at(line), Src: []ir.Ref{{}}, Dst: []ir.Ref{{}}}
	}
	many := func(n int) []*ir.Op {
		var ops []*ir.Op
		for i := 0; i < n; i++ {
			ops = append(ops, cp(int32(10+i)))
		}
		return ops
	}
	prog := func(tbs ...*ir.ThreadBlock) *ir.Program {
		return &ir.Program{Name: "p", Pos: at(1), GPUs: []*ir.GPU{{ThreadBlocks: tbs}}}
	}
	refs := func(n int) []ir.Ref { return make([]ir.Ref, n) }
	cases := []struct {
		name string
		p    *ir.Program
		want []Warning
	}{
		{"clean", prog(&ir.ThreadBlock{Ops: many(64)}), nil},
		{"65 ops", prog(&ir.ThreadBlock{Ops: many(65)}), []Warning{{at(74), `program "p" rank 0 tb 0 op 64`,
			"copy is the thread block's op number 65 (pipeline bodies included): the MSCCL++ executor holds at most 64"}}},
		{"pipeline body counts", prog(&ir.ThreadBlock{Ops: append(many(60), &ir.Op{Kind: plan.OpPipeline, Pos: at(3), UnitSize: 32, Body: many(5)})}),
			[]Warning{{at(13), `program "p" rank 0 tb 0 op 60.3`,
				"copy is the thread block's op number 65 (pipeline bodies included): the MSCCL++ executor holds at most 64"}}},
		{"empty block", prog(&ir.ThreadBlock{ID: 0, Ops: many(1)}, &ir.ThreadBlock{ID: 1}),
			[]Warning{{at(1), `program "p" rank 0 tb 1`, "the thread block holds no op (the MSCCL++ executor still launches it)"}}},
		{"channel ids", prog(&ir.ThreadBlock{Ops: []*ir.Op{{Kind: plan.OpGet, Pos: at(7), Src: refs(1), Dst: refs(1), ChannelIDs: make([]int, 9)}}}),
			[]Warning{{at(7), `program "p" rank 0 tb 0 op 0`, "get has 9 channel ids: the MSCCL++ executor reads at most 8 per op"}}},
		{"operands", prog(&ir.ThreadBlock{Ops: []*ir.Op{{Kind: plan.OpReduce, Pos: at(8), LocalSrc: refs(6), RemoteSrc: refs(5), LocalDst: refs(1)}}}),
			[]Warning{{at(8), `program "p" rank 0 tb 0 op 0`, "re has 11 sources and 1 destinations: the MSCCL++ executor holds at most 10 on a side"}}},
		{"channels per block", prog(&ir.ThreadBlock{Ops: many(1), Channels: []ir.IDTable{{Type: ir.Port, IDs: make([]int, 17)}}}),
			[]Warning{{at(10), `program "p" rank 0 tb 0`, "the thread block uses 17 port channels: the MSCCL++ executor holds at most 16 of a type per thread block"}}},
		{"unit size", prog(&ir.ThreadBlock{Ops: []*ir.Op{{Kind: plan.OpPipeline, Pos: at(5), UnitSize: 24, Body: many(1)}}}),
			[]Warning{{at(5), `program "p" rank 0 tb 0 op 0`, "pipeline unit size 24 is not a multiple of 16 bytes: MSCCL++ mis-handles the tails of its reductions"}}},
	}
	for _, c := range cases {
		got := Warnings(c.p)
		if diff := cmp.Diff(c.want, got, cmp.Comparer(func(a, b syntax.Position) bool { return a == b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
