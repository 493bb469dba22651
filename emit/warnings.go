package emit

// warnings.go holds the eval-time warnings: what the MSCCL++ executor
// cannot run or silently mis-runs in a compiled program (its hard limits,
// docs/semantics.md §1.16, the sizes §2.8 needs, and channels used
// without a partner on the peer, docs/semantics.md §4.1), each with the
// .star position of the op. The plan is still written, byte-identical;
// `eval --strict` makes them errors.

import (
	"fmt"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// unitAlignment is the pipeline unit size, in bytes, whose multiples
// MSCCL++ reduces correctly.
const unitAlignment = 16

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
	unpaired := unpairedChannels(p)
	for r, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			where := fmt.Sprintf("program %q rank %d tb %d", p.Name, r, tb.ID)
			for k, op := range tb.Ops {
				for _, o := range append([]*ir.Op{op}, op.Body...) {
					if msg := usesUnpaired(unpaired[r], tb, o); msg != "" {
						add(o.Pos, fmt.Sprintf("%s op %d", where, k), "%s %s", o.Kind, msg)
					}
				}
			}
			if len(tb.Ops) == 0 {
				add(p.Pos, where, "the thread block holds no op (the MSCCL++ executor still launches it)")
			}
			perType := map[ir.ChannelType]int{}
			for _, t := range tb.Channels {
				perType[t.Type] += len(t.IDs)
			}
			for _, ct := range []ir.ChannelType{ir.Memory, ir.Port, ir.Switch} {
				if n := perType[ct]; n > plan.MaxChannelsPerTB {
					pos := syntax.Position{}
					if len(tb.Ops) > 0 {
						pos = tb.Ops[0].Pos
					}
					add(pos, where, "the thread block uses %d %s channels: the MSCCL++ executor holds at most %d of a type per thread block", n, ct, plan.MaxChannelsPerTB)
				}
			}
			count := 0
			for k, op := range tb.Ops {
				count++
				if count == plan.MaxOpsPerTB+1 {
					add(op.Pos, fmt.Sprintf("%s op %d", where, k), "%s is the thread block's op number %d (pipeline bodies included): the MSCCL++ executor holds at most %d", op.Kind, count, plan.MaxOpsPerTB)
				}
				opWarnings(add, fmt.Sprintf("%s op %d", where, k), op)
				for j, b := range op.Body {
					count++
					if count == plan.MaxOpsPerTB+1 {
						add(b.Pos, fmt.Sprintf("%s op %d.%d", where, k, j), "%s is the thread block's op number %d (pipeline bodies included): the MSCCL++ executor holds at most %d", b.Kind, count, plan.MaxOpsPerTB)
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
	if ids > plan.MaxChannelIDsPerOp {
		add(op.Pos, where, "%s has %d channel ids: the MSCCL++ executor reads at most %d per op", op.Kind, ids, plan.MaxChannelIDsPerOp)
	}
	src, dst := len(op.Src), len(op.Dst)
	if op.Kind.Family() == plan.FamReduce {
		src = len(op.LocalSrc) + len(op.RemoteSrc)
		dst = len(op.LocalDst) + len(op.LocalPktDst) + len(op.RemoteDst)
	}
	if src > plan.MaxOperandsPerSide || dst > plan.MaxOperandsPerSide {
		add(op.Pos, where, "%s has %d sources and %d destinations: the MSCCL++ executor holds at most %d on a side", op.Kind, src, dst, plan.MaxOperandsPerSide)
	}
	if op.Kind == plan.OpPipeline && op.UnitSize%unitAlignment != 0 {
		add(op.Pos, where, "pipeline unit size %d is not a multiple of %d bytes: MSCCL++ mis-handles the tails of its reductions", op.UnitSize, unitAlignment)
	}
}

// unpairedKey is a rank-level channel: its type and its global index.
type unpairedKey struct {
	t  ir.ChannelType
	id int
}

// unpairedChannels returns, per rank, its memory and port channels that
// have no partner on the peer (MSCCL++ pairs A's k-th channel of a type
// to B with B's k-th channel of that type to A): their signals land in a
// filler connection and their waits never end.
func unpairedChannels(p *ir.Program) []map[unpairedKey]string {
	peers := func(g *ir.GPU, t ir.ChannelType) []int {
		var out []int
		for _, c := range g.Channels {
			if c.Type == t {
				out = append(out, c.ConnectedTo...)
			}
		}
		return out
	}
	// counts[t][r][peer] is how many channels of type t rank r declares
	// to peer: counted once, so that the check is linear in the channels.
	counts := map[ir.ChannelType][]map[int]int{}
	for _, t := range []ir.ChannelType{ir.Memory, ir.Port} {
		counts[t] = make([]map[int]int, len(p.GPUs))
		for r, g := range p.GPUs {
			counts[t][r] = map[int]int{}
			for _, peer := range peers(g, t) {
				counts[t][r][peer]++
			}
		}
	}
	out := make([]map[unpairedKey]string, len(p.GPUs))
	for r, g := range p.GPUs {
		for _, t := range []ir.ChannelType{ir.Memory, ir.Port} {
			mine := peers(g, t)
			seen := map[int]int{}
			for id, peer := range mine {
				k := seen[peer]
				seen[peer]++
				if peer < 0 || peer >= len(p.GPUs) || peer == r {
					continue
				}
				back := counts[t][peer][r]
				if k < back {
					continue
				}
				if out[r] == nil {
					out[r] = map[unpairedKey]string{}
				}
				out[r][unpairedKey{t, id}] = fmt.Sprintf("uses %s channel %d of rank %d (to rank %d), which has no partner: rank %d declares %d %s channel(s) to rank %d, rank %d declares %d back; MSCCL++ loses its signals and never ends its waits",
					t, id, r, peer, r, counts[t][r][peer], t, peer, peer, back)
			}
		}
	}
	return out
}

// usesUnpaired returns the message of the first unpaired channel a
// signal, wait or flush op, or a put with signal on a port channel, uses,
// or "".
func usesUnpaired(unpaired map[unpairedKey]string, tb *ir.ThreadBlock, op *ir.Op) string {
	if len(unpaired) == 0 {
		return ""
	}
	var ids []int
	switch {
	case op.Kind.Family() == plan.FamDataSync && op.IDSet != nil:
		ids = op.IDSet.Keys()
	case op.Kind.IsData() && op.Kind.Signals() && op.ChannelType == ir.Port: // a put with a signal
		ids = op.ChannelIDs
	default:
		return ""
	}
	var table []int
	for _, t := range tb.Channels {
		if t.Type == op.ChannelType {
			table = append(table, t.IDs...)
		}
	}
	for _, local := range ids {
		if local >= 0 && local < len(table) {
			if msg, ok := unpaired[unpairedKey{op.ChannelType, table[local]}]; ok {
				return msg
			}
		}
	}
	return ""
}
