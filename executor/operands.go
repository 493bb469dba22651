package executor

// operands.go resolves the data operands of an op at a pipeline offset
// to byte ranges of the ranks' buffers (docs/semantics.md §2.4-§2.6; the
// operand roles are docs/semantics.md §2.11), checking each against the
// launch's buffers.
// CheckOperands walks every op with it; the CPU backend resolves each op
// it runs with it and slices its memory at the ranges.

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// LaunchView is the memory the operands of one launch resolve against.
type LaunchView struct {
	// Bufs are, per rank, its input, output and scratch as the launch
	// sees them. A nil scratch stands for one of inst.ScratchBytes at an
	// 8-byte aligned address (a check made before the scratch exists).
	Bufs [][3][]byte
	// Upper says the launch uses the upper half of a double-buffered
	// scratch (every second launch: the even LL flags).
	Upper bool
	// Ranks are the ranks whose thread blocks are checked, nil for every
	// rank (a rank session of a multi-process job runs only its own).
	Ranks []int
}

// NoUnit is the unit of ops outside pipelines (UINT32_MAX on the device,
// "unbounded" here).
const NoUnit = math.MaxUint64

// OperandRole is what a resolved operand is to its op.
type OperandRole uint8

const (
	// RoleSrc and RoleDst are the operands of non-packet ops (pairwise
	// for put and get, sources then destinations for reductions, one per
	// member for switch ops) and of put, read-put and switch-store of
	// packets.
	RoleSrc OperandRole = iota
	RoleDst
	// The operands of the other packet ops: raw (payload) sources,
	// packet sources (awaited), raw destinations, packet destinations.
	RoleRawIn
	RolePktIn
	RoleRawOut
	RolePktOut
)

// OperandSpan is one resolved operand: Len bytes at Offset (from the start
// of the buffer, the double-buffer half included) of rank Rank's buffer
// Buffer, in bounds; packet regions are 8-byte aligned in memory.
type OperandSpan struct {
	Role   OperandRole
	Rank   int
	Buffer BufferType
	Offset uint64
	Len    uint64
}

// Operands resolves the operands of one launch.
type Operands struct {
	inst            *Instance
	bufs            [][3][]byte
	dt              DType
	elem            uint64
	payload, packet uint64 // LL payload and packet bytes
	double          bool   // use_double_scratch_buffer
	half            uint64 // bytes of one scratch half (the whole scratch without double buffering)
	so              uint64 // offset of this launch's scratch half
}

// NewOperands returns the operand resolution of a launch of inst (which
// passed Validate with opts) on v.Bufs, which has a buffer set per rank.
func NewOperands(inst *Instance, opts Options, v LaunchView) *Operands {
	c := &Operands{inst: inst, bufs: v.Bufs, dt: opts.DType, elem: uint64(opts.DType.Size()), payload: 8, packet: 16}
	if opts.LL8 {
		c.payload, c.packet = 4, 8
	}
	c.half = inst.ScratchBytes
	if inst.Plan != nil && inst.Plan.UseDoubleScratch {
		c.double, c.half = true, inst.ScratchBytes/2
		if v.Upper {
			c.so = c.half
		}
	}
	return c
}

// RankOperands resolves the operands of one rank's ops. It is not
// changed by Resolve: the rank's thread blocks may share it.
type RankOperands struct {
	c  *Operands
	ri *RankInstance
	// slot is the rank's reuse_resources scratch slot (0 if unused),
	// sorted its switch groups' members in ascending order.
	slot   uint64
	sorted [][]int
}

// Rank returns the resolution of rank r's ops.
func (c *Operands) Rank(r int) *RankOperands {
	ri := &c.inst.Ranks[r]
	ro := &RankOperands{c: c, ri: ri}
	if c.inst.Plan != nil && r < len(c.inst.Plan.GPUs) {
		ro.slot = c.inst.ScratchSlot(r)
	}
	for _, g := range ri.Switches {
		ro.sorted = append(ro.sorted, slices.Sorted(slices.Values(g.Ranks)))
	}
	return ro
}

// window returns where the part of a rank's buffer an access sees starts
// in the buffer, its size and its address (0 for a scratch not yet
// allocated: an aligned base). shifted selects the current double-buffer
// half of scratch (local scratch and packet accesses:
// docs/semantics.md §1.12); unshifted scratch accesses (non-packet
// remote, NVLS: quirk Q8) see the whole scratch from its base.
func (c *Operands) window(rank int, bt BufferType, shifted bool) (base, size uint64, addr uintptr) {
	b := c.bufs[rank][bt]
	size = uint64(len(b))
	if bt == Scratch && b == nil {
		size = c.inst.ScratchBytes
	} else if len(b) > 0 {
		addr = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	if bt == Scratch && shifted && c.double {
		return c.so, c.half, addr + uintptr(c.so)
	}
	return 0, size, addr
}

// span checks [off, off+n) of the window and returns it as an operand
// and its address.
func (c *Operands) span(rank int, bt BufferType, shifted bool, off, n uint64) (OperandSpan, uintptr, error) {
	base, size, addr := c.window(rank, bt, shifted)
	if n == 0 {
		// Nothing is accessed (a clamped pipeline tail, an empty
		// operand): no bounds to check.
		return OperandSpan{Rank: rank, Buffer: bt, Offset: base + off}, 0, nil
	}
	if off > size || n > size-off {
		lim := fmt.Sprintf("the buffer has %d bytes", size)
		if bt == Scratch && shifted && c.double {
			lim = fmt.Sprintf("the scratch half of this launch is [%d:%d]", base, base+size)
		}
		hi := "overflow"
		if off+n >= off {
			hi = fmt.Sprint(base + off + n)
		}
		return OperandSpan{}, 0, fmt.Errorf("%s[%d:%s] of rank %d out of range: %s", bt.Name(), base+off, hi, rank, lim)
	}
	return OperandSpan{Rank: rank, Buffer: bt, Offset: base + off, Len: n}, addr + uintptr(off), nil
}

// clampLen is n(len, o, u) = min(len-o, u), clamped at 0 (quirk Q9).
func clampLen(n, o, u uint64) uint64 {
	if n <= o {
		return 0
	}
	return min(n-o, u)
}

// adj is the pipeline offset of an operand of buffer type bt
// (docs/semantics.md §2.4): o, reduced modulo the scratch ring of
// reuse_resources plans.
func (ro *RankOperands) adj(bt BufferType, o uint64) uint64 {
	if bt == Scratch && ro.slot > 0 {
		return o % ro.slot
	}
	return o
}

// resolution is one Resolve: the rank, the callback, the first error.
type resolution struct {
	ro  *RankOperands
	f   func(OperandSpan)
	err error
}

// emit checks one operand (what i names it in errors) and hands it to
// the callback in role; after a first error it does nothing.
func (x *resolution) emit(role OperandRole, what string, i int, get func() (OperandSpan, error)) {
	if x.err != nil {
		return
	}
	a, err := get()
	if err != nil {
		x.err = fmt.Errorf("%s %d: %w", what, i, err)
		return
	}
	if x.f != nil {
		a.Role = role
		x.f(a)
	}
}

func (x *resolution) local(r Region, o, n uint64) (OperandSpan, error) {
	a, _, err := x.ro.c.span(x.ro.ri.Rank, r.Buffer, true, r.Offset+x.ro.adj(r.Buffer, o), n)
	return a, err
}

func (x *resolution) remote(r Region, o, n uint64) (OperandSpan, error) {
	a, _, err := x.ro.c.span(r.Rank, r.Buffer, false, r.Offset+x.ro.adj(r.Buffer, o), n)
	return a, err
}

// packets is the packet region of np packets for the data offset off of
// a rank's buffer: at 2·off in its (shifted) window, 8-byte aligned in
// memory for the packet atomics.
func (x *resolution) packets(rank int, bt BufferType, off, np uint64) (OperandSpan, error) {
	a, addr, err := x.ro.c.span(rank, bt, true, 2*off, np*x.ro.c.packet)
	if err != nil {
		return a, err
	}
	if a.Len > 0 && addr%8 != 0 {
		return a, fmt.Errorf("packets at %s[%d] of rank %d are not 8-byte aligned in memory", bt.Name(), a.Offset, rank)
	}
	return a, nil
}

// raw is the payload-sized raw operand of a packet op (no pipeline
// offset: packet ops ignore it).
func (x *resolution) raw(r Region, np uint64) (OperandSpan, error) {
	a, _, err := x.ro.c.span(x.ro.ri.Rank, r.Buffer, true, r.Offset, np*x.ro.c.payload)
	return a, err
}

// members emits a switch operand in every member's bound buffer, in
// ascending rank order. pkt selects packet addressing (2·off, shifted
// scratch) with n packets; otherwise n bytes at off + adj.
func (x *resolution) members(role OperandRole, what string, r Region, o, n uint64, pkt bool) {
	if x.err != nil {
		return
	}
	g := x.ro.ri.Switches[r.Switch]
	for _, m := range x.ro.sorted[r.Switch] {
		var a OperandSpan
		var err error
		if pkt {
			a, err = x.packets(m, g.Buffer, r.Offset, n)
		} else {
			a, _, err = x.ro.c.span(m, g.Buffer, false, r.Offset+x.ro.adj(g.Buffer, o), n)
		}
		if err != nil {
			x.err = fmt.Errorf("%s 0: switch channel %d: %w", what, r.Switch, err)
			return
		}
		if x.f != nil {
			a.Role = role
			x.f(a)
		}
	}
}

// Resolve resolves the operands of data op op (one of the rank's) at
// pipeline offset o with unit u (0 and NoUnit outside pipelines),
// handing each to f (when not nil) in the order the op lists them, and
// returns the op's packet count (packet ops) or the first problem: an
// operand out of bounds or misaligned packets, named by its role and
// index ("source 1: ..."), or a reduction over a part of an element.
func (ro *RankOperands) Resolve(op *OpInstance, o, u uint64, f func(OperandSpan)) (packets uint64, err error) {
	c := ro.c
	x := &resolution{ro: ro, f: f}
	me := ro.ri.Rank
	switch op.Type {
	case OpCopy:
		n := clampLen(op.Src[0].Size, o, u)
		x.emit(RoleSrc, "source", 0, func() (OperandSpan, error) { return x.local(op.Src[0], o, n) })
		x.emit(RoleDst, "destination", 0, func() (OperandSpan, error) { return x.local(op.Dst[0], o, n) })

	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush:
		// Port transfers read the local source through its registration
		// at the buffer's base: no double-buffer shift
		// (docs/semantics.md §2.4 localMemId, mirrored like Q8).
		shifted := op.ChannelType != Port
		for i, d := range op.Dst {
			n := clampLen(d.Size, o, u)
			x.emit(RoleSrc, "source", i, func() (OperandSpan, error) {
				r := op.Src[i]
				a, _, err := c.span(me, r.Buffer, shifted, r.Offset+ro.adj(r.Buffer, o), n)
				return a, err
			})
			x.emit(RoleDst, "destination", i, func() (OperandSpan, error) { return x.remote(d, o, n) })
		}

	case OpGet:
		for i, r := range op.Src {
			n := clampLen(r.Size, o, u)
			x.emit(RoleSrc, "source", i, func() (OperandSpan, error) { return x.remote(r, o, n) })
			x.emit(RoleDst, "destination", i, func() (OperandSpan, error) { return x.local(op.Dst[i], o, n) })
		}

	case OpReduce, OpReduceSend, OpReadReduce, OpReadReduceSend:
		n := clampLen(op.Src[0].Size, o, u)
		if n%c.elem != 0 {
			return 0, fmt.Errorf("%d bytes is not a whole number of %s elements", n, c.dt.Name())
		}
		for i, r := range op.Src {
			x.emit(RoleSrc, "source", i, func() (OperandSpan, error) {
				if SrcKind(op.Type, i) == RemoteOperand {
					return x.remote(r, o, n)
				}
				return x.local(r, o, n)
			})
		}
		for i, r := range op.Dst {
			x.emit(RoleDst, "destination", i, func() (OperandSpan, error) {
				if DstKind(op.Type, i) == RemoteOperand {
					return x.remote(r, o, n)
				}
				return x.local(r, o, n)
			})
		}

	case OpMultiLoadReduceStore:
		n := clampLen(op.Src[0].Size, o, u)
		if n%c.elem != 0 {
			return 0, fmt.Errorf("%d bytes is not a whole number of %s elements", n, c.dt.Name())
		}
		x.members(RoleSrc, "source", op.Src[0], o, n, false)
		x.members(RoleDst, "destination", op.Dst[0], o, n, false)

	case OpMultiStore:
		n := clampLen(op.Src[0].Size, o, u)
		x.emit(RoleSrc, "source", 0, func() (OperandSpan, error) { return x.local(op.Src[0], o, n) })
		x.members(RoleDst, "destination", op.Dst[0], o, n, false)

	case OpPutPacket:
		for i, d := range op.Dst {
			np := op.Src[i].Size / c.payload
			x.emit(RoleSrc, "source", i, func() (OperandSpan, error) {
				if op.ChannelType == Port {
					// The source is already in packet form
					// (docs/semantics.md §2.5).
					return x.packets(me, op.Src[i].Buffer, op.Src[i].Offset, np)
				}
				return x.raw(op.Src[i], np)
			})
			x.emit(RoleDst, "destination", i, func() (OperandSpan, error) { return x.packets(d.Rank, d.Buffer, d.Offset, np) })
		}

	case OpReadPutPacket:
		packets = op.Src[0].Size / c.payload
		x.emit(RoleSrc, "source", 0, func() (OperandSpan, error) { return x.packets(me, Scratch, op.Src[0].Offset, packets) })
		for i, d := range op.Dst {
			x.emit(RoleDst, "destination", i, func() (OperandSpan, error) { return x.packets(d.Rank, d.Buffer, d.Offset, packets) })
		}

	case OpCopyPacket:
		packets = op.Src[0].Size / c.payload
		x.emit(RoleRawIn, "source", 0, func() (OperandSpan, error) { return x.raw(op.Src[0], packets) })
		x.emit(RolePktOut, "destination", 0, func() (OperandSpan, error) {
			return x.packets(me, op.Dst[0].Buffer, op.Dst[0].Offset, packets)
		})

	case OpUnpackPacket:
		packets = op.Src[0].Size / c.payload
		// The source is always local scratch, whatever its type
		// (docs/semantics.md §2.6).
		x.emit(RolePktIn, "source", 0, func() (OperandSpan, error) { return x.packets(me, Scratch, op.Src[0].Offset, packets) })
		x.emit(RoleRawOut, "destination", 0, func() (OperandSpan, error) { return x.raw(op.Dst[0], packets) })

	case OpReducePacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket:
		if c.payload%c.elem != 0 {
			return 0, fmt.Errorf("packet payload of %d bytes is not a whole number of %s elements", c.payload, c.dt.Name())
		}
		packets = op.Src[0].Size / c.payload
		x.emit(RoleRawIn, "source", 0, func() (OperandSpan, error) { return x.raw(op.Src[0], packets) })
		for i := 1; i < len(op.Src); i++ {
			x.emit(RolePktIn, "source", i, func() (OperandSpan, error) { return x.packets(me, Scratch, op.Src[i].Offset, packets) })
		}
		x.emit(RoleRawOut, "destination", 0, func() (OperandSpan, error) { return x.raw(op.Dst[0], packets) })
		for i := 1; i < len(op.Dst); i++ {
			d := op.Dst[i]
			x.emit(RolePktOut, "destination", i, func() (OperandSpan, error) {
				if DstKind(op.Type, i) == RemoteOperand {
					return x.packets(d.Rank, d.Buffer, d.Offset, packets)
				}
				return x.packets(me, d.Buffer, d.Offset, packets)
			})
		}

	case OpMultiStorePacket:
		packets = op.Src[0].Size / c.payload
		x.emit(RolePktIn, "source", 0, func() (OperandSpan, error) {
			return x.packets(me, op.Src[0].Buffer, op.Src[0].Offset, packets)
		})
		x.members(RolePktOut, "destination", op.Dst[0], 0, packets, true)

	default:
		return 0, fmt.Errorf("op type %v is not a data op", op.Type)
	}
	if x.err != nil {
		return 0, x.err
	}
	return packets, nil
}
