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
	e := &encoder{plan.NewWriter(w)}
	e.program(p)
	e.Byte('\n')
	if err := e.Flush(); err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	return nil
}

// encoder writes an ir.Program through the plan format's writer.
type encoder struct {
	*plan.Writer
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
	e.Open('{')
	e.Key(kName)
	e.Quoted(p.Name)
	e.Key(kCollective)
	e.Quoted(p.Collective)
	e.Key(kProtocol)
	e.Quoted(p.Protocol)
	e.Key(kInplace)
	e.Bool(p.Inplace)
	e.Key(kReuseResources)
	e.Bool(p.ReuseResources)
	e.Key(kGPUs)
	e.Open('[')
	for _, g := range p.GPUs {
		if e.Err() != nil {
			return
		}
		e.Member()
		e.gpu(g)
	}
	e.Close(']')
	e.Key(kNumThreadsPerBlock)
	e.BigInt(p.NumThreadsPerBlock, DefaultNumThreadsPerBlock)
	e.Key(kUseDoubleScratchBuffer)
	e.Bool(p.UseDoubleScratchBuffer)
	e.Key(kBufferAlignment)
	e.BigInt(p.BufferAlignment, DefaultBufferAlignment)
	e.Key(kMinMessageSize)
	e.BigInt(p.MinMessageSize, DefaultMinMessageSize)
	e.Key(kMaxMessageSize)
	e.BigInt(p.MaxMessageSize, DefaultMaxMessageSize)
	if p.Collective == plan.AllToAllVCollective {
		e.allToAllV(p)
	}
	e.Close('}')
}

// allToAllV writes the "alltoallv" extension object: one block per rank
// in the input and output buffers, each of chunks_per_block chunks.
func (e *encoder) allToAllV(p *ir.Program) {
	per := 0
	if n := len(p.GPUs); n > 0 {
		per = p.GPUs[0].InputChunks / n
	}
	e.Key(kAllToAllV)
	e.Open('{')
	e.Key(kVersion)
	e.Int(plan.AllToAllVVersion)
	e.Key(kBlocks)
	e.Int(len(p.GPUs))
	e.Key(kChunksPerBlock)
	e.Int(per)
	e.Close('}')
}

// gpu writes one rank's object.
func (e *encoder) gpu(g *ir.GPU) {
	e.Open('{')
	e.Key(kID)
	e.Int(g.ID)
	e.Key(kInputChunks)
	e.Int(g.InputChunks)
	e.Key(kOutputChunks)
	e.Int(g.OutputChunks)
	e.Key(kScratchChunks)
	e.Int(g.ScratchChunks)

	e.Key(kThreadBlocks)
	e.Open('[')
	for _, tb := range g.ThreadBlocks {
		if e.Err() != nil {
			return
		}
		e.Member()
		e.threadBlock(tb)
	}
	e.Close(']')

	e.Key(kChannels)
	e.Open('[')
	for i := range g.Channels {
		c := &g.Channels[i]
		e.Member()
		e.Open('{')
		e.Key(kChannelType)
		e.Lit(c.Type.String())
		e.Key(kConnectedTo)
		e.Ints(c.ConnectedTo)
		e.Close('}')
	}
	for i := range g.Switches {
		s := &g.Switches[i]
		e.Member()
		e.Open('{')
		e.Key(kChannelType)
		e.Lit(ir.Switch.String())
		e.Key(kBufferType)
		e.Lit(s.Buffer.String())
		e.Key(kRankGroups)
		e.Open('[')
		e.Member()
		e.Open('{')
		e.Key(kSize)
		e.Int(len(s.Ranks))
		e.Key(kRanks)
		e.Ints(s.Ranks)
		e.Close('}')
		e.Close(']')
		e.Close('}')
	}
	e.Close(']')

	e.Key(kRemoteBuffers)
	e.Open('[')
	for i := range g.RemoteBuffers {
		rb := &g.RemoteBuffers[i]
		e.Member()
		e.Open('{')
		e.Key(kRank)
		e.Int(rb.Rank)
		e.Key(kType)
		e.Lit(rb.Buffer.String())
		e.Key(kAccessChannelTypes)
		e.Open('[')
		if rb.Memory {
			e.Member()
			e.Lit(ir.Memory.String())
		}
		if rb.Port {
			e.Member()
			e.Lit(ir.Port.String())
		}
		e.Close(']')
		e.Close('}')
	}
	e.Close(']')

	e.Key(kSemaphores)
	e.Open('[')
	for _, v := range g.Semaphores {
		e.Member()
		e.Open('{')
		e.Key(kInitValue)
		e.BigInt(v, "0")
		e.Close('}')
	}
	e.Close(']')
	e.Close('}')
}

// idTables writes a thread block's per-kind id tables (its channels or
// its remote buffer refs) as an array of {typeKey: kind, idsKey: [ids]}.
func (e *encoder) idTables(tables []ir.IDTable, typeKey, idsKey string) {
	e.Open('[')
	for i := range tables {
		t := &tables[i]
		e.Member()
		e.Open('{')
		e.Key(typeKey)
		e.Lit(t.Type.String())
		e.Key(idsKey)
		e.Ints(t.IDs)
		e.Close('}')
	}
	e.Close(']')
}

// threadBlock writes one thread block with all four keys.
func (e *encoder) threadBlock(tb *ir.ThreadBlock) {
	e.Open('{')
	e.Key(kID)
	e.Int(tb.ID)
	e.Key(kOps)
	e.ops(tb.Ops)
	e.Key(kChannels)
	e.idTables(tb.Channels, kChannelType, kChannelIDs)
	e.Key(kRemoteBufferRefs)
	e.idTables(tb.RemoteRefs, kAccessChannelType, kRemoteBufferIDs)
	e.Close('}')
}

// ops writes an op array.
func (e *encoder) ops(ops []*ir.Op) {
	e.Open('[')
	for _, op := range ops {
		e.Member()
		e.op(op)
		e.MaybeFlush()
	}
	e.Close(']')
}

// op writes one op object with the key list of its kind (docs/plan-format.md §6–§7).
func (e *encoder) op(op *ir.Op) {
	e.Open('{')
	e.Key(kName)
	e.Lit(op.Kind.String())
	switch op.Kind.Family() {
	case plan.FamSync:
		if op.Kind == plan.OpBarrier {
			e.Key(kBarrierID)
			e.Int(op.Barrier.ID)
			e.Key(kNumThreadblocks)
			e.Int(len(op.Barrier.TBList))
		}

	case plan.FamDataSync:
		if op.Kind == plan.OpSemAcquire || op.Kind == plan.OpSemRelease {
			e.Key(kSemaphoreIDs)
			e.Ints(op.SemaphoreIDs)
			break
		}
		e.Key(kChannelIDs)
		if op.IDSet != nil {
			e.Ints(op.IDSet.Keys())
		} else {
			e.Ints(op.ChannelIDs)
		}
		e.Key(kChannelType)
		e.Lit(op.ChannelType.String())

	case plan.FamCopy:
		e.Key(kSrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.Key(kDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.tbg(op.TBG)

	case plan.FamGet:
		e.Key(kSrcBuff)
		e.refs(true, op.Src, nil, nil)
		e.Key(kDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.Key(kChannelIDs)
		e.Ints(op.ChannelIDs)
		e.Key(kChannelType)
		e.Lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case plan.FamPut:
		e.Key(kSrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.Key(kDstBuff)
		e.refs(true, op.Dst, nil, nil)
		if op.ChannelType == ir.Port {
			e.Key(kChannelIDs)
			e.Ints(op.ChannelIDs)
		}
		e.Key(kChannelType)
		e.Lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case plan.FamReduce:
		e.Key(kSrcBuff)
		e.refs(false, op.LocalSrc, nil, op.RemoteSrc)
		e.Key(kDstBuff)
		e.refs(false, op.LocalDst, op.LocalPktDst, op.RemoteDst)
		if op.ChannelType != ir.NoChannel {
			e.Key(kChannelType)
			e.Lit(op.ChannelType.String())
		}
		e.Key(kReduceOp)
		e.Lit(op.ReduceOp.String())
		e.tbg(op.TBG)

	case plan.FamSwitch:
		e.switchOp(op)

	case plan.FamPipeline:
		e.Key(kIterContext)
		e.Open('{')
		e.Key(kUnitSize)
		e.Int64(op.UnitSize)
		e.Key(kNumChunks)
		e.Int64(op.NumChunks)
		e.Close('}')
		e.Key(kOps)
		e.ops(op.Body)
	}
	e.Close('}')
}

// switchOp writes the keys of glre, gstore, gstorepkt and glres after name.
func (e *encoder) switchOp(op *ir.Op) {
	switch op.Kind {
	case plan.OpGroupLoadReduce:
		e.Key(kBufferType)
		e.Lit(op.SwitchBuffer.String())
		e.Key(kBufferOffset)
		e.Int(op.BufferOffset)
		e.Key(kSize)
		e.Int(op.Size)
		e.Key(kDstChunk)
		e.chunk(op.SwitchChunk)
		e.Key(kChannelIDs)
		e.Ints(op.ChannelIDs)
		e.Key(kChannelType)
		e.Lit(ir.Switch.String())
		e.Key(kReduceOp)
		e.Lit(op.ReduceOp.String())

	case plan.OpMultiStore, plan.OpMultiStorePacket:
		e.Key(kSrcBuff)
		e.Open('[')
		e.Member()
		e.chunk(op.SwitchChunk)
		e.Close(']')
		e.Key(kDstBuff)
		e.Open('[')
		e.Member()
		e.switchRef(op.ChannelIDs[0], op.BufferOffset, op.Size)
		e.Close(']')
		e.Key(kChannelType)
		e.Lit(ir.Switch.String())

	case plan.OpMultiLoadReduceStore:
		// Both sides print the reduce (source) offsets: quirk Q1 of the
		// reference, which records DstIndex but never serialises it.
		for _, k := range [...]string{kSrcBuff, kDstBuff} {
			e.Key(k)
			e.Open('[')
			for i, idx := range op.SrcIndex {
				e.Member()
				e.switchRef(op.ChannelIDs[i], idx, op.Size)
			}
			e.Close(']')
		}
		e.Key(kChannelType)
		e.Lit(ir.Switch.String())
		e.Key(kReduceOp)
		e.Lit(op.ReduceOp.String())
	}
}

// refs writes an operand array: the refs of a, then b, then remote; the
// refs of a and b are local unless aRemote is set, those of remote are
// remote. The shape follows the list a ref comes from; Ref.Remote is not
// consulted.
func (e *encoder) refs(aRemote bool, a, b, remote []ir.Ref) {
	e.Open('[')
	for i := range a {
		e.Member()
		e.ref(aRemote, &a[i])
	}
	for i := range b {
		e.Member()
		e.ref(false, &b[i])
	}
	for i := range remote {
		e.Member()
		e.ref(true, &remote[i])
	}
	e.Close(']')
}

// ref writes a local {type, index, size} or remote {buffer_id, index, size}
// operand.
func (e *encoder) ref(remote bool, r *ir.Ref) {
	e.Open('{')
	if remote {
		e.Key(kBufferID)
		e.Int(r.BufferID)
	} else {
		e.Key(kType)
		e.Lit(r.Buffer.String())
	}
	e.Key(kIndex)
	e.Int(r.Index)
	e.Key(kSize)
	e.Int(r.Size)
	e.Close('}')
}

// chunk writes a chunk-with-rank operand {rank, type, index, size}.
func (e *encoder) chunk(c *ir.Chunk) {
	e.Open('{')
	e.Key(kRank)
	e.Int(c.Rank)
	e.Key(kType)
	e.Lit(c.Buffer.String())
	e.Key(kIndex)
	e.Int(c.Index)
	e.Key(kSize)
	e.Int(c.Size)
	e.Close('}')
}

// switchRef writes a switch operand {switch_channel_id, index, size}.
func (e *encoder) switchRef(ch, index, size int) {
	e.Open('{')
	e.Key(kSwitchChannelID)
	e.Int(ch)
	e.Key(kIndex)
	e.Int(index)
	e.Key(kSize)
	e.Int(size)
	e.Close('}')
}

// tbg writes the optional trailing tbg_info member.
func (e *encoder) tbg(t *ir.TBGInfo) {
	if t == nil {
		return
	}
	e.Key(kTBGInfo)
	e.Open('{')
	e.Key(kTBID)
	e.Int(t.TBID)
	e.Key(kTBGSize)
	e.Int(t.TBGSize)
	e.Close('}')
}
