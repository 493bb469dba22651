package executor

import "github.com/mscclgo/mscclgo/plan"

// This file exports the operand terms of a variable-size plan, for
// backends that resolve operands themselves from each call's counts (the
// GPU backend evaluates them on the device from a per-call table, so that
// neither the plan nor its op records change between calls).

// VarTerm is how Bind computes one operand region of a variable-size
// instance from a call's counts (docs/executor.md, "Variable-size plans").
type VarTerm struct {
	// Region is the operand's region in the instance, which Bind fills.
	Region *Region
	// Owner is the rank whose buffer the operand addresses (remote
	// operands use the owner's counts and displacements).
	Owner int
	// Buffer is the buffer the operand addresses.
	Buffer plan.BufferType
	// Index and Size are the operand's chunks [Index, Index+Size).
	Index, Size uint64
	// TBGID and TBGN are the thread-block-group member and group size
	// whose part of the operand the op takes; TBGN is 0 without a group.
	TBGID, TBGN uint64
	// Packet is set for operands addressed as LL packets.
	Packet bool
	// Counterpart is, for a scratch operand, the region of the op's
	// first input or output operand, whose size (before the group split)
	// the scratch operand takes; nil when the op has none (the operand
	// then covers all of its chunks).
	Counterpart *Region
}

// Terms returns the term of every operand of the instance, in the order
// of the plan: rank, thread block, op (a pipeline's body in place of the
// pipeline), sources before destinations.
func (vp *VarPlan) Terms() []VarTerm {
	out := make([]VarTerm, len(vp.refs))
	for i := range vp.refs {
		ref := &vp.refs[i]
		t := VarTerm{Region: ref.reg, Owner: ref.owner, Buffer: ref.buf, Index: ref.index, Size: ref.size,
			TBGID: ref.tbgID, TBGN: ref.tbgN, Packet: ref.packet}
		if ref.counterpart >= 0 {
			t.Counterpart = vp.refs[ref.counterpart].reg
		}
		out[i] = t
	}
	return out
}

// Bound returns the counts and element size of the last successful Bind;
// ok is false before the first.
func (vp *VarPlan) Bound() (c *Counts, elem int, ok bool) {
	return vp.counts, vp.elem, vp.bound
}
