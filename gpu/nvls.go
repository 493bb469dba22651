package gpu

// nvls.go says which path a plan's switch channels (NVLS) take on the
// device, and builds the multicast objects of a session that runs every
// member of a switch group in this process on a device of its own
// (local.go): one object per switch group, every member's device added,
// every member's bound buffer bound to it and the object mapped on every
// member's device; the mapping's address is the switch's mc pointer,
// which the kernel's multimem path uses (the unicast fallback otherwise).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Multicaster is implemented by drivers of devices with NVLS multicast
// (CUDA's multicast objects).
type Multicaster interface {
	// AllocBindable returns n bytes of zeroed device memory, rounded up
	// to the granularity, that a multicast object can bind, accessible to
	// this device and every device with peer access to it; Free releases
	// it.
	AllocBindable(n uint64) (DevPtr, error)
	// MulticastCreate creates a multicast object for devices devices of
	// at least size bytes per device and returns it and its size (rounded
	// up to the multicast granularity).
	MulticastCreate(devices int, size uint64) (h, rounded uint64, err error)
	// MulticastAddDevice adds this driver's device to h. Every member's
	// device must be added before any binds.
	MulticastAddDevice(h uint64) error
	// MulticastBind binds the first size bytes of p's allocation (from
	// AllocBindable) to h for this device and maps h into this device's
	// address space, at the returned multicast address.
	MulticastBind(h uint64, p DevPtr, size uint64) (DevPtr, error)
	// MulticastUnbind unmaps mc and unbinds this device's memory from h.
	MulticastUnbind(h uint64, mc DevPtr, size uint64) error
	// MulticastRelease releases h once every member has unbound.
	MulticastRelease(h uint64) error
	// Multimem reports whether the kernel image loaded has the multimem
	// path, which uses a switch's mc pointer.
	Multimem() bool
}

// nvlsBranch says which path switch channels take on a device described
// by info: the multimem instructions need a multicast object bound to
// every member's buffer (a switch's mc pointer); without one every
// switch op runs the unicast fallback, a loop over the members' buffers,
// which gives the same bytes. rank is set for a rank session (one rank
// of a multi-process job). Empty when the plan has no switch channel.
func nvlsBranch(inst *executor.Instance, info DeviceInfo, rank bool) string {
	n := switchChannels(inst)
	if n == 0 {
		return ""
	}
	if !info.Multicast {
		return fmt.Sprintf("unicast fallback for %d switch channels: %s has no NVLS multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)", n, info.Name)
	}
	if rank {
		return fmt.Sprintf("unicast fallback for %d switch channels: %s supports NVLS multicast, but multicast objects "+
			"are built only for ranks of one process on devices of their own (mscclgo run without a launcher), "+
			"not across processes", n, info.Name)
	}
	return fmt.Sprintf("unicast fallback for %d switch channels: %s supports NVLS multicast, but the members of each "+
		"switch group run on this one device and a multicast object binds one buffer per device", n, info.Name)
}

func switchChannels(inst *executor.Instance) int {
	n := 0
	for _, ri := range inst.Ranks {
		n += len(ri.Switches)
	}
	return n
}

// NVLS says which path the plan's switch channels take on the device
// (the unicast fallback, and why); empty when the plan has none.
func (s *session) NVLS() string { return s.nvls }

// NVLS says which path the plan's switch channels take on the device.
func (r *RankSession) NVLS() string { return r.s.nvls }

// allocBound allocates a buffer a switch may bind: multicast-bindable
// memory in a rank session that asked for it, else Alloc's.
func (s *session) allocBound(n uint64) (DevPtr, error) {
	if s.mp == nil || s.mp.bindable == nil {
		return s.alloc(n)
	}
	p, err := s.mp.bindable.AllocBindable(max(n, 8))
	if err != nil {
		return 0, fmt.Errorf("%s: allocating %d bytes of multicast-bindable memory: %w", s.name, n, err)
	}
	s.allocs = append(s.allocs, p)
	return p, nil
}

// mcGroup is a switch group's multicast object in a local session.
type mcGroup struct {
	ranks []int // ascending
	buf   plan.BufferType
	slot  map[int][]int // member rank -> its switch channels bound to the group
	h     uint64
	size  uint64
	owner Multicaster
	mc    map[int]DevPtr // member rank -> the object's address on its device
}

// boundBuffer returns the allocation that holds rank's buffer of type bt
// in a rank session, the buffer's offset in it and the allocation's
// requested size.
func boundBuffer(rs *RankSession, bt plan.BufferType) (alloc DevPtr, off, size uint64) {
	s, m := rs.s, rs.s.mp
	switch bt {
	case plan.Input:
		return m.io, uint64(m.devIn - m.io), m.l.RankBytes(m.rank)
	case plan.Output:
		return m.io, uint64(m.devOut - m.io), m.l.RankBytes(m.rank)
	}
	return s.ranks[m.rank].scratch, 0, s.inst.ScratchBytes
}

// setupMulticast builds a multicast object per switch group of the
// local session and writes its addresses into the members' switch
// records, or leaves every switch on the unicast fallback, with the
// reason, when one group cannot have one. It returns what NVLS says.
func (ls *localSession) setupMulticast() (string, error) {
	inst := ls.inst
	n := switchChannels(inst)
	if n == 0 {
		return "", nil
	}
	var groups []*mcGroup
	byKey := map[string]*mcGroup{}
	for r, ri := range inst.Ranks {
		for i, g := range ri.Switches {
			ranks := slices.Sorted(slices.Values(g.Ranks))
			key := fmt.Sprint(g.Buffer, ranks)
			grp, ok := byKey[key]
			if !ok {
				grp = &mcGroup{ranks: ranks, buf: g.Buffer, slot: map[int][]int{}, mc: map[int]DevPtr{}}
				byKey[key] = grp
				groups = append(groups, grp)
			}
			grp.slot[r] = append(grp.slot[r], i)
		}
	}
	fallback := func(why string) string {
		return fmt.Sprintf("unicast fallback for %d switch channels: %s", n, why)
	}
	for _, g := range groups {
		devs := map[int]int{}
		for _, r := range g.ranks {
			if p, ok := devs[r%ls.devices]; ok {
				return fallback(fmt.Sprintf("ranks %d and %d of a switch group share device %d (%d devices for %d ranks) "+
					"and a multicast object binds one buffer per device", p, r, r%ls.devices, ls.devices, len(ls.ranks))), nil
			}
			devs[r%ls.devices] = r
		}
	}
	for _, g := range groups {
		var off0, size0 uint64
		for k, r := range g.ranks {
			rs := ls.ranks[r]
			if rs.s.mp.bindable == nil {
				return rs.NVLS(), nil
			}
			if !rs.s.mp.bindable.Multimem() {
				return fallback(fmt.Sprintf("the kernel image loaded on rank %d's device has no multimem path "+
					"(the compute_90 PTX has it; `make gpu` builds it)", r)), nil
			}
			_, off, size := boundBuffer(rs, g.buf)
			if k == 0 {
				off0, size0 = off, size
			} else if off != off0 || size != size0 {
				return fallback(fmt.Sprintf("the %s buffers of ranks %d and %d lie at different offsets or sizes "+
					"(%d and %d bytes at %d and %d), which one multicast address cannot cover", g.buf, g.ranks[0], r,
					size0, size, off0, off)), nil
			}
		}
	}
	for _, g := range groups {
		ls.mcGroups = append(ls.mcGroups, g)
		if err := ls.bindGroup(g); err != nil {
			// Every switch back on the unicast fallback, then the objects
			// go.
			for _, g := range ls.mcGroups {
				for r := range g.mc {
					if werr := ls.writeMC(g, r, 0); werr != nil {
						return "", werr
					}
				}
			}
			if rerr := ls.releaseMulticast(); rerr != nil {
				return "", fmt.Errorf("%s: NVLS: %w; then releasing the multicast objects: %w", ls.cfg.Name, err, rerr)
			}
			return fallback(fmt.Sprintf("building the multicast object of the %s switch group of ranks %v failed: %v",
				g.buf, g.ranks, err)), nil
		}
	}
	return fmt.Sprintf("multimem through %d multicast object(s) (cuMulticastCreate) for %d switch channels on %d devices",
		len(groups), n, ls.devices), nil
}

// bindGroup creates g's object, adds every member's device, binds every
// member's buffer, maps the object on every member's device and writes
// its address into the member's switch record.
func (ls *localSession) bindGroup(g *mcGroup) error {
	drv := func(r int) Multicaster { return ls.ranks[r].s.mp.bindable }
	_, _, size := boundBuffer(ls.ranks[g.ranks[0]], g.buf)
	var err error
	g.owner = drv(g.ranks[0])
	if g.h, g.size, err = g.owner.MulticastCreate(len(g.ranks), max(size, 8)); err != nil {
		g.owner = nil
		return err
	}
	for _, r := range g.ranks {
		if err := drv(r).MulticastAddDevice(g.h); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	for _, r := range g.ranks {
		alloc, off, _ := boundBuffer(ls.ranks[r], g.buf)
		mc, err := drv(r).MulticastBind(g.h, alloc, g.size)
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		g.mc[r] = mc
		if err := ls.writeMC(g, r, uint64(mc)+off); err != nil {
			return err
		}
	}
	return nil
}

// writeMC writes v as the mc pointer of member r's switch records of g.
func (ls *localSession) writeMC(g *mcGroup, r int, v uint64) error {
	s := ls.ranks[r].s
	for _, i := range g.slot[r] {
		at := DevPtr(s.ranks[r].rec.Switches + uint64(i)*sizeSwitch + 8) // mg_switch.mc
		if err := s.d.HtoD(at, binary.LittleEndian.AppendUint64(nil, v)); err != nil {
			return fmt.Errorf("%s: rank %d: writing switch %d's multicast address: %w", ls.cfg.Name, r, i, err)
		}
	}
	return nil
}

// releaseMulticast unbinds and releases the session's multicast objects.
func (ls *localSession) releaseMulticast() error {
	var errs []error
	for _, g := range ls.mcGroups {
		for _, r := range g.ranks {
			if mc, ok := g.mc[r]; ok {
				if err := ls.ranks[r].s.mp.bindable.MulticastUnbind(g.h, mc, g.size); err != nil {
					errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
				}
			}
		}
		if g.owner != nil {
			if err := g.owner.MulticastRelease(g.h); err != nil {
				errs = append(errs, err)
			}
		}
	}
	ls.mcGroups = nil
	return errors.Join(errs...)
}

// SwitchMC reads back the mc pointers of rank's switch records from its
// device, in the order of the rank's switch channels (0: the unicast
// fallback).
func (ls *localSession) SwitchMC(rank int) ([]uint64, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if rank < 0 || rank >= len(ls.ranks) {
		return nil, fmt.Errorf("%s: rank %d of %d", ls.cfg.Name, rank, len(ls.ranks))
	}
	s := ls.ranks[rank].s
	n := len(s.ranks[rank].ri.Switches)
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n*sizeSwitch)
	if err := s.d.DtoH(b, DevPtr(s.ranks[rank].rec.Switches)); err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[i*sizeSwitch+8:])
	}
	return out, nil
}
