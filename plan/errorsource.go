package plan

import (
	"errors"
	"strconv"
	"strings"
)

// OpRef names an op as a source map does: its rank, its thread block's
// position in the rank's list, and "K" (its index in the thread block) or
// "K.J" (op J of pipeline K's body).
type OpRef struct {
	Rank, TB int
	Op       string
}

// Op returns the op that e is in, from its Path as the reader and the
// instantiation write it (gpus[R].threadblocks[T].ops[K], then
// .ops[J] inside a pipeline, then anything below the op); ok is false
// for a problem outside every op.
func (e *PlanError) Op() (ref OpRef, ok bool) {
	rest := e.Path
	index := func(key string) (int, bool) {
		var found bool
		if rest, found = strings.CutPrefix(rest, key+"["); !found {
			return 0, false
		}
		end := strings.IndexByte(rest, ']')
		if end < 1 {
			return 0, false
		}
		n, err := strconv.Atoi(rest[:end])
		rest = rest[end+1:]
		return n, err == nil && n >= 0
	}
	var k int
	if ref.Rank, ok = index(KeyGPUs); !ok {
		return OpRef{}, false
	}
	if ref.TB, ok = index("." + KeyThreadBlocks); !ok {
		return OpRef{}, false
	}
	if k, ok = index("." + KeyOps); !ok {
		return OpRef{}, false
	}
	ref.Op = strconv.Itoa(k)
	if strings.HasPrefix(rest, "."+KeyOps+"[") {
		if j, ok := index("." + KeyOps); ok {
			ref.Op += "." + strconv.Itoa(j)
		}
	}
	return ref, true
}

// SourceIndex finds the source positions of a plan's ops by OpRef.
type SourceIndex struct {
	m    *SourceMap
	byOp map[OpRef]*SourceOps
}

// Index returns the index of m's ops.
func (m *SourceMap) Index() *SourceIndex {
	x := &SourceIndex{m: m, byOp: make(map[OpRef]*SourceOps, len(m.Ops))}
	for i := range m.Ops {
		o := &m.Ops[i]
		x.byOp[OpRef{o.Rank, o.TB, o.Op}] = o
	}
	return x
}

// Where returns the source positions (Positions) of the op that err, a
// *PlanError however wrapped, is in; nil when err is no *PlanError, is in
// no op, or the map does not name its op.
func (x *SourceIndex) Where(err error) []string {
	var pe *PlanError
	if !errors.As(err, &pe) {
		return nil
	}
	ref, ok := pe.Op()
	if !ok {
		return nil
	}
	o := x.byOp[ref]
	if o == nil {
		return nil
	}
	return x.m.Positions(o)
}
