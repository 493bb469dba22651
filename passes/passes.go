// Package passes holds the compiler passes that turn the IR recorded by the
// builtins into the IR that emit writes as an MSCCL++ execution plan. They
// reproduce, rule by rule, what the reference Python DSL does inside JSON()
// (docs/passes.md states these rules; the comments cite its sections). Run
// applies the whole pipeline to a recorded program, once:
//
//	if err := passes.Run(prog, passes.Config{}); err != nil {
//		return err // a *passes.Error naming the pass
//	}
//
// Each pass is also exported on its own, for tests and tools:
//   - ValidatePairing, the signal/wait pairing check (docs/passes.md §3);
//   - Fuse, instruction fusion and sync elision (docs/passes.md §4), and
//     Appender, which fuses ops as they are recorded;
//   - InsertDataSync, the nops around data-sync ops (docs/passes.md §5);
//   - ResolveDependencies, the nops before hazards (docs/passes.md §6);
//   - Replicate, the instances of every thread block (docs/passes.md §7).
//
// The pipeline is the reference's (docs/passes.md §1): validate on the
// whole program, then for every rank fuse (if InstrFusion), data-sync,
// auto-sync (if AutoSync) on each thread block, and replicate the rank.
// When Config asks for checks or dumps between passes, Run instead runs
// each pass over all ranks before the next; passes keep no state across
// thread blocks or ranks and only replicate can fail after validate, so
// both orders give the same IR and the same first error.
//
// The passes are not idempotent (fusion elision, data-sync and replication
// all change their own input), so Run processes a program once: it marks
// the program Finalized and refuses a finalized program.
package passes

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/ir"
	"go.starlark.net/syntax"
)

// Sentinel errors, matched with errors.Is on an *Error.
var (
	// ErrPairing: the signals sent from one rank to a peer over one
	// channel type do not match the waits the peer performs.
	ErrPairing = errors.New("signal/wait mismatch")
	// ErrReplicationPolicy: replication_policy=none met an op with buffer
	// operands (the reference fails there with a TypeError).
	ErrReplicationPolicy = errors.New("replication policy none with buffer operands")
	// ErrFinalized: Run was given a program that has already been run.
	ErrFinalized = errors.New("program already finalized")
	// ErrUnknownPass: a Config names a pass that does not exist.
	ErrUnknownPass = errors.New("unknown pass")
	// ErrInvariant: ir.Check failed between passes (Config.Check).
	ErrInvariant = errors.New("IR invariant violated")
)

// Error is an error found by a pass. Its text is "POS: PASS: MSG", or
// "PASS: MSG" when Pos is zero.
type Error struct {
	Pass    string          // the pass table name, e.g. "validate"
	Program string          // the program's name
	Pos     syntax.Position // the user call site of the offending op, if any
	Msg     string
	Err     error // the sentinel (ErrPairing, ...) or the underlying error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Pos != (syntax.Position{}) {
		return e.Pos.String() + ": " + e.Pass + ": " + e.Msg
	}
	return e.Pass + ": " + e.Msg
}

// Unwrap returns the sentinel or underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Config selects how Run runs the passes. The zero value runs every pass
// the program asks for, without checks or dumps.
type Config struct {
	// Disabled names passes to skip (table names: "validate", "fuse",
	// "data-sync", "auto-sync", "replicate"). Skipping a pass gives a plan
	// that differs from the reference; it is meant for debugging.
	Disabled map[string]bool
	// Check runs ir.Check before the first pass and after every pass that
	// ran, failing with ErrInvariant.
	Check bool
	// DumpAfter names the pass after which Dump is called; "*" means after
	// every pass that ran. Empty means never.
	DumpAfter string
	// Dump receives the whole program after the pass named by DumpAfter.
	Dump func(pass string, p *ir.Program)
}

// scope is what one application of a pass covers.
type scope uint8

const (
	scopeProgram scope = iota // the whole program (validate)
	scopeTB                   // one thread block's op list (fuse, data-sync, auto-sync)
	scopeRank                 // one rank (replicate)
)

// pass is one entry of the pass table: its name, whether the program's
// options ask for it, and its function for its scope.
type pass struct {
	name    string
	scope   scope
	wanted  func(p *ir.Program) bool
	program func(p *ir.Program) error
	tb      func(s *state, ops []*ir.Op) []*ir.Op
	rank    func(p *ir.Program, g *ir.GPU) error
}

func always(*ir.Program) bool { return true }

// passList is the pass table, in pipeline order (docs/passes.md §1). Program-scope passes
// come first and rank-scope passes last, which the rank-major driver
// relies on (checked by passes_test).
var passList = [...]pass{
	{name: "validate", scope: scopeProgram, wanted: always, program: ValidatePairing},
	{name: "fuse", scope: scopeTB, wanted: func(p *ir.Program) bool { return p.InstrFusion && !p.Fused },
		tb: func(s *state, ops []*ir.Op) []*ir.Op { return s.fuser.fuse(ops) }},
	{name: "data-sync", scope: scopeTB, wanted: always, tb: (*state).insertDataSync},
	{name: "auto-sync", scope: scopeTB, wanted: func(p *ir.Program) bool { return p.AutoSync }, tb: (*state).resolveTB},
	{name: "replicate", scope: scopeRank, wanted: always, rank: Replicate},
}

// state is the scratch space that the thread-block passes reuse from one
// block to the next within a Run: the fusion chain buffers, nop blocks and
// hazard trackers.
type state struct {
	fuser        fuser
	nops         nopAlloc
	outer, inner tracker
}

// passOrder lists the ordering constraints between passes: a must run
// before b. passes_test checks that passList honours them.
var passOrder = [...]struct{ a, b, why string }{
	{"validate", "fuse", "a pairing error must be reported before any rewriting, as the reference raises it first"},
	{"validate", "replicate", "replicate's policy error must not hide a pairing error, which the reference reports first"},
	{"fuse", "data-sync", "fusion ORs and clears data_sync bits (elision); nops must come from the final bits"},
	{"fuse", "auto-sync", "a fused op is one owner for hazard tracking and fusion ignores the nops auto-sync inserts"},
	{"data-sync", "auto-sync", "the data-sync nops reset the hazard tracker, so they must be in place first"},
	{"auto-sync", "replicate", "hazards are found on one instance's chunk indices; replicas copy the resolved lists"},
	{"data-sync", "replicate", "replicas copy the final op lists, nops included"},
}

// Names returns the pass table names in pipeline order.
func Names() []string {
	out := make([]string, len(passList))
	for i, ps := range passList {
		out[i] = ps.name
	}
	return out
}

func knownPass(name string) bool {
	for _, ps := range passList {
		if ps.name == name {
			return true
		}
	}
	return false
}

// Run runs the pass pipeline on p in place: validate, then fuse (if
// p.InstrFusion), data-sync, auto-sync (if p.AutoSync) and replicate. It
// marks p Finalized and fails with ErrFinalized on a program that was
// already run. Errors are *Error values.
func Run(p *ir.Program, cfg Config) error {
	if p == nil {
		return &Error{Pass: "run", Msg: "nil program", Err: errors.New("nil program")}
	}
	for name := range cfg.Disabled {
		if !knownPass(name) {
			return unknownPass(p, name)
		}
	}
	if cfg.DumpAfter != "" && cfg.DumpAfter != "*" && !knownPass(cfg.DumpAfter) {
		return unknownPass(p, cfg.DumpAfter)
	}
	if p.Finalized {
		return &Error{Pass: "run", Program: p.Name, Msg: "passes already ran on this program; they are not idempotent", Err: ErrFinalized}
	}
	p.Finalized = true
	var active []*pass
	for i := range passList {
		if ps := &passList[i]; !cfg.Disabled[ps.name] && ps.wanted(p) {
			active = append(active, ps)
		}
	}
	if cfg.Check || cfg.Dump != nil && cfg.DumpAfter != "" {
		return runPassMajor(p, cfg, active)
	}
	return runRankMajor(p, active)
}

// runRankMajor is the reference's order (docs/passes.md §1): program passes, then for
// each rank every thread-block pass on each block in turn (while the
// block's ops are in cache), then the rank passes.
func runRankMajor(p *ir.Program, active []*pass) error {
	var s state
	for _, ps := range active {
		if ps.scope == scopeProgram {
			if err := ps.program(p); err != nil {
				return err
			}
		}
	}
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			ops := tb.Ops
			for _, ps := range active {
				if ps.scope == scopeTB {
					ops = ps.tb(&s, ops)
				}
			}
			tb.Ops = ops
		}
		for _, ps := range active {
			if ps.scope == scopeRank {
				if err := ps.rank(p, g); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runPassMajor runs each pass over the whole program before the next, so
// that the program can be checked and dumped between passes. Passes keep
// no state across blocks or ranks and only replicate can fail after
// validate, so the IR and the first error are those of runRankMajor.
func runPassMajor(p *ir.Program, cfg Config, active []*pass) error {
	if cfg.Check {
		if err := ir.Check(p); err != nil {
			return invariantError(p, "recorded IR", err)
		}
	}
	var s state
	for _, ps := range active {
		switch ps.scope {
		case scopeProgram:
			if err := ps.program(p); err != nil {
				return err
			}
		case scopeTB:
			for _, g := range p.GPUs {
				for _, tb := range g.ThreadBlocks {
					tb.Ops = ps.tb(&s, tb.Ops)
				}
			}
		case scopeRank:
			for _, g := range p.GPUs {
				if err := ps.rank(p, g); err != nil {
					return err
				}
			}
		}
		if cfg.Check {
			if err := ir.Check(p); err != nil {
				return invariantError(p, ps.name, err)
			}
		}
		if cfg.Dump != nil && (cfg.DumpAfter == "*" || cfg.DumpAfter == ps.name) {
			cfg.Dump(ps.name, p)
		}
	}
	return nil
}

func unknownPass(p *ir.Program, name string) error {
	return &Error{Pass: "run", Program: p.Name,
		Msg: fmt.Sprintf("unknown pass %q (passes: %s)", name, strings.Join(Names(), ", ")), Err: ErrUnknownPass}
}

func invariantError(p *ir.Program, after string, err error) error {
	e := &Error{Pass: "check", Program: p.Name, Msg: "after " + after + ": " + err.Error(), Err: fmt.Errorf("%w: %w", ErrInvariant, err)}
	var ce *ir.CheckError
	if errors.As(err, &ce) {
		e.Pos = ce.Pos
		e.Msg = "after " + after + ": " + ce.Detail()
	}
	return e
}
