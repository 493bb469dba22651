package emit

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// ErrInvalid is wrapped by the errors of Write and Marshal when the program
// holds something the plan format cannot express (a nil GPU, thread block
// or op, an unknown op kind, a barrier without its BarrierInfo, a switch op
// without its chunk or channel index, a nil semaphore value). The program is
// checked before the first byte is written, so an invalid program produces
// no output.
var ErrInvalid = errors.New("invalid program")

// Defaults written for nil header values, as the reference DSL's
// CollectiveProgram defaults them.
const (
	DefaultNumThreadsPerBlock = "1024"
	DefaultBufferAlignment    = "16"
	DefaultMinMessageSize     = "0"
	DefaultMaxMessageSize     = "18446744073709551615" // 2^64-1
)

// Pre-quoted keys with their separator.
const (
	kName                   = `"name": `
	kCollective             = `"collective": `
	kProtocol               = `"protocol": `
	kInplace                = `"inplace": `
	kReuseResources         = `"reuse_resources": `
	kGPUs                   = `"gpus": `
	kNumThreadsPerBlock     = `"num_threads_per_block": `
	kUseDoubleScratchBuffer = `"use_double_scratch_buffer": `
	kBufferAlignment        = `"buffer_alignment": `
	kMinMessageSize         = `"min_message_size": `
	kMaxMessageSize         = `"max_message_size": `
	kAllToAllV              = `"alltoallv": `
	kVersion                = `"version": `
	kBlocks                 = `"blocks": `
	kChunksPerBlock         = `"chunks_per_block": `

	kID                 = `"id": `
	kInputChunks        = `"input_chunks": `
	kOutputChunks       = `"output_chunks": `
	kScratchChunks      = `"scratch_chunks": `
	kThreadBlocks       = `"threadblocks": `
	kChannels           = `"channels": `
	kRemoteBuffers      = `"remote_buffers": `
	kSemaphores         = `"semaphores": `
	kChannelType        = `"channel_type": `
	kConnectedTo        = `"connected_to": `
	kBufferType         = `"buffer_type": `
	kRankGroups         = `"rank_groups": `
	kSize               = `"size": `
	kRanks              = `"ranks": `
	kRank               = `"rank": `
	kType               = `"type": `
	kAccessChannelTypes = `"access_channel_types": `
	kInitValue          = `"init_value": `

	kOps               = `"ops": `
	kChannelIDs        = `"channel_ids": `
	kRemoteBufferRefs  = `"remote_buffer_refs": `
	kAccessChannelType = `"access_channel_type": `
	kRemoteBufferIDs   = `"remote_buffer_ids": `

	kBarrierID       = `"barrier_id": `
	kNumThreadblocks = `"num_threadblocks": `
	kSemaphoreIDs    = `"semaphore_ids": `
	kSrcBuff         = `"src_buff": `
	kDstBuff         = `"dst_buff": `
	kReduceOp        = `"reduce_op": `
	kTBGInfo         = `"tbg_info": `
	kTBID            = `"tb_id": `
	kTBGSize         = `"tbg_size": `
	kBufferOffset    = `"buffer_offset": `
	kDstChunk        = `"dst_chunk": `
	kIndex           = `"index": `
	kBufferID        = `"buffer_id": `
	kSwitchChannelID = `"switch_channel_id": `
	kIterContext     = `"iter_context": `
	kUnitSize        = `"unit_size": `
	kNumChunks       = `"num_chunks": `
)

// Write writes p to w as the MSCCL++ execution plan text followed by one
// newline: the bytes `print(JSON())` writes in the reference DSL. The
// output is streamed in 64 KiB pieces, so w needs no buffering of its own.
// p must be the program after the passes ran; Write does not modify it.
// Nil header numbers are written as the reference defaults
// (DefaultNumThreadsPerBlock and the others). An invalid program (see
// ErrInvalid) is reported before anything is written; a write error stops
// the output and is returned wrapped.
func Write(w io.Writer, p *ir.Program) error {
	if err := check(p); err != nil {
		return err
	}
	e := &encoder{w: w, buf: make([]byte, 0, flushAt+flushAt/4)}
	e.program(p)
	e.buf = append(e.buf, '\n')
	e.flush()
	if e.err != nil {
		return fmt.Errorf("emit: %w", e.err)
	}
	return nil
}

// Marshal returns the plan text of p followed by one newline, the same
// bytes Write writes.
func Marshal(p *ir.Program) ([]byte, error) {
	var c collector
	if err := Write(&c, p); err != nil {
		return nil, err
	}
	return c.join(), nil
}

// MarshalNoNewline returns the plan text of p without the trailing
// newline: the string the DSL's JSON() builtin returns.
func MarshalNoNewline(p *ir.Program) ([]byte, error) {
	b, err := Marshal(p)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// collector keeps the pieces Write streams and joins them into one slice
// of the exact size, so that Marshal never regrows a large buffer.
type collector struct {
	pieces [][]byte
	n      int
}

// Write keeps a copy of b (the encoder reuses its buffer).
func (c *collector) Write(b []byte) (int, error) {
	c.pieces = append(c.pieces, bytes.Clone(b))
	c.n += len(b)
	return len(b), nil
}

// join returns the concatenated pieces.
func (c *collector) join() []byte {
	if len(c.pieces) == 1 {
		return c.pieces[0]
	}
	out := make([]byte, 0, c.n)
	for _, b := range c.pieces {
		out = append(out, b...)
	}
	return out
}

// program writes the top-level object.
func (e *encoder) program(p *ir.Program) {
	e.open('{')
	e.key(kName)
	e.buf = AppendString(e.buf, p.Name)
	e.key(kCollective)
	e.buf = AppendString(e.buf, p.Collective)
	e.key(kProtocol)
	e.buf = AppendString(e.buf, p.Protocol)
	e.key(kInplace)
	e.bool(p.Inplace)
	e.key(kReuseResources)
	e.bool(p.ReuseResources)
	e.key(kGPUs)
	e.open('[')
	for _, g := range p.GPUs {
		if e.err != nil {
			return
		}
		e.member()
		e.gpu(g)
	}
	e.close(']')
	e.key(kNumThreadsPerBlock)
	e.bigInt(p.NumThreadsPerBlock, DefaultNumThreadsPerBlock)
	e.key(kUseDoubleScratchBuffer)
	e.bool(p.UseDoubleScratchBuffer)
	e.key(kBufferAlignment)
	e.bigInt(p.BufferAlignment, DefaultBufferAlignment)
	e.key(kMinMessageSize)
	e.bigInt(p.MinMessageSize, DefaultMinMessageSize)
	e.key(kMaxMessageSize)
	e.bigInt(p.MaxMessageSize, DefaultMaxMessageSize)
	if p.Collective == plan.AllToAllVCollective {
		e.allToAllV(p)
	}
	e.close('}')
}

// allToAllV writes the "alltoallv" extension object: one block per rank
// in the input and output buffers, each of chunks_per_block chunks.
func (e *encoder) allToAllV(p *ir.Program) {
	per := 0
	if n := len(p.GPUs); n > 0 {
		per = p.GPUs[0].InputChunks / n
	}
	e.key(kAllToAllV)
	e.open('{')
	e.key(kVersion)
	e.int(plan.AllToAllVVersion)
	e.key(kBlocks)
	e.int(len(p.GPUs))
	e.key(kChunksPerBlock)
	e.int(per)
	e.close('}')
}

// gpu writes one rank's object.
func (e *encoder) gpu(g *ir.GPU) {
	e.open('{')
	e.key(kID)
	e.int(g.ID)
	e.key(kInputChunks)
	e.int(g.InputChunks)
	e.key(kOutputChunks)
	e.int(g.OutputChunks)
	e.key(kScratchChunks)
	e.int(g.ScratchChunks)

	e.key(kThreadBlocks)
	e.open('[')
	for _, tb := range g.ThreadBlocks {
		if e.err != nil {
			return
		}
		e.member()
		e.threadBlock(tb)
	}
	e.close(']')

	e.key(kChannels)
	e.open('[')
	for i := range g.Channels {
		c := &g.Channels[i]
		e.member()
		e.open('{')
		e.key(kChannelType)
		e.lit(c.Type.String())
		e.key(kConnectedTo)
		e.ints(c.ConnectedTo)
		e.close('}')
	}
	for i := range g.Switches {
		s := &g.Switches[i]
		e.member()
		e.open('{')
		e.key(kChannelType)
		e.lit(ir.Switch.String())
		e.key(kBufferType)
		e.lit(s.Buffer.String())
		e.key(kRankGroups)
		e.open('[')
		e.member()
		e.open('{')
		e.key(kSize)
		e.int(len(s.Ranks))
		e.key(kRanks)
		e.ints(s.Ranks)
		e.close('}')
		e.close(']')
		e.close('}')
	}
	e.close(']')

	e.key(kRemoteBuffers)
	e.open('[')
	for i := range g.RemoteBuffers {
		rb := &g.RemoteBuffers[i]
		e.member()
		e.open('{')
		e.key(kRank)
		e.int(rb.Rank)
		e.key(kType)
		e.lit(rb.Buffer.String())
		e.key(kAccessChannelTypes)
		e.open('[')
		if rb.Memory {
			e.member()
			e.lit(ir.Memory.String())
		}
		if rb.Port {
			e.member()
			e.lit(ir.Port.String())
		}
		e.close(']')
		e.close('}')
	}
	e.close(']')

	e.key(kSemaphores)
	e.open('[')
	for _, v := range g.Semaphores {
		e.member()
		e.open('{')
		e.key(kInitValue)
		e.bigInt(v, "0")
		e.close('}')
	}
	e.close(']')
	e.close('}')
}

// idTables writes a thread block's per-kind id tables (its channels or
// its remote buffer refs) as an array of {typeKey: kind, idsKey: [ids]}.
func (e *encoder) idTables(tables []ir.IDTable, typeKey, idsKey string) {
	e.open('[')
	for i := range tables {
		t := &tables[i]
		e.member()
		e.open('{')
		e.key(typeKey)
		e.lit(t.Type.String())
		e.key(idsKey)
		e.ints(t.IDs)
		e.close('}')
	}
	e.close(']')
}

// threadBlock writes one thread block with all four keys.
func (e *encoder) threadBlock(tb *ir.ThreadBlock) {
	e.open('{')
	e.key(kID)
	e.int(tb.ID)
	e.key(kOps)
	e.ops(tb.Ops)
	e.key(kChannels)
	e.idTables(tb.Channels, kChannelType, kChannelIDs)
	e.key(kRemoteBufferRefs)
	e.idTables(tb.RemoteRefs, kAccessChannelType, kRemoteBufferIDs)
	e.close('}')
}

// ops writes an op array.
func (e *encoder) ops(ops []*ir.Op) {
	e.open('[')
	for _, op := range ops {
		e.member()
		e.op(op)
		e.maybeFlush()
	}
	e.close(']')
}

// op writes one op object with the key list of its kind (docs/plan-format.md §6–§7).
func (e *encoder) op(op *ir.Op) {
	e.open('{')
	e.key(kName)
	e.lit(op.Kind.String())
	switch op.Kind.Family() {
	case ir.FamSync:
		if op.Kind == ir.Barrier {
			e.key(kBarrierID)
			e.int(op.Barrier.ID)
			e.key(kNumThreadblocks)
			e.int(len(op.Barrier.TBList))
		}

	case ir.FamDataSync:
		if op.Kind == ir.SemAcquire || op.Kind == ir.SemRelease {
			e.key(kSemaphoreIDs)
			e.ints(op.SemaphoreIDs)
			break
		}
		e.key(kChannelIDs)
		if op.IDSet != nil {
			e.ints(op.IDSet.Keys())
		} else {
			e.ints(op.ChannelIDs)
		}
		e.key(kChannelType)
		e.lit(op.ChannelType.String())

	case ir.FamCopy:
		e.key(kSrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.key(kDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.tbg(op.TBG)

	case ir.FamGet:
		e.key(kSrcBuff)
		e.refs(true, op.Src, nil, nil)
		e.key(kDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.key(kChannelIDs)
		e.ints(op.ChannelIDs)
		e.key(kChannelType)
		e.lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case ir.FamPut:
		e.key(kSrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.key(kDstBuff)
		e.refs(true, op.Dst, nil, nil)
		if op.ChannelType == ir.Port {
			e.key(kChannelIDs)
			e.ints(op.ChannelIDs)
		}
		e.key(kChannelType)
		e.lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case ir.FamReduce:
		e.key(kSrcBuff)
		e.refs(false, op.LocalSrc, nil, op.RemoteSrc)
		e.key(kDstBuff)
		e.refs(false, op.LocalDst, op.LocalPktDst, op.RemoteDst)
		if op.ChannelType != ir.NoChannel {
			e.key(kChannelType)
			e.lit(op.ChannelType.String())
		}
		e.key(kReduceOp)
		e.lit(op.ReduceOp.String())
		e.tbg(op.TBG)

	case ir.FamSwitch:
		e.switchOp(op)

	case ir.FamPipeline:
		e.key(kIterContext)
		e.open('{')
		e.key(kUnitSize)
		e.int64(op.UnitSize)
		e.key(kNumChunks)
		e.int64(op.NumChunks)
		e.close('}')
		e.key(kOps)
		e.ops(op.Body)
	}
	e.close('}')
}

// switchOp writes the keys of glre, gstore, gstorepkt and glres after name.
func (e *encoder) switchOp(op *ir.Op) {
	switch op.Kind {
	case ir.GroupLoadReduce:
		e.key(kBufferType)
		e.lit(op.SwitchBuffer.String())
		e.key(kBufferOffset)
		e.int(op.BufferOffset)
		e.key(kSize)
		e.int(op.Size)
		e.key(kDstChunk)
		e.chunk(op.SwitchChunk)
		e.key(kChannelIDs)
		e.ints(op.ChannelIDs)
		e.key(kChannelType)
		e.lit(ir.Switch.String())
		e.key(kReduceOp)
		e.lit(op.ReduceOp.String())

	case ir.GroupStore, ir.GroupStorePacket:
		e.key(kSrcBuff)
		e.open('[')
		e.member()
		e.chunk(op.SwitchChunk)
		e.close(']')
		e.key(kDstBuff)
		e.open('[')
		e.member()
		e.switchRef(op.ChannelIDs[0], op.BufferOffset, op.Size)
		e.close(']')
		e.key(kChannelType)
		e.lit(ir.Switch.String())

	case ir.GroupLoadReduceStore:
		// Both sides print the reduce (source) offsets: quirk Q1 of the
		// reference, which records DstIndex but never serialises it.
		for _, k := range [...]string{kSrcBuff, kDstBuff} {
			e.key(k)
			e.open('[')
			for i, idx := range op.SrcIndex {
				e.member()
				e.switchRef(op.ChannelIDs[i], idx, op.Size)
			}
			e.close(']')
		}
		e.key(kChannelType)
		e.lit(ir.Switch.String())
		e.key(kReduceOp)
		e.lit(op.ReduceOp.String())
	}
}

// refs writes an operand array: the refs of a, then b, then remote; the
// refs of a and b are local unless aRemote is set, those of remote are
// remote. The shape follows the list a ref comes from; Ref.Remote is not
// consulted.
func (e *encoder) refs(aRemote bool, a, b, remote []ir.Ref) {
	e.open('[')
	for i := range a {
		e.member()
		e.ref(aRemote, &a[i])
	}
	for i := range b {
		e.member()
		e.ref(false, &b[i])
	}
	for i := range remote {
		e.member()
		e.ref(true, &remote[i])
	}
	e.close(']')
}

// ref writes a local {type, index, size} or remote {buffer_id, index, size}
// operand.
func (e *encoder) ref(remote bool, r *ir.Ref) {
	e.open('{')
	if remote {
		e.key(kBufferID)
		e.int(r.BufferID)
	} else {
		e.key(kType)
		e.lit(r.Buffer.String())
	}
	e.key(kIndex)
	e.int(r.Index)
	e.key(kSize)
	e.int(r.Size)
	e.close('}')
}

// chunk writes a chunk-with-rank operand {rank, type, index, size}.
func (e *encoder) chunk(c *ir.Chunk) {
	e.open('{')
	e.key(kRank)
	e.int(c.Rank)
	e.key(kType)
	e.lit(c.Buffer.String())
	e.key(kIndex)
	e.int(c.Index)
	e.key(kSize)
	e.int(c.Size)
	e.close('}')
}

// switchRef writes a switch operand {switch_channel_id, index, size}.
func (e *encoder) switchRef(ch, index, size int) {
	e.open('{')
	e.key(kSwitchChannelID)
	e.int(ch)
	e.key(kIndex)
	e.int(index)
	e.key(kSize)
	e.int(size)
	e.close('}')
}

// tbg writes the optional trailing tbg_info member.
func (e *encoder) tbg(t *ir.TBGInfo) {
	if t == nil {
		return
	}
	e.key(kTBGInfo)
	e.open('{')
	e.key(kTBID)
	e.int(t.TBID)
	e.key(kTBGSize)
	e.int(t.TBGSize)
	e.close('}')
}
