package executor

// check.go holds the checks every backend makes before it runs anything:
// Prepare, which every backend's Open starts with, and Validate, of an
// instance at Open (rank numbering, channel pairing,
// switch groups, every op's channels, semaphores, barrier, operand counts
// and kinds), and CheckBuffers and CheckOperands, of a launch's buffers
// (every operand of every op, every pipeline iteration included, resolved
// by Operands, as the CPU backend resolves them to run the op). A launch
// a device backend accepts is then one the CPU backend accepts, and no
// kernel is handed an operand outside its buffers.

import (
	"errors"
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
	"slices"
)

// Prepare validates inst with opts (Validate) and resolves what every
// launch of it on any backend needs: the packet and scratch geometry,
// each rank's scratch slot and sorted switch members. The error is
// Validate's; backends prefix it with their name ("cpu: open: ...").
func Prepare(inst *Instance, opts Options) (*Prepared, error) {
	if err := Validate(inst, opts); err != nil {
		return nil, err
	}
	p := &Prepared{Inst: inst, Opts: opts, Geometry: geometryOf(inst, opts.LL8)}
	p.Ranks = make([]PreparedRank, len(inst.Ranks))
	for r := range inst.Ranks {
		p.Ranks[r] = resolveRank(inst, r)
	}
	return p, nil
}

func geometryOf(inst *Instance, ll8 bool) Geometry {
	g := Geometry{Payload: 8, Packet: 16, Half: inst.ScratchBytes}
	if ll8 {
		g.Payload, g.Packet = 4, 8
	}
	if inst.Plan != nil && inst.Plan.UseDoubleScratch {
		g.Double, g.Half = true, inst.ScratchBytes/2
	}
	return g
}

func resolveRank(inst *Instance, r int) PreparedRank {
	var pr PreparedRank
	if inst.Plan != nil && r < len(inst.Plan.GPUs) {
		pr.Slot = inst.ScratchSlot(r)
	}
	for _, g := range inst.Ranks[r].Switches {
		pr.Members = append(pr.Members, slices.Sorted(slices.Values(g.Ranks)))
	}
	return pr
}

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
	if err := CheckReduce(opts.DType, opts.Reduce); err != nil {
		return err
	}
	if opts.Threads < 0 {
		return fmt.Errorf("Options.Threads is %d (want 0 for every core, or at least 1)", opts.Threads)
	}
	n := len(inst.Ranks)
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		if ri.Rank != r {
			return fmt.Errorf("Ranks[%d] is rank %d", r, ri.Rank)
		}
		for _, tc := range []struct {
			t   plan.ChannelType
			chs []ChannelEnd
		}{{plan.Memory, ri.MemoryChannels}, {plan.Port, ri.PortChannels}} {
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
			if sw.Buffer > plan.Scratch {
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

func peerChannels(inst *Instance, rank int, t plan.ChannelType) []ChannelEnd {
	if t == plan.Port {
		return inst.Ranks[rank].PortChannels
	}
	return inst.Ranks[rank].MemoryChannels
}

func validateOp(inst *Instance, ri *RankInstance, op *OpInstance, inPipeline bool) error {
	n := len(inst.Ranks)
	chans := func() error {
		var tab []ChannelEnd
		switch op.ChannelType {
		case plan.Memory:
			tab = ri.MemoryChannels
		case plan.Port:
			tab = ri.PortChannels
		case plan.Switch:
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
	switch ty := op.Type; {
	case ty == plan.OpNop:
		return nil
	case ty == plan.OpBarrier:
		if op.BarrierID < 0 || op.BarrierID > plan.MaxBarrierID {
			return fmt.Errorf("barrier id %d out of range [0:%d]", op.BarrierID, plan.MaxBarrierID+1)
		}
		if op.NumThreadBlocks < 0 {
			return fmt.Errorf("negative thread block count %d", op.NumThreadBlocks)
		}
		return nil
	case ty.SignalsChannels(): // signals, waits or flushes channels
		if op.ChannelType == plan.NoChannel {
			return errors.New("no channel type")
		}
		return nil
	case ty == plan.OpSemAcquire, ty == plan.OpSemRelease:
		for _, id := range op.Semaphores {
			if id < 0 || id >= len(ri.Semaphores) {
				return fmt.Errorf("semaphore %d out of range [0:%d]", id, len(ri.Semaphores))
			}
		}
		return nil
	case ty == plan.OpPipeline:
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
	if !op.Type.IsData() {
		return fmt.Errorf("unknown op type %v", op.Type)
	}
	minS, maxS, minD, maxD := op.Type.OperandCounts()
	if len(op.Src) < minS || (maxS >= 0 && len(op.Src) > maxS) {
		return fmt.Errorf("%d source operand(s), want %s", len(op.Src), countRange(minS, maxS))
	}
	if len(op.Dst) < minD || (maxD >= 0 && len(op.Dst) > maxD) {
		return fmt.Errorf("%d destination operand(s), want %s", len(op.Dst), countRange(minD, maxD))
	}
	switch fam := op.Type.Family(); {
	case op.Type.Pairwise() && fam == plan.FamPut:
		if len(op.Src) < len(op.Dst) {
			return fmt.Errorf("%d source(s) for %d destination(s)", len(op.Src), len(op.Dst))
		}
	case op.Type.Pairwise() && fam == plan.FamGet:
		if len(op.Dst) < len(op.Src) {
			return fmt.Errorf("%d destination(s) for %d source(s)", len(op.Dst), len(op.Src))
		}
	}
	if op.Type.UsesPort(op.ChannelType) && len(op.Channels) < len(op.Dst) {
		return fmt.Errorf("%d port channel(s) for %d destination(s)", len(op.Channels), len(op.Dst))
	}
	check := func(what string, i int, r Region, rl plan.OperandKind) error {
		switch rl {
		case plan.SwitchOperand:
			if r.Switch < 0 || r.Switch >= len(ri.Switches) {
				return fmt.Errorf("%s %d: switch channel %d out of range [0:%d]", what, i, r.Switch, len(ri.Switches))
			}
		case plan.RemoteOperand:
			if r.Rank < 0 || r.Rank >= n {
				return fmt.Errorf("%s %d: owner rank %d out of range [0:%d]", what, i, r.Rank, n)
			}
		}
		if r.Buffer > plan.Scratch {
			return fmt.Errorf("%s %d: bad buffer type %v", what, i, r.Buffer)
		}
		return nil
	}
	for i, r := range op.Src {
		if err := check("source", i, r, plan.SrcKind(op.Type, i)); err != nil {
			return err
		}
	}
	for i, r := range op.Dst {
		if err := check("destination", i, r, plan.DstKind(op.Type, i)); err != nil {
			return err
		}
	}
	return nil
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

// CheckOperands resolves every data op of the thread blocks of v.Ranks,
// every pipeline iteration included, against v (Operands): each operand
// must lie in the buffer or the scratch window it accesses, reductions
// must cover whole elements, and LL packets must be 8-byte aligned in
// memory. inst must have passed Validate with opts. The error names the
// rank, thread block, op and pipeline iteration; a launch that fails it
// has not started.
func CheckOperands(inst *Instance, opts Options, v LaunchView) error {
	if len(v.Bufs) != len(inst.Ranks) {
		return fmt.Errorf("launch: got buffers for %d ranks, want %d", len(v.Bufs), len(inst.Ranks))
	}
	return checkOperands(inst, NewOperands(inst, opts, v), v)
}

// checkOperands is CheckOperands with the operand resolution ops of v.
func checkOperands(inst *Instance, ops *Operands, v LaunchView) error {
	if len(v.Bufs) != len(inst.Ranks) {
		return fmt.Errorf("launch: got buffers for %d ranks, want %d", len(v.Bufs), len(inst.Ranks))
	}
	if v.Ranks == nil {
		for r := range inst.Ranks {
			if err := ops.Rank(r).check(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range v.Ranks {
		if r < 0 || r >= len(inst.Ranks) {
			return fmt.Errorf("launch: rank %d out of range [0:%d]", r, len(inst.Ranks))
		}
		if err := ops.Rank(r).check(); err != nil {
			return err
		}
	}
	return nil
}

// check resolves every data op of the rank's thread blocks. Without a
// scratch ring every pipeline iteration touches a part of what the whole
// operand spans, so one check at offset 0 with no unit covers them all;
// with a ring, each iteration is checked.
func (ro *RankOperands) check() error {
	ri := ro.ri
	for t := range ri.TBs {
		tb := &ri.TBs[t]
		for i := range tb.Ops {
			op := &tb.Ops[i]
			if op.Type != plan.OpPipeline {
				if op.Type.IsData() {
					if _, err := ro.Resolve(op, 0, NoUnit, nil); err != nil {
						return operandError(ri.Rank, tb, op, -1, err)
					}
				}
				continue
			}
			iters, unit := min(op.Iterations, 1), uint64(NoUnit)
			if ro.slot > 0 {
				iters, unit = op.Iterations, op.UnitSize
			}
			for it := 0; it < iters; it++ {
				o := uint64(it) * unit
				if unit == NoUnit {
					o = 0
				}
				for j := range op.Body {
					b := &op.Body[j]
					if !b.Type.IsData() {
						continue
					}
					if _, err := ro.Resolve(b, o, unit, nil); err != nil {
						if unit == NoUnit {
							it = -1
						}
						return operandError(ri.Rank, tb, b, it, err)
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
