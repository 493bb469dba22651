package passes

import (
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Appender fuses one thread block's ops while they are recorded, so that a
// long program never holds its unfused op list: appending ops one by one
// gives exactly the list Fuse gives for the whole recorded list. Fusion is
// greedy and looks only at the accumulated last op and the next original
// op, so it can run as each op arrives; a pipeline's body is fused when the
// pipeline is appended as a new op, as Fuse does when it takes the
// pipeline as the accumulated op.
//
// A program whose blocks were built with Appenders has ir.Program.Fused
// set, and Run then skips the fuse pass.
type Appender struct {
	f     fuser
	fresh bool // the last op is a fused op private to this Appender
}

// Append appends op to ops, the list this Appender has built so far, fusing
// it into the last op where a rule applies, and returns the new list.
func (a *Appender) Append(ops []*ir.Op, op *ir.Op) []*ir.Op {
	return a.append(ops, op, false)
}

// AppendCopy is Append for an op built in reusable storage (ir.OpBuf): the
// list never refers to op or its lists, and op is cloned only where the
// list keeps it rather than fusing it into the last op.
func (a *Appender) AppendCopy(ops []*ir.Op, op *ir.Op) []*ir.Op {
	return a.append(ops, op, true)
}

func (a *Appender) append(ops []*ir.Op, op *ir.Op, borrowed bool) []*ir.Op {
	if n := len(ops); n > 0 {
		if r, isNew := a.f.combine(ops[n-1], op, a.fresh); r != nil {
			if r == op && borrowed { // F16, F18 keep the right operand
				r = op.Clone()
			}
			ops[n-1], a.fresh = r, isNew
			return ops
		}
		a.f.ids.finish(ops[n-1])
	}
	if borrowed {
		op = op.Clone()
	}
	if op.Kind == plan.OpPipeline {
		op.Body = a.f.fuse(op.Body)
	}
	a.fresh = false
	return append(ops, op)
}

// ExtendSync is a shortcut for the commonest step of recording: when the
// last op of ops is a signal, wait or flush chain that a new kind op on the
// one channel index ch (channel type ct, data_sync ds, recorded at pos)
// would extend, it
// extends the chain as AppendCopy would and reports true; otherwise it
// changes nothing and reports false, and the caller appends the op.
func (a *Appender) ExtendSync(ops []*ir.Op, kind plan.OpType, ch int, ct ir.ChannelType, ds ir.SyncType, pos syntax.Position) bool {
	n := len(ops)
	if n == 0 || !a.fresh || !a.f.ids.active {
		return false
	}
	l := ops[n-1]
	if l.Kind != kind || l.ChannelType != ct || kind != plan.OpFlush && a.f.ids.has(ch) {
		return false
	}
	a.f.ids.extend(ch)
	l.DataSync |= ds
	l.Fused = append(l.Fused, pos)
	return true
}

// Finish completes the last op of ops (the id set of a fused signal, wait
// or flush chain). Call it once, when recording ends.
func (a *Appender) Finish(ops []*ir.Op) {
	if n := len(ops); n > 0 {
		a.f.ids.finish(ops[n-1])
	}
	a.fresh = false
}
