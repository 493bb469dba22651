package executor

import (
	"errors"
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
	"math"
)

// This file instantiates variable-size (alltoallv) plans: NewVarPlan
// resolves everything that does not depend on sizes once (channels,
// remote buffers, operand owners, the term of every operand), and Bind
// fills in the byte regions of one call's counts in place, without
// re-reading the plan (docs/executor.md, "Variable-size plans").

// ErrVariableSizes is returned by Instantiate for an alltoallv plan,
// whose sizes come from each call's counts (NewVarPlan, Bind).
var ErrVariableSizes = errors.New("variable-size plan")

// VarPlan is an alltoallv plan resolved up to its sizes. Bind resolves it
// for one call's counts. A VarPlan is not safe for concurrent use, and
// Bind must not run while a launch of its instance does.
type VarPlan struct {
	Plan *plan.Plan
	inst *Instance
	refs []varRef
	// pipes are the pipelines, whose iteration counts follow their body's
	// largest operand; body indexes refs.
	pipes []varPipe
	// maxScratch is the largest scratch_chunks of any rank.
	maxScratch uint64
	// bound is set after a successful Bind; counts and elem are its
	// arguments (Bound, for backends that resolve operands themselves).
	bound  bool
	counts *Counts
	elem   int
}

// varRef is one operand: the region it fills and how to compute it.
type varRef struct {
	reg    *Region
	buf    plan.BufferType
	owner  int    // the rank whose buffer it addresses
	index  uint64 // chunk units
	size   uint64
	tbgID  uint64 // tbg split; tbgN == 0 without one
	tbgN   uint64
	packet bool
	// counterpart, for scratch operands, is the ref whose size they take
	// (-1: none); whole is a ref's size before its thread-block-group
	// split.
	counterpart int
	whole       uint64
	path, where string
}

// varPipe is a pipeline with the refs of its body.
type varPipe struct {
	op     *OpInstance
	lo, hi int
}

// NewVarPlan resolves p, an alltoallv plan, up to its sizes.
func NewVarPlan(p *plan.Plan) (*VarPlan, error) {
	if p.AllToAllV == nil {
		return nil, sizeErr("", "collective %q is not a variable-size plan: use Instantiate", p.Collective)
	}
	if p.BufferAlignment == 0 {
		return nil, sizeErr("", "buffer_alignment is 0")
	}
	inst := &Instance{Plan: p, Ranks: make([]RankInstance, len(p.GPUs))}
	lays := make([]rankLayout, len(p.GPUs))
	for r := range lays {
		lays[r] = rankLayout{C: 1}
	}
	// With zero-byte chunks every region resolves to [0, 0) and every
	// pipeline to 0 iterations; Bind fills in the real ones.
	res := &resolver{p: p, inst: inst, lays: lays}
	vp := &VarPlan{Plan: p, inst: inst}
	inst.Var = vp
	for r := range p.GPUs {
		ri, err := res.rank(r)
		if err != nil {
			return nil, err
		}
		inst.Ranks[r] = ri
		vp.maxScratch = max(vp.maxScratch, uint64(p.GPUs[r].ScratchChunks))
	}
	for r := range p.GPUs {
		g := &p.GPUs[r]
		for t := range g.ThreadBlocks {
			tb := &g.ThreadBlocks[t]
			tbPath := plan.IndexPath(plan.IndexPath("gpus", r)+".threadblocks", t)
			for k := range tb.Ops {
				vp.addOp(&tb.Ops[k], &inst.Ranks[r].TBs[t].Ops[k], plan.IndexPath(tbPath+".ops", k))
			}
		}
	}
	return vp, nil
}

func (vp *VarPlan) addOp(op *plan.Op, oi *OpInstance, path string) {
	if op.Type == plan.OpPipeline {
		lo := len(vp.refs)
		for j := range op.Ops {
			vp.addOp(&op.Ops[j], &oi.Body[j], plan.IndexPath(path+".ops", j))
		}
		vp.pipes = append(vp.pipes, varPipe{op: oi, lo: lo, hi: len(vp.refs)})
		return
	}
	first := len(vp.refs)
	add := func(opds []plan.Operand, regs []Region, packetAt func(plan.OpType, int) bool, key string) {
		for i := range opds {
			opd := &opds[i]
			ref := varRef{
				reg: &regs[i], buf: regs[i].Buffer, owner: regs[i].Rank,
				index: opd.Index, size: opd.Size, counterpart: -1,
				packet: packetAt(op.Type, i) || (op.Type == plan.OpPutPacket && op.ChannelType == plan.Port && key == plan.KeySrcBuff),
				path:   path, where: fmt.Sprintf("%s[%d]", key, i),
			}
			if op.TBG != nil && op.TBG.TBGSize > 0 {
				ref.tbgID, ref.tbgN = uint64(op.TBG.TBID), uint64(op.TBG.TBGSize)
			}
			vp.refs = append(vp.refs, ref)
		}
	}
	add(op.Src, oi.Src, plan.SrcPacket, plan.KeySrcBuff)
	add(op.Dst, oi.Dst, plan.DstPacket, plan.KeyDstBuff)
	// Scratch operands take the size of the op's first input or output
	// operand: a scratch chunk holds a piece of some block, whose size
	// only that operand knows.
	cp := -1
	for i := first; i < len(vp.refs); i++ {
		if vp.refs[i].buf != plan.Scratch {
			cp = i
			break
		}
	}
	for i := first; i < len(vp.refs); i++ {
		if vp.refs[i].buf == plan.Scratch {
			vp.refs[i].counterpart = cp
		}
	}
}

// Bind resolves the plan for one call: it validates c for elements of
// elem bytes, and fills in every region, every pipeline's iteration count
// and the scratch size of the instance it returns. The instance is the
// same on every call (a session opened on it sees the new regions at its
// next launch) unless ScratchBytes grew, in which case a session opened
// before must be reopened.
//
// Chunk j of block b of an input or output covers the elements
// [displ + split(count, j), displ + split(count, j+size)) of that block,
// where split cuts count elements into chunks_per_block parts, the
// remainder to the lowest; a thread-block-group member takes its part of
// that range the same way. A scratch chunk is the largest piece of any
// block rounded up to buffer_alignment; a scratch operand covers as many
// bytes as the first input or output operand of its op (all of its chunks
// when the op has none).
func (vp *VarPlan) Bind(c *Counts, elem int) (*Instance, error) {
	p := vp.Plan
	n := len(p.GPUs)
	if elem < 1 {
		return nil, fmt.Errorf("alltoallv: element size %d: want at least 1 byte", elem)
	}
	if err := c.Validate(n, elem); err != nil {
		return nil, err
	}
	e := uint64(elem)
	per := uint64(p.AllToAllV.ChunksPerBlock)
	var largest uint64
	var inMax, outMax uint64
	for r := range n {
		for q := range n {
			largest = max(largest, uint64(c.Send[r][q]), uint64(c.Recv[r][q]))
		}
		in, out := c.Extents(r)
		inMax, outMax = max(inMax, uint64(in)*e), max(outMax, uint64(out)*e)
	}
	piece := ceilDiv(largest, per) * e
	a := p.BufferAlignment
	sc, ok := alignUp(piece, a)
	scratch, ok2 := mulU64(sc, vp.maxScratch)
	if p.Protocol == "LL" {
		scratch, ok2 = scratch*2, ok2 && scratch <= math.MaxUint64/2
	}
	if p.UseDoubleScratch {
		scratch, ok2 = scratch*2, ok2 && scratch <= math.MaxUint64/2
	}
	if !ok || !ok2 || scratch > math.MaxUint32 {
		return nil, &CountsError{Err: ErrCountsBounds, Msg: fmt.Sprintf("largest block of %d elements: %d scratch chunks of %d bytes exceed the executor's 32-bit offsets", largest, vp.maxScratch, sc)}
	}
	inst := vp.inst
	inst.Sizes = Sizes{Input: inMax, Output: outMax}
	inst.ChunkBytes = sc
	if !vp.bound || scratch > inst.ScratchBytes {
		inst.ScratchBytes = scratch
	}
	half := inst.ScratchBytes
	if p.UseDoubleScratch {
		half /= 2
	}
	// Input and output operands first: scratch operands read their
	// counterpart's size.
	for pass := 0; pass < 2; pass++ {
		for i := range vp.refs {
			ref := &vp.refs[i]
			if (ref.buf == plan.Scratch) != (pass == 1) {
				continue
			}
			var off, size uint64
			switch ref.buf {
			case plan.Input, plan.Output:
				counts, displ := c.Send[ref.owner], c.SendDispls[ref.owner]
				if ref.buf == plan.Output {
					counts, displ = c.Recv[ref.owner], c.RecvDispls[ref.owner]
				}
				b := ref.index / per
				if b >= uint64(n) {
					return nil, sizeErr(ref.path, "%s: chunk %d is in block %d of %d", ref.where, ref.index, b, n)
				}
				j := ref.index % per
				cnt := uint64(counts[b])
				lo := splitUnits(cnt, j, per)
				hi := splitUnits(cnt, j+ref.size, per)
				off, size = uint64(displ[b])*e+lo*e, (hi-lo)*e
			case plan.Scratch:
				off = ref.index * sc
				size = ref.size * sc
				if ref.counterpart >= 0 {
					size = vp.refs[ref.counterpart].whole
				}
			}
			ref.whole = size
			if ref.tbgN > 0 {
				// Split in elements, or in bytes where a scratch span
				// of whole chunks is not a multiple of the element.
				u := e
				if size%e != 0 {
					u = 1
				}
				lo, hi := splitUnits(size/u, ref.tbgID, ref.tbgN)*u, splitUnits(size/u, ref.tbgID+1, ref.tbgN)*u
				off, size = off+lo, hi-lo
			}
			if ref.packet && (off%8 != 0 || size%8 != 0) {
				return nil, &CountsError{Err: ErrCountsBounds, Field: ref.path + " " + ref.where,
					Msg: fmt.Sprintf("LL packet operand of %d bytes at byte %d: packet operands of alltoallv plans need multiples of 8 bytes", size, off)}
			}
			if ref.buf == plan.Scratch {
				end := off + size
				if ref.packet {
					end *= 2
				}
				if end > half {
					return nil, sizeErr(ref.path, "%s: scratch bytes [%d, %d) beyond the scratch of %d bytes", ref.where, off, end, half)
				}
			}
			ref.reg.Offset, ref.reg.Size = off, size
		}
	}
	for _, pp := range vp.pipes {
		var big uint64
		for i := pp.lo; i < pp.hi; i++ {
			big = max(big, vp.refs[i].reg.Size)
		}
		pp.op.Iterations = int(ceilDiv(big, pp.op.UnitSize))
	}
	vp.bound, vp.counts, vp.elem = true, c, elem
	return inst, nil
}

// splitUnits is the start of part i of total units cut into n parts, the
// remainder going to the lowest parts (no overflow: total < 2^32).
func splitUnits(total, i, n uint64) uint64 {
	q, r := total/n, total%n
	return i*q + min(i, r)
}
