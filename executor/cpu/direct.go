package cpu

// direct.go: launches of a multi-process rank on the caller's own input
// or output (RankSession.LaunchDirect), where no other rank reaches that
// buffer, so that the caller's data need not be copied into the shared
// mapping and back.

import (
	"context"
	"fmt"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/plan"
)

// directBuffers reports which of rank's input and output only the rank
// itself touches in p: no other rank names them in its remote buffers
// (memory or port channels), no switch channel spans them, and, for the
// input of an out-of-place plan, none of the rank's own ops writes it
// (the caller's input stays as it was). An in-place plan's input and
// output are one buffer: both or neither.
func directBuffers(p *plan.Plan, rank int) (in, out bool) {
	var reached [plan.NumBufferTypes]bool
	for g := range p.GPUs {
		gpu := &p.GPUs[g]
		for _, rb := range gpu.RemoteBuffers {
			if rb.Rank == rank && gpu.ID != rank {
				reached[rb.Type] = true
			}
		}
		for _, ch := range gpu.Channels {
			if ch.Type == plan.Switch {
				reached[ch.Buffer] = true
			}
		}
	}
	if p.Inplace {
		both := !reached[plan.Input] && !reached[plan.Output]
		return both, both
	}
	writes := false
	for g := range p.GPUs {
		if p.GPUs[g].ID != rank {
			continue
		}
		for _, tb := range p.GPUs[g].ThreadBlocks {
			writes = writes || writesLocal(tb.Ops, plan.Input)
		}
	}
	return !reached[plan.Input] && !writes, !reached[plan.Output]
}

// writesLocal reports whether an op of ops (pipeline bodies included)
// has a destination in the rank's own buffer bt.
func writesLocal(ops []plan.Op, bt plan.BufferType) bool {
	for i := range ops {
		for _, d := range ops[i].Dst {
			if d.Kind == plan.LocalOperand && d.Type == bt {
				return true
			}
		}
		if writesLocal(ops[i].Ops, bt) {
			return true
		}
	}
	return false
}

// Direct reports whether LaunchDirect may take this rank's input and
// output from the caller (directBuffers): each only where no other rank
// reaches it.
func (r *RankSession) Direct() (in, out bool) { return r.direct[0], r.direct[1] }

// LaunchDirect is Launch with the rank's input taken from in and its
// output from out instead of the session's buffers (Buffers), each where
// it is not nil: the run reads the caller's input where it is and writes
// its output there, no copy in or out. Each must have its session
// buffer's length, lie at the same offset from a 64-byte boundary, and
// be one that Direct allows; an in-place plan takes both or neither,
// aliased as its layout places them (the input at the rank's block of
// the output for allgather, the output at the rank's block of the input
// for reducescatter, the same bytes otherwise). The caller keeps them
// untouched until LaunchDirect returns.
func (r *RankSession) LaunchDirect(ctx context.Context, in, out []byte) error {
	if in == nil && out == nil {
		return r.Launch(ctx)
	}
	if err := r.checkDirect(in, out); err != nil {
		return err
	}
	m := r.s.mp
	ctx, stop := rankwire.Merge(ctx, m.ctx)
	defer stop()
	bufs := make([]executor.RankBuffers, len(r.s.ranks))
	bufs[m.rank] = executor.RankBuffers{Input: in, Output: out}
	return r.s.Launch(ctx, bufs)
}

// checkDirect is LaunchDirect's refusal of in and out, nil where it
// takes them.
func (r *RankSession) checkDirect(in, out []byte) error {
	if r.s.inst.Plan.Inplace && (in == nil) != (out == nil) {
		return fmt.Errorf("cpu: rank %d: plan %s is in place: a direct launch takes its input and output together", r.Rank(), r.s.inst.Plan.Name)
	}
	for bt, c := range [2]struct {
		mine, own []byte
		ok        bool
	}{{in, r.bufs.Input, r.direct[0]}, {out, r.bufs.Output, r.direct[1]}} {
		if c.mine == nil {
			continue
		}
		name := plan.BufferType(bt).Name()
		switch {
		case !c.ok:
			return fmt.Errorf("cpu: rank %d: plan %s: another rank reaches this rank's %s (or the rank writes its input): it cannot be the caller's", r.Rank(), r.s.inst.Plan.Name, name)
		case len(c.mine) != len(c.own):
			return fmt.Errorf("cpu: rank %d: plan %s: a direct %s of %d bytes, the session's has %d", r.Rank(), r.s.inst.Plan.Name, name, len(c.mine), len(c.own))
		case len(c.own) > 0 && (addrOf(c.mine)-addrOf(c.own))%64 != 0:
			return fmt.Errorf("cpu: rank %d: plan %s: a direct %s at %#x, %d bytes from the session's 64-byte alignment", r.Rank(), r.s.inst.Plan.Name, name, addrOf(c.mine), (addrOf(c.mine)-addrOf(c.own))%64)
		}
	}
	return nil
}

// Copy copies src into dst (of one length, apart), as the caller stages
// a buffer that peers reach into the session's buffers and back out
// between launches: split over the rank's share of the host's
// goroutines (the session's bound on a large copy op, splitParts: parts
// of at least splitPart bytes), so that a large call's staging is
// not one core's memcpy where the rank has more. It must not run during
// a launch of the session.
func (r *RankSession) Copy(dst, src []byte) {
	parts := splitParts(r.s.split.threads, 1, len(src))
	if parts <= 1 || len(dst) != len(src) {
		copy(dst, src)
		return
	}
	rs := splitRanges(len(src), parts)
	var wg sync.WaitGroup
	for _, p := range rs[1:] {
		wg.Go(func() { copy(dst[p[0]:p[1]], src[p[0]:p[1]]) })
	}
	copy(dst[rs[0][0]:rs[0][1]], src[rs[0][0]:rs[0][1]])
	wg.Wait()
}
