package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
)

// noUnit is the unit of ops outside pipelines (UINT32_MAX on the device,
// "unbounded" here).
const noUnit = math.MaxUint64

// span is a resolved, bounds-checked byte range of one rank's buffer.
type span struct {
	rank int
	bt   executor.BufferType
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

// window returns the part of a rank's buffer an access sees and its
// absolute start. shifted selects the current double-buffer half of
// scratch (local scratch and packet accesses, docs/semantics.md §1.12); unshifted scratch
// accesses (non-packet remote, NVLS: quirk Q8, mirrored) see the whole
// scratch from its base.
func (l *launch) window(rank int, bt executor.BufferType, shifted bool) (uint64, []byte) {
	b := l.bufs[rank][bt]
	if bt == executor.Scratch && shifted && l.s.double {
		return l.so, b[l.so : l.so+l.s.half]
	}
	return 0, b
}

// span returns [off, off+n) of the window, or an error naming the range.
func (l *launch) span(rank int, bt executor.BufferType, shifted bool, off, n uint64) (span, error) {
	base, w := l.window(rank, bt, shifted)
	if n == 0 {
		// Nothing is accessed (a clamped pipeline tail, an empty
		// operand): no bounds to check.
		return span{rank: rank, bt: bt, off: base + off}, nil
	}
	size := uint64(len(w))
	if off > size || n > size-off {
		lim := fmt.Sprintf("the buffer has %d bytes", size)
		if bt == executor.Scratch && shifted && l.s.double {
			lim = fmt.Sprintf("the scratch half of this launch is [%d:%d]", base, base+size)
		}
		hi := "overflow"
		if off+n >= off {
			hi = fmt.Sprint(base + off + n)
		}
		return span{}, fmt.Errorf("%s[%d:%s] of rank %d out of range: %s", bt.Name(), base+off, hi, rank, lim)
	}
	return span{rank: rank, bt: bt, off: base + off, b: w[off : off+n : off+n]}, nil
}

// adj is the pipeline offset of an operand of buffer type bt (docs/semantics.md §2.4): o,
// reduced modulo the scratch ring of reuse_resources plans.
func (t *tbRun) adj(bt executor.BufferType, o uint64) uint64 {
	if bt == executor.Scratch && t.r.reuseSlot > 0 {
		return o % t.r.reuseSlot
	}
	return o
}

// clampLen is n(len, o, u) = min(len-o, u), clamped at 0 (quirk Q9).
func clampLen(n, o, u uint64) uint64 {
	if n <= o {
		return 0
	}
	n -= o
	if n > u {
		n = u
	}
	return n
}

func (t *tbRun) local(r executor.Region, o, n uint64) (span, error) {
	return t.l.span(t.r.id, r.Buffer, true, r.Offset+t.adj(r.Buffer, o), n)
}

func (t *tbRun) remote(r executor.Region, o, n uint64) (span, error) {
	return t.l.span(r.Rank, r.Buffer, false, r.Offset+t.adj(r.Buffer, o), n)
}

// packets returns the packet region of np packets for the data offset off
// of a rank's buffer: at 2·off in its (shifted) window, 8-byte aligned for
// the packet atomics.
func (t *tbRun) packets(rank int, bt executor.BufferType, off, np uint64) (span, error) {
	sp, err := t.l.span(rank, bt, true, 2*off, np*t.l.s.packet)
	if err != nil {
		return sp, err
	}
	if len(sp.b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(sp.b)))%8 != 0 {
		return sp, fmt.Errorf("packets at %s[%d] of rank %d are not 8-byte aligned in memory", bt.Name(), sp.off, rank)
	}
	return sp, nil
}

// raw returns the payload-sized raw operand of a packet op (no pipeline
// offset: packet ops ignore it).
func (t *tbRun) raw(r executor.Region, np uint64) (span, error) {
	return t.l.span(t.r.id, r.Buffer, true, r.Offset, np*t.l.s.payload)
}

// members returns the spans of a switch operand in every member's bound
// buffer, in ascending rank order. pkt selects packet addressing
// (gstorepkt: 2·off, shifted scratch) with np packets; otherwise n bytes
// at off + adj.
func (t *tbRun) members(r executor.Region, o, n uint64, pkt bool) ([]span, error) {
	g := t.r.ri.Switches[r.Switch]
	var out []span
	for _, m := range t.r.members[r.Switch] {
		var sp span
		var err error
		if pkt {
			sp, err = t.packets(m, g.Buffer, r.Offset, n)
		} else {
			sp, err = t.l.span(m, g.Buffer, false, r.Offset+t.adj(g.Buffer, o), n)
		}
		if err != nil {
			return nil, fmt.Errorf("switch channel %d: %w", r.Switch, err)
		}
		out = append(out, sp)
	}
	return out, nil
}

// resolve turns a data op into bounds-checked spans at pipeline offset o
// with unit u, following docs/semantics.md §2.4-§2.6 and the operand roles of §2.11.
func (t *tbRun) resolve(op *executor.OpInstance, o, u uint64) (*opSpans, error) {
	s := t.l.s
	sp := &opSpans{}
	var err error
	add := func(list *[]span, what string, i int, f func() (span, error)) {
		if err != nil {
			return
		}
		x, e := f()
		if e != nil {
			err = fmt.Errorf("%s %d: %w", what, i, e)
			return
		}
		*list = append(*list, x)
	}
	elem := uint64(s.dt.Size())
	switch op.Type {
	case executor.OpCopy:
		n := clampLen(op.Src[0].Size, o, u)
		add(&sp.src, "source", 0, func() (span, error) { return t.local(op.Src[0], o, n) })
		add(&sp.dst, "destination", 0, func() (span, error) { return t.local(op.Dst[0], o, n) })

	case executor.OpPut, executor.OpPutWithSignal, executor.OpPutWithSignalAndFlush:
		// Port transfers read the local source through its registration
		// at the buffer's base: no double-buffer shift (docs/semantics.md §2.4 localMemId,
		// mirrored like Q8).
		shifted := op.ChannelType != executor.Port
		for i, d := range op.Dst {
			n := clampLen(d.Size, o, u)
			add(&sp.src, "source", i, func() (span, error) {
				r := op.Src[i]
				return t.l.span(t.r.id, r.Buffer, shifted, r.Offset+t.adj(r.Buffer, o), n)
			})
			add(&sp.dst, "destination", i, func() (span, error) { return t.remote(d, o, n) })
		}

	case executor.OpGet:
		for i, r := range op.Src {
			n := clampLen(r.Size, o, u)
			add(&sp.src, "source", i, func() (span, error) { return t.remote(r, o, n) })
			add(&sp.dst, "destination", i, func() (span, error) { return t.local(op.Dst[i], o, n) })
		}

	case executor.OpReduce, executor.OpReduceSend, executor.OpReadReduce, executor.OpReadReduceSend:
		n := clampLen(op.Src[0].Size, o, u)
		if n%elem != 0 {
			return nil, fmt.Errorf("%d bytes is not a whole number of %s elements", n, s.dt.Name())
		}
		for i, r := range op.Src {
			add(&sp.src, "source", i, func() (span, error) {
				if executor.SrcKind(op.Type, i) == executor.RemoteOperand {
					return t.remote(r, o, n)
				}
				return t.local(r, o, n)
			})
		}
		for i, r := range op.Dst {
			add(&sp.dst, "destination", i, func() (span, error) {
				if executor.DstKind(op.Type, i) == executor.RemoteOperand {
					return t.remote(r, o, n)
				}
				return t.local(r, o, n)
			})
		}

	case executor.OpMultiLoadReduceStore:
		n := clampLen(op.Src[0].Size, o, u)
		if n%elem != 0 {
			return nil, fmt.Errorf("%d bytes is not a whole number of %s elements", n, s.dt.Name())
		}
		if sp.src, err = t.members(op.Src[0], o, n, false); err != nil {
			return nil, fmt.Errorf("source 0: %w", err)
		}
		if sp.dst, err = t.members(op.Dst[0], o, n, false); err != nil {
			return nil, fmt.Errorf("destination 0: %w", err)
		}

	case executor.OpMultiStore:
		n := clampLen(op.Src[0].Size, o, u)
		add(&sp.src, "source", 0, func() (span, error) { return t.local(op.Src[0], o, n) })
		if err == nil {
			if sp.dst, err = t.members(op.Dst[0], o, n, false); err != nil {
				return nil, fmt.Errorf("destination 0: %w", err)
			}
		}

	case executor.OpPutPacket:
		for i, d := range op.Dst {
			np := op.Src[i].Size / s.payload
			if op.ChannelType == executor.Port {
				// The source is already in packet form (docs/semantics.md §2.5).
				add(&sp.src, "source", i, func() (span, error) { return t.packets(t.r.id, op.Src[i].Buffer, op.Src[i].Offset, np) })
			} else {
				add(&sp.src, "source", i, func() (span, error) { return t.raw(op.Src[i], np) })
			}
			add(&sp.dst, "destination", i, func() (span, error) { return t.packets(d.Rank, d.Buffer, d.Offset, np) })
		}

	case executor.OpReadPutPacket:
		np := op.Src[0].Size / s.payload
		add(&sp.src, "source", 0, func() (span, error) { return t.packets(t.r.id, executor.Scratch, op.Src[0].Offset, np) })
		for i, d := range op.Dst {
			add(&sp.dst, "destination", i, func() (span, error) { return t.packets(d.Rank, d.Buffer, d.Offset, np) })
		}
		sp.pk = pktPlan{np: np, pktIn: sp.src, pktOut: sp.dst}

	case executor.OpCopyPacket:
		np := op.Src[0].Size / s.payload
		p := &sp.pk
		p.np = np
		add(&p.rawIn, "source", 0, func() (span, error) { return t.raw(op.Src[0], np) })
		add(&p.pktOut, "destination", 0, func() (span, error) { return t.packets(t.r.id, op.Dst[0].Buffer, op.Dst[0].Offset, np) })

	case executor.OpUnpackPacket:
		np := op.Src[0].Size / s.payload
		p := &sp.pk
		p.np = np
		// The source is always local scratch, whatever its type (docs/semantics.md §2.6).
		add(&p.pktIn, "source", 0, func() (span, error) { return t.packets(t.r.id, executor.Scratch, op.Src[0].Offset, np) })
		add(&p.rawOut, "destination", 0, func() (span, error) { return t.raw(op.Dst[0], np) })

	case executor.OpReducePacket, executor.OpReduceSendPacket, executor.OpReduceCopyPacket, executor.OpReduceCopySendPacket:
		if s.payload%elem != 0 {
			return nil, fmt.Errorf("packet payload of %d bytes is not a whole number of %s elements", s.payload, s.dt.Name())
		}
		np := op.Src[0].Size / s.payload
		p := &sp.pk
		p.np, p.reduce = np, true
		add(&p.rawIn, "source", 0, func() (span, error) { return t.raw(op.Src[0], np) })
		for i := 1; i < len(op.Src); i++ {
			r := op.Src[i]
			add(&p.pktIn, "source", i, func() (span, error) { return t.packets(t.r.id, executor.Scratch, r.Offset, np) })
		}
		add(&p.rawOut, "destination", 0, func() (span, error) { return t.raw(op.Dst[0], np) })
		for i := 1; i < len(op.Dst); i++ {
			d := op.Dst[i]
			add(&p.pktOut, "destination", i, func() (span, error) {
				if executor.DstKind(op.Type, i) == executor.RemoteOperand {
					return t.packets(d.Rank, d.Buffer, d.Offset, np)
				}
				return t.packets(t.r.id, d.Buffer, d.Offset, np)
			})
		}

	case executor.OpMultiStorePacket:
		np := op.Src[0].Size / s.payload
		p := &sp.pk
		p.np = np
		add(&p.pktIn, "source", 0, func() (span, error) { return t.packets(t.r.id, op.Src[0].Buffer, op.Src[0].Offset, np) })
		if err == nil {
			if p.pktOut, err = t.members(op.Dst[0], 0, np, true); err != nil {
				return nil, fmt.Errorf("destination 0: %w", err)
			}
		}

	default:
		return nil, fmt.Errorf("op type %v is not a data op", op.Type)
	}
	if err != nil {
		return nil, err
	}
	return sp, nil
}
