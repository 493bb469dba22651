package gpu

// backend.go is the executor backend over a Driver and the entry to the
// session kinds, one file each:
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
	dt, err := dtypeCode(opts.DType)
	if err != nil {
		return nil, err
	}
	if err := executor.Validate(inst, opts); err != nil {
		return nil, fmt.Errorf("%s: open: %w", b.cfg.Name, err)
	}
	packet := uint64(16)
	if opts.LL8 {
		packet = 8
	}
	if err := checkAlignment(inst, packet, uint64(opts.DType.Size())); err != nil {
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
