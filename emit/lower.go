package emit

import (
	"fmt"
	"math"
	"math/big"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Lower returns the plan of p, after the passes: the document that
// plan.Encode writes as the DSL prints it. It checks p first and returns
// an error wrapping ErrInvalid for what the format cannot express (see
// ErrInvalid), including a header number or a semaphore value that does
// not fit the plan's field. It does not modify p; the plan may share
// lists with it, so treat both as read-only.
func Lower(p *ir.Program) (*plan.Plan, error) {
	if err := check(p); err != nil {
		return nil, err
	}
	l := lowerer{}
	out := &plan.Plan{
		Name:             p.Name,
		Collective:       p.Collective,
		Protocol:         p.Protocol,
		Inplace:          p.Inplace,
		ReuseResources:   p.ReuseResources,
		UseDoubleScratch: p.UseDoubleScratchBuffer,
		GPUs:             make([]plan.GPU, len(p.GPUs)),
	}
	out.NumThreadsPerBlock = int(l.header(plan.KeyNumThreadsPerBlock, p.NumThreadsPerBlock, DefaultNumThreadsPerBlock, math.MaxInt))
	out.BufferAlignment = l.header(plan.KeyBufferAlignment, p.BufferAlignment, DefaultBufferAlignment, math.MaxUint64)
	out.MinMessageSize = l.header(plan.KeyMinMessageSize, p.MinMessageSize, DefaultMinMessageSize, math.MaxUint64)
	out.MaxMessageSize = l.header(plan.KeyMaxMessageSize, p.MaxMessageSize, DefaultMaxMessageSize, math.MaxUint64)
	for r, g := range p.GPUs {
		l.gpu(&out.GPUs[r], g)
	}
	if p.Collective == plan.AllToAllVCollective {
		per := 0
		if n := len(p.GPUs); n > 0 {
			per = p.GPUs[0].InputChunks / n
		}
		out.AllToAllV = &plan.VarLayout{Blocks: len(p.GPUs), ChunksPerBlock: per}
	}
	if l.err != nil {
		return nil, l.err
	}
	return out, nil
}

// lowerer keeps the first value that does not fit its field, and the
// block the operands of the plan are carved from (one allocation for many
// ops, as ir.Op.Clone does).
type lowerer struct {
	err  error
	opds []plan.Operand
}

// operands returns n operands of the block, capped so that appending to
// them never writes into their neighbours.
func (l *lowerer) operands(n int) []plan.Operand {
	if cap(l.opds)-len(l.opds) < n {
		l.opds = make([]plan.Operand, 0, max(n, 4096))
	}
	i := len(l.opds)
	l.opds = l.opds[:i+n]
	return l.opds[i : i+n : i+n]
}

func (l *lowerer) fail(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf("emit: %w: "+format, append([]any{ErrInvalid}, args...)...)
	}
}

// header returns a header number, def when it is nil.
func (l *lowerer) header(key string, v *big.Int, def string, limit uint64) uint64 {
	if v == nil {
		v, _ = new(big.Int).SetString(def, 10)
	}
	if !v.IsUint64() || v.Uint64() > limit {
		l.fail("%s = %s: the plan holds a number in [0, %d]", key, v, limit)
		return 0
	}
	return v.Uint64()
}

// index returns a chunk index or size of the IR as the plan's.
func (l *lowerer) index(what string, v int) uint64 {
	if v < 0 {
		l.fail("%s = %d: want at least 0", what, v)
		return 0
	}
	return uint64(v)
}

func (l *lowerer) gpu(out *plan.GPU, g *ir.GPU) {
	*out = plan.GPU{
		ID:            g.ID,
		InputChunks:   g.InputChunks,
		OutputChunks:  g.OutputChunks,
		ScratchChunks: g.ScratchChunks,
		ThreadBlocks:  make([]plan.ThreadBlock, len(g.ThreadBlocks)),
		Channels:      make([]plan.ChannelDecl, 0, len(g.Channels)+len(g.Switches)),
		RemoteBuffers: make([]plan.RemoteBuffer, len(g.RemoteBuffers)),
		Semaphores:    make([]int64, len(g.Semaphores)),
	}
	for i, tb := range g.ThreadBlocks {
		l.threadBlock(&out.ThreadBlocks[i], tb)
	}
	for _, c := range g.Channels {
		out.Channels = append(out.Channels, plan.ChannelDecl{Type: c.Type, ConnectedTo: orEmpty(c.ConnectedTo)})
	}
	for _, s := range g.Switches {
		out.Channels = append(out.Channels, plan.ChannelDecl{Type: plan.Switch, Buffer: s.Buffer, RankGroups: [][]int{orEmpty(s.Ranks)}})
	}
	for i, rb := range g.RemoteBuffers {
		out.RemoteBuffers[i] = plan.RemoteBuffer{Rank: rb.Rank, Type: rb.Buffer, Access: rb.AccessTypes()}
	}
	for i, v := range g.Semaphores {
		if !v.IsInt64() {
			l.fail("rank %d: semaphore %d: init_value %s does not fit 64 bits", g.ID, i, v)
			continue
		}
		out.Semaphores[i] = v.Int64()
	}
}

func (l *lowerer) threadBlock(out *plan.ThreadBlock, tb *ir.ThreadBlock) {
	out.ID = tb.ID
	out.Ops = l.ops(tb.Ops)
	out.Channels, out.ChannelOrder = tables(tb.Channels)
	out.RemoteRefs, out.RemoteRefOrder = tables(tb.RemoteRefs)
}

// tables returns a thread block's id tables as the plan keeps them.
func tables(ts []ir.IDTable) (map[plan.ChannelType][]int, []plan.ChannelType) {
	m := make(map[plan.ChannelType][]int, len(ts))
	order := make([]plan.ChannelType, 0, len(ts))
	for _, t := range ts {
		if _, seen := m[t.Type]; !seen {
			order = append(order, t.Type)
		}
		m[t.Type] = append(m[t.Type], t.IDs...)
	}
	return m, order
}

func (l *lowerer) ops(ops []*ir.Op) []plan.Op {
	out := make([]plan.Op, len(ops))
	for i, op := range ops {
		l.op(&out[i], op)
	}
	return out
}

// op lowers one op with the fields its family writes
// (docs/plan-format.md §6-§7).
func (l *lowerer) op(out *plan.Op, op *ir.Op) {
	out.Type = op.Kind
	switch op.Kind.Family() {
	case plan.FamSync:
		if op.Kind == plan.OpBarrier {
			out.BarrierID, out.NumThreadBlocks = op.Barrier.ID, len(op.Barrier.TBList)
		}
	case plan.FamDataSync:
		if !op.Kind.SignalsChannels() {
			out.SemaphoreIDs = orEmpty(op.SemaphoreIDs)
			break
		}
		if op.IDSet != nil {
			out.ChannelIDs = orEmpty(op.IDSet.Keys())
		} else {
			out.ChannelIDs = orEmpty(op.ChannelIDs)
		}
		out.ChannelType = op.ChannelType
	case plan.FamCopy:
		out.Src, out.Dst = l.refs(false, op.Src, nil, nil), l.refs(false, op.Dst, nil, nil)
		out.TBG = tbg(op.TBG)
	case plan.FamGet:
		out.Src, out.Dst = l.refs(true, op.Src, nil, nil), l.refs(false, op.Dst, nil, nil)
		out.ChannelIDs, out.ChannelType = orEmpty(op.ChannelIDs), op.ChannelType
		out.TBG = tbg(op.TBG)
	case plan.FamPut:
		out.Src, out.Dst = l.refs(false, op.Src, nil, nil), l.refs(true, op.Dst, nil, nil)
		if op.ChannelType == plan.Port {
			out.ChannelIDs = orEmpty(op.ChannelIDs)
		}
		out.ChannelType = op.ChannelType
		out.TBG = tbg(op.TBG)
	case plan.FamReduce:
		out.Src = l.refs(false, op.LocalSrc, nil, op.RemoteSrc)
		out.Dst = l.refs(false, op.LocalDst, op.LocalPktDst, op.RemoteDst)
		out.ChannelType, out.ReduceOp = op.ChannelType, op.ReduceOp.String()
		out.TBG = tbg(op.TBG)
	case plan.FamSwitch:
		l.switchOp(out, op)
	case plan.FamPipeline:
		if op.UnitSize < 0 || op.NumChunks < 0 {
			l.fail("pipeline: unit_size %d, num_chunks %d: want at least 0", op.UnitSize, op.NumChunks)
		}
		out.UnitSize, out.NumChunks = uint64(op.UnitSize), uint64(op.NumChunks)
		out.Ops = l.ops(op.Body)
	}
}

// switchOp lowers glre, gstore, gstorepkt and glres.
func (l *lowerer) switchOp(out *plan.Op, op *ir.Op) {
	out.ChannelType = plan.Switch
	switch op.Kind {
	case plan.OpGroupLoadReduce:
		out.Src, out.Dst = l.operands(1), l.operands(1)
		out.Src[0] = plan.Operand{Kind: plan.SwitchOperand, Type: op.SwitchBuffer, Index: l.index(plan.KeyBufferOffset, op.BufferOffset), Size: l.index("size", op.Size)}
		out.Dst[0] = l.chunk(op.SwitchChunk)
		out.ChannelIDs = orEmpty(op.ChannelIDs)
		out.ReduceOp = op.ReduceOp.String()
	case plan.OpMultiStore, plan.OpMultiStorePacket:
		out.Src, out.Dst = l.operands(1), l.operands(1)
		out.Src[0] = l.chunk(op.SwitchChunk)
		out.Dst[0] = l.switchRef(op.ChannelIDs[0], op.BufferOffset, op.Size)
	case plan.OpMultiLoadReduceStore:
		// Both sides hold the reduce (source) offsets: quirk Q1 of the
		// reference, which records DstIndex but never serialises it.
		out.Src, out.Dst = l.operands(len(op.SrcIndex)), l.operands(len(op.SrcIndex))
		for i, idx := range op.SrcIndex {
			out.Src[i] = l.switchRef(op.ChannelIDs[i], idx, op.Size)
		}
		copy(out.Dst, out.Src)
		out.ReduceOp = op.ReduceOp.String()
	}
}

// refs returns an operand list: the refs of a, then b, then remote; the
// refs of a and b are local unless aRemote is set, those of remote are
// remote. The shape follows the list a ref comes from; Ref.Remote is not
// consulted.
func (l *lowerer) refs(aRemote bool, a, b, remote []ir.Ref) []plan.Operand {
	out := l.operands(len(a) + len(b) + len(remote))[:0]
	for i := range a {
		out = append(out, l.ref(aRemote, &a[i]))
	}
	for i := range b {
		out = append(out, l.ref(false, &b[i]))
	}
	for i := range remote {
		out = append(out, l.ref(true, &remote[i]))
	}
	return out
}

func (l *lowerer) ref(remote bool, r *ir.Ref) plan.Operand {
	o := plan.Operand{Kind: plan.LocalOperand, Type: r.Buffer, Index: l.index("index", r.Index), Size: l.index("size", r.Size)}
	if remote {
		o.Kind, o.Type, o.BufferID = plan.RemoteOperand, 0, r.BufferID
	}
	return o
}

// chunk returns a chunk-with-rank operand {rank, type, index, size}.
func (l *lowerer) chunk(c *ir.Chunk) plan.Operand {
	return plan.Operand{Kind: plan.LocalOperand, Rank: c.Rank, HasRank: true, Type: c.Buffer, Index: l.index("index", c.Index), Size: l.index("size", c.Size)}
}

// switchRef returns a switch operand {switch_channel_id, index, size}.
func (l *lowerer) switchRef(ch, index, size int) plan.Operand {
	return plan.Operand{Kind: plan.SwitchOperand, SwitchID: ch, Index: l.index("index", index), Size: l.index("size", size)}
}

func tbg(t *ir.TBGInfo) *plan.TBGInfo {
	if t == nil {
		return nil
	}
	return &plan.TBGInfo{TBID: t.TBID, TBGSize: t.TBGSize}
}

// orEmpty returns s, or an empty list for nil: the plan writes a list
// that is nil in the IR as [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
