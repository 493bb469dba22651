package executor

// launchcheck.go holds CheckLaunch: the checks a backend makes only when it
// launches an instance (the CPU backend's resolution of every operand at
// every pipeline iteration), made beforehand from the instance and the
// buffer layout alone, without allocating anything, so that `mscclgo
// check --size` finds what `mscclgo run` would reject at that size, with
// the same message, and `run` rejects it before it allocates buffers.
// Where an op's operands lie is operands.go's (RankOperands.operands);
// this file computes what the layout and the pipeline make of them.

import (
	"errors"
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
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
	// No buffers: only the operand lists are used, not Resolve.
	return checkLaunch(inst, l, NewOperands(inst, Options{DType: l.DType, LL8: ll8}, LaunchView{}))
}

// ForLayout returns p for a rank session over the buffer layout l: the
// operand checks a launch in one process makes (CheckLaunch), made
// against l instead of buffers, with p's resolution; the result keeps l
// as its Layout. p itself is not changed.
func (p *Prepared) ForLayout(l *BufferLayout) (*Prepared, error) {
	if l == nil {
		return nil, errors.New("a rank session needs a buffer layout (nil)")
	}
	if err := p.checkLaunch(l); err != nil {
		return nil, err
	}
	q := *p
	q.Layout = l
	return &q, nil
}

// checkLaunch is Prepare's CheckLaunch against l: the operand lists with
// the ranks as Prepare resolved them.
func (p *Prepared) checkLaunch(l *BufferLayout) error {
	if l.DType == nil {
		return nil
	}
	ops := NewOperands(p.Inst, Options{DType: l.DType, LL8: p.Opts.LL8}, LaunchView{})
	ops.prep = p
	return checkLaunch(p.Inst, l, ops)
}

// checkLaunch is CheckLaunch with the operand resolution ops.
func checkLaunch(inst *Instance, l *BufferLayout, ops *Operands) error {
	c := &launchCheck{inst: inst, l: l, elem: ops.elem, payload: ops.payload}
	if c.elem == 0 {
		return nil
	}
	p := inst.Plan
	if p != nil && p.UseDoubleScratch {
		c.half = inst.ScratchBytes / 2
	}
	for r := range inst.Ranks {
		ro := ops.Rank(r)
		c.slot = ro.slot
		for _, tb := range ro.ri.TBs {
			for k := range tb.Ops {
				op := &tb.Ops[k]
				path := fmt.Sprintf("gpus[%d].threadblocks[%d].ops[%d]", r, tb.ID, op.Index)
				if op.Type != plan.OpPipeline {
					if err := c.op(ro, op, path, nil); err != nil {
						return err
					}
					continue
				}
				for j := range op.Body {
					b := &op.Body[j]
					if err := c.op(ro, b, fmt.Sprintf("%s.ops[%d]", path, b.Index), op); err != nil {
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
	return &plan.PlanError{Path: path, Err: plan.ErrSize, Msg: fmt.Sprintf(format, args...)}
}

// op checks one op, a pipeline body's op when pipe is its pipeline.
func (c *launchCheck) op(ro *RankOperands, op *OpInstance, path string, pipe *OpInstance) error {
	if op.Type.ReducesElements() {
		if len(op.Src) == 0 {
			return nil
		}
		if n, it, bad := c.partialElement(op.Src[0].Size, pipe); bad {
			where := ""
			if pipe != nil {
				where = fmt.Sprintf(" (pipeline unit_size %d, iteration %d)", pipe.UnitSize, it)
			}
			return c.errf(path, "%s: %d bytes is not a whole number of %d-byte %s elements%s", op.Type, n, c.elem, c.l.DType.Name(), where)
		}
	}
	var err error
	ro.operands(op, func(d operand) {
		switch {
		case err != nil:
		case d.mode == modePackets:
			err = c.packets(d, path)
		case d.mode == modeData && pipe != nil && c.slot > 0:
			err = c.ring(d, path, pipe)
		}
	})
	return err
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

// packets checks that the LL packets of operand d are 8-byte aligned in
// memory at both halves of a double-buffered scratch.
func (c *launchCheck) packets(d operand, path string) error {
	if d.length/c.payload == 0 {
		return nil
	}
	base := c.l.baseOffset(d.rank, d.buffer)
	why := fmt.Sprintf("twice the data offset %d", d.off)
	if base != 0 {
		why += fmt.Sprintf(", plus %d, where this in-place %s starts in the buffer it shares", base, d.buffer.Name())
	}
	at := base + packetOffset(d.off)
	if at%packetAlign == 0 && d.buffer == plan.Scratch && c.half%packetAlign != 0 {
		// Launches alternate between the scratch halves: every
		// second one uses the upper half, which starts at half.
		at += c.half
		why += fmt.Sprintf(", plus the double-buffer half %d (every second launch)", c.half)
	}
	if at%packetAlign != 0 {
		return c.errf(path, "%s[%d]: LL packets at byte %d of rank %d's %s are not %d-byte aligned (%s): a packet word is accessed atomically",
			d.srcDst(), d.i, at, d.rank, d.buffer.Name(), packetAlign, why)
	}
	return nil
}

// ring checks a non-packet scratch operand of a body op of a
// reuse_resources pipeline: at iteration i the access is
// [off + (i·unit mod slot), + n) with n = min(length − i·unit, unit), and
// must stay inside the scratch the access sees (the current half for
// shifted accesses with double buffering, the whole scratch otherwise).
func (c *launchCheck) ring(d operand, path string, pipe *OpInstance) error {
	if d.buffer != plan.Scratch {
		return nil
	}
	window := c.inst.ScratchBytes
	if d.shifted && c.half > 0 {
		window = c.half
	}
	it, end, ok := c.ringEnd(d.off, d.length, pipe)
	if !ok || end <= window {
		return nil
	}
	owner := fmt.Sprintf("rank %d's", d.rank)
	if d.sw >= 0 {
		owner = fmt.Sprintf("switch channel %d's", d.sw)
	}
	start := end - min(d.length-uint64(it)*pipe.UnitSize, pipe.UnitSize)
	return c.errf(path, "%s[%d]: pipeline iteration %d accesses bytes [%d, %d), beyond %s scratch of %d bytes (in a reuse_resources pipeline, scratch offsets wrap in slots of %d bytes and an iteration takes up to unit_size %d bytes from there)",
		d.srcDst(), d.i, it, start, end, owner, window, c.slot, pipe.UnitSize)
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
func (l *BufferLayout) baseOffset(rank int, bt plan.BufferType) uint64 {
	if !l.InPlace || rank < 0 {
		return 0
	}
	switch {
	case l.c == AllGather && bt == plan.Input:
		return uint64(rank) * l.Sizes.Input
	case l.c == ReduceScatter && bt == plan.Output:
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
