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
		sl, err := c.slot(p)
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

// slot describes the buffer at p for the peers: its address (peers in
// this process use it as it is), its allocation and, for peers in other
// processes, the allocation's index in the mailbox's table, where its
// IPC handle was put once.
func (c *Comm) slot(p gpu.DevPtr) (slot, error) {
	sl := slot{ptr: uint64(p), base: uint64(p), alloc: -1}
	base, size, ok, err := c.io.AddressRange(p)
	if err != nil {
		return sl, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		sl.base, sl.size = uint64(base), size
	}
	if c.inProcess() {
		// The peers use the address as it is: the registration is only
		// counted, once per allocation.
		c.regMu.Lock()
		defer c.regMu.Unlock()
		c.seen(gpu.DevPtr(sl.base), sl.size)
		return sl, nil
	}
	if !ok {
		return sl, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if c.ider != nil {
		if sl.id, err = c.ider.AllocID(base); err != nil {
			return sl, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if a, have := c.shared[base]; have && a.id == sl.id {
		sl.alloc = a.idx
		return sl, nil
	}
	h, err := c.io.IpcGet(base)
	if err != nil {
		return sl, fmt.Errorf("exporting the allocation at %#x: %w", uint64(base), err)
	}
	idx, err := c.mb.register(c.rank, uint64(base), size, sl.id, h)
	if err != nil {
		return sl, err
	}
	c.shared[base] = sharedAlloc{id: sl.id, idx: idx}
	c.regs++
	sl.alloc = idx
	return sl, nil
}

// seen counts an own allocation the first time same-process peers are
// shown it. The caller holds regMu.
func (c *Comm) seen(base gpu.DevPtr, size uint64) {
	k := peerAlloc{rank: c.rank, base: base, size: size}
	if _, ok := c.mapped[k]; !ok {
		c.mapped[k] = base
		c.regs++
	}
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
	c.regMu.Lock()
	defer c.regMu.Unlock()
	out := make([][2]gpu.DevPtr, c.n)
	for r, rec := range all {
		if !c.local(r) {
			continue // the kernel does not address its buffers
		}
		for i, b := range rec.bufs {
			p, err := c.address(r, b)
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

// address is the buffer of rank r's slot b as this rank addresses it:
// its own and same-process peers' as they are, other processes' through
// their allocation's mapping here, made (from the handle in the
// mailbox's table) at its first use. A mapping that the new allocation
// overlaps was freed by the peer: it is unmapped at Close, since a
// launch may still read it. The caller holds regMu.
func (c *Comm) address(r int, b slot) (gpu.DevPtr, error) {
	if r == c.rank || c.procs[r] == c.self {
		return gpu.DevPtr(b.ptr), nil
	}
	k := peerAlloc{r, gpu.DevPtr(b.base), b.size, b.id}
	p, ok := c.mapped[k]
	if !ok {
		h, err := c.mb.handle(r, b.alloc)
		if err != nil {
			return 0, fmt.Errorf("rank %d's buffer %#x: %w", r, b.ptr, err)
		}
		c.stale = append(c.stale, c.dropOverlapped(k)...)
		if p, err = c.io.IpcOpen(h); err != nil {
			return 0, fmt.Errorf("mapping rank %d's allocation at %#x: %w", r, b.base, err)
		}
		c.mapped[k] = p
		c.regs++
	}
	return p + gpu.DevPtr(b.ptr-b.base), nil
}

// dropOverlapped forgets the mappings of k's rank that k overlaps (freed
// allocations whose addresses the peer used again) and returns them, for
// unmapping. The caller holds regMu.
func (c *Comm) dropOverlapped(k peerAlloc) []gpu.DevPtr {
	var gone []gpu.DevPtr
	for old, q := range c.mapped {
		if old.rank == k.rank && old.base < k.base+gpu.DevPtr(k.size) && k.base < old.base+gpu.DevPtr(old.size) {
			gone = append(gone, q)
			delete(c.mapped, old)
		}
	}
	return gone
}
