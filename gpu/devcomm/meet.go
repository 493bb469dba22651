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
	var pre *opened
	if capturing {
		// Every rank refuses the same plan here, before meeting.
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
				err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
				c.refuse(seq, call, err)
				return err
			}
		}
	}
	if cs != nil {
		if err := cs.makeRoom(c.waitBound(cs)); err != nil {
			err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
			c.refuse(seq, call, err)
			return err
		}
	}
	mine := callRec{Key: call.Key, Desc: call.Desc}
	if cs != nil {
		if err := checkUser(cs.l, c.rank, call.In, call.Out); err != nil {
			mine.Err = err.Error()
		}
	}
	newExports := map[gpu.DevPtr]uint64{}
	c.regMu.Lock()
	for i, p := range []gpu.DevPtr{call.In, call.Out} {
		if mine.Err != "" {
			break
		}
		rec, err := c.describe(p, newExports)
		if err != nil {
			mine.Err = err.Error()
			break
		}
		mine.Bufs[i] = rec
	}
	c.regMu.Unlock()
	if c.mb != nil {
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
		defer c.mb.markConsumed(c.rank, seq)
	}
	gctx, cancel := context.WithTimeoutCause(ctx, c.cfg.SetupTimeout,
		fmt.Errorf("rank %d: %s: not every rank made the call within %v", c.rank, call.Desc, c.cfg.SetupTimeout))
	defer cancel()
	all, err := rankwire.GatherSetup(gctx, c.w.Net, mine, func(r *callRec) string { return r.Err }, call.Desc)
	if err != nil {
		if cerr := context.Cause(gctx); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
		return fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	if err := mismatch(all); err != nil {
		return fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	c.regMu.Lock()
	for p, id := range newExports {
		c.exported[p] = id
		c.regs++
	}
	bases, stale, regErr := c.peerBuffers(all)
	c.regMu.Unlock()
	if err := c.unmap(stale); err != nil {
		regErr = errors.Join(regErr, fmt.Errorf("rank %d: %w", c.rank, err))
	}
	if cs == nil {
		// Every rank opens the instance's session at this call: its
		// set-up's all-gathers also tell every rank of a registration
		// that failed on one.
		var err error
		cs, err = c.open(ctx, call, regErr, pre)
		if err != nil {
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

// describe returns the record of the buffer at p: its allocation, and the
// allocation's IPC handle when peers in other processes have not had it.
func (c *Comm) describe(p gpu.DevPtr, newExports map[gpu.DevPtr]uint64) (bufRec, error) {
	rec := bufRec{Ptr: p, Base: p}
	base, size, ok, err := c.io.AddressRange(p)
	if err != nil {
		return rec, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		rec.Base, rec.Size = base, size
	}
	if c.inProcess() {
		return rec, nil
	}
	if !ok {
		return rec, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if c.ider != nil {
		if rec.ID, err = c.ider.AllocID(base); err != nil {
			return rec, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	// An allocation at a registered one's address with another id
	// replaced a freed one: the peers get its handle.
	if id, have := c.exported[base]; have && id == rec.ID {
		return rec, nil
	}
	if id, have := newExports[base]; have && id == rec.ID {
		return rec, nil
	}
	h, err := c.io.IpcGet(base)
	if err != nil {
		return rec, fmt.Errorf("exporting the allocation at %#x: %w", uint64(base), err)
	}
	rec.Handle = &h
	newExports[base] = rec.ID
	return rec, nil
}

// peerBuffers returns every rank's input and output as this rank
// addresses them (0 for ranks on other hosts), mapping the allocations
// of same-host peers in other processes on first use. A peer's new
// allocation that overlaps one mapped here (freed, and its address used
// again) replaces the old one, which is returned for unmapping. The
// caller holds regMu.
func (c *Comm) peerBuffers(all []callRec) ([][2]gpu.DevPtr, []gpu.DevPtr, error) {
	out := make([][2]gpu.DevPtr, c.n)
	var errs []string
	var stale []gpu.DevPtr
	for r, rec := range all {
		if c.w.Host[r] != c.w.Host[c.rank] {
			continue
		}
		for i, b := range rec.Bufs {
			if r == c.rank || c.procs[r] == c.self {
				out[r][i] = b.Ptr
				if r == c.rank && c.inProcess() {
					c.seen(b.Base, b.Size)
				}
				continue
			}
			k := peerAlloc{r, b.Base, b.Size, b.ID}
			p, ok := c.mapped[k]
			if !ok && b.Handle == nil {
				errs = append(errs, fmt.Sprintf("rank %d's buffer %#x is in an allocation (%#x, %d bytes) it did not register", r, uint64(b.Ptr), uint64(b.Base), b.Size))
				continue
			}
			if !ok {
				for old, q := range c.mapped {
					if old.rank == r && old.base < k.base+gpu.DevPtr(k.size) && k.base < old.base+gpu.DevPtr(old.size) {
						stale = append(stale, q)
						delete(c.mapped, old)
					}
				}
				var err error
				if p, err = c.io.IpcOpen(*b.Handle); err != nil {
					errs = append(errs, fmt.Sprintf("mapping rank %d's allocation at %#x: %v", r, uint64(b.Base), err))
					continue
				}
				c.mapped[k] = p
				c.regs++
			}
			out[r][i] = p + (b.Ptr - b.Base)
		}
	}
	if len(errs) > 0 {
		return nil, stale, fmt.Errorf("rank %d: %s", c.rank, strings.Join(errs, "; "))
	}
	return out, stale, nil
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
