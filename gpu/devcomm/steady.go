package devcomm

import (
	"fmt"

	"github.com/mscclgo/mscclgo/gpu"
)

// steady is a call of an open session in a communicator with a mailbox.
func (c *Comm) steady(cs *commSession, seq uint64, call Call) error {
	fail := func(err error) error {
		err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
		c.refuse(seq, call, err)
		return err
	}
	if err := cs.makeRoom(c.waitBound(cs)); err != nil {
		return fail(err)
	}
	if err := checkUser(cs.l, c.rank, call.In, call.Out); err != nil {
		return fail(err)
	}
	if cs.sigDesc != call.Desc {
		// (The key is the session's own.)
		cs.sig, cs.sigDesc = signature(call.Key, call.Desc), call.Desc
	}
	rec := callRecord{sig: cs.sig, desc: call.Desc}
	for i, p := range []gpu.DevPtr{call.In, call.Out} {
		sl, err := c.reg.slot(p)
		if err != nil {
			return fail(err)
		}
		rec.bufs[i] = sl
	}
	c.tellRemote(seq, rec)
	if err := c.mb.publish(c.rank, seq, rec, c.peers(), c.aliveFn, c.cfg.SetupTimeout); err != nil {
		return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
	}
	if cs.ss.Gated() {
		return c.launch(cs, call, nil, peerCall{ok: true, seq: seq, rec: rec})
	}
	// The driver cannot hold its stream for the host: the peers' records
	// are read here (through memory).
	bufs, err := c.resolveCall(seq, rec, call.Desc)
	if err != nil {
		c.fail(err)
		return err
	}
	return c.launch(cs, call, bufs, peerCall{})
}

// resolveCall is resolve, its error naming the call.
func (c *Comm) resolveCall(seq uint64, rec callRecord, desc string) ([][2]gpu.DevPtr, error) {
	bufs, err := c.resolve(seq, rec)
	if err != nil {
		err = fmt.Errorf("%s: rank %d: call %d (%s): %w", c.cfg.Name, c.rank, seq, desc, err)
	}
	return bufs, err
}

// resolve waits (at most the set-up timeout; Abort ends it) for every
// peer's record of call seq, checks that every rank made the same call,
// and returns every rank's input and output as this rank addresses them,
// mapping peers' new allocations.
//
// A launch queued behind one that failed fails at once (the
// communicator's asynchronous error), and so does a wait for a peer that
// ended its communicator before it made the call: a lost or departed
// peer fails every queued call together, not one timeout each.
func (c *Comm) resolve(seq uint64, mine callRecord) ([][2]gpu.DevPtr, error) {
	if err := c.AsyncError(); err != nil {
		return nil, fmt.Errorf("the communicator failed earlier: %w", err)
	}
	all := make([]callRecord, c.n)
	all[c.rank] = mine
	for r := range c.n {
		if r == c.rank {
			continue
		}
		if err := c.waitRecord(r, seq, all); err != nil {
			return nil, err
		}
	}
	c.mb.markConsumed(c.rank, seq)
	if err := sameCall(all); err != nil {
		return nil, err
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	out := make([][2]gpu.DevPtr, c.n)
	for r, rec := range all {
		if !c.local(r) {
			continue // the kernel does not address its buffers
		}
		for i, b := range rec.bufs {
			p, err := c.reg.address(r, b)
			if err != nil {
				return nil, err
			}
			out[r][i] = p
		}
	}
	return out, nil
}

// waitRecord waits (at most the set-up timeout; Abort ends it) for rank
// r's record of call seq in the mailbox, and puts it in all[r].
func (c *Comm) waitRecord(r int, seq uint64, all []callRecord) error {
	var rerr error
	err := c.mb.waitFor(func() bool {
		rec, ok, err := c.mb.read(r, seq)
		if err != nil {
			rerr = err
			return true
		}
		if ok {
			all[r] = rec
		} else if err := c.mb.gone(r, seq); err != nil {
			rerr = err
			return true
		}
		return ok
	}, c.aliveFn, c.cfg.SetupTimeout)
	if rerr != nil {
		return rerr
	}
	if err != nil {
		return fmt.Errorf("rank %d has not made the call: %w", r, err)
	}
	return nil
}

// sameCall checks that no rank refused the call and every rank made the
// same one (by signature).
func sameCall(all []callRecord) error {
	for r, rec := range all {
		if rec.refused {
			return fmt.Errorf("rank %d refused it: %s", r, rec.desc)
		}
	}
	for r := 1; r < len(all); r++ {
		if all[r].sig != all[0].sig {
			return fmt.Errorf("mismatched calls: rank 0 called %s, rank %d called %s", all[0].desc, r, all[r].desc)
		}
	}
	return nil
}
