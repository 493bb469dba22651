package starlib

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// loopContext collects the ops recorded while a Loop.iteration body runs.
type loopContext struct {
	unit, numChunks int64
	entries         []loopEntry
}

type loopEntry struct {
	rank, tb int
	op       *ir.Op
}

func (l *loopContext) add(rank, tb int, op *ir.Op) {
	l.entries = append(l.entries, loopEntry{rank, tb, op})
}

// close appends one pipeline op per (rank, tb), in order of each group's
// first op, holding that group's ops in call order.
func (l *loopContext) close(p *Program) {
	type key struct{ rank, tb int }
	var order []key
	groups := map[key][]*ir.Op{}
	for _, e := range l.entries {
		k := key{e.rank, e.tb}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e.op)
	}
	for _, k := range order {
		p.appendOp(k.rank, k.tb, &ir.Op{Kind: plan.OpPipeline, UnitSize: l.unit, NumChunks: l.numChunks, Body: groups[k], Pos: groups[k][0].Pos})
	}
}

// LoopIteration is the iterable returned by Loop.iteration(unit,
// num_chunks): iterating it runs the body once, with ops recorded into
// pipeline ops.
type LoopIteration struct {
	prog            *Program
	unit, numChunks int64
}

var _ starlark.Iterable = (*LoopIteration)(nil)

// String returns <Loop.iteration unit=U num_chunks=N>.
func (l *LoopIteration) String() string {
	return fmt.Sprintf("<Loop.iteration unit=%d num_chunks=%d>", l.unit, l.numChunks)
}

// Type returns "LoopIteration".
func (l *LoopIteration) Type() string { return "LoopIteration" }

// Freeze does nothing.
func (l *LoopIteration) Freeze() {}

// Truth is true.
func (l *LoopIteration) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (l *LoopIteration) Hash() (uint32, error) { return noHash("LoopIteration") }

// Iterate opens the loop context on the first Next and closes it when the
// iteration ends, however it ends.
func (l *LoopIteration) Iterate() starlark.Iterator { return &loopIterator{l: l} }

type loopIterator struct {
	l      *LoopIteration
	ctx    *loopContext
	opened bool
}

func (it *loopIterator) Next(p *starlark.Value) bool {
	if it.opened {
		it.Done()
		return false
	}
	it.opened = true
	prog := it.l.prog
	if prog.loop != nil {
		// Nesting is rejected when the inner Loop.iteration is called;
		// an iterable created earlier and iterated inside a body lands
		// here and runs its body as part of the outer loop.
		*p = starlark.None
		return true
	}
	it.ctx = &loopContext{unit: it.l.unit, numChunks: it.l.numChunks}
	prog.loop = it.ctx
	*p = starlark.None
	return true
}

func (it *loopIterator) Done() {
	if it.ctx != nil && it.l.prog.loop == it.ctx {
		it.l.prog.loop = nil
		it.ctx.close(it.l.prog)
	}
	it.ctx = nil
}

// loopIterationBuiltin implements Loop.iteration(unit, num_chunks) (also
// predeclared as LoopIterationContext).
func loopIterationBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var unit, numChunks int64
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "unit", &unit, "num_chunks", &numChunks); err != nil {
		return nil, err
	}
	p, err := currentProgram(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if p.loop != nil {
		return nil, fmt.Errorf("%s: nested pipelines are not supported", b.Name())
	}
	return &LoopIteration{prog: p, unit: unit, numChunks: numChunks}, nil
}
