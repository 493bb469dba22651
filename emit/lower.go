package emit

import (
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
	var l lowerer
	out := l.head(p)
	out.GPUs = make([]plan.GPU, len(p.GPUs))
	for r, g := range p.GPUs {
		l.gpu(&out.GPUs[r], g)
	}
	return out, nil
}

// lowerEach checks p and returns its plan's header and a function that
// lowers GPU i, for plan.EncodeEach. The function reuses one GPU's
// memory for the next, so each result is valid only until the next call:
// a plan is written holding one rank's ops at a time.
func lowerEach(p *ir.Program) (*plan.Plan, func(i int) *plan.GPU, error) {
	if err := check(p); err != nil {
		return nil, nil, err
	}
	l := &lowerer{reuse: true}
	var g plan.GPU
	return l.head(p), func(i int) *plan.GPU {
		l.reset()
		l.gpu(&g, p.GPUs[i])
		return &g
	}, nil
}

// lowerer carves the lists of the plan from blocks, one allocation for
// many ops (as ir.Op.Clone does). With reuse, reset hands the blocks out
// again from their start, so that lowering one GPU after another
// allocates only while a GPU needs more than the ones before it.
type lowerer struct {
	reuse bool
	ops   block[plan.Op]
	opds  block[plan.Operand]
	ints  block[int]
	types block[plan.ChannelType]
	tbgs  block[plan.TBGInfo]
	tbs   block[plan.ThreadBlock]
	chans block[plan.ChannelDecl]
	rbs   block[plan.RemoteBuffer]
	sems  block[int64]
	maps  []map[plan.ChannelType][]int // with reuse: the id tables handed out, in order
	nmaps int
}

// block is a slab that lists are carved from.
type block[T any] struct{ s []T }

// take returns n zeroed elements of the block, capped so that appending
// to them never writes into their neighbours.
func (b *block[T]) take(n int) []T {
	if cap(b.s)-len(b.s) < n {
		b.s = make([]T, 0, max(n, 1024))
	}
	i := len(b.s)
	b.s = b.s[:i+n]
	out := b.s[i : i+n : i+n]
	clear(out)
	return out
}

// reset hands the blocks out again (their earlier lists are dead).
func (l *lowerer) reset() {
	l.ops.s, l.opds.s, l.ints.s, l.types.s = l.ops.s[:0], l.opds.s[:0], l.ints.s[:0], l.types.s[:0]
	l.tbgs.s, l.tbs.s, l.chans.s, l.rbs.s, l.sems.s = l.tbgs.s[:0], l.tbs.s[:0], l.chans.s[:0], l.rbs.s[:0], l.sems.s[:0]
	l.nmaps = 0
}

// head returns the plan's header fields; check(p) has passed, so every
// header number fits.
func (l *lowerer) head(p *ir.Program) *plan.Plan {
	out := &plan.Plan{
		Name:             p.Name,
		Collective:       p.Collective,
		Protocol:         p.Protocol,
		Inplace:          p.Inplace,
		ReuseResources:   p.ReuseResources,
		UseDoubleScratch: p.UseDoubleScratchBuffer,
	}
	out.NumThreadsPerBlock = int(headerValue(p.NumThreadsPerBlock, DefaultNumThreadsPerBlock))
	out.BufferAlignment = headerValue(p.BufferAlignment, DefaultBufferAlignment)
	out.MinMessageSize = headerValue(p.MinMessageSize, DefaultMinMessageSize)
	out.MaxMessageSize = headerValue(p.MaxMessageSize, DefaultMaxMessageSize)
	if p.Collective == plan.AllToAllVCollective {
		per := 0
		if n := len(p.GPUs); n > 0 {
			per = p.GPUs[0].InputChunks / n
		}
		out.AllToAllV = &plan.VarLayout{Blocks: len(p.GPUs), ChunksPerBlock: per}
	}
	return out
}

// header is one header number of a program with its key, default and
// upper limit (check reads them).
type header struct {
	key, def string
	v        *big.Int
	limit    uint64
}

// headers returns the header numbers of p.
func headers(p *ir.Program) []header {
	return []header{
		{plan.KeyNumThreadsPerBlock, DefaultNumThreadsPerBlock, p.NumThreadsPerBlock, math.MaxInt},
		{plan.KeyBufferAlignment, DefaultBufferAlignment, p.BufferAlignment, math.MaxUint64},
		{plan.KeyMinMessageSize, DefaultMinMessageSize, p.MinMessageSize, math.MaxUint64},
		{plan.KeyMaxMessageSize, DefaultMaxMessageSize, p.MaxMessageSize, math.MaxUint64},
	}
}

// headerValue returns a header number, def when it is nil.
func headerValue(v *big.Int, def string) uint64 {
	if v == nil {
		v, _ = new(big.Int).SetString(def, 10)
	}
	return v.Uint64()
}

func (l *lowerer) gpu(out *plan.GPU, g *ir.GPU) {
	*out = plan.GPU{
		ID:            g.ID,
		InputChunks:   g.InputChunks,
		OutputChunks:  g.OutputChunks,
		ScratchChunks: g.ScratchChunks,
		ThreadBlocks:  l.tbs.take(len(g.ThreadBlocks)),
		Channels:      l.chans.take(len(g.Channels) + len(g.Switches))[:0],
		RemoteBuffers: l.rbs.take(len(g.RemoteBuffers)),
		Semaphores:    l.sems.take(len(g.Semaphores)),
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
		access := l.types.take(2)[:0]
		if rb.Memory {
			access = append(access, plan.Memory)
		}
		if rb.Port {
			access = append(access, plan.Port)
		}
		out.RemoteBuffers[i] = plan.RemoteBuffer{Rank: rb.Rank, Type: rb.Buffer, Access: access}
	}
	for i, v := range g.Semaphores {
		out.Semaphores[i] = v.Int64()
	}
}

func (l *lowerer) threadBlock(out *plan.ThreadBlock, tb *ir.ThreadBlock) {
	out.ID = tb.ID
	out.Ops = l.ops.take(len(tb.Ops))
	for i, op := range tb.Ops {
		l.op(&out.Ops[i], op)
	}
	out.Channels, out.ChannelOrder = l.tables(tb.Channels)
	out.RemoteRefs, out.RemoteRefOrder = l.tables(tb.RemoteRefs)
}

// tables returns a thread block's id tables as the plan keeps them. A
// type listed once shares its ids with the IR.
func (l *lowerer) tables(ts []ir.IDTable) (map[plan.ChannelType][]int, []plan.ChannelType) {
	m := l.table(len(ts))
	order := l.types.take(len(ts))[:0]
	for _, t := range ts {
		prev, seen := m[t.Type]
		if !seen {
			order = append(order, t.Type)
			m[t.Type] = t.IDs
			continue
		}
		m[t.Type] = append(prev[:len(prev):len(prev)], t.IDs...)
	}
	return m, order
}

// table returns an empty id table: a new map, or with reuse the next one
// of the maps handed out for earlier GPUs.
func (l *lowerer) table(n int) map[plan.ChannelType][]int {
	if !l.reuse {
		return make(map[plan.ChannelType][]int, n)
	}
	if l.nmaps == len(l.maps) {
		l.maps = append(l.maps, make(map[plan.ChannelType][]int, n))
	}
	m := l.maps[l.nmaps]
	l.nmaps++
	clear(m)
	return m
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
			out.ChannelIDs = op.IDSet.AppendKeys(l.ints.take(op.IDSet.Len())[:0])
		} else {
			out.ChannelIDs = orEmpty(op.ChannelIDs)
		}
		out.ChannelType = op.ChannelType
	case plan.FamCopy:
		out.Src, out.Dst = l.refs(false, op.Src, nil, nil), l.refs(false, op.Dst, nil, nil)
		out.TBG = l.tbg(op.TBG)
	case plan.FamGet:
		out.Src, out.Dst = l.refs(true, op.Src, nil, nil), l.refs(false, op.Dst, nil, nil)
		out.ChannelIDs, out.ChannelType = orEmpty(op.ChannelIDs), op.ChannelType
		out.TBG = l.tbg(op.TBG)
	case plan.FamPut:
		out.Src, out.Dst = l.refs(false, op.Src, nil, nil), l.refs(true, op.Dst, nil, nil)
		if op.ChannelType == plan.Port {
			out.ChannelIDs = orEmpty(op.ChannelIDs)
		}
		out.ChannelType = op.ChannelType
		out.TBG = l.tbg(op.TBG)
	case plan.FamReduce:
		out.Src = l.refs(false, op.LocalSrc, nil, op.RemoteSrc)
		out.Dst = l.refs(false, op.LocalDst, op.LocalPktDst, op.RemoteDst)
		out.ChannelType, out.ReduceOp = op.ChannelType, op.ReduceOp.String()
		out.TBG = l.tbg(op.TBG)
	case plan.FamSwitch:
		l.switchOp(out, op)
	case plan.FamPipeline:
		out.UnitSize, out.NumChunks = uint64(op.UnitSize), uint64(op.NumChunks)
		out.Ops = l.ops.take(len(op.Body))
		for i, b := range op.Body {
			l.op(&out.Ops[i], b)
		}
	}
}

// switchOp lowers glre, gstore, gstorepkt and glres.
func (l *lowerer) switchOp(out *plan.Op, op *ir.Op) {
	out.ChannelType = plan.Switch
	switch op.Kind {
	case plan.OpGroupLoadReduce:
		out.Src, out.Dst = l.opds.take(1), l.opds.take(1)
		out.Src[0] = plan.Operand{Kind: plan.SwitchOperand, Type: op.SwitchBuffer, Index: uint64(op.BufferOffset), Size: uint64(op.Size)}
		out.Dst[0] = chunkOperand(op.SwitchChunk)
		out.ChannelIDs = orEmpty(op.ChannelIDs)
		out.ReduceOp = op.ReduceOp.String()
	case plan.OpMultiStore, plan.OpMultiStorePacket:
		out.Src, out.Dst = l.opds.take(1), l.opds.take(1)
		out.Src[0] = chunkOperand(op.SwitchChunk)
		out.Dst[0] = switchRef(op.ChannelIDs[0], op.BufferOffset, op.Size)
	case plan.OpMultiLoadReduceStore:
		// Both sides hold the reduce (source) offsets: quirk Q1 of the
		// reference, which records DstIndex but never serialises it.
		out.Src, out.Dst = l.opds.take(len(op.SrcIndex)), l.opds.take(len(op.SrcIndex))
		for i, idx := range op.SrcIndex {
			out.Src[i] = switchRef(op.ChannelIDs[i], idx, op.Size)
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
	out := l.opds.take(len(a) + len(b) + len(remote))[:0]
	for i := range a {
		out = append(out, ref(aRemote, &a[i]))
	}
	for i := range b {
		out = append(out, ref(false, &b[i]))
	}
	for i := range remote {
		out = append(out, ref(true, &remote[i]))
	}
	return out
}

// ref returns a buffer operand; check(p) has refused negative indices.
func ref(remote bool, r *ir.Ref) plan.Operand {
	o := plan.Operand{Kind: plan.LocalOperand, Type: r.Buffer, Index: uint64(r.Index), Size: uint64(r.Size)}
	if remote {
		o.Kind, o.Type, o.BufferID = plan.RemoteOperand, 0, r.BufferID
	}
	return o
}

// chunkOperand returns a chunk-with-rank operand {rank, type, index, size}.
func chunkOperand(c *ir.Chunk) plan.Operand {
	return plan.Operand{Kind: plan.LocalOperand, Rank: c.Rank, HasRank: true, Type: c.Buffer, Index: uint64(c.Index), Size: uint64(c.Size)}
}

// switchRef returns a switch operand {switch_channel_id, index, size}.
func switchRef(ch, index, size int) plan.Operand {
	return plan.Operand{Kind: plan.SwitchOperand, SwitchID: ch, Index: uint64(index), Size: uint64(size)}
}

func (l *lowerer) tbg(t *ir.TBGInfo) *plan.TBGInfo {
	if t == nil {
		return nil
	}
	g := &l.tbgs.take(1)[0]
	*g = plan.TBGInfo{TBID: t.TBID, TBGSize: t.TBGSize}
	return g
}

// orEmpty returns s, or an empty list for nil: the plan writes a list
// that is nil in the IR as [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
