package plan

import (
	"io"
	"strconv"
)

// This file is the encoder: Encode writes a *Plan as the MSCCL++ plan
// text, in the layout and key order the Python DSL prints (json.dumps
// with indent=2), so that a plan read by Load and written by Encode is
// the same bytes (TestEncodeFixedPoint, over every golden and reference
// plan). The keys are those of keys.go, which the reader uses too.

// Encode writes p to w as plan text followed by one newline. The output
// is streamed in pieces of 64 KiB through a Writer; the first write error
// is returned.
func Encode(w io.Writer, p *Plan) error {
	return EncodeEach(w, p, len(p.GPUs), func(i int) *GPU { return &p.GPUs[i] })
}

// EncodeEach writes, as Encode does, the plan whose header fields are
// head's and whose n GPUs are gpu(0), ..., gpu(n-1), asked for in that
// order; head.GPUs is not read. Each GPU is written before the next is
// asked for, so gpu may build its result in memory that it reuses for
// the next: a producer such as package emit holds one GPU at a time
// instead of the whole plan. A write error stops the output; the GPUs
// after it are not asked for.
func EncodeEach(w io.Writer, head *Plan, n int, gpu func(i int) *GPU) error {
	e := NewWriter(w)
	encodePlan(e, head, n, gpu)
	e.Byte('\n')
	return e.Flush()
}

func encodePlan(e *Writer, p *Plan, n int, gpu func(i int) *GPU) {
	e.Open('{')
	e.Key(KeyName)
	e.Quoted(p.Name)
	e.Key(KeyCollective)
	e.Quoted(p.Collective)
	e.Key(KeyProtocol)
	e.Quoted(p.Protocol)
	e.Key(KeyInplace)
	e.Bool(p.Inplace)
	e.Key(KeyReuseResources)
	e.Bool(p.ReuseResources)
	e.Key(KeyGPUs)
	e.Open('[')
	for i := range n {
		if e.Err() != nil {
			return
		}
		e.Member()
		encodeGPU(e, gpu(i))
	}
	e.Close(']')
	e.Key(KeyNumThreadsPerBlock)
	e.Int(p.NumThreadsPerBlock)
	e.Key(KeyUseDoubleScratchBuffer)
	e.Bool(p.UseDoubleScratch)
	e.Key(KeyBufferAlignment)
	e.Uint64(p.BufferAlignment)
	e.Key(KeyMinMessageSize)
	e.Uint64(p.MinMessageSize)
	e.Key(KeyMaxMessageSize)
	e.Uint64(p.MaxMessageSize)
	if v := p.AllToAllV; v != nil {
		e.Key(KeyAllToAllV)
		e.Open('{')
		e.Key(KeyVersion)
		e.Int(AllToAllVVersion)
		e.Key(KeyBlocks)
		e.Int(v.Blocks)
		e.Key(KeyChunksPerBlock)
		e.Int(v.ChunksPerBlock)
		e.Close('}')
	}
	e.Close('}')
}

func encodeGPU(e *Writer, g *GPU) {
	e.Open('{')
	e.Key(KeyID)
	e.Int(g.ID)
	e.Key(KeyInputChunks)
	e.Int(g.InputChunks)
	e.Key(KeyOutputChunks)
	e.Int(g.OutputChunks)
	e.Key(KeyScratchChunks)
	e.Int(g.ScratchChunks)
	e.Key(KeyThreadBlocks)
	e.Open('[')
	for i := range g.ThreadBlocks {
		e.Member()
		encodeThreadBlock(e, &g.ThreadBlocks[i])
	}
	e.Close(']')
	e.Key(KeyChannels)
	e.Open('[')
	for i := range g.Channels {
		e.Member()
		encodeChannel(e, &g.Channels[i])
	}
	e.Close(']')
	e.Key(KeyRemoteBuffers)
	e.Open('[')
	for _, rb := range g.RemoteBuffers {
		e.Member()
		e.Open('{')
		e.Key(KeyRank)
		e.Int(rb.Rank)
		e.Key(KeyType)
		e.Lit(rb.Type.String())
		e.Key(KeyAccessChannelTypes)
		e.Open('[')
		for _, ct := range rb.Access {
			e.Member()
			e.Lit(ct.String())
		}
		e.Close(']')
		e.Close('}')
	}
	e.Close(']')
	e.Key(KeySemaphores)
	e.Open('[')
	for _, v := range g.Semaphores {
		e.Member()
		e.Open('{')
		e.Key(KeyInitValue)
		e.Int64(v)
		e.Close('}')
	}
	e.Close(']')
	e.Close('}')
}

func encodeChannel(e *Writer, c *ChannelDecl) {
	e.Open('{')
	e.Key(KeyChannelType)
	e.Lit(c.Type.String())
	if c.Type != Switch {
		e.Key(KeyConnectedTo)
		e.Ints(c.ConnectedTo)
		e.Close('}')
		return
	}
	e.Key(KeyBufferType)
	e.Lit(c.Buffer.String())
	e.Key(KeyRankGroups)
	e.Open('[')
	for _, g := range c.RankGroups {
		e.Member()
		e.Open('{')
		e.Key(KeySize)
		e.Int(len(g))
		e.Key(KeyRanks)
		e.Ints(g)
		e.Close('}')
	}
	e.Close(']')
	e.Close('}')
}

func encodeThreadBlock(e *Writer, tb *ThreadBlock) {
	e.Open('{')
	e.Key(KeyID)
	e.Int(tb.ID)
	e.Key(KeyOps)
	encodeOps(e, tb.Ops)
	e.Key(KeyChannels)
	encodeTables(e, tb.ChannelOrder, tb.Channels, KeyChannelType, KeyChannelIDs)
	e.Key(KeyRemoteBufferRefs)
	encodeTables(e, tb.RemoteRefOrder, tb.RemoteRefs, KeyAccessChannelType, KeyRemoteBufferIDs)
	e.Close('}')
}

// encodeTables writes a thread block's per-type id tables as an array of
// {typeKey: type, idsKey: [ids]}, in order.
func encodeTables(e *Writer, order []ChannelType, tables map[ChannelType][]int, typeKey, idsKey string) {
	e.Open('[')
	for _, ct := range order {
		e.Member()
		e.Open('{')
		e.Key(typeKey)
		e.Lit(ct.String())
		e.Key(idsKey)
		e.Ints(tables[ct])
		e.Close('}')
	}
	e.Close(']')
}

func encodeOps(e *Writer, ops []Op) {
	e.Open('[')
	for i := range ops {
		e.Member()
		encodeOp(e, &ops[i])
		e.MaybeFlush()
	}
	e.Close(']')
}

// encodeOp writes one op with the keys of its family, in the DSL's order
// (docs/plan-format.md §6-§7). Optional keys are written when the op has
// them: channel_ids when not nil, channel_type of a reduction when it is
// not none, tbg_info when set.
func encodeOp(e *Writer, op *Op) {
	e.Open('{')
	e.Key(KeyName)
	e.Lit(op.Type.String())
	switch op.Type.Family() {
	case FamSync:
		if op.Type == OpBarrier {
			e.Key(KeyBarrierID)
			e.Int(op.BarrierID)
			e.Key(KeyNumThreadBlocks)
			e.Int(op.NumThreadBlocks)
		}
	case FamDataSync:
		if Ops[op.Type].semaphores {
			e.Key(KeySemaphoreIDs)
			e.Ints(op.SemaphoreIDs)
			break
		}
		e.Key(KeyChannelIDs)
		e.Ints(op.ChannelIDs)
		e.Key(KeyChannelType)
		e.Lit(op.ChannelType.String())
	case FamCopy, FamGet, FamPut, FamReduce:
		encodeOperands(e, KeySrcBuff, op.Src)
		encodeOperands(e, KeyDstBuff, op.Dst)
		if op.ChannelIDs != nil {
			e.Key(KeyChannelIDs)
			e.Ints(op.ChannelIDs)
		}
		if op.ChannelType != NoChannel {
			e.Key(KeyChannelType)
			e.Lit(op.ChannelType.String())
		}
		if op.ReduceOp != "" {
			e.Key(KeyReduceOp)
			e.Lit(op.ReduceOp)
		}
		encodeTBG(e, op.TBG)
	case FamSwitch:
		encodeSwitchOp(e, op)
	case FamPipeline:
		e.Key(KeyIterContext)
		e.Open('{')
		e.Key(KeyUnitSize)
		e.Uint64(op.UnitSize)
		e.Key(KeyNumChunks)
		e.Uint64(op.NumChunks)
		e.Close('}')
		e.Key(KeyOps)
		encodeOps(e, op.Ops)
	}
	e.Close('}')
}

// encodeSwitchOp writes the keys of glres, gstore and gstorepkt (their
// operands) and of the compiler's glre (its switch source as
// buffer_type, buffer_offset and size, then its dst_chunk).
func encodeSwitchOp(e *Writer, op *Op) {
	if op.Type == OpGroupLoadReduce && len(op.Src) == 1 && len(op.Dst) == 1 {
		e.Key(KeyBufferType)
		e.Lit(op.Src[0].Type.String())
		e.Key(KeyBufferOffset)
		e.Uint64(op.Src[0].Index)
		e.Key(KeySize)
		e.Uint64(op.Src[0].Size)
		e.Key(KeyDstChunk)
		encodeOperand(e, &op.Dst[0])
		e.Key(KeyChannelIDs)
		e.Ints(op.ChannelIDs)
	} else {
		encodeOperands(e, KeySrcBuff, op.Src)
		encodeOperands(e, KeyDstBuff, op.Dst)
	}
	e.Key(KeyChannelType)
	e.Lit(op.ChannelType.String())
	if op.ReduceOp != "" {
		e.Key(KeyReduceOp)
		e.Lit(op.ReduceOp)
	}
}

func encodeOperands(e *Writer, key string, opds []Operand) {
	e.Key(key)
	e.Open('[')
	for i := range opds {
		e.Member()
		encodeOperand(e, &opds[i])
	}
	e.Close(']')
}

// encodeOperand writes {type, index, size} (with the rank first when it
// has one), {buffer_id, index, size} or {switch_channel_id, index, size}.
func encodeOperand(e *Writer, o *Operand) {
	e.Open('{')
	switch o.Kind {
	case LocalOperand:
		if o.HasRank {
			e.Key(KeyRank)
			e.Int(o.Rank)
		}
		e.Key(KeyType)
		e.Lit(o.Type.String())
	case RemoteOperand:
		e.Key(KeyBufferID)
		e.Int(o.BufferID)
	case SwitchOperand:
		e.Key(KeySwitchChannelID)
		e.Int(o.SwitchID)
	}
	e.Key(KeyIndex)
	e.Uint64(o.Index)
	e.Key(KeySize)
	e.Uint64(o.Size)
	e.Close('}')
}

func encodeTBG(e *Writer, t *TBGInfo) {
	if t == nil {
		return
	}
	e.Key(KeyTBGInfo)
	e.Open('{')
	e.Key(KeyTBID)
	e.Int(t.TBID)
	e.Key(KeyTBGSize)
	e.Int(t.TBGSize)
	e.Close('}')
}

// Uint64 appends v.
func (e *Writer) Uint64(v uint64) { e.buf = strconv.AppendUint(e.buf, v, 10) }

// Op writes one op object as Encode writes it inside a plan.
func (e *Writer) Op(op *Op) { encodeOp(e, op) }
