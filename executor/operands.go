package executor

// operands.go resolves the data operands of an op at a pipeline offset
// to byte ranges of the ranks' buffers (docs/semantics.md §2.4-§2.6; the
// operand roles are docs/semantics.md §2.11), checking each against the
// launch's buffers.
// CheckOperands walks every op with it; the CPU backend resolves each op
// it runs with it and slices its memory at the ranges; CheckLaunch
// (launchcheck.go) walks the same list of operands (RankOperands.operands)
// against a buffer layout instead of buffers.

import (
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
	"math"
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
	Buffer plan.BufferType
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
	// prep, when set, holds each rank's slot and sorted switch members
	// (Prepared.Operands); nil: Rank resolves them.
	prep *Prepared
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
	var pr PreparedRank
	if c.prep != nil {
		pr = c.prep.Ranks[r]
	} else {
		pr = resolveRank(c.inst, r)
	}
	return &RankOperands{c: c, ri: ri, slot: pr.Slot, sorted: pr.Members}
}

// window returns where the part of a rank's buffer an access sees starts
// in the buffer, its size and its address (0 for a scratch not yet
// allocated: an aligned base). shifted selects the current double-buffer
// half of scratch (local scratch and packet accesses:
// docs/semantics.md §1.12); unshifted scratch accesses (non-packet
// remote, NVLS: quirk Q8) see the whole scratch from its base.
func (c *Operands) window(rank int, bt plan.BufferType, shifted bool) (base, size uint64, addr uintptr) {
	b := c.bufs[rank][bt]
	size = uint64(len(b))
	if bt == plan.Scratch && b == nil {
		size = c.inst.ScratchBytes
	} else if len(b) > 0 {
		addr = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	if bt == plan.Scratch && shifted && c.double {
		return c.so, c.half, addr + uintptr(c.so)
	}
	return 0, size, addr
}

// span checks [off, off+n) of the window and returns it as an operand
// and its address.
func (c *Operands) span(rank int, bt plan.BufferType, shifted bool, off, n uint64) (OperandSpan, uintptr, error) {
	base, size, addr := c.window(rank, bt, shifted)
	if n == 0 {
		// Nothing is accessed (a clamped pipeline tail, an empty
		// operand): no bounds to check.
		return OperandSpan{Rank: rank, Buffer: bt, Offset: base + off}, 0, nil
	}
	if off > size || n > size-off {
		lim := fmt.Sprintf("the buffer has %d bytes", size)
		if bt == plan.Scratch && shifted && c.double {
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
func (ro *RankOperands) adj(bt plan.BufferType, o uint64) uint64 {
	if bt == plan.Scratch && ro.slot > 0 {
		return o % ro.slot
	}
	return o
}

// operandMode is how an operand is addressed in its buffer.
type operandMode uint8

const (
	// modeData: the bytes at the operand's offset plus the pipeline
	// offset (reduced modulo the scratch ring, RankOperands.adj), as
	// many as the op moves at that offset with its unit (clampLen).
	modeData operandMode = iota
	// modePackets: the LL packets that carry the operand's data, at
	// twice its data offset (packetOffset) in the current scratch half,
	// 8-byte aligned in memory; packet ops have no pipeline offset.
	modePackets
	// modeRaw: the payload bytes of those packets, at the data offset.
	modeRaw
)

// operand is one data operand of an op before it is addressed: the one
// description of where an op's operands lie that Resolve addresses
// against a launch's buffers and CheckLaunch against a buffer layout.
type operand struct {
	role OperandRole
	i    int // its index in src_buff or dst_buff
	mode operandMode
	// rank is whose buffer it is: the executing rank's for a local
	// operand, a switch member's for each member of a switch operand.
	rank   int
	buffer plan.BufferType
	off    uint64 // the region's offset (the data offset for packets)
	// length is the op's length in bytes at pipeline offset 0 with no
	// unit (modeData), or the data bytes the packets carry.
	length uint64
	// shifted says the access sees the current double-buffer half of
	// scratch (local and packet accesses: docs/semantics.md §1.12);
	// unshifted ones (non-packet remote, NVLS: quirk Q8) see the whole
	// scratch from its base.
	shifted bool
	// sw is the switch channel of a switch operand, -1 for others.
	sw int
}

// isSource reports whether the operand is one of src_buff.
func (d *operand) isSource() bool {
	return d.role == RoleSrc || d.role == RoleRawIn || d.role == RolePktIn
}

// srcDst is the plan's name of the operand's side: src_buff or dst_buff.
func (d *operand) srcDst() string {
	if d.isSource() {
		return plan.KeySrcBuff
	}
	return plan.KeyDstBuff
}

// packetOffset is where the LL packets for data offset off start in a
// buffer: each packet carries half its bytes in data.
func packetOffset(off uint64) uint64 { return 2 * off }

// operands hands f the data operands of op, one of the rank's data ops,
// in the order the op lists them (docs/semantics.md §2.4-§2.6; the
// roles are docs/semantics.md §2.11); a switch operand comes once per member of its group, in
// ascending rank order. It reports false if op is not a data op.
func (ro *RankOperands) operands(op *OpInstance, f func(operand)) bool {
	me := ro.ri.Rank
	first := func(rs []Region) uint64 {
		if len(rs) == 0 {
			return 0
		}
		return rs[0].Size
	}
	srcLen := first(op.Src)
	put := func(role OperandRole, i, rank int, r Region, mode operandMode, n uint64, shifted bool) {
		f(operand{role: role, i: i, mode: mode, rank: rank, buffer: r.Buffer, off: r.Offset, length: n, shifted: shifted, sw: -1})
	}
	local := func(role OperandRole, i int, r Region, n uint64) { put(role, i, me, r, modeData, n, true) }
	remote := func(role OperandRole, i int, r Region, n uint64) { put(role, i, r.Rank, r, modeData, n, false) }
	pkts := func(role OperandRole, i, rank int, bt plan.BufferType, off, n uint64) {
		put(role, i, rank, Region{Buffer: bt, Offset: off}, modePackets, n, true)
	}
	raw := func(role OperandRole, r Region, n uint64) { put(role, 0, me, r, modeRaw, n, true) }
	byKind := func(role OperandRole, i int, r Region, k plan.OperandKind, n uint64) {
		if k == plan.RemoteOperand {
			remote(role, i, r, n)
		} else {
			local(role, i, r, n)
		}
	}
	// members hands f a switch operand in every member's bound buffer.
	members := func(role OperandRole, r Region, mode operandMode, n uint64) {
		if r.Switch < 0 || r.Switch >= len(ro.ri.Switches) {
			return
		}
		g := &ro.ri.Switches[r.Switch]
		for _, m := range ro.sorted[r.Switch] {
			f(operand{role: role, mode: mode, rank: m, buffer: g.Buffer, off: r.Offset, length: n, shifted: mode != modeData, sw: r.Switch})
		}
	}
	pairs := min(len(op.Src), len(op.Dst))
	// The put and reduce families dispatch by the op table: a new member
	// whose operand roles the table gives needs no case of its own.
	switch t := op.Type; {
	case t == plan.OpCopy:
		if pairs > 0 {
			local(RoleSrc, 0, op.Src[0], srcLen)
			local(RoleDst, 0, op.Dst[0], srcLen)
		}

	case t.Family() == plan.FamPut && !t.Packet(): // the put family, without packets
		// Port transfers read the local source through its registration
		// at the buffer's base: no double-buffer shift
		// (docs/semantics.md §2.4 localMemId, mirrored like Q8).
		for i, d := range op.Dst[:pairs] {
			put(RoleSrc, i, me, op.Src[i], modeData, d.Size, op.ChannelType != plan.Port)
			remote(RoleDst, i, d, d.Size)
		}

	case t == plan.OpGet:
		for i, r := range op.Src[:pairs] {
			remote(RoleSrc, i, r, r.Size)
			local(RoleDst, i, op.Dst[i], r.Size)
		}

	case t.Family() == plan.FamReduce && !t.Packet(): // the reduce family, without packets
		for i, r := range op.Src {
			byKind(RoleSrc, i, r, plan.SrcKind(op.Type, i), srcLen)
		}
		for i, r := range op.Dst {
			byKind(RoleDst, i, r, plan.DstKind(op.Type, i), srcLen)
		}

	case t == plan.OpMultiLoadReduceStore:
		if pairs > 0 {
			members(RoleSrc, op.Src[0], modeData, srcLen)
			members(RoleDst, op.Dst[0], modeData, srcLen)
		}

	case t == plan.OpMultiStore:
		if pairs > 0 {
			local(RoleSrc, 0, op.Src[0], srcLen)
			members(RoleDst, op.Dst[0], modeData, srcLen)
		}

	case t == plan.OpPutPacket:
		for i, d := range op.Dst[:pairs] {
			s := op.Src[i]
			if op.ChannelType == plan.Port {
				// The source is already in packet form
				// (docs/semantics.md §2.5).
				pkts(RoleSrc, i, me, s.Buffer, s.Offset, s.Size)
			} else {
				put(RoleSrc, i, me, s, modeRaw, s.Size, true)
			}
			pkts(RoleDst, i, d.Rank, d.Buffer, d.Offset, s.Size)
		}

	case t == plan.OpReadPutPacket:
		if len(op.Src) > 0 {
			pkts(RoleSrc, 0, me, plan.Scratch, op.Src[0].Offset, srcLen)
		}
		for i, d := range op.Dst {
			pkts(RoleDst, i, d.Rank, d.Buffer, d.Offset, srcLen)
		}

	case t == plan.OpCopyPacket:
		if pairs > 0 {
			raw(RoleRawIn, op.Src[0], srcLen)
			pkts(RolePktOut, 0, me, op.Dst[0].Buffer, op.Dst[0].Offset, srcLen)
		}

	case t == plan.OpUnpackPacket:
		if pairs > 0 {
			// The source is always local scratch, whatever its type
			// (docs/semantics.md §2.6).
			pkts(RolePktIn, 0, me, plan.Scratch, op.Src[0].Offset, srcLen)
			raw(RoleRawOut, op.Dst[0], srcLen)
		}

	case t.Family() == plan.FamReduce: // the reduce family, with packets
		if pairs == 0 {
			break
		}
		raw(RoleRawIn, op.Src[0], srcLen)
		for i := 1; i < len(op.Src); i++ {
			pkts(RolePktIn, i, me, plan.Scratch, op.Src[i].Offset, srcLen)
		}
		raw(RoleRawOut, op.Dst[0], srcLen)
		for i := 1; i < len(op.Dst); i++ {
			d := op.Dst[i]
			rank := me
			if plan.DstKind(op.Type, i) == plan.RemoteOperand {
				rank = d.Rank
			}
			pkts(RolePktOut, i, rank, d.Buffer, d.Offset, srcLen)
		}

	case t == plan.OpMultiStorePacket:
		if pairs > 0 {
			pkts(RolePktIn, 0, me, op.Src[0].Buffer, op.Src[0].Offset, srcLen)
			members(RolePktOut, op.Dst[0], modePackets, srcLen)
		}

	default:
		return false
	}
	return true
}

// resolution is one Resolve: the rank, the pipeline offset and unit, the
// callback, the first error.
type resolution struct {
	ro   *RankOperands
	o, u uint64
	f    func(OperandSpan)
	err  error
}

// address checks one operand against the launch's buffers and hands it
// to the callback; after a first error it does nothing. Errors name the
// operand by its role and index ("source 1: ...").
func (x *resolution) address(d operand) {
	if x.err != nil {
		return
	}
	c := x.ro.c
	var a OperandSpan
	var err error
	switch d.mode {
	case modeData:
		a, _, err = c.span(d.rank, d.buffer, d.shifted, d.off+x.ro.adj(d.buffer, x.o), clampLen(d.length, x.o, x.u))
	case modePackets:
		var addr uintptr
		a, addr, err = c.span(d.rank, d.buffer, d.shifted, packetOffset(d.off), d.length/c.payload*c.packet)
		if err == nil && a.Len > 0 && addr%8 != 0 {
			err = fmt.Errorf("packets at %s[%d] of rank %d are not 8-byte aligned in memory", d.buffer.Name(), a.Offset, d.rank)
		}
	case modeRaw:
		a, _, err = c.span(d.rank, d.buffer, d.shifted, d.off, d.length/c.payload*c.payload)
	}
	if err != nil {
		what := "destination"
		if d.isSource() {
			what = "source"
		}
		if d.sw >= 0 {
			err = fmt.Errorf("switch channel %d: %w", d.sw, err)
		}
		x.err = fmt.Errorf("%s %d: %w", what, d.i, err)
		return
	}
	if x.f != nil {
		a.Role = d.role
		x.f(a)
	}
}

// Resolve resolves the operands of data op op (one of the rank's) at
// pipeline offset o with unit u (0 and NoUnit outside pipelines),
// handing each to f (when not nil) in the order the op lists them, and
// returns the op's packet count (packet ops other than put of packets)
// or the first problem: an operand out of bounds or misaligned packets,
// named by its role and index ("source 1: ..."), or a reduction over a
// part of an element.
func (ro *RankOperands) Resolve(op *OpInstance, o, u uint64, f func(OperandSpan)) (packets uint64, err error) {
	c := ro.c
	switch {
	case op.Type.ReducesElements():
		if n := clampLen(op.Src[0].Size, o, u); n%c.elem != 0 {
			return 0, fmt.Errorf("%d bytes is not a whole number of %s elements", n, c.dt.Name())
		}
	case op.Type.Reduces() && op.Type.Packet():
		if c.payload%c.elem != 0 {
			return 0, fmt.Errorf("packet payload of %d bytes is not a whole number of %s elements", c.payload, c.dt.Name())
		}
	}
	x := &resolution{ro: ro, o: o, u: u, f: f}
	if !ro.operands(op, x.address) {
		return 0, fmt.Errorf("op type %v is not a data op", op.Type)
	}
	if x.err != nil {
		return 0, x.err
	}
	if op.Type.Packet() && op.Type != plan.OpPutPacket {
		packets = op.Src[0].Size / c.payload
	}
	return packets, nil
}
