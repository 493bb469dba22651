package executor

// prepare.go holds Prepared: what every backend's Open does with an
// instance before anything backend-specific, done once by Prepare
// (check.go, beside Validate) and ForLayout (launchcheck.go, beside
// CheckLaunch). Both backends (executor/cpu and gpu) open their sessions
// from a *Prepared, and the per-launch checks and operand resolution
// reuse what it resolved.

import (
	"fmt"
)

// Prepared is an instance made ready for a backend's Open: validated
// with its options (Validate), its LL packet and scratch geometry, each
// rank's scratch slot and switch groups resolved, and, for a rank
// session of a job of one process per rank, the buffer layout its
// operands were checked against (PrepareRank). A Prepared is not changed
// after it is made: the sessions and launches of one instance may share
// it.
type Prepared struct {
	// Inst and Opts are the instance and the options it was validated
	// with.
	Inst *Instance
	Opts Options
	// Geometry is the LL packet and scratch geometry under Opts.
	Geometry
	// Layout is the buffer layout of a rank session (PrepareRank), nil
	// for a session whose launches bring their buffers.
	Layout *BufferLayout
	// Ranks are, by rank, what Prepare resolved of each (the callers
	// must not change them).
	Ranks []PreparedRank
}

// Geometry is the LL packet and scratch geometry of an instance under
// its options (docs/semantics.md §3.2, §1.12).
type Geometry struct {
	// Payload and Packet are the LL payload and packet bytes: 8 and 16
	// (LL16), or 4 and 8 (Options.LL8).
	Payload, Packet uint64
	// Double is the plan's use_double_scratch_buffer; Half is the bytes
	// of one scratch half (the whole scratch without double buffering).
	Double bool
	Half   uint64
}

// PreparedRank is what Prepare resolved of one rank.
type PreparedRank struct {
	// Slot is the rank's reuse_resources scratch slot
	// (Instance.ScratchSlot; 0 if unused).
	Slot uint64
	// Members are, per switch channel of the rank, its member ranks in
	// ascending order.
	Members [][]int
}

// PrepareRank is Prepare for a rank session over the buffer layout l,
// then ForLayout.
func PrepareRank(inst *Instance, l *BufferLayout, opts Options) (*Prepared, error) {
	p, err := Prepare(inst, opts)
	if err != nil {
		return nil, err
	}
	return p.ForLayout(l)
}

// PreparedOpener is a Backend that opens a session of an instance
// Prepare made ready (both backends are): a caller that opens one
// instance more than once, or on two backends, prepares it once.
type PreparedOpener interface {
	OpenPrepared(p *Prepared) (Session, error)
}

// Operands is NewOperands of the prepared instance on v, with the ranks
// as Prepare resolved them.
func (p *Prepared) Operands(v LaunchView) *Operands {
	c := NewOperands(p.Inst, p.Opts, v)
	c.prep = p
	return c
}

// CheckBuffers is the package's CheckBuffers for the prepared instance:
// the operand checks of a launch on bufs, without validating again.
func (p *Prepared) CheckBuffers(bufs []RankBuffers) error {
	if len(bufs) != len(p.Inst.Ranks) {
		return fmt.Errorf("launch: got buffers for %d ranks, want %d", len(bufs), len(p.Inst.Ranks))
	}
	v := LaunchView{Bufs: make([][3][]byte, len(bufs))}
	for r, b := range bufs {
		v.Bufs[r] = [3][]byte{b.Input, b.Output, nil}
	}
	return p.CheckOperands(v)
}

// CheckOperands is the package's CheckOperands for the prepared instance.
func (p *Prepared) CheckOperands(v LaunchView) error {
	return checkOperands(p.Inst, p.Operands(v), v)
}
