package cpu

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
)

// validate checks once, at Open, everything about an instance that does
// not depend on the caller's buffers: rank numbering, channel pairing,
// switch groups, and every op's channels, semaphores, barrier, operand
// counts and kinds. Launch then never indexes out of range; buffer bounds
// are checked per launch (launch.precheck).
func validate(inst *executor.Instance, opts executor.Options) error {
	if inst == nil {
		return errors.New("cpu: open: nil instance")
	}
	if opts.DType == nil {
		return errors.New("cpu: open: Options.DType is nil")
	}
	if sz := opts.DType.Size(); sz <= 0 || sz > 16 {
		return fmt.Errorf("cpu: open: data type %s has element size %d", opts.DType.Name(), sz)
	}
	n := len(inst.Ranks)
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		if ri.Rank != r {
			return fmt.Errorf("cpu: open: Ranks[%d] is rank %d", r, ri.Rank)
		}
		for _, tc := range []struct {
			t   executor.ChannelType
			chs []executor.ChannelEnd
		}{{executor.Memory, ri.MemoryChannels}, {executor.Port, ri.PortChannels}} {
			for c, end := range tc.chs {
				if end.Peer < 0 || end.Peer >= n {
					return fmt.Errorf("cpu: open: rank %d %s channel %d: peer %d out of range [0:%d]", r, tc.t, c, end.Peer, n)
				}
				if end.PeerIndex < 0 {
					continue
				}
				peer := peerChannels(inst, end.Peer, tc.t)
				if end.PeerIndex >= len(peer) {
					return fmt.Errorf("cpu: open: rank %d %s channel %d: peer channel %d out of range (rank %d has %d)", r, tc.t, c, end.PeerIndex, end.Peer, len(peer))
				}
				if back := peer[end.PeerIndex]; back.Peer != r || back.PeerIndex != c {
					return fmt.Errorf("cpu: open: rank %d %s channel %d pairs with rank %d channel %d, which pairs with rank %d channel %d", r, tc.t, c, end.Peer, end.PeerIndex, back.Peer, back.PeerIndex)
				}
			}
		}
		for g, sw := range ri.Switches {
			if sw.Buffer > executor.Scratch {
				return fmt.Errorf("cpu: open: rank %d switch channel %d: bad buffer type %v", r, g, sw.Buffer)
			}
			seen := map[int]bool{}
			for _, m := range sw.Ranks {
				if m < 0 || m >= n || seen[m] {
					return fmt.Errorf("cpu: open: rank %d switch channel %d: bad member rank %d", r, g, m)
				}
				seen[m] = true
			}
			if !seen[r] {
				return fmt.Errorf("cpu: open: rank %d switch channel %d: rank %d is not a member of %v", r, g, r, sw.Ranks)
			}
		}
		for t := range ri.TBs {
			for i := range ri.TBs[t].Ops {
				op := &ri.TBs[t].Ops[i]
				if err := validateOp(inst, ri, op, false); err != nil {
					return fmt.Errorf("cpu: open: rank %d tb %d %s: %w", r, ri.TBs[t].ID, opName(op), err)
				}
			}
		}
	}
	return nil
}

func peerChannels(inst *executor.Instance, rank int, t executor.ChannelType) []executor.ChannelEnd {
	if t == executor.Port {
		return inst.Ranks[rank].PortChannels
	}
	return inst.Ranks[rank].MemoryChannels
}

// operandCounts says how many sources and destinations an op needs: at
// least minSrc/minDst, at most maxSrc/maxDst (-1: any).
func operandCounts(t executor.OpType) (minSrc, maxSrc, minDst, maxDst int) {
	switch t {
	case executor.OpCopy, executor.OpCopyPacket, executor.OpUnpackPacket,
		executor.OpMultiLoadReduceStore, executor.OpMultiStore, executor.OpMultiStorePacket:
		return 1, 1, 1, 1
	case executor.OpPut, executor.OpPutWithSignal, executor.OpPutWithSignalAndFlush, executor.OpPutPacket:
		return 1, -1, 1, -1
	case executor.OpReadPutPacket:
		return 1, 1, 1, -1
	case executor.OpGet:
		return 1, -1, 1, -1
	case executor.OpReduce, executor.OpReadReduce, executor.OpReducePacket:
		return 1, -1, 1, 1
	case executor.OpReduceSend, executor.OpReadReduceSend, executor.OpReduceSendPacket:
		return 1, -1, 1, -1
	case executor.OpReduceCopyPacket:
		return 1, -1, 2, 2
	case executor.OpReduceCopySendPacket:
		return 1, -1, 2, -1
	}
	return 0, -1, 0, -1
}

func isDataOp(t executor.OpType) bool {
	switch t {
	case executor.OpNop, executor.OpBarrier, executor.OpSignal, executor.OpRelaxedSignal,
		executor.OpWait, executor.OpRelaxedWait, executor.OpFlush,
		executor.OpSemAcquire, executor.OpSemRelease, executor.OpPipeline:
		return false
	}
	return true
}

func validateOp(inst *executor.Instance, ri *executor.RankInstance, op *executor.OpInstance, inPipeline bool) error {
	n := len(inst.Ranks)
	chans := func() error {
		var tab []executor.ChannelEnd
		switch op.ChannelType {
		case executor.Memory:
			tab = ri.MemoryChannels
		case executor.Port:
			tab = ri.PortChannels
		case executor.Switch:
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
	case executor.OpNop:
		return nil
	case executor.OpBarrier:
		if op.BarrierID < 0 || op.BarrierID > executor.MaxBarrierID {
			return fmt.Errorf("barrier id %d out of range [0:%d]", op.BarrierID, executor.MaxBarrierID+1)
		}
		if op.NumThreadBlocks < 0 {
			return fmt.Errorf("negative thread block count %d", op.NumThreadBlocks)
		}
		return nil
	case executor.OpSignal, executor.OpRelaxedSignal, executor.OpWait, executor.OpRelaxedWait, executor.OpFlush:
		if op.ChannelType == executor.NoChannel {
			return errors.New("no channel type")
		}
		return nil
	case executor.OpSemAcquire, executor.OpSemRelease:
		for _, id := range op.Semaphores {
			if id < 0 || id >= len(ri.Semaphores) {
				return fmt.Errorf("semaphore %d out of range [0:%d]", id, len(ri.Semaphores))
			}
		}
		return nil
	case executor.OpPipeline:
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
				return fmt.Errorf("%s: %w", opName(b), err)
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
	case executor.OpPut, executor.OpPutWithSignal, executor.OpPutWithSignalAndFlush, executor.OpPutPacket:
		if len(op.Src) < len(op.Dst) {
			return fmt.Errorf("%d source(s) for %d destination(s)", len(op.Src), len(op.Dst))
		}
	case executor.OpGet:
		if len(op.Dst) < len(op.Src) {
			return fmt.Errorf("%d destination(s) for %d source(s)", len(op.Dst), len(op.Src))
		}
	}
	if usesPort(op) && len(op.Channels) < len(op.Dst) {
		return fmt.Errorf("%d port channel(s) for %d destination(s)", len(op.Channels), len(op.Dst))
	}
	check := func(what string, i int, r executor.Region, rl executor.OperandKind) error {
		switch rl {
		case executor.SwitchOperand:
			if r.Switch < 0 || r.Switch >= len(ri.Switches) {
				return fmt.Errorf("%s %d: switch channel %d out of range [0:%d]", what, i, r.Switch, len(ri.Switches))
			}
		case executor.RemoteOperand:
			if r.Rank < 0 || r.Rank >= n {
				return fmt.Errorf("%s %d: owner rank %d out of range [0:%d]", what, i, r.Rank, n)
			}
		}
		if r.Buffer > executor.Scratch {
			return fmt.Errorf("%s %d: bad buffer type %v", what, i, r.Buffer)
		}
		return nil
	}
	for i, r := range op.Src {
		if err := check("source", i, r, executor.SrcKind(op.Type, i)); err != nil {
			return err
		}
	}
	for i, r := range op.Dst {
		if err := check("destination", i, r, executor.DstKind(op.Type, i)); err != nil {
			return err
		}
	}
	return nil
}

// usesPort reports whether a data op goes through the proxy.
func usesPort(op *executor.OpInstance) bool {
	if op.ChannelType != executor.Port {
		return false
	}
	switch op.Type {
	case executor.OpPut, executor.OpPutWithSignal, executor.OpPutWithSignalAndFlush,
		executor.OpPutPacket, executor.OpReadPutPacket:
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

// opName is the report name of an op: its path and plan name, "op 7 wait".
func opName(op *executor.OpInstance) string { return op.Describe() }
