package starlib

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/emit"
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/passes"
	"github.com/mscclgo/mscclgo/plan"
)

// stateKey is the thread-local key of the evaluation state.
const stateKey = "mscclgo.state"

// ErrNoProgram is returned by builtins that record into the current program
// when no CollectiveProgram has been created yet.
var ErrNoProgram = errors.New("no program in context: call CollectiveProgram(...) first")

// Program is one collective program created by a script. Its plan is
// computed once, on the first call of Plan (or of JSON() in the script).
type Program struct {
	IR *ir.Program

	once sync.Once
	done bool
	plan []byte
	err  error

	collective *Collective
	spec       *SpecInfo
	// loop is the open Loop.iteration context, if any.
	loop *loopContext
	// ranks caches the Rank values.
	ranks []*Rank
	// buffers caches each rank's input and output buffer values.
	buffers map[int][2]*Buffer
	// appenders fuse each thread block's ops as they are recorded, indexed
	// [rank][tb].
	appenders [][]*passes.Appender
	// buf is where the builtins build each op they record (recordBuf).
	buf ir.OpBuf
	// st is the evaluation state the program was started in.
	st *state
	// recorded counts the ops the builtins recorded (before fusion).
	recorded int
	// stacks interns the call stacks of recorded ops (callStack).
	stacks map[[maxStack]syntax.Position][]syntax.Position
}

// Name returns the program's name.
func (p *Program) Name() string { return p.IR.Name }

// Plan runs the passes on the program (once) and returns its plan text:
// the JSON followed by one newline, as `print(JSON())` writes it. A pass
// failure is an *Error naming the program and, where one exists, the
// position of the offending op.
func (p *Program) Plan() ([]byte, error) {
	p.once.Do(func() {
		p.done = true
		if p.err = p.runPasses(); p.err != nil {
			return
		}
		p.plan, p.err = emit.Marshal(p.IR)
	})
	return p.plan, p.err
}

// WritePlan writes the plan text to w. Unless JSON() already produced the
// plan, it streams it without holding the whole text in memory.
func (p *Program) WritePlan(w io.Writer) error {
	streamed := false
	p.once.Do(func() {
		p.done = true
		streamed = true
		if p.err = p.runPasses(); p.err != nil {
			return
		}
		p.err = emit.Write(w, p.IR)
	})
	if streamed || p.err != nil {
		return p.err
	}
	_, err := w.Write(p.plan)
	return err
}

// runPasses runs the compiler passes and converts their errors.
func (p *Program) runPasses() error {
	p.finishRecording()
	err := passes.Run(p.IR, passes.Config{})
	if err == nil {
		return nil
	}
	e := &Error{Msg: fmt.Sprintf("program %q: %v", p.IR.Name, err), cause: err, File: p.IR.Pos.Filename()}
	var pe *passes.Error
	if errors.As(err, &pe) {
		e.Pos = pe.Pos
		e.Msg = fmt.Sprintf("program %q: %s: %s", p.IR.Name, pe.Pass, pe.Msg)
	}
	if !e.Pos.IsValid() {
		e.Pos = p.IR.Pos
	}
	return e
}

func (p *Program) finalized() bool { return p.done }

// state is the per-evaluation host state, reached through the thread.
type state struct {
	// thread is the evaluation's one thread (call stacks of recorded ops).
	thread   *starlark.Thread
	programs []*Program
	current  *Program
	params   *paramSet
	stderr   io.Writer
	// meter enforces the evaluation's limits.
	meter *meter
}

func stateOf(thread *starlark.Thread) *state {
	s, _ := thread.Local(stateKey).(*state)
	return s
}

// currentProgram returns the current program or an error naming fn.
func currentProgram(thread *starlark.Thread, fn string) (*Program, error) {
	s := stateOf(thread)
	if s == nil || s.current == nil {
		return nil, fmt.Errorf("%s: %w", fn, ErrNoProgram)
	}
	if s.current.finalized() {
		return nil, fmt.Errorf("%s: program %q was finalized by JSON(); create a new CollectiveProgram to record more ops", fn, s.current.Name())
	}
	return s.current, nil
}

// ownerProgram returns owner, the program value v was created under, if it
// is the current program, and otherwise the error currentProgram or
// sameProgram gives. Its fast path skips the thread-local lookup: every
// value of an evaluation is used on that evaluation's one thread, so owner
// is current exactly when its own evaluation state says so.
func ownerProgram(thread *starlark.Thread, fn string, owner *Program, v starlark.Value) (*Program, error) {
	if owner.st != nil && owner.st.current == owner && !owner.done {
		return owner, nil
	}
	p, err := currentProgram(thread, fn)
	if err != nil {
		return nil, err
	}
	return p, sameProgram(fn, p, owner, v)
}

// sameProgram checks that value v, created under program owner, is used
// while owner is still the current program.
func sameProgram(fn string, cur, owner *Program, v starlark.Value) error {
	if cur != owner {
		return fmt.Errorf("%s: %s belongs to program %q, not to the current program %q", fn, v, owner.Name(), cur.Name())
	}
	return nil
}

// maxStack is how many calling frames an op's Stack keeps.
const maxStack = 4

// callStack returns the frames that called the user function which
// called the running builtin, innermost first, at most maxStack (nil for
// a call at the top level), interned per program: a loop that records
// thousands of ops from one helper shares one slice.
func (p *Program) callStack() []syntax.Position {
	if p.st == nil || p.st.thread == nil {
		return nil
	}
	t := p.st.thread
	d := t.CallStackDepth()
	if d <= 2 {
		return nil
	}
	var key [maxStack]syntax.Position
	n := 0
	for i := 2; i < d && n < maxStack; i++ {
		key[n] = t.CallFrame(i).Pos
		n++
	}
	if s, ok := p.stacks[key]; ok {
		return s
	}
	s := append([]syntax.Position(nil), key[:n]...)
	if p.stacks == nil {
		p.stacks = map[[maxStack]syntax.Position][]syntax.Position{}
	}
	p.stacks[key] = s
	return s
}

// callerPos returns the position of the user's call of the running builtin.
func callerPos(thread *starlark.Thread) syntax.Position {
	if thread.CallStackDepth() < 2 {
		return syntax.Position{}
	}
	return thread.CallFrame(1).Pos
}

// record appends op to (rank, tb), or to the open loop context.
func (p *Program) record(rank, tb int, op *ir.Op) {
	p.countOp()
	if op.Stack == nil && op.Pos.IsValid() {
		op.Stack = p.callStack()
	}
	if p.loop != nil {
		p.loop.add(rank, tb, op)
		return
	}
	p.appendOp(rank, tb, op)
}

// recordBuf is record for an op built in p.buf: the op is cloned where it
// is kept, and fused away without a copy where it is not.
func (p *Program) recordBuf(rank, tb int, op *ir.Op) {
	op.Stack = p.callStack()
	if p.loop != nil || !p.IR.InstrFusion {
		p.record(rank, tb, op.Clone())
		return
	}
	p.countOp()
	t := p.IR.GPUs[rank].TB(tb)
	t.Ops = p.appender(rank, tb).AppendCopy(t.Ops, op)
}

// countOp counts one recorded op and stops the evaluation once the ops,
// times the instances they will be replicated into, pass the limit.
func (p *Program) countOp() {
	p.recorded++
	m := p.st.meter
	if m == nil || p.recorded*p.IR.Instances <= m.lim.MaxOps {
		return
	}
	if p.IR.Instances > 1 {
		m.haltNow(fmt.Sprintf("program %q: %d ops × %d instances pass the limit of %d ops (--max-ops raises it)", p.IR.Name, p.recorded, p.IR.Instances, m.lim.MaxOps))
	} else {
		m.haltNow(fmt.Sprintf("program %q records more than %d ops (--max-ops raises the limit)", p.IR.Name, m.lim.MaxOps))
	}
}

// appendOp appends op to the op list of (rank, tb). With instruction
// fusion on, ops are fused as they arrive (passes.Appender), which gives
// the fuse pass's result without ever holding the unfused list.
func (p *Program) appendOp(rank, tb int, op *ir.Op) {
	t := p.IR.GPUs[rank].TB(tb)
	if !p.IR.InstrFusion {
		t.Ops = append(t.Ops, op)
		return
	}
	t.Ops = p.appender(rank, tb).Append(t.Ops, op)
}

// extendSync extends the signal, wait or flush chain that ends (rank,
// tb)'s fused list where it would take this op (passes.Appender.ExtendSync)
// and reports whether it did; if not, the caller records the op.
func (p *Program) extendSync(rank, tb int, kind plan.OpType, ch int, ct ir.ChannelType, ds ir.SyncType, pos syntax.Position) bool {
	if p.loop != nil || !p.IR.InstrFusion {
		return false
	}
	return p.appender(rank, tb).ExtendSync(p.IR.GPUs[rank].TB(tb).Ops, kind, ch, ct, ds, pos)
}

// appender returns the fusing Appender of (rank, tb).
func (p *Program) appender(rank, tb int) *passes.Appender {
	if p.appenders == nil {
		p.appenders = make([][]*passes.Appender, p.IR.NumRanks)
	}
	as := p.appenders[rank]
	for len(as) <= tb {
		as = append(as, nil)
	}
	if as[tb] == nil {
		as[tb] = new(passes.Appender)
	}
	p.appenders[rank] = as
	return as[tb]
}

// finishRecording completes the fused op lists before the passes run.
func (p *Program) finishRecording() {
	if !p.IR.InstrFusion {
		return
	}
	for rank, as := range p.appenders {
		for tb, a := range as {
			if a != nil {
				a.Finish(p.IR.GPUs[rank].ThreadBlocks[tb].Ops)
			}
		}
	}
	p.appenders = nil
	p.IR.Fused = true
}
