package gpu

// backend.go is the executor backend over a Driver, the checks every
// session kind makes of an instance at open (checkOpen), and the entry to
// the session kinds, one file each:
//
//	session.go  session: one driver session running an instance's ranks
//	rank.go     RankSession: one rank of a job of one process per rank
//	local.go    localSession: one process, a rank session per device
//	streamsession.go  StreamSession: a rank session on the caller's buffers
//	                  and stream, what gpu/devcomm's communicator opens
//
// Open picks session or localSession; OpenRank (rank.go) and
// OpenStreamSession (streamsession.go) are the other entries.

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// New returns a GPU backend: the plan interpreter of csrc/ on the device
// of cfg.Open.
func New(cfg Config) executor.Backend { return &backend{cfg: cfg} }

type backend struct{ cfg Config }

// Name returns the configured backend name.
func (b *backend) Name() string { return b.cfg.Name }

// Open validates inst (executor.Validate), encodes it, and places its
// persistent state on a new driver session. Options.Race is not
// supported by the device and is ignored (the CPU backend finds races).
func (b *backend) Open(inst *executor.Instance, opts executor.Options) (executor.Session, error) {
	if b.cfg.Open == nil {
		return nil, fmt.Errorf("%s: no driver", b.cfg.Name)
	}
	dt, err := checkOpen(b.cfg.Name, inst, opts)
	if err != nil {
		return nil, err
	}
	if n, err := devicesFor(b.cfg, inst); err != nil {
		return nil, err
	} else if n > 1 {
		// Several devices: one rank session per rank (local.go).
		return openLocal(b.cfg, inst, opts, n)
	}
	tabs, err := buildTables(inst)
	if err != nil {
		return nil, err
	}
	d, err := b.cfg.Open()
	if err != nil {
		return nil, err
	}
	s := &session{name: b.cfg.Name, inst: inst, opts: opts, d: d, tabs: tabs, dtype: dt, useGraph: b.cfg.Graph}
	s.guard.Name = b.cfg.Name
	if err := s.place(b.cfg.Threads); err != nil {
		s.release()
		return nil, err
	}
	if inst.Plan != nil && inst.Plan.AllToAllV != nil {
		// Variable-size plans: terms and the per-call table (varsize.go).
		if err := s.openVar(); err != nil {
			s.release()
			return nil, err
		}
	}
	return s, nil
}

// checkOpen makes the checks every session kind makes of an instance
// before it opens anything: the data type's code in the kernel
// (dtypeCode), executor.Validate, and the operands' alignment on the
// device (checkAlignment).
func checkOpen(name string, inst *executor.Instance, opts executor.Options) (uint32, error) {
	dt, err := dtypeCode(opts.DType)
	if err != nil {
		return 0, err
	}
	if err := executor.Validate(inst, opts); err != nil {
		return 0, fmt.Errorf("%s: open: %w", name, err)
	}
	packet := uint64(16)
	if opts.LL8 {
		packet = 8
	}
	if err := checkAlignment(inst, packet, uint64(opts.DType.Size())); err != nil {
		return 0, err
	}
	return dt, nil
}

func dtypeCode(dt executor.DType) (uint32, error) {
	if dt == nil {
		return 0, errors.New("gpu: open: Options.DType is nil")
	}
	switch dt.Name() {
	case executor.Float16.Name():
		return 0, nil
	case executor.BFloat16.Name():
		return 1, nil
	case executor.Float32.Name():
		return 2, nil
	case executor.Int32.Name():
		return 3, nil
	}
	return 0, fmt.Errorf("gpu: data type %s is not supported by the kernel", dt.Name())
}

// checkAlignment refuses operands the device would access misaligned
// (the host build and the CPU backend do not care): LL16 packets are
// 16-byte vector accesses at twice the data offset, LL8 packets 8-byte
// ones; packet payloads are read and written as 32-bit words; reductions
// access whole elements. The scratch half of double buffering is a packet
// base too.
func checkAlignment(inst *executor.Instance, packet uint64, elem uint64) error {
	if inst.Plan != nil && inst.Plan.UseDoubleScratch && (inst.ScratchBytes/2)%packet != 0 {
		return fmt.Errorf("gpu: the double-buffer half of scratch (%d bytes) is not a multiple of the %d-byte packets",
			inst.ScratchBytes/2, packet)
	}
	for r := range inst.Ranks {
		for _, tb := range inst.Ranks[r].TBs {
			for i := range tb.Ops {
				op := &tb.Ops[i]
				for _, o := range append([]executor.OpInstance{*op}, op.Body...) {
					if err := alignedOperands(&o, packet, elem); err != nil {
						return fmt.Errorf("gpu: rank %d tb %d %s %s: %w", r, tb.ID, o.Path, o.Type, err)
					}
				}
			}
		}
	}
	return nil
}

func alignedOperands(op *executor.OpInstance, packet, elem uint64) error {
	pkt := func(what string, i int, r executor.Region) error {
		if (2*r.Offset)%packet != 0 {
			return fmt.Errorf("%s %d: packets at %d are not %d-byte aligned", what, i, 2*r.Offset, packet)
		}
		return nil
	}
	word := func(what string, i int, r executor.Region, a uint64) error {
		if r.Offset%a != 0 {
			return fmt.Errorf("%s %d: offset %d is not a multiple of %d bytes", what, i, r.Offset, a)
		}
		return nil
	}
	var err error
	check := func(e error) {
		if err == nil {
			err = e
		}
	}
	switch t := op.Type; {
	case t == plan.OpCopyPacket:
		check(word("source", 0, op.Src[0], 4))
		check(pkt("destination", 0, op.Dst[0]))
	case t == plan.OpUnpackPacket:
		check(pkt("source", 0, op.Src[0]))
		check(word("destination", 0, op.Dst[0], 4))
	case t == plan.OpPutPacket:
		for i := range op.Dst {
			if op.ChannelType == plan.Port {
				check(pkt("source", i, op.Src[i]))
			} else {
				check(word("source", i, op.Src[i], 4))
			}
			check(pkt("destination", i, op.Dst[i]))
		}
	case t == plan.OpReadPutPacket, t == plan.OpMultiStorePacket:
		check(pkt("source", 0, op.Src[0]))
		for i := range op.Dst {
			check(pkt("destination", i, op.Dst[i]))
		}
	case t.Family() == plan.FamReduce && t.Packet(): // the reduce family, with packets
		check(word("source", 0, op.Src[0], 4))
		for i := 1; i < len(op.Src); i++ {
			check(pkt("source", i, op.Src[i]))
		}
		check(word("destination", 0, op.Dst[0], 4))
		for i := 1; i < len(op.Dst); i++ {
			check(pkt("destination", i, op.Dst[i]))
		}
	case t.ReducesElements(): // reductions of elements
		for i, r := range op.Src {
			check(word("source", i, r, elem))
		}
		for i, r := range op.Dst {
			check(word("destination", i, r, elem))
		}
	}
	return err
}
