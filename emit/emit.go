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
	e.Key(plan.KeyName)
	e.Quoted(p.Name)
	e.Key(plan.KeyCollective)
	e.Quoted(p.Collective)
	e.Key(plan.KeyProtocol)
	e.Quoted(p.Protocol)
	e.Key(plan.KeyInplace)
	e.Bool(p.Inplace)
	e.Key(plan.KeyReuseResources)
	e.Bool(p.ReuseResources)
	e.Key(plan.KeyGPUs)
	e.Open('[')
	for _, g := range p.GPUs {
		if e.Err() != nil {
			return
		}
		e.Member()
		e.gpu(g)
	}
	e.Close(']')
	e.Key(plan.KeyNumThreadsPerBlock)
	e.BigInt(p.NumThreadsPerBlock, DefaultNumThreadsPerBlock)
	e.Key(plan.KeyUseDoubleScratchBuffer)
	e.Bool(p.UseDoubleScratchBuffer)
	e.Key(plan.KeyBufferAlignment)
	e.BigInt(p.BufferAlignment, DefaultBufferAlignment)
	e.Key(plan.KeyMinMessageSize)
	e.BigInt(p.MinMessageSize, DefaultMinMessageSize)
	e.Key(plan.KeyMaxMessageSize)
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
	e.Key(plan.KeyAllToAllV)
	e.Open('{')
	e.Key(plan.KeyVersion)
	e.Int(plan.AllToAllVVersion)
	e.Key(plan.KeyBlocks)
	e.Int(len(p.GPUs))
	e.Key(plan.KeyChunksPerBlock)
	e.Int(per)
	e.Close('}')
}

// gpu writes one rank's object.
func (e *encoder) gpu(g *ir.GPU) {
	e.Open('{')
	e.Key(plan.KeyID)
	e.Int(g.ID)
	e.Key(plan.KeyInputChunks)
	e.Int(g.InputChunks)
	e.Key(plan.KeyOutputChunks)
	e.Int(g.OutputChunks)
	e.Key(plan.KeyScratchChunks)
	e.Int(g.ScratchChunks)

	e.Key(plan.KeyThreadBlocks)
	e.Open('[')
	for _, tb := range g.ThreadBlocks {
		if e.Err() != nil {
			return
		}
		e.Member()
		e.threadBlock(tb)
	}
	e.Close(']')

	e.Key(plan.KeyChannels)
	e.Open('[')
	for i := range g.Channels {
		c := &g.Channels[i]
		e.Member()
		e.Open('{')
		e.Key(plan.KeyChannelType)
		e.Lit(c.Type.String())
		e.Key(plan.KeyConnectedTo)
		e.Ints(c.ConnectedTo)
		e.Close('}')
	}
	for i := range g.Switches {
		s := &g.Switches[i]
		e.Member()
		e.Open('{')
		e.Key(plan.KeyChannelType)
		e.Lit(ir.Switch.String())
		e.Key(plan.KeyBufferType)
		e.Lit(s.Buffer.String())
		e.Key(plan.KeyRankGroups)
		e.Open('[')
		e.Member()
		e.Open('{')
		e.Key(plan.KeySize)
		e.Int(len(s.Ranks))
		e.Key(plan.KeyRanks)
		e.Ints(s.Ranks)
		e.Close('}')
		e.Close(']')
		e.Close('}')
	}
	e.Close(']')

	e.Key(plan.KeyRemoteBuffers)
	e.Open('[')
	for i := range g.RemoteBuffers {
		rb := &g.RemoteBuffers[i]
		e.Member()
		e.Open('{')
		e.Key(plan.KeyRank)
		e.Int(rb.Rank)
		e.Key(plan.KeyType)
		e.Lit(rb.Buffer.String())
		e.Key(plan.KeyAccessChannelTypes)
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

	e.Key(plan.KeySemaphores)
	e.Open('[')
	for _, v := range g.Semaphores {
		e.Member()
		e.Open('{')
		e.Key(plan.KeyInitValue)
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
	e.Key(plan.KeyID)
	e.Int(tb.ID)
	e.Key(plan.KeyOps)
	e.ops(tb.Ops)
	e.Key(plan.KeyChannels)
	e.idTables(tb.Channels, plan.KeyChannelType, plan.KeyChannelIDs)
	e.Key(plan.KeyRemoteBufferRefs)
	e.idTables(tb.RemoteRefs, plan.KeyAccessChannelType, plan.KeyRemoteBufferIDs)
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
	e.Key(plan.KeyName)
	e.Lit(op.Kind.String())
	switch op.Kind.Family() {
	case plan.FamSync:
		if op.Kind == plan.OpBarrier {
			e.Key(plan.KeyBarrierID)
			e.Int(op.Barrier.ID)
			e.Key(plan.KeyNumThreadBlocks)
			e.Int(len(op.Barrier.TBList))
		}

	case plan.FamDataSync:
		if op.Kind == plan.OpSemAcquire || op.Kind == plan.OpSemRelease {
			e.Key(plan.KeySemaphoreIDs)
			e.Ints(op.SemaphoreIDs)
			break
		}
		e.Key(plan.KeyChannelIDs)
		if op.IDSet != nil {
			e.Ints(op.IDSet.Keys())
		} else {
			e.Ints(op.ChannelIDs)
		}
		e.Key(plan.KeyChannelType)
		e.Lit(op.ChannelType.String())

	case plan.FamCopy:
		e.Key(plan.KeySrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.Key(plan.KeyDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.tbg(op.TBG)

	case plan.FamGet:
		e.Key(plan.KeySrcBuff)
		e.refs(true, op.Src, nil, nil)
		e.Key(plan.KeyDstBuff)
		e.refs(false, op.Dst, nil, nil)
		e.Key(plan.KeyChannelIDs)
		e.Ints(op.ChannelIDs)
		e.Key(plan.KeyChannelType)
		e.Lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case plan.FamPut:
		e.Key(plan.KeySrcBuff)
		e.refs(false, op.Src, nil, nil)
		e.Key(plan.KeyDstBuff)
		e.refs(true, op.Dst, nil, nil)
		if op.ChannelType == ir.Port {
			e.Key(plan.KeyChannelIDs)
			e.Ints(op.ChannelIDs)
		}
		e.Key(plan.KeyChannelType)
		e.Lit(op.ChannelType.String())
		e.tbg(op.TBG)

	case plan.FamReduce:
		e.Key(plan.KeySrcBuff)
		e.refs(false, op.LocalSrc, nil, op.RemoteSrc)
		e.Key(plan.KeyDstBuff)
		e.refs(false, op.LocalDst, op.LocalPktDst, op.RemoteDst)
		if op.ChannelType != ir.NoChannel {
			e.Key(plan.KeyChannelType)
			e.Lit(op.ChannelType.String())
		}
		e.Key(plan.KeyReduceOp)
		e.Lit(op.ReduceOp.String())
		e.tbg(op.TBG)

	case plan.FamSwitch:
		e.switchOp(op)

	case plan.FamPipeline:
		e.Key(plan.KeyIterContext)
		e.Open('{')
		e.Key(plan.KeyUnitSize)
		e.Int64(op.UnitSize)
		e.Key(plan.KeyNumChunks)
		e.Int64(op.NumChunks)
		e.Close('}')
		e.Key(plan.KeyOps)
		e.ops(op.Body)
	}
	e.Close('}')
}

// switchOp writes the keys of glre, gstore, gstorepkt and glres after name.
func (e *encoder) switchOp(op *ir.Op) {
	switch op.Kind {
	case plan.OpGroupLoadReduce:
		e.Key(plan.KeyBufferType)
		e.Lit(op.SwitchBuffer.String())
		e.Key(plan.KeyBufferOffset)
		e.Int(op.BufferOffset)
		e.Key(plan.KeySize)
		e.Int(op.Size)
		e.Key(plan.KeyDstChunk)
		e.chunk(op.SwitchChunk)
		e.Key(plan.KeyChannelIDs)
		e.Ints(op.ChannelIDs)
		e.Key(plan.KeyChannelType)
		e.Lit(ir.Switch.String())
		e.Key(plan.KeyReduceOp)
		e.Lit(op.ReduceOp.String())

	case plan.OpMultiStore, plan.OpMultiStorePacket:
		e.Key(plan.KeySrcBuff)
		e.Open('[')
		e.Member()
		e.chunk(op.SwitchChunk)
		e.Close(']')
		e.Key(plan.KeyDstBuff)
		e.Open('[')
		e.Member()
		e.switchRef(op.ChannelIDs[0], op.BufferOffset, op.Size)
		e.Close(']')
		e.Key(plan.KeyChannelType)
		e.Lit(ir.Switch.String())

	case plan.OpMultiLoadReduceStore:
		// Both sides print the reduce (source) offsets: quirk Q1 of the
		// reference, which records DstIndex but never serialises it.
		for _, k := range [...]string{plan.KeySrcBuff, plan.KeyDstBuff} {
			e.Key(k)
			e.Open('[')
			for i, idx := range op.SrcIndex {
				e.Member()
				e.switchRef(op.ChannelIDs[i], idx, op.Size)
			}
			e.Close(']')
		}
		e.Key(plan.KeyChannelType)
		e.Lit(ir.Switch.String())
		e.Key(plan.KeyReduceOp)
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
		e.Key(plan.KeyBufferID)
		e.Int(r.BufferID)
	} else {
		e.Key(plan.KeyType)
		e.Lit(r.Buffer.String())
	}
	e.Key(plan.KeyIndex)
	e.Int(r.Index)
	e.Key(plan.KeySize)
	e.Int(r.Size)
	e.Close('}')
}

// chunk writes a chunk-with-rank operand {rank, type, index, size}.
func (e *encoder) chunk(c *ir.Chunk) {
	e.Open('{')
	e.Key(plan.KeyRank)
	e.Int(c.Rank)
	e.Key(plan.KeyType)
	e.Lit(c.Buffer.String())
	e.Key(plan.KeyIndex)
	e.Int(c.Index)
	e.Key(plan.KeySize)
	e.Int(c.Size)
	e.Close('}')
}

// switchRef writes a switch operand {switch_channel_id, index, size}.
func (e *encoder) switchRef(ch, index, size int) {
	e.Open('{')
	e.Key(plan.KeySwitchChannelID)
	e.Int(ch)
	e.Key(plan.KeyIndex)
	e.Int(index)
	e.Key(plan.KeySize)
	e.Int(size)
	e.Close('}')
}

// tbg writes the optional trailing tbg_info member.
func (e *encoder) tbg(t *ir.TBGInfo) {
	if t == nil {
		return
	}
	e.Key(plan.KeyTBGInfo)
	e.Open('{')
	e.Key(plan.KeyTBID)
	e.Int(t.TBID)
	e.Key(plan.KeyTBGSize)
	e.Int(t.TBGSize)
	e.Close('}')
}
