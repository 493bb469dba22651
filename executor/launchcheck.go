package executor

// launchcheck.go holds CheckLaunch: the checks a backend makes only when it
// launches an instance (the CPU backend's resolution of every operand at
// every pipeline iteration), made beforehand from the instance and the
// buffer layout alone, without allocating anything, so that `mscclgo
// check --size` finds what `mscclgo run` would reject at that size, with
// the same message, and `run` rejects it before it allocates buffers.

import (
	"fmt"
	"math/bits"
)

// packetAlign is the memory alignment of LL packets: each 8-byte
// {data, flag} word is written and read with one atomic operation.
const packetAlign = 8

// CheckLaunch reports the first problem a launch of inst with the buffers
// of l would hit before or while running, that Instantiate does not see:
//
//   - a reduction (re, res, rre, rres, glres) whose byte count, at some
//     pipeline iteration, is not a whole number of l's elements (a
//     pipeline unit_size of 1 or 7 bytes with 2-byte elements);
//   - LL packets that would not be 8-byte aligned in memory: packets sit
//     at twice the data offset, plus the double-buffer half of scratch,
//     plus the place of an in-place buffer in the one it aliases;
//   - a scratch access of a reuse_resources pipeline that leaves the
//     scratch: inside such pipelines scratch offsets wrap in their slot,
//     which Instantiate does not check.
//
// ll8 selects 8-byte LL packets (4 bytes of data) instead of 16-byte ones
// (8 bytes), as Options.LL8 does. Problems are *PlanErrors with ErrSize
// and the path of the op.
func CheckLaunch(inst *Instance, l *BufferLayout, ll8 bool) error {
	if inst == nil || l == nil || l.DType == nil {
		return nil
	}
	c := &launchCheck{inst: inst, l: l, elem: uint64(l.DType.Size()), payload: 8}
	if ll8 {
		c.payload = 4
	}
	if c.elem == 0 {
		return nil
	}
	p := inst.Plan
	if p != nil && p.UseDoubleScratch {
		c.half = inst.ScratchBytes / 2
	}
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		c.slot = inst.ScratchSlot(r)
		for _, tb := range ri.TBs {
			for k := range tb.Ops {
				op := &tb.Ops[k]
				path := fmt.Sprintf("gpus[%d].threadblocks[%d].ops[%d]", r, tb.ID, op.Index)
				if op.Type != OpPipeline {
					if err := c.op(ri, op, path, nil); err != nil {
						return err
					}
					continue
				}
				for j := range op.Body {
					b := &op.Body[j]
					if err := c.op(ri, b, fmt.Sprintf("%s.ops[%d]", path, b.Index), op); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// launchCheck is the state of one CheckLaunch.
type launchCheck struct {
	inst *Instance
	l    *BufferLayout
	elem uint64
	// payload is the data bytes of an LL packet: 8 (LL16) or 4 (LL8).
	payload uint64
	half    uint64 // the double-buffer half of scratch, 0 without double buffering
	slot    uint64 // the executing rank's reuse_resources slot, 0 if none
}

func (c *launchCheck) errf(path string, format string, args ...any) error {
	return &PlanError{Path: path, Err: ErrSize, Msg: fmt.Sprintf(format, args...)}
}

// op checks one op, a pipeline body's op when pipe is its pipeline.
func (c *launchCheck) op(ri *RankInstance, op *OpInstance, path string, pipe *OpInstance) error {
	name := op.Type.String()
	switch op.Type {
	case OpReduce, OpReduceSend, OpReadReduce, OpReadReduceSend, OpMultiLoadReduceStore:
		if len(op.Src) == 0 {
			return nil
		}
		if n, it, bad := c.partialElement(op.Src[0].Size, pipe); bad {
			where := ""
			if pipe != nil {
				where = fmt.Sprintf(" (pipeline unit_size %d, iteration %d)", pipe.UnitSize, it)
			}
			return c.errf(path, "%s: %d bytes is not a whole number of %d-byte %s elements%s", name, n, c.elem, c.l.DType.Name(), where)
		}
	}
	if err := c.packets(ri, op, path); err != nil {
		return err
	}
	if pipe != nil && c.slot > 0 {
		return c.ring(ri, op, path, pipe)
	}
	return nil
}

// partialElement returns a byte count of a reduction over size bytes that
// is not a whole number of elements, and its pipeline iteration: the
// whole size outside a pipeline, else min(size - i·unit, unit) at each
// iteration i that reduces anything (the first and the last are the only
// distinct counts).
func (c *launchCheck) partialElement(size uint64, pipe *OpInstance) (n uint64, it int, bad bool) {
	if pipe == nil {
		return size, -1, size%c.elem != 0
	}
	k := c.activeIterations(size, pipe)
	if k == 0 {
		return 0, 0, false
	}
	u := pipe.UnitSize
	if first := min(size, u); first%c.elem != 0 {
		return first, 0, true
	}
	if last := min(size-uint64(k-1)*u, u); last%c.elem != 0 {
		return last, k - 1, true
	}
	return 0, 0, false
}

// activeIterations is the number of leading iterations of pipe that
// access any of an operand of size bytes: min(iterations, ceil(size/unit)).
func (c *launchCheck) activeIterations(size uint64, pipe *OpInstance) int {
	u := pipe.UnitSize
	if u == 0 || size == 0 || pipe.Iterations <= 0 {
		return 0
	}
	n := size / u
	if size%u != 0 {
		n++
	}
	return int(min(n, uint64(pipe.Iterations)))
}

// packetSpan is a packet region of an op: the data offset of the region
// in the buffer of one rank.
type packetSpan struct {
	what   string
	i      int
	rank   int
	buffer BufferType
	off    uint64
	n      uint64 // data bytes: packets are accessed for n / payload > 0
}

// packetSpans lists the packet regions of a packet op, as the CPU backend
// addresses them (Operands, operands.go): sources read from local
// scratch whatever their type, switch destinations in every member.
func packetSpans(ri *RankInstance, op *OpInstance) []packetSpan {
	me := ri.Rank
	var out []packetSpan
	add := func(what string, i, rank int, bt BufferType, r Region) {
		out = append(out, packetSpan{what, i, rank, bt, r.Offset, r.Size})
	}
	srcSize := uint64(0)
	if len(op.Src) > 0 {
		srcSize = op.Src[0].Size
	}
	switch op.Type {
	case OpPutPacket:
		for i, d := range op.Dst {
			if i >= len(op.Src) {
				break
			}
			if op.ChannelType == Port {
				add("src_buff", i, me, op.Src[i].Buffer, Region{Offset: op.Src[i].Offset, Size: op.Src[i].Size})
			}
			add("dst_buff", i, d.Rank, d.Buffer, Region{Offset: d.Offset, Size: op.Src[i].Size})
		}
	case OpReadPutPacket:
		if len(op.Src) > 0 {
			add("src_buff", 0, me, Scratch, op.Src[0])
		}
		for i, d := range op.Dst {
			add("dst_buff", i, d.Rank, d.Buffer, Region{Offset: d.Offset, Size: srcSize})
		}
	case OpCopyPacket:
		if len(op.Dst) > 0 {
			add("dst_buff", 0, me, op.Dst[0].Buffer, Region{Offset: op.Dst[0].Offset, Size: srcSize})
		}
	case OpUnpackPacket:
		if len(op.Src) > 0 {
			add("src_buff", 0, me, Scratch, op.Src[0])
		}
	case OpReducePacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket:
		for i := 1; i < len(op.Src); i++ {
			add("src_buff", i, me, Scratch, Region{Offset: op.Src[i].Offset, Size: srcSize})
		}
		for i := 1; i < len(op.Dst); i++ {
			d := op.Dst[i]
			rank := me
			if DstKind(op.Type, i) == RemoteOperand {
				rank = d.Rank
			}
			add("dst_buff", i, rank, d.Buffer, Region{Offset: d.Offset, Size: srcSize})
		}
	case OpMultiStorePacket:
		if len(op.Src) > 0 {
			add("src_buff", 0, me, op.Src[0].Buffer, op.Src[0])
		}
		if len(op.Dst) > 0 && op.Dst[0].Switch >= 0 && op.Dst[0].Switch < len(ri.Switches) {
			g := ri.Switches[op.Dst[0].Switch]
			for _, m := range g.Ranks {
				add("dst_buff", 0, m, g.Buffer, Region{Offset: op.Dst[0].Offset, Size: srcSize})
			}
		}
	}
	return out
}

// packets checks that the LL packets of op are 8-byte aligned in memory.
func (c *launchCheck) packets(ri *RankInstance, op *OpInstance, path string) error {
	for _, s := range packetSpans(ri, op) {
		if s.n/c.payload == 0 {
			continue
		}
		base := c.l.baseOffset(s.rank, s.buffer)
		why := fmt.Sprintf("twice the data offset %d", s.off)
		if base != 0 {
			why += fmt.Sprintf(", plus %d, where this in-place %s starts in the buffer it shares", base, s.buffer.Name())
		}
		at := base + 2*s.off
		if at%packetAlign == 0 && s.buffer == Scratch && c.half%packetAlign != 0 {
			// Launches alternate between the scratch halves: every
			// second one uses the upper half, which starts at half.
			at += c.half
			why += fmt.Sprintf(", plus the double-buffer half %d (every second launch)", c.half)
		}
		if at%packetAlign != 0 {
			return c.errf(path, "%s[%d]: LL packets at byte %d of rank %d's %s are not %d-byte aligned (%s): a packet word is accessed atomically",
				s.what, s.i, at, s.rank, s.buffer.Name(), packetAlign, why)
		}
	}
	return nil
}

// ringOperand is a non-packet operand of a pipeline body op: its region,
// the byte count the op moves at offset 0 with no unit (the op's length),
// and whether the access sees the current double-buffer half of scratch.
type ringOperand struct {
	what    string
	i       int
	rank    int
	reg     Region
	length  uint64
	shifted bool
	sw      *SwitchGroup
}

// ringOperands lists the non-packet operands of op as the CPU backend
// resolves them inside a pipeline.
func ringOperands(ri *RankInstance, op *OpInstance) []ringOperand {
	me := ri.Rank
	var out []ringOperand
	srcLen := uint64(0)
	if len(op.Src) > 0 {
		srcLen = op.Src[0].Size
	}
	local := func(what string, i int, r Region, n uint64) {
		out = append(out, ringOperand{what: what, i: i, rank: me, reg: r, length: n, shifted: true})
	}
	remote := func(what string, i int, r Region, n uint64) {
		out = append(out, ringOperand{what: what, i: i, rank: r.Rank, reg: r, length: n})
	}
	member := func(what string, r Region, n uint64) {
		if r.Switch >= 0 && r.Switch < len(ri.Switches) {
			g := &ri.Switches[r.Switch]
			out = append(out, ringOperand{what: what, reg: r, length: n, sw: g})
		}
	}
	switch op.Type {
	case OpCopy:
		if len(op.Src) > 0 && len(op.Dst) > 0 {
			local("src_buff", 0, op.Src[0], srcLen)
			local("dst_buff", 0, op.Dst[0], srcLen)
		}
	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush:
		for i, d := range op.Dst {
			if i >= len(op.Src) {
				break
			}
			out = append(out, ringOperand{what: "src_buff", i: i, rank: me, reg: op.Src[i], length: d.Size, shifted: op.ChannelType != Port})
			remote("dst_buff", i, d, d.Size)
		}
	case OpGet:
		for i, r := range op.Src {
			if i >= len(op.Dst) {
				break
			}
			remote("src_buff", i, r, r.Size)
			local("dst_buff", i, op.Dst[i], r.Size)
		}
	case OpReduce, OpReduceSend, OpReadReduce, OpReadReduceSend:
		for i, r := range op.Src {
			if SrcKind(op.Type, i) == RemoteOperand {
				remote("src_buff", i, r, srcLen)
			} else {
				local("src_buff", i, r, srcLen)
			}
		}
		for i, r := range op.Dst {
			if DstKind(op.Type, i) == RemoteOperand {
				remote("dst_buff", i, r, srcLen)
			} else {
				local("dst_buff", i, r, srcLen)
			}
		}
	case OpMultiLoadReduceStore:
		if len(op.Src) > 0 && len(op.Dst) > 0 {
			member("src_buff", op.Src[0], srcLen)
			member("dst_buff", op.Dst[0], srcLen)
		}
	case OpMultiStore:
		if len(op.Src) > 0 && len(op.Dst) > 0 {
			local("src_buff", 0, op.Src[0], srcLen)
			member("dst_buff", op.Dst[0], srcLen)
		}
	}
	return out
}

// ring checks the scratch operands of a body op of a reuse_resources
// pipeline: at iteration i the access is [off + (i·unit mod slot), + n)
// with n = min(length − i·unit, unit), and must stay inside the scratch
// the access sees (the current half for local accesses with double
// buffering, the whole scratch otherwise).
func (c *launchCheck) ring(ri *RankInstance, op *OpInstance, path string, pipe *OpInstance) error {
	for _, o := range ringOperands(ri, op) {
		bt := o.reg.Buffer
		if o.sw != nil {
			bt = o.sw.Buffer
		}
		if bt != Scratch {
			continue
		}
		window := c.inst.ScratchBytes
		if o.shifted && c.half > 0 {
			window = c.half
		}
		it, end, ok := c.ringEnd(o.reg.Offset, o.length, pipe)
		if !ok || end <= window {
			continue
		}
		owner := fmt.Sprintf("rank %d's", o.rank)
		if o.sw != nil {
			owner = fmt.Sprintf("switch channel %d's", o.reg.Switch)
		}
		start := end - min(o.length-uint64(it)*pipe.UnitSize, pipe.UnitSize)
		return c.errf(path, "%s[%d]: pipeline iteration %d accesses bytes [%d, %d), beyond %s scratch of %d bytes (in a reuse_resources pipeline, scratch offsets wrap in slots of %d bytes and an iteration takes up to unit_size %d bytes from there)",
			o.what, o.i, it, start, end, owner, window, c.slot, pipe.UnitSize)
	}
	return nil
}

// ringEnd returns the iteration whose access of an operand at off of
// length bytes ends farthest, and that end; ok is false when no iteration
// accesses anything.
func (c *launchCheck) ringEnd(off, length uint64, pipe *OpInstance) (it int, end uint64, ok bool) {
	k := c.activeIterations(length, pipe)
	if k == 0 {
		return 0, 0, false
	}
	u, slot := pipe.UnitSize, c.slot
	// The full iterations 0..k-2 each access unit bytes at i·u mod slot,
	// a sequence of period slot/gcd(u, slot); its largest value is
	// slot − gcd, first reached at iteration top. The walk stops there,
	// or after maxRingSteps: beyond that the largest value is taken to be
	// reached (exact once the full iterations cover top; otherwise an
	// overestimate, for pipelines of millions of iterations only).
	g := gcd(u%slot, slot)
	period := slot / g
	full := uint64(k - 1)
	best, bestAt := uint64(0), 0
	steps := min(full, period)
	if steps > maxRingSteps {
		best, bestAt = slot-g, int(min(firstResidue(u%slot, slot, g), uint64(k-2)))
	} else {
		for i, pos := uint64(0), uint64(0); i < steps; i++ {
			if pos > best || i == 0 {
				best, bestAt = pos, int(i)
				if best == slot-g {
					break
				}
			}
			pos += u % slot
			if pos >= slot {
				pos -= slot
			}
		}
	}
	if full > 0 {
		it, end, ok = bestAt, off+best+u, true
	}
	last := k - 1
	n := min(length-uint64(last)*u, u)
	if e := off + (uint64(last)*u)%slot + n; !ok || e > end {
		it, end, ok = last, e, true
	}
	return it, end, ok
}

// maxRingSteps bounds the iterations ringEnd walks.
const maxRingSteps = 1 << 22

// firstResidue returns the least i with i·a ≡ n − g (mod n), where g =
// gcd(a, n) > 0: the iteration at which the offsets i·a mod n reach their
// largest value.
func firstResidue(a, n, g uint64) uint64 {
	p, q := n/g, a/g // coprime
	target := p - 1  // (n − g) / g
	if p == 1 {
		return 0
	}
	inv := modInverse(q%p, p)
	hi, lo := bits.Mul64(target, inv)
	_, r := bits.Div64(hi%p, lo, p)
	return r
}

// modInverse returns x with a·x ≡ 1 (mod m), for coprime a and m > 1.
func modInverse(a, m uint64) uint64 {
	// Extended Euclid on (m, a), tracking the coefficient of a modulo m.
	r0, r1 := m, a
	t0, t1 := uint64(0), uint64(1) // coefficients, kept in [0, m)
	for r1 != 0 {
		q := r0 / r1
		r0, r1 = r1, r0-q*r1
		hi, lo := bits.Mul64(q, t1)
		_, qt := bits.Div64(hi%m, lo, m)
		t0, t1 = t1, (t0+m-qt)%m
	}
	return t0
}

// baseOffset is where rank's buffer bt starts in the allocation that
// holds it, in the buffers Alloc lays out: non-zero for an in-place
// allgather input (a slice of the output) and an in-place reducescatter
// output (a slice of the input).
func (l *BufferLayout) baseOffset(rank int, bt BufferType) uint64 {
	if !l.InPlace || rank < 0 {
		return 0
	}
	switch {
	case l.c == AllGather && bt == Input:
		return uint64(rank) * l.Sizes.Input
	case l.c == ReduceScatter && bt == Output:
		return uint64(rank) * l.Sizes.Output
	}
	return 0
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
