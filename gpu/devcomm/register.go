package devcomm

// register.go holds a rank's registrations of its buffers with its peers
// and of theirs here: an allocation is registered once, by address range
// (the allocation that holds a buffer), and the registrations are made
// both by calls (meet.go, steady.go's slot) and by a steady call's
// resolution on its stream (steady.go's resolve).

import (
	"fmt"
	"strings"
	"sync"

	"github.com/mscclgo/mscclgo/gpu"
)

// registry is a rank's registrations. Its fields above mu are set once,
// when the communicator opens (mb once its mailbox is mapped).
type registry struct {
	rank   int
	n      int
	host   []int            // every rank's host (rankwire.World.Host)
	io     gpu.StreamDriver // the driver that exports and maps user buffers
	ider   gpu.AllocIDer    // io, when it names allocations; else nil
	self   string           // this process (gpu.ProcessName)
	procs  []string         // every rank's process
	inProc bool             // every rank runs in this process
	mb     *mailbox         // the host's mailbox, nil without

	mu       sync.Mutex
	exported map[gpu.DevPtr]uint64      // own allocations whose handles the peers have: their ids
	shared   map[gpu.DevPtr]sharedAlloc // own allocations in the mailbox's table
	mapped   map[peerAlloc]gpu.DevPtr   // peers' allocations mapped here
	stale    []gpu.DevPtr               // peers' freed allocations, unmapped at Close
	regs     int                        // registrations made (exports and mappings)
}

// peerAlloc names a peer's allocation.
type peerAlloc struct {
	rank int
	base gpu.DevPtr
	size uint64
	id   uint64 // the driver's (AllocIDer), 0 without
}

// sharedAlloc is an own allocation in the mailbox's table: its id and
// index there.
type sharedAlloc struct {
	id  uint64
	idx int
}

// count is how many registrations were made.
func (g *registry) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.regs
}

// slot describes the buffer at p for the peers: its address (peers in
// this process use it as it is), its allocation and, for peers in other
// processes, the allocation's index in the mailbox's table, where its
// IPC handle was put once.
func (g *registry) slot(p gpu.DevPtr) (slot, error) {
	sl := slot{ptr: uint64(p), base: uint64(p), alloc: -1}
	base, size, ok, err := g.io.AddressRange(p)
	if err != nil {
		return sl, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		sl.base, sl.size = uint64(base), size
	}
	if g.inProc {
		// The peers use the address as it is: the registration is only
		// counted, once per allocation.
		g.mu.Lock()
		defer g.mu.Unlock()
		g.seen(gpu.DevPtr(sl.base), sl.size)
		return sl, nil
	}
	if !ok {
		return sl, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if g.ider != nil {
		if sl.id, err = g.ider.AllocID(base); err != nil {
			return sl, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if a, have := g.shared[base]; have && a.id == sl.id {
		sl.alloc = a.idx
		return sl, nil
	}
	h, err := g.io.IpcGet(base)
	if err != nil {
		return sl, fmt.Errorf("exporting the allocation at %#x: %w", uint64(base), err)
	}
	idx, err := g.mb.register(g.rank, uint64(base), size, sl.id, h)
	if err != nil {
		return sl, err
	}
	g.shared[base] = sharedAlloc{id: sl.id, idx: idx}
	g.regs++
	sl.alloc = idx
	return sl, nil
}

// seen counts an own allocation the first time same-process peers are
// shown it. The caller holds mu.
func (g *registry) seen(base gpu.DevPtr, size uint64) {
	k := peerAlloc{rank: g.rank, base: base, size: size}
	if _, ok := g.mapped[k]; !ok {
		g.mapped[k] = base
		g.regs++
	}
}

// address is the buffer of rank r's slot b as this rank addresses it:
// its own and same-process peers' as they are, other processes' through
// their allocation's mapping here, made (from the handle in the
// mailbox's table) at its first use. A mapping that the new allocation
// overlaps was freed by the peer: it is unmapped at Close, since a
// launch may still read it. The caller holds mu.
func (g *registry) address(r int, b slot) (gpu.DevPtr, error) {
	if r == g.rank || g.procs[r] == g.self {
		return gpu.DevPtr(b.ptr), nil
	}
	k := peerAlloc{r, gpu.DevPtr(b.base), b.size, b.id}
	p, ok := g.mapped[k]
	if !ok {
		h, err := g.mb.handle(r, b.alloc)
		if err != nil {
			return 0, fmt.Errorf("rank %d's buffer %#x: %w", r, b.ptr, err)
		}
		g.stale = append(g.stale, g.dropOverlapped(k)...)
		if p, err = g.io.IpcOpen(h); err != nil {
			return 0, fmt.Errorf("mapping rank %d's allocation at %#x: %w", r, b.base, err)
		}
		g.mapped[k] = p
		g.regs++
	}
	return p + gpu.DevPtr(b.ptr-b.base), nil
}

// dropOverlapped forgets the mappings of k's rank that k overlaps (freed
// allocations whose addresses the peer used again) and returns them, for
// unmapping. The caller holds mu.
func (g *registry) dropOverlapped(k peerAlloc) []gpu.DevPtr {
	var gone []gpu.DevPtr
	for old, q := range g.mapped {
		if old.rank == k.rank && old.base < k.base+gpu.DevPtr(k.size) && k.base < old.base+gpu.DevPtr(old.size) {
			gone = append(gone, q)
			delete(g.mapped, old)
		}
	}
	return gone
}

// describe returns the record of the buffer at p: its allocation, and the
// allocation's IPC handle when peers in other processes have not had it.
func (g *registry) describe(p gpu.DevPtr, newExports map[gpu.DevPtr]uint64) (bufRec, error) {
	rec := bufRec{Ptr: p, Base: p}
	base, size, ok, err := g.io.AddressRange(p)
	if err != nil {
		return rec, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		rec.Base, rec.Size = base, size
	}
	if g.inProc {
		return rec, nil
	}
	if !ok {
		return rec, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if g.ider != nil {
		if rec.ID, err = g.ider.AllocID(base); err != nil {
			return rec, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	// An allocation at a registered one's address with another id
	// replaced a freed one: the peers get its handle.
	if id, have := g.exported[base]; have && id == rec.ID {
		return rec, nil
	}
	if id, have := newExports[base]; have && id == rec.ID {
		return rec, nil
	}
	h, err := g.io.IpcGet(base)
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
func (g *registry) peerBuffers(all []callRec) ([][2]gpu.DevPtr, []gpu.DevPtr, error) {
	out := make([][2]gpu.DevPtr, g.n)
	var errs []string
	var stale []gpu.DevPtr
	for r, rec := range all {
		if g.host[r] != g.host[g.rank] {
			continue
		}
		for i, b := range rec.Bufs {
			p, gone, err := g.peerBuffer(r, b)
			stale = append(stale, gone...)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			out[r][i] = p
		}
	}
	if len(errs) > 0 {
		return nil, stale, fmt.Errorf("rank %d: %s", g.rank, strings.Join(errs, "; "))
	}
	return out, stale, nil
}

// peerBuffer is rank r's buffer b as this rank addresses it (peerBuffers),
// and the mappings it replaced. The caller holds mu.
func (g *registry) peerBuffer(r int, b bufRec) (gpu.DevPtr, []gpu.DevPtr, error) {
	if r == g.rank || g.procs[r] == g.self {
		if r == g.rank && g.inProc {
			g.seen(b.Base, b.Size)
		}
		return b.Ptr, nil, nil
	}
	k := peerAlloc{r, b.Base, b.Size, b.ID}
	if p, ok := g.mapped[k]; ok {
		return p + (b.Ptr - b.Base), nil, nil
	}
	if b.Handle == nil {
		return 0, nil, fmt.Errorf("rank %d's buffer %#x is in an allocation (%#x, %d bytes) it did not register", r, uint64(b.Ptr), uint64(b.Base), b.Size)
	}
	gone := g.dropOverlapped(k)
	p, err := g.io.IpcOpen(*b.Handle)
	if err != nil {
		return 0, gone, fmt.Errorf("mapping rank %d's allocation at %#x: %v", r, uint64(b.Base), err)
	}
	g.mapped[k] = p
	g.regs++
	return p + (b.Ptr - b.Base), gone, nil
}

// unmapPeers unmaps the peers' allocations mapped here.
func (g *registry) unmapPeers() {
	for k, p := range g.mapped {
		if k.rank != g.rank && g.procs[k.rank] != g.self {
			_ = g.io.IpcClose(p)
		}
	}
	for _, p := range g.stale {
		_ = g.io.IpcClose(p)
	}
}
