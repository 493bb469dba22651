package executor

// check.go holds the checks every backend makes before it runs anything:
// Validate, of an instance at Open (rank numbering, channel pairing,
// switch groups, every op's channels, semaphores, barrier, operand counts
// and kinds), and CheckBuffers and CheckOperands, of a launch's buffers (every
// operand of every op, every pipeline iteration included, resolved
// against the buffers and the scratch as the CPU backend resolves them).
// A launch a device backend accepts is then one the CPU backend accepts,
// and no kernel is handed an operand outside its buffers.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Validate checks everything about inst with opts that does not depend
// on a launch's buffers: the data type, rank numbering, channel pairing,
// switch groups, and every op's channels, semaphores, barrier, operand
// counts and kinds. A backend calls it at Open; a launch then never
// indexes out of range, and buffer bounds are checked per launch
// (CheckOperands). Errors name the rank, thread block and op; backends
// prefix them with their name.
func Validate(inst *Instance, opts Options) error {
	if inst == nil {
		return errors.New("nil instance")
	}
	if opts.DType == nil {
		return errors.New("Options.DType is nil")
	}
	if sz := opts.DType.Size(); sz <= 0 || sz > 16 {
		return fmt.Errorf("data type %s has element size %d", opts.DType.Name(), sz)
	}
	n := len(inst.Ranks)
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		if ri.Rank != r {
			return fmt.Errorf("Ranks[%d] is rank %d", r, ri.Rank)
		}
		for _, tc := range []struct {
			t   ChannelType
			chs []ChannelEnd
		}{{Memory, ri.MemoryChannels}, {Port, ri.PortChannels}} {
			for c, end := range tc.chs {
				if end.Peer < 0 || end.Peer >= n {
					return fmt.Errorf("rank %d %s channel %d: peer %d out of range [0:%d]", r, tc.t, c, end.Peer, n)
				}
				if end.PeerIndex < 0 {
					continue
				}
				peer := peerChannels(inst, end.Peer, tc.t)
				if end.PeerIndex >= len(peer) {
					return fmt.Errorf("rank %d %s channel %d: peer channel %d out of range (rank %d has %d)", r, tc.t, c, end.PeerIndex, end.Peer, len(peer))
				}
				if back := peer[end.PeerIndex]; back.Peer != r || back.PeerIndex != c {
					return fmt.Errorf("rank %d %s channel %d pairs with rank %d channel %d, which pairs with rank %d channel %d", r, tc.t, c, end.Peer, end.PeerIndex, back.Peer, back.PeerIndex)
				}
			}
		}
		for g, sw := range ri.Switches {
			if sw.Buffer > Scratch {
				return fmt.Errorf("rank %d switch channel %d: bad buffer type %v", r, g, sw.Buffer)
			}
			seen := map[int]bool{}
			for _, m := range sw.Ranks {
				if m < 0 || m >= n || seen[m] {
					return fmt.Errorf("rank %d switch channel %d: bad member rank %d", r, g, m)
				}
				seen[m] = true
			}
			if !seen[r] {
				return fmt.Errorf("rank %d switch channel %d: rank %d is not a member of %v", r, g, r, sw.Ranks)
			}
		}
		for t := range ri.TBs {
			for i := range ri.TBs[t].Ops {
				op := &ri.TBs[t].Ops[i]
				if err := validateOp(inst, ri, op, false); err != nil {
					return fmt.Errorf("rank %d tb %d %s: %w", r, ri.TBs[t].ID, op.Describe(), err)
				}
			}
		}
	}
	return nil
}

func peerChannels(inst *Instance, rank int, t ChannelType) []ChannelEnd {
	if t == Port {
		return inst.Ranks[rank].PortChannels
	}
	return inst.Ranks[rank].MemoryChannels
}

// operandCounts says how many sources and destinations an op needs: at
// least minSrc/minDst, at most maxSrc/maxDst (-1: any).
func operandCounts(t OpType) (minSrc, maxSrc, minDst, maxDst int) {
	switch t {
	case OpCopy, OpCopyPacket, OpUnpackPacket,
		OpMultiLoadReduceStore, OpMultiStore, OpMultiStorePacket:
		return 1, 1, 1, 1
	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPacket:
		return 1, -1, 1, -1
	case OpReadPutPacket:
		return 1, 1, 1, -1
	case OpGet:
		return 1, -1, 1, -1
	case OpReduce, OpReadReduce, OpReducePacket:
		return 1, -1, 1, 1
	case OpReduceSend, OpReadReduceSend, OpReduceSendPacket:
		return 1, -1, 1, -1
	case OpReduceCopyPacket:
		return 1, -1, 2, 2
	case OpReduceCopySendPacket:
		return 1, -1, 2, -1
	}
	return 0, -1, 0, -1
}

func isDataOp(t OpType) bool {
	switch t {
	case OpNop, OpBarrier, OpSignal, OpRelaxedSignal,
		OpWait, OpRelaxedWait, OpFlush,
		OpSemAcquire, OpSemRelease, OpPipeline:
		return false
	}
	return true
}

func validateOp(inst *Instance, ri *RankInstance, op *OpInstance, inPipeline bool) error {
	n := len(inst.Ranks)
	chans := func() error {
		var tab []ChannelEnd
		switch op.ChannelType {
		case Memory:
			tab = ri.MemoryChannels
		case Port:
			tab = ri.PortChannels
		case Switch:
			for _, c := range op.Channels {
				if c < 0 || c >= len(ri.Switches) {
					return fmt.Errorf("switch channel %d out of range [0:%d]", c, len(ri.Switches))
				}
			}
			return nil
		default:
			if len(op.Channels) > 0 {
				return errors.New("channels without a channel type")
			}
			return nil
		}
		for _, c := range op.Channels {
			if c < 0 || c >= len(tab) {
				return fmt.Errorf("%s channel %d out of range [0:%d]", op.ChannelType, c, len(tab))
			}
		}
		return nil
	}
	if err := chans(); err != nil {
		return err
	}
	switch op.Type {
	case OpNop:
		return nil
	case OpBarrier:
		if op.BarrierID < 0 || op.BarrierID > MaxBarrierID {
			return fmt.Errorf("barrier id %d out of range [0:%d]", op.BarrierID, MaxBarrierID+1)
		}
		if op.NumThreadBlocks < 0 {
			return fmt.Errorf("negative thread block count %d", op.NumThreadBlocks)
		}
		return nil
	case OpSignal, OpRelaxedSignal, OpWait, OpRelaxedWait, OpFlush:
		if op.ChannelType == NoChannel {
			return errors.New("no channel type")
		}
		return nil
	case OpSemAcquire, OpSemRelease:
		for _, id := range op.Semaphores {
			if id < 0 || id >= len(ri.Semaphores) {
				return fmt.Errorf("semaphore %d out of range [0:%d]", id, len(ri.Semaphores))
			}
		}
		return nil
	case OpPipeline:
		if inPipeline {
			return errors.New("nested pipeline")
		}
		if op.Iterations < 0 {
			return fmt.Errorf("negative iteration count %d", op.Iterations)
		}
		if op.Iterations > 0 && op.UnitSize == 0 {
			return errors.New("pipeline unit size 0")
		}
		for i := range op.Body {
			b := &op.Body[i]
			if err := validateOp(inst, ri, b, true); err != nil {
				return fmt.Errorf("%s: %w", b.Describe(), err)
			}
		}
		return nil
	}
	if !isDataOp(op.Type) {
		return fmt.Errorf("unknown op type %v", op.Type)
	}
	minS, maxS, minD, maxD := operandCounts(op.Type)
	if len(op.Src) < minS || (maxS >= 0 && len(op.Src) > maxS) {
		return fmt.Errorf("%d source operand(s), want %s", len(op.Src), countRange(minS, maxS))
	}
	if len(op.Dst) < minD || (maxD >= 0 && len(op.Dst) > maxD) {
		return fmt.Errorf("%d destination operand(s), want %s", len(op.Dst), countRange(minD, maxD))
	}
	switch op.Type {
	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPacket:
		if len(op.Src) < len(op.Dst) {
			return fmt.Errorf("%d source(s) for %d destination(s)", len(op.Src), len(op.Dst))
		}
	case OpGet:
		if len(op.Dst) < len(op.Src) {
			return fmt.Errorf("%d destination(s) for %d source(s)", len(op.Dst), len(op.Src))
		}
	}
	if usesPort(op) && len(op.Channels) < len(op.Dst) {
		return fmt.Errorf("%d port channel(s) for %d destination(s)", len(op.Channels), len(op.Dst))
	}
	check := func(what string, i int, r Region, rl OperandKind) error {
		switch rl {
		case SwitchOperand:
			if r.Switch < 0 || r.Switch >= len(ri.Switches) {
				return fmt.Errorf("%s %d: switch channel %d out of range [0:%d]", what, i, r.Switch, len(ri.Switches))
			}
		case RemoteOperand:
			if r.Rank < 0 || r.Rank >= n {
				return fmt.Errorf("%s %d: owner rank %d out of range [0:%d]", what, i, r.Rank, n)
			}
		}
		if r.Buffer > Scratch {
			return fmt.Errorf("%s %d: bad buffer type %v", what, i, r.Buffer)
		}
		return nil
	}
	for i, r := range op.Src {
		if err := check("source", i, r, SrcKind(op.Type, i)); err != nil {
			return err
		}
	}
	for i, r := range op.Dst {
		if err := check("destination", i, r, DstKind(op.Type, i)); err != nil {
			return err
		}
	}
	return nil
}

// usesPort reports whether a data op goes through the proxy.
func usesPort(op *OpInstance) bool {
	if op.ChannelType != Port {
		return false
	}
	switch op.Type {
	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush,
		OpPutPacket, OpReadPutPacket:
		return true
	}
	return false
}

func countRange(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// CheckBuffers makes the checks a launch of inst with opts on bufs makes before
// anything runs, without running it or allocating anything: Validate, and
// CheckOperands of every rank's thread blocks against bufs and a scratch
// of inst.ScratchBytes.
func CheckBuffers(inst *Instance, opts Options, bufs []RankBuffers) error {
	if err := Validate(inst, opts); err != nil {
		return err
	}
	if len(bufs) != len(inst.Ranks) {
		return fmt.Errorf("launch: got buffers for %d ranks, want %d", len(bufs), len(inst.Ranks))
	}
	v := LaunchView{Bufs: make([][3][]byte, len(bufs))}
	for r, b := range bufs {
		v.Bufs[r] = [3][]byte{b.Input, b.Output, nil}
	}
	return CheckOperands(inst, opts, v)
}

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

// noUnit is the unit of ops outside pipelines (UINT32_MAX on the device,
// "unbounded" here).
const noUnit = math.MaxUint64

// CheckOperands resolves every data op of the thread blocks of v.Ranks,
// every pipeline iteration included, against v: each operand must lie in
// the buffer or the scratch window it accesses (docs/semantics.md §2.4-
// §2.6, the operand roles of §2.11), reductions must cover whole
// elements, and LL packets must be 8-byte aligned in memory. inst must
// have passed Validate with opts. The error names the rank, thread block,
// op and pipeline iteration; a launch that fails it has not started.
func CheckOperands(inst *Instance, opts Options, v LaunchView) error {
	if len(v.Bufs) != len(inst.Ranks) {
		return fmt.Errorf("launch: got buffers for %d ranks, want %d", len(v.Bufs), len(inst.Ranks))
	}
	c := &operandCheck{inst: inst, bufs: v.Bufs, dt: opts.DType, elem: uint64(opts.DType.Size()), payload: 8, packet: 16}
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
	ranks := v.Ranks
	if ranks == nil {
		for r := range inst.Ranks {
			if err := c.rank(r); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range ranks {
		if r < 0 || r >= len(inst.Ranks) {
			return fmt.Errorf("launch: rank %d out of range [0:%d]", r, len(inst.Ranks))
		}
		if err := c.rank(r); err != nil {
			return err
		}
	}
	return nil
}

// operandCheck is the state of one CheckOperands.
type operandCheck struct {
	inst            *Instance
	bufs            [][3][]byte
	dt              DType
	elem            uint64
	payload, packet uint64 // LL payload and packet bytes
	double          bool   // use_double_scratch_buffer
	half            uint64 // bytes of one scratch half (the whole scratch without double buffering)
	so              uint64 // offset of this launch's scratch half

	// The rank whose thread blocks are checked: its instance, its
	// reuse_resources scratch slot (0 if unused) and its switch groups'
	// members in ascending order.
	ri     *RankInstance
	slot   uint64
	sorted [][]int
}

// rank checks the thread blocks of rank r. Without a scratch ring every
// pipeline iteration touches a part of what the whole operand spans, so
// one check at offset 0 with no unit covers them all; with a ring, each
// iteration is checked.
func (c *operandCheck) rank(r int) error {
	ri := &c.inst.Ranks[r]
	c.ri, c.slot, c.sorted = ri, 0, c.sorted[:0]
	if c.inst.Plan != nil && r < len(c.inst.Plan.GPUs) {
		c.slot = c.inst.ScratchSlot(r)
	}
	for _, g := range ri.Switches {
		c.sorted = append(c.sorted, slices.Sorted(slices.Values(g.Ranks)))
	}
	for t := range ri.TBs {
		tb := &ri.TBs[t]
		for i := range tb.Ops {
			op := &tb.Ops[i]
			if op.Type != OpPipeline {
				if isDataOp(op.Type) {
					if err := c.op(op, 0, noUnit); err != nil {
						return operandError(r, tb, op, -1, err)
					}
				}
				continue
			}
			iters, unit := min(op.Iterations, 1), uint64(noUnit)
			if c.slot > 0 {
				iters, unit = op.Iterations, op.UnitSize
			}
			for it := 0; it < iters; it++ {
				o := uint64(it) * unit
				if unit == noUnit {
					o = 0
				}
				for j := range op.Body {
					b := &op.Body[j]
					if !isDataOp(b.Type) {
						continue
					}
					if err := c.op(b, o, unit); err != nil {
						if unit == noUnit {
							it = -1
						}
						return operandError(r, tb, b, it, err)
					}
				}
			}
		}
	}
	return nil
}

func operandError(rank int, tb *TBInstance, op *OpInstance, iter int, err error) error {
	it := ""
	if iter >= 0 {
		it = fmt.Sprintf(" (pipeline iteration %d)", iter)
	}
	return fmt.Errorf("rank %d tb %d %s%s: %w", rank, tb.ID, op.Describe(), it, err)
}

// window returns where the part of a rank's buffer an access sees starts
// in the buffer, its size and its address (0 for a scratch not yet
// allocated: an aligned base). shifted selects the current double-buffer
// half of scratch (local scratch and packet accesses, docs/semantics.md
// §1.12); unshifted scratch accesses (non-packet remote, NVLS: quirk Q8)
// see the whole scratch from its base.
func (c *operandCheck) window(rank int, bt BufferType, shifted bool) (base, size uint64, addr uintptr) {
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

// span checks [off, off+n) of the window and returns its offset in the
// whole buffer and its address.
func (c *operandCheck) span(rank int, bt BufferType, shifted bool, off, n uint64) (uint64, uintptr, error) {
	base, size, addr := c.window(rank, bt, shifted)
	if n == 0 {
		// Nothing is accessed (a clamped pipeline tail, an empty
		// operand): no bounds to check.
		return base + off, 0, nil
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
		return 0, 0, fmt.Errorf("%s[%d:%s] of rank %d out of range: %s", bufferName(bt), base+off, hi, rank, lim)
	}
	return base + off, addr + uintptr(off), nil
}

// adj is the pipeline offset of an operand of buffer type bt
// (docs/semantics.md §2.4): o, reduced modulo the scratch ring of
// reuse_resources plans.
func (c *operandCheck) adj(bt BufferType, o uint64) uint64 {
	if bt == Scratch && c.slot > 0 {
		return o % c.slot
	}
	return o
}

// clampLen is n(len, o, u) = min(len-o, u), clamped at 0 (quirk Q9).
func clampLen(n, o, u uint64) uint64 {
	if n <= o {
		return 0
	}
	return min(n-o, u)
}

func (c *operandCheck) local(r Region, o, n uint64) error {
	_, _, err := c.span(c.ri.Rank, r.Buffer, true, r.Offset+c.adj(r.Buffer, o), n)
	return err
}

func (c *operandCheck) remote(r Region, o, n uint64) error {
	_, _, err := c.span(r.Rank, r.Buffer, false, r.Offset+c.adj(r.Buffer, o), n)
	return err
}

// packets checks the packet region of np packets for the data offset off
// of a rank's buffer: at 2·off in its (shifted) window, 8-byte aligned
// for the packet atomics.
func (c *operandCheck) packets(rank int, bt BufferType, off, np uint64) error {
	at, addr, err := c.span(rank, bt, true, 2*off, np*c.packet)
	if err != nil {
		return err
	}
	if np*c.packet > 0 && addr%8 != 0 {
		return fmt.Errorf("packets at %s[%d] of rank %d are not 8-byte aligned in memory", bufferName(bt), at, rank)
	}
	return nil
}

// raw checks the payload-sized raw operand of a packet op (no pipeline
// offset: packet ops ignore it).
func (c *operandCheck) raw(r Region, np uint64) error {
	_, _, err := c.span(c.ri.Rank, r.Buffer, true, r.Offset, np*c.payload)
	return err
}

// members checks a switch operand in every member's bound buffer, in
// ascending rank order. pkt selects packet addressing (2·off, shifted
// scratch) with n packets; otherwise n bytes at off + adj.
func (c *operandCheck) members(r Region, o, n uint64, pkt bool) error {
	g := c.ri.Switches[r.Switch]
	for _, m := range c.sorted[r.Switch] {
		var err error
		if pkt {
			err = c.packets(m, g.Buffer, r.Offset, n)
		} else {
			_, _, err = c.span(m, g.Buffer, false, r.Offset+c.adj(g.Buffer, o), n)
		}
		if err != nil {
			return fmt.Errorf("switch channel %d: %w", r.Switch, err)
		}
	}
	return nil
}

// op checks the operands of a data op at pipeline offset o with unit u,
// in the order the CPU backend resolves them, and returns the first
// problem.
func (c *operandCheck) op(op *OpInstance, o, u uint64) error {
	var err error
	check := func(what string, i int, f func() error) {
		if err == nil {
			if e := f(); e != nil {
				err = fmt.Errorf("%s %d: %w", what, i, e)
			}
		}
	}
	me := c.ri.Rank
	switch op.Type {
	case OpCopy:
		n := clampLen(op.Src[0].Size, o, u)
		check("source", 0, func() error { return c.local(op.Src[0], o, n) })
		check("destination", 0, func() error { return c.local(op.Dst[0], o, n) })

	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush:
		// Port transfers read the local source through its registration
		// at the buffer's base: no double-buffer shift (docs/semantics.md
		// §2.4 localMemId, mirrored like Q8).
		shifted := op.ChannelType != Port
		for i, d := range op.Dst {
			n := clampLen(d.Size, o, u)
			check("source", i, func() error {
				r := op.Src[i]
				_, _, err := c.span(me, r.Buffer, shifted, r.Offset+c.adj(r.Buffer, o), n)
				return err
			})
			check("destination", i, func() error { return c.remote(d, o, n) })
		}

	case OpGet:
		for i, r := range op.Src {
			n := clampLen(r.Size, o, u)
			check("source", i, func() error { return c.remote(r, o, n) })
			check("destination", i, func() error { return c.local(op.Dst[i], o, n) })
		}

	case OpReduce, OpReduceSend, OpReadReduce, OpReadReduceSend:
		n := clampLen(op.Src[0].Size, o, u)
		if n%c.elem != 0 {
			return fmt.Errorf("%d bytes is not a whole number of %s elements", n, c.dt.Name())
		}
		for i, r := range op.Src {
			check("source", i, func() error {
				if SrcKind(op.Type, i) == RemoteOperand {
					return c.remote(r, o, n)
				}
				return c.local(r, o, n)
			})
		}
		for i, r := range op.Dst {
			check("destination", i, func() error {
				if DstKind(op.Type, i) == RemoteOperand {
					return c.remote(r, o, n)
				}
				return c.local(r, o, n)
			})
		}

	case OpMultiLoadReduceStore:
		n := clampLen(op.Src[0].Size, o, u)
		if n%c.elem != 0 {
			return fmt.Errorf("%d bytes is not a whole number of %s elements", n, c.dt.Name())
		}
		check("source", 0, func() error { return c.members(op.Src[0], o, n, false) })
		check("destination", 0, func() error { return c.members(op.Dst[0], o, n, false) })

	case OpMultiStore:
		n := clampLen(op.Src[0].Size, o, u)
		check("source", 0, func() error { return c.local(op.Src[0], o, n) })
		check("destination", 0, func() error { return c.members(op.Dst[0], o, n, false) })

	case OpPutPacket:
		for i, d := range op.Dst {
			np := op.Src[i].Size / c.payload
			check("source", i, func() error {
				if op.ChannelType == Port {
					// The source is already in packet form
					// (docs/semantics.md §2.5).
					return c.packets(me, op.Src[i].Buffer, op.Src[i].Offset, np)
				}
				return c.raw(op.Src[i], np)
			})
			check("destination", i, func() error { return c.packets(d.Rank, d.Buffer, d.Offset, np) })
		}

	case OpReadPutPacket:
		np := op.Src[0].Size / c.payload
		check("source", 0, func() error { return c.packets(me, Scratch, op.Src[0].Offset, np) })
		for i, d := range op.Dst {
			check("destination", i, func() error { return c.packets(d.Rank, d.Buffer, d.Offset, np) })
		}

	case OpCopyPacket:
		np := op.Src[0].Size / c.payload
		check("source", 0, func() error { return c.raw(op.Src[0], np) })
		check("destination", 0, func() error { return c.packets(me, op.Dst[0].Buffer, op.Dst[0].Offset, np) })

	case OpUnpackPacket:
		np := op.Src[0].Size / c.payload
		// The source is always local scratch, whatever its type
		// (docs/semantics.md §2.6).
		check("source", 0, func() error { return c.packets(me, Scratch, op.Src[0].Offset, np) })
		check("destination", 0, func() error { return c.raw(op.Dst[0], np) })

	case OpReducePacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket:
		if c.payload%c.elem != 0 {
			return fmt.Errorf("packet payload of %d bytes is not a whole number of %s elements", c.payload, c.dt.Name())
		}
		np := op.Src[0].Size / c.payload
		check("source", 0, func() error { return c.raw(op.Src[0], np) })
		for i := 1; i < len(op.Src); i++ {
			check("source", i, func() error { return c.packets(me, Scratch, op.Src[i].Offset, np) })
		}
		check("destination", 0, func() error { return c.raw(op.Dst[0], np) })
		for i := 1; i < len(op.Dst); i++ {
			d := op.Dst[i]
			check("destination", i, func() error {
				if DstKind(op.Type, i) == RemoteOperand {
					return c.packets(d.Rank, d.Buffer, d.Offset, np)
				}
				return c.packets(me, d.Buffer, d.Offset, np)
			})
		}

	case OpMultiStorePacket:
		np := op.Src[0].Size / c.payload
		check("source", 0, func() error { return c.packets(me, op.Src[0].Buffer, op.Src[0].Offset, np) })
		check("destination", 0, func() error { return c.members(op.Dst[0], 0, np, true) })

	default:
		return fmt.Errorf("op type %v is not a data op", op.Type)
	}
	return err
}
