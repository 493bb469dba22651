package devcomm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
)

// meet is a call whose ranks meet over the bootstrap: the first call of
// a plan instance, a capture, a communicator without a mailbox. Its
// record also goes to the mailbox and the ranks on other hosts, for
// peers whose same call (by sequence number) is in the steady state.
func (c *Comm) meet(ctx context.Context, cs *commSession, seq uint64, call Call, capturing bool) error {
	// Abort (another thread) ends a call waiting for its peers.
	ctx, stop := rankwire.Merge(ctx, c.ctx)
	defer stop()
	pre, err := c.beforeMeeting(cs, call, capturing)
	if err != nil {
		err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
		c.refuse(seq, call, err)
		return err
	}
	mine, newExports := c.myRecord(cs, call)
	if c.mb != nil {
		if err := c.publishMeeting(seq, call, mine); err != nil {
			return err
		}
		defer c.mb.markConsumed(c.rank, seq)
	}
	all, err := c.gatherCall(ctx, call, mine)
	if err != nil {
		return err
	}
	bases, regErr := c.registerMet(all, newExports)
	if cs == nil {
		// Every rank opens the instance's session at this call: its
		// set-up's all-gathers also tell every rank of a registration
		// that failed on one.
		if cs, err = c.open(ctx, call, regErr, pre); err != nil {
			return err
		}
	} else if anyHandle(all) {
		// New registrations: every rank says whether its mapping worked.
		if _, err := c.gather(ctx, regErr, "registering buffers of "+call.Desc); err != nil {
			return err
		}
	} else if regErr != nil {
		return regErr
	}
	if capturing {
		return c.capture(cs, call, bases)
	}
	return c.launch(cs, call, bases, peerCall{})
}

// beforeMeeting refuses, before the ranks meet, a capture of a plan that
// cannot be captured (every rank refuses the same plan: pre is the
// instance made for it, when its session is not open), and waits for
// what the session's next launch needs (makeRoom).
func (c *Comm) beforeMeeting(cs *commSession, call Call, capturing bool) (pre *opened, err error) {
	if capturing {
		var inst *executor.Instance
		if cs != nil {
			inst = cs.ss.Instance()
		} else {
			pre = &opened{}
			pre.inst, pre.l, pre.opts, pre.err = call.openCall()
			inst = pre.inst
		}
		if inst != nil {
			if err := capturable(inst); err != nil {
				return pre, err
			}
		}
	}
	if cs != nil {
		if err := cs.makeRoom(c.waitBound(cs)); err != nil {
			return pre, err
		}
	}
	return pre, nil
}

// myRecord is this rank's record of a call that meets: its buffers, with
// the handles of allocations new to the peers in other processes
// (newExports, counted once the peers have them), or why the call is
// refused here.
func (c *Comm) myRecord(cs *commSession, call Call) (callRec, map[gpu.DevPtr]uint64) {
	mine := callRec{Key: call.Key, Desc: call.Desc}
	newExports := map[gpu.DevPtr]uint64{}
	if cs != nil {
		if err := checkUser(cs.l, c.rank, call.In, call.Out); err != nil {
			mine.Err = err.Error()
			return mine, newExports
		}
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	for i, p := range []gpu.DevPtr{call.In, call.Out} {
		rec, err := c.reg.describe(p, newExports)
		if err != nil {
			mine.Err = err.Error()
			break
		}
		mine.Bufs[i] = rec
	}
	return mine, newExports
}

// publishMeeting puts the record of a call that meets in the mailbox
// and queues it for the ranks on other hosts, for the peers whose same
// call is in the steady state.
func (c *Comm) publishMeeting(seq uint64, call Call, mine callRec) error {
	rec := callRecord{sig: signature(call.Key, call.Desc), desc: call.Desc, refused: mine.Err != ""}
	if mine.Err != "" {
		rec.desc += ": " + mine.Err
	}
	for i := range rec.bufs {
		rec.bufs[i].alloc = -1 // never read: this call's peers meet it here
	}
	c.tellRemote(seq, rec)
	if err := c.mb.publish(c.rank, seq, rec, c.peers(), c.aliveFn, c.cfg.SetupTimeout); err != nil {
		return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
	}
	return nil
}

// gatherCall all-gathers every rank's record of the call, within the
// set-up timeout, and checks that every rank made the same call.
func (c *Comm) gatherCall(ctx context.Context, call Call, mine callRec) ([]callRec, error) {
	gctx, cancel := context.WithTimeoutCause(ctx, c.cfg.SetupTimeout,
		fmt.Errorf("rank %d: %s: not every rank made the call within %v", c.rank, call.Desc, c.cfg.SetupTimeout))
	defer cancel()
	all, err := rankwire.GatherSetup(gctx, c.w.Net, mine, func(r *callRec) string { return r.Err }, call.Desc)
	if err != nil {
		if cerr := context.Cause(gctx); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
		return nil, fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	if err := mismatch(all); err != nil {
		return nil, fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	return all, nil
}

// registerMet counts the exports the peers now have, and returns every
// rank's buffers as this rank addresses them (peerBuffers), unmapping the
// peers' freed allocations; regErr is this rank's registration failure.
func (c *Comm) registerMet(all []callRec, newExports map[gpu.DevPtr]uint64) (bases [][2]gpu.DevPtr, regErr error) {
	c.reg.mu.Lock()
	for p, id := range newExports {
		c.reg.exported[p] = id
		c.reg.regs++
	}
	bases, stale, regErr := c.reg.peerBuffers(all)
	c.reg.mu.Unlock()
	if err := c.unmap(stale); err != nil {
		regErr = errors.Join(regErr, fmt.Errorf("rank %d: %w", c.rank, err))
	}
	return bases, regErr
}

// mismatch names the first rank whose call differs from rank 0's.
func mismatch(all []callRec) error {
	for r := 1; r < len(all); r++ {
		if all[r].Desc == all[0].Desc && all[r].Key != all[0].Key {
			// The same call for another plan instance or reduction
			// (sessionKey).
			return fmt.Errorf("mismatched calls: rank 0 and rank %d called %s for different plan instances or reductions (keys %q and %q)",
				r, all[0].Desc, all[0].Key, all[r].Key)
		}
		if all[r].Key != all[0].Key || all[r].Desc != all[0].Desc {
			return fmt.Errorf("mismatched calls: rank 0 called %s, rank %d called %s", all[0].Desc, r, all[r].Desc)
		}
	}
	return nil
}

func anyHandle(all []callRec) bool {
	for _, r := range all {
		for _, b := range r.Bufs {
			if b.Handle != nil {
				return true
			}
		}
	}
	return false
}

// gather all-gathers an outcome (err nil: success) within the set-up
// timeout; every rank gets the same error.
func (c *Comm) gather(ctx context.Context, err error, step string) ([]commProc, error) {
	mine := commProc{Proc: c.self}
	if err != nil {
		mine.Err = err.Error()
	}
	gctx, cancel := context.WithTimeout(ctx, c.cfg.SetupTimeout)
	defer cancel()
	all, gerr := rankwire.GatherSetup(gctx, c.w.Net, mine, func(p *commProc) string { return p.Err }, step)
	if gerr != nil {
		return nil, fmt.Errorf("%s: %w", c.cfg.Name, gerr)
	}
	return all, nil
}

// unmap unmaps peers' freed allocations once the launches that may still
// read them have ended (each waited for at most the deadlock timeout and
// a margin).
func (c *Comm) unmap(stale []gpu.DevPtr) error {
	if len(stale) == 0 {
		return nil
	}
	for key, cs := range c.sessions {
		if err := cs.wait(c.waitBound(cs)); err != nil {
			return fmt.Errorf("unmapping a peer's freed allocation (its mapping stays until the process ends): %s: %w", key, err)
		}
	}
	var errs []string
	for _, p := range stale {
		if err := c.io.IpcClose(p); err != nil {
			errs = append(errs, fmt.Sprintf("unmapping a peer's freed allocation at %#x: %v", uint64(p), err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
