package emit

// warnings.go holds the eval-time warnings: what the MSCCL++ executor
// cannot run or silently mis-runs in a compiled program (its hard limits,
// runtime-semantics.md §1.16, and the sizes §2.8 needs), each with the
// .star position of the op. The plan is still written, byte-identical;
// `eval --strict` makes them errors.

import (
	"fmt"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
)

// The MSCCL++ executor's limits the warnings check.
const (
	maxOpsPerTB      = 64
	maxChannelIDs    = 8
	maxChannelsPerTB = 16
	maxOperands      = 10
	unitAlignment    = 16
)

// Warning is one problem of a compiled program, at the .star position of
// the op (or of the program for a thread block without ops). Where names
// the op in the plan ("program \"ar\" rank 0 tb 1 op 3"); Msg says what
// is wrong, the same for every op a loop records the same way.
type Warning struct {
	Pos   syntax.Position
	Where string
	Msg   string
}

// Warnings returns the warnings of p, a program whose passes have run, in
// rank, thread block and op order.
func Warnings(p *ir.Program) []Warning {
	var out []Warning
	add := func(pos syntax.Position, where, format string, args ...any) {
		if !pos.IsValid() {
			pos = p.Pos
		}
		out = append(out, Warning{Pos: pos, Where: where, Msg: fmt.Sprintf(format, args...)})
	}
	for r, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			where := fmt.Sprintf("program %q rank %d tb %d", p.Name, r, tb.ID)
			if len(tb.Ops) == 0 {
				add(p.Pos, where, "the thread block holds no op (the MSCCL++ executor still launches it)")
			}
			perType := map[ir.ChannelType]int{}
			for _, t := range tb.Channels {
				perType[t.Type] += len(t.IDs)
			}
			for _, ct := range []ir.ChannelType{ir.Memory, ir.Port, ir.Switch} {
				if n := perType[ct]; n > maxChannelsPerTB {
					pos := syntax.Position{}
					if len(tb.Ops) > 0 {
						pos = tb.Ops[0].Pos
					}
					add(pos, where, "the thread block uses %d %s channels: the MSCCL++ executor holds at most %d of a type per thread block", n, ct, maxChannelsPerTB)
				}
			}
			count := 0
			for k, op := range tb.Ops {
				count++
				if count == maxOpsPerTB+1 {
					add(op.Pos, fmt.Sprintf("%s op %d", where, k), "%s is the thread block's op number %d (pipeline bodies included): the MSCCL++ executor holds at most %d", op.Kind, count, maxOpsPerTB)
				}
				opWarnings(add, fmt.Sprintf("%s op %d", where, k), op)
				for j, b := range op.Body {
					count++
					if count == maxOpsPerTB+1 {
						add(b.Pos, fmt.Sprintf("%s op %d.%d", where, k, j), "%s is the thread block's op number %d (pipeline bodies included): the MSCCL++ executor holds at most %d", b.Kind, count, maxOpsPerTB)
					}
					opWarnings(add, fmt.Sprintf("%s op %d.%d", where, k, j), b)
				}
			}
		}
	}
	return out
}

// opWarnings checks one op's channel ids, operands and pipeline unit.
func opWarnings(add func(syntax.Position, string, string, ...any), where string, op *ir.Op) {
	ids := len(op.ChannelIDs)
	if op.IDSet != nil {
		ids = op.IDSet.Len()
	}
	if ids > maxChannelIDs {
		add(op.Pos, where, "%s has %d channel ids: the MSCCL++ executor reads at most %d per op", op.Kind, ids, maxChannelIDs)
	}
	src, dst := len(op.Src), len(op.Dst)
	if op.Kind.Family() == ir.FamReduce {
		src = len(op.LocalSrc) + len(op.RemoteSrc)
		dst = len(op.LocalDst) + len(op.LocalPktDst) + len(op.RemoteDst)
	}
	if src > maxOperands || dst > maxOperands {
		add(op.Pos, where, "%s has %d sources and %d destinations: the MSCCL++ executor holds at most %d on a side", op.Kind, src, dst, maxOperands)
	}
	if op.Kind == ir.Pipeline && op.UnitSize%unitAlignment != 0 {
		add(op.Pos, where, "pipeline unit size %d is not a multiple of %d bytes: MSCCL++ mis-handles the tails of its reductions", op.UnitSize, unitAlignment)
	}
}
