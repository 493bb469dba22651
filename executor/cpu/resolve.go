package cpu

import (
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// noUnit is the unit of ops outside pipelines.
const noUnit = executor.NoUnit

// span is a resolved, bounds-checked byte range of one rank's buffer.
type span struct {
	rank int
	bt   plan.BufferType
	off  uint64 // absolute offset in the owner's whole buffer
	b    []byte // the bytes, len(b) is the size
}

// sub returns the part [off, off+n) of sp.
func (sp span) sub(off, n uint64) span {
	return span{rank: sp.rank, bt: sp.bt, off: sp.off + off, b: sp.b[off : off+n : off+n]}
}

// region is sp as an executor.Region for reports.
func (sp span) region() executor.Region {
	return executor.Region{Rank: sp.rank, Buffer: sp.bt, Offset: sp.off, Size: uint64(len(sp.b)), Switch: -1}
}

// opSpans are the resolved operands of one data op at one pipeline
// offset. Non-packet ops use src and dst (pairwise for put/get/ppkt,
// src[0..] and dst[0..] by role for reductions, members for switch ops);
// packet ops use pk.
type opSpans struct {
	src, dst []span
	pk       pktPlan
}

// pktPlan is a packet op: np packets; optional raw source (payload bytes),
// packet sources (awaited), raw and packet destinations; reduce says the
// payload is 0 ⊕ pktIn[0] ⊕ … ⊕ rawIn[0] (docs/semantics.md §2.6).
type pktPlan struct {
	np     uint64
	rawIn  []span
	pktIn  []span
	rawOut []span
	pktOut []span
	reduce bool
}

// resolve turns a data op into spans of the launch's memory at pipeline
// offset o with unit u: executor's operand resolution (which checks
// bounds and packet alignment) gives the byte ranges, by role.
func (t *tbRun) resolve(op *executor.OpInstance, o, u uint64) (*opSpans, error) {
	l := t.l
	sp := &opSpans{}
	np, err := l.operands[t.r.id].Resolve(op, o, u, func(a executor.OperandSpan) {
		x := span{rank: a.Rank, bt: a.Buffer, off: a.Offset}
		if a.Len > 0 {
			x.b = l.bufs[a.Rank][a.Buffer][a.Offset : a.Offset+a.Len : a.Offset+a.Len]
		}
		switch a.Role {
		case executor.RoleSrc:
			sp.src = append(sp.src, x)
		case executor.RoleDst:
			sp.dst = append(sp.dst, x)
		case executor.RoleRawIn:
			sp.pk.rawIn = append(sp.pk.rawIn, x)
		case executor.RolePktIn:
			sp.pk.pktIn = append(sp.pk.pktIn, x)
		case executor.RoleRawOut:
			sp.pk.rawOut = append(sp.pk.rawOut, x)
		case executor.RolePktOut:
			sp.pk.pktOut = append(sp.pk.pktOut, x)
		}
	})
	if err != nil {
		return nil, err
	}
	sp.pk.np = np
	switch ty := op.Type; {
	case ty == plan.OpReadPutPacket:
		sp.pk.pktIn, sp.pk.pktOut = sp.src, sp.dst
	case ty.Family() == plan.FamReduce && ty.Packet(): // the reduce family, with packets
		sp.pk.reduce = true
	}
	return sp, nil
}
