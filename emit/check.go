package emit

import (
	"fmt"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// check reports the first part of p that the writer cannot express,
// wrapping ErrInvalid. It reads p only.
func check(p *ir.Program) error {
	if p == nil {
		return fmt.Errorf("emit: %w: nil program", ErrInvalid)
	}
	for _, h := range headers(p) {
		if h.v != nil && (!h.v.IsUint64() || h.v.Uint64() > h.limit) {
			return fmt.Errorf("emit: %w: %s = %s: the plan holds a number in [0, %d]", ErrInvalid, h.key, h.v, h.limit)
		}
	}
	for gi, g := range p.GPUs {
		if g == nil {
			return fmt.Errorf("emit: gpus[%d]: %w: nil GPU", gi, ErrInvalid)
		}
		for si, v := range g.Semaphores {
			if v == nil {
				return fmt.Errorf("emit: rank %d: semaphore %d: %w: nil init value", g.ID, si, ErrInvalid)
			}
			if !v.IsInt64() {
				return fmt.Errorf("emit: %w: rank %d: semaphore %d: init_value %s does not fit 64 bits", ErrInvalid, g.ID, si, v)
			}
		}
		for ti, tb := range g.ThreadBlocks {
			if tb == nil {
				return fmt.Errorf("emit: rank %d: threadblocks[%d]: %w: nil thread block", g.ID, ti, ErrInvalid)
			}
			if err := checkOps(tb.Ops, g.ID, tb.ID, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOps checks the op list of thread block tb of a rank; outer names
// the enclosing pipeline ops ("op 3: body ") for error messages.
func checkOps(ops []*ir.Op, rank, tb int, outer string) error {
	for i, op := range ops {
		if op == nil {
			return fmt.Errorf("emit: rank %d: tb %d: %sop %d: %w: nil op", rank, tb, outer, i, ErrInvalid)
		}
		if msg := checkOp(op); msg != "" {
			pos := ""
			if op.Pos.IsValid() {
				pos = op.Pos.String() + ": "
			}
			return fmt.Errorf("%semit: rank %d: tb %d: %sop %d (%s): %w: %s", pos, rank, tb, outer, i, op.Kind, ErrInvalid, msg)
		}
		if op.Kind == plan.OpPipeline {
			if err := checkOps(op.Body, rank, tb, fmt.Sprintf("%sop %d: body ", outer, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOp returns what is wrong with a single op, or "".
func checkOp(op *ir.Op) string {
	if op.Kind > plan.OpGroupLoadReduce {
		return fmt.Sprintf("unknown op kind %d", uint8(op.Kind))
	}
	switch op.Kind {
	case plan.OpBarrier:
		if op.Barrier == nil {
			return "barrier without BarrierInfo"
		}
	case plan.OpGroupLoadReduce:
		if op.SwitchChunk == nil {
			return "no destination chunk"
		}
	case plan.OpMultiStore, plan.OpMultiStorePacket:
		if op.SwitchChunk == nil {
			return "no source chunk"
		}
		if len(op.ChannelIDs) == 0 {
			return "no switch channel index"
		}
	case plan.OpMultiLoadReduceStore:
		if len(op.ChannelIDs) < len(op.SrcIndex) {
			return fmt.Sprintf("%d switch channel indices for %d source offsets", len(op.ChannelIDs), len(op.SrcIndex))
		}
	case plan.OpPipeline:
		if op.UnitSize < 0 || op.NumChunks < 0 {
			return fmt.Sprintf("unit_size %d, num_chunks %d: want at least 0", op.UnitSize, op.NumChunks)
		}
	}
	return checkIndices(op)
}

// checkIndices returns what is negative among the indices and sizes of
// op's operands, or "": the plan holds them unsigned.
func checkIndices(op *ir.Op) string {
	// The fast path: the sign bit of every index and size at once.
	lists := [...][]ir.Ref{op.Src, op.Dst, op.LocalSrc, op.RemoteSrc, op.LocalDst, op.LocalPktDst, op.RemoteDst}
	acc := op.BufferOffset | op.Size
	for _, l := range lists {
		for i := range l {
			acc |= l[i].Index | l[i].Size
		}
	}
	for _, v := range op.SrcIndex {
		acc |= v
	}
	if c := op.SwitchChunk; c != nil {
		acc |= c.Index | c.Size
	}
	if acc >= 0 {
		return ""
	}
	names := [len(lists)]string{"src", "dst", "local_src", "remote_src", "local_dst", "local_pkt_dst", "remote_dst"}
	for k, l := range lists {
		for i := range l {
			if r := &l[i]; r.Index < 0 || r.Size < 0 {
				return fmt.Sprintf("%s[%d]: index %d, size %d: want at least 0", names[k], i, r.Index, r.Size)
			}
		}
	}
	if c := op.SwitchChunk; c != nil && (c.Index < 0 || c.Size < 0) {
		return fmt.Sprintf("chunk: index %d, size %d: want at least 0", c.Index, c.Size)
	}
	if op.Kind.Family() == plan.FamSwitch {
		if op.BufferOffset < 0 || op.Size < 0 {
			return fmt.Sprintf("%s %d, size %d: want at least 0", plan.KeyBufferOffset, op.BufferOffset, op.Size)
		}
		for i, idx := range op.SrcIndex {
			if idx < 0 {
				return fmt.Sprintf("source offset %d = %d: want at least 0", i, idx)
			}
		}
	}
	return ""
}
