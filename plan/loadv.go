package plan

import (
	"fmt"
	"math"
)

// This file holds the loader's part of variable-size plans: the
// "alltoallv" extension object and the rules an alltoallv plan's operands
// follow so that every chunk names a part of one block (docs/executor.md,
// "Variable-size plans").

// VarLayout is the "alltoallv" extension object of a plan: every rank's
// input and output are Blocks blocks (one per peer) of ChunksPerBlock
// chunks each, whose byte sizes come from each call's counts and
// displacements.
type VarLayout struct {
	Blocks         int
	ChunksPerBlock int
}

// parseAllToAllV reads the "alltoallv" object. It reports whether the
// plan is an alltoallv plan (so that the min > max marker is expected).
func (l *loader) parseAllToAllV(top node) bool {
	p := l.plan
	isV := p.Collective == AllToAllVCollective
	if !top.has(KeyAllToAllV) {
		if isV {
			l.errf("", ErrMissing, "collective = \"alltoallv\" without the required \"alltoallv\" object: a variable-size plan states its block layout (docs/executor.md, Variable-size plans)")
		}
		return false
	}
	if !isV {
		l.errf("", ErrStructure, "\"alltoallv\" object in a plan of collective %q: only alltoallv plans have variable-size blocks", p.Collective)
		return false
	}
	obj, ok := top.child(KeyAllToAllV, true)
	if !ok {
		return true
	}
	if v, ok := obj.int(KeyVersion, true); ok && v != AllToAllVVersion {
		l.errf(obj.path, ErrValue, "version = %d: this loader reads version %d", v, AllToAllVVersion)
	}
	blocks, okB := obj.int(KeyBlocks, true)
	per, okP := obj.int(KeyChunksPerBlock, true)
	if okP && per == 0 {
		l.errf(obj.path, ErrOutOfRange, "chunks_per_block = 0: want at least 1")
		okP = false
	}
	if okB && okP {
		p.AllToAllV = &VarLayout{Blocks: blocks, ChunksPerBlock: per}
	}
	if p.MinMessageSize != math.MaxUint64 || p.MaxMessageSize != 0 {
		l.errf("", ErrValue, "min_message_size = %d, max_message_size = %d: an alltoallv plan has min_message_size %d and max_message_size 0, so that MSCCL++ accepts no message size for it", p.MinMessageSize, p.MaxMessageSize, uint64(math.MaxUint64))
	}
	if p.ReuseResources {
		l.errf("", ErrStructure, "reuse_resources = true: an alltoallv plan sizes its scratch per call and cannot use the fixed scratch of reuse_resources")
	}
	return true
}

// checkAllToAllVChunks checks an alltoallv plan against its layout: chunk
// counts of Blocks × ChunksPerBlock, no switch channels, and every input
// or output operand inside one block and not addressed as LL packets.
func (l *loader) checkAllToAllVChunks() {
	p := l.plan
	v := p.AllToAllV
	if v == nil {
		return
	}
	if v.Blocks != len(p.GPUs) {
		l.errf(KeyAllToAllV, ErrStructure, "blocks = %d but the plan has %d ranks: an alltoallv plan has one block per rank", v.Blocks, len(p.GPUs))
		return
	}
	want := v.Blocks * v.ChunksPerBlock
	for r := range p.GPUs {
		g := &p.GPUs[r]
		path := IndexPath(KeyGPUs, r)
		if g.InputChunks != want || g.OutputChunks != want {
			l.errf(path, ErrStructure, "input_chunks = %d, output_chunks = %d: an alltoallv plan with %d blocks of %d chunks has %d of each", g.InputChunks, g.OutputChunks, v.Blocks, v.ChunksPerBlock, want)
			continue
		}
		if len(g.SwitchGroups()) > 0 {
			l.errf(path, ErrStructure, "switch channels in an alltoallv plan: a multicast address names one offset in every member, but blocks differ per rank")
			continue
		}
		for t := range g.ThreadBlocks {
			tb := &g.ThreadBlocks[t]
			tbPath := IndexPath(path+".threadblocks", t)
			for k := range tb.Ops {
				l.checkVarOp(g, tb, &tb.Ops[k], IndexPath(tbPath+".ops", k))
			}
		}
	}
}

func (l *loader) checkVarOp(g *GPU, tb *ThreadBlock, op *Op, path string) {
	if op.Type == OpPipeline {
		for j := range op.Ops {
			l.checkVarOp(g, tb, &op.Ops[j], IndexPath(path+".ops", j))
		}
		return
	}
	spec := &Ops[op.Type]
	check := func(opds []Operand, s side, key string) {
		for i, opd := range opds {
			bt, ok := operandBufferType(g, tb, op, opd)
			if !ok || bt == Scratch {
				continue
			}
			where := fmt.Sprintf("%s[%d]", key, i)
			if s.at(i).packet || (op.Type == OpPutPacket && op.ChannelType == Port && key == KeySrcBuff) {
				l.errf(path, ErrStructure, "%s: %s %s addressed as LL packets in an alltoallv plan: packets of a block would spill into the next; stage packets in scratch", where, op.Type, bt.Name())
				continue
			}
			per := uint64(l.plan.AllToAllV.ChunksPerBlock)
			if opd.Size > 0 && opd.Index/per != (opd.Index+opd.Size-1)/per {
				l.errf(path, ErrStructure, "%s: chunks [%d, %d) of %s span blocks %d to %d: in an alltoallv plan an operand lies inside one block (blocks of one rank need not be adjacent)", where, opd.Index, opd.Index+opd.Size, bt.Name(), opd.Index/per, (opd.Index+opd.Size-1)/per)
			}
		}
	}
	check(op.Src, spec.src, KeySrcBuff)
	check(op.Dst, spec.dst, KeyDstBuff)
}

// operandBufferType returns the buffer type an operand addresses; ok is
// false where the tables do not say (the loader reports those elsewhere).
func operandBufferType(g *GPU, tb *ThreadBlock, op *Op, opd Operand) (BufferType, bool) {
	switch opd.Kind {
	case LocalOperand:
		return opd.Type, true
	case RemoteOperand:
		refs := tb.RemoteRefs[op.ChannelType]
		if opd.BufferID < 0 || opd.BufferID >= len(refs) {
			return 0, false
		}
		gid := refs[opd.BufferID]
		if gid < 0 || gid >= len(g.RemoteBuffers) {
			return 0, false
		}
		return g.RemoteBuffers[gid].Type, true
	}
	return 0, false
}
