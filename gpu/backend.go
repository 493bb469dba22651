package gpu

// backend.go is the executor backend over a Driver and the entry to the
// session kinds, one file each (prepare.go holds what every kind does
// with an instance first, once):
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
	gp, err := prepare(b.cfg.Name, inst, opts)
	if err != nil {
		return nil, err
	}
	return b.open(gp)
}

// OpenPrepared is Open of an instance executor.Prepare already validated
// and resolved (executor.PreparedOpener).
func (b *backend) OpenPrepared(p *executor.Prepared) (executor.Session, error) {
	if b.cfg.Open == nil {
		return nil, fmt.Errorf("%s: no driver", b.cfg.Name)
	}
	gp, err := prepareFrom(b.cfg.Name, p)
	if err != nil {
		return nil, err
	}
	return b.open(gp)
}

// open places gp on one driver session, or on one rank session per
// device (local.go).
func (b *backend) open(gp *prepared) (executor.Session, error) {
	inst, opts := gp.Inst, gp.Opts
	if n, err := devicesFor(b.cfg, inst); err != nil {
		return nil, err
	} else if n > 1 {
		// Several devices: one rank session per rank (local.go).
		return openLocal(b.cfg, gp, n)
	}
	d, err := b.cfg.Open()
	if err != nil {
		return nil, err
	}
	s := &session{name: b.cfg.Name, inst: inst, opts: opts, prep: gp.Prepared, d: d, tabs: gp.tabs, dtype: gp.dtype, useGraph: b.cfg.Graph}
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

// devicesFor returns the number of devices a session of inst spreads its
// ranks over, or 0 when one session on cfg.Open's device runs it: one
// device, one rank, no device count, or an alltoallv plan (whose
// per-call counts rank sessions do not take).
func devicesFor(cfg Config, inst *executor.Instance) (int, error) {
	if cfg.Devices == nil || cfg.OpenDevice == nil || len(inst.Ranks) < 2 {
		return 0, nil
	}
	if inst.Plan != nil && inst.Plan.AllToAllV != nil {
		return 0, nil
	}
	n, err := cfg.Devices()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	if n < 2 {
		return 0, nil
	}
	return min(n, len(inst.Ranks)), nil
}
