package passes

import (
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Fuse is pass 2, instruction fusion (docs/passes.md §4). It reads one thread block's op
// list as recorded (user nops, barriers, pipelines included) and returns
// the fused list; the result may share ops' backing array, which the caller
// must treat as consumed.
//
// Greedy and left to right, it combines the accumulated op with the next
// original op while a rule of the fusion table (docs/passes.md §4.2, F1–F19) applies:
// same-name puts, gets and reductions concatenate their operands, a
// reduction absorbs the put of its result (res, rres, respkt, recpkt,
// recspkt), glre+gstore become glres, adjacent semaphore, signal, wait and
// flush ops merge their ids and OR their data_sync, and nops melt into
// neighbouring nops, barriers and pipelines. A fused op is a new *ir.Op
// (a new owner for auto-sync) and its kind is re-derived from its fields.
// The id set of fused signals, waits and flushes is the set
// L.IDSet.Union(R.IDSet).Copy() would give, step by step (docs/passes.md §4.6; built
// cheaply by idSetChain). Fusion never looks at data dependencies (Q9).
//
// Each failed combination may clear data_sync bits (sync elision, docs/passes.md §4.4):
// a data-sync op followed by a sync point, or by a data-sync op or pipeline
// that syncs before, drops its after bit; a data-sync op after a nop,
// barrier, or pipeline that syncs after, drops its before bit.
//
// A pipeline's body is fused when the pipeline is taken as the accumulated
// op, not when it is a right operand (its profile then reads the unfused
// body, Q3) nor when a preceding nop absorbs into it (it is then never
// fused, Q2).
//
// Needs: ops as recorded (well formed per ir.Check, pipelines not nested).
// Establishes: the final data_sync bits, from which data-sync inserts nops.
// Fusing the result again usually changes nothing, but not always (Q2–Q4).
func Fuse(ops []*ir.Op) []*ir.Op {
	var f fuser
	return f.fuse(ops)
}

// fuser is the driver of docs/passes.md §4.1 with the state of the current chain of
// fused signal, wait or flush ops (see idSetChain).
type fuser struct {
	ids idSetChain
}

func (f *fuser) fuse(ops []*ir.Op) []*ir.Op {
	out := ops[:0] // writes never overtake reads: len(out) <= i < j
	for i := 0; i < len(ops); {
		cur := ops[i]
		if cur.Kind == plan.OpPipeline {
			cur.Body = f.fuse(cur.Body)
		}
		fresh := false // cur is a fused op of this chain, private to us
		j := i + 1
		for ; j < len(ops); j++ {
			r, isNew := f.combine(cur, ops[j], fresh)
			if r == nil {
				break
			}
			cur, fresh = r, isNew
		}
		f.ids.finish(cur)
		out = append(out, cur)
		i = j
	}
	// Clear the tail so the dropped ops can be collected.
	clear(ops[len(out):])
	return out
}

// combine returns the fusion of l and r, or nil after applying the elision
// side effects of a failed combination. isNew reports whether the result is
// a fused op private to the driver. When fresh is set, l is such an op and
// combine may extend it in place: the intermediate ops of a fusion chain
// are never observable, and extending avoids quadratic copying.
func (f *fuser) combine(l, r *ir.Op, fresh bool) (res *ir.Op, isNew bool) {
	res, isNew = f.combineOps(l, r, fresh)
	if isNew {
		// A fused op keeps its parts' call sites.
		res.Fused = append(append(res.Fused, r.Pos), r.Fused...)
	}
	return res, isNew
}

func (f *fuser) combineOps(l, r *ir.Op, fresh bool) (res *ir.Op, isNew bool) {
	if l.Kind.SignalsChannels() { // F12, F13, F14
		// Flushes may overlap; signals and waits must be disjoint.
		if r.Kind == l.Kind && l.ChannelType == r.ChannelType && (l.Kind == plan.OpFlush || f.ids.disjoint(l, r, fresh)) {
			acc := accumulator(l, fresh)
			f.ids.union(acc, r, fresh)
			acc.DataSync |= r.DataSync
			return acc, true
		}
		elide(l, r)
		return nil, false
	}
	return combine(l, r, fresh)
}

// combine implements every rule but F12–F14, which fuser.combine handles
// with its chain state.
func combine(l, r *ir.Op, fresh bool) (res *ir.Op, isNew bool) {
	switch k := l.Kind; {
	case k.Merges() && k.Pairwise(): // F1 (puts), F3 (get)
		if r.Kind == l.Kind && sameFirstSize(l.Src, r.Src) && l.ChannelType == r.ChannelType && tbgEqual(l, r) {
			f := accumulator(l, fresh)
			f.Src = append(f.Src, r.Src...)
			f.Dst = append(f.Dst, r.Dst...)
			f.ChannelIDs = append(f.ChannelIDs, r.ChannelIDs...)
			return f, true
		}
	case k == plan.OpReadPutPacket: // F2
		if r.Kind == plan.OpReadPutPacket && refsEqual(l.Src, r.Src) && l.ChannelType == r.ChannelType && tbgEqual(l, r) {
			f := accumulator(l, fresh)
			f.Dst = append(f.Dst, r.Dst...)
			f.ChannelIDs = append(f.ChannelIDs, r.ChannelIDs...)
			return f, true
		}
	case k.Family() == plan.FamReduce:
		if f := combineReduce(l, r, fresh); f != nil {
			return f, true
		}
	case k == plan.OpGroupLoadReduce: // F9
		if r.Kind == plan.OpMultiStore && l.SwitchBuffer == r.SwitchBuffer && l.Size == r.Size &&
			chunkEqual(l.SwitchChunk, r.SwitchChunk) && intsEqual(l.ChannelIDs, r.ChannelIDs) &&
			l.ChannelType == r.ChannelType {
			return &ir.Op{
				Kind:         plan.OpMultiLoadReduceStore,
				Pos:          l.Pos,
				SwitchBuffer: l.SwitchBuffer,
				Size:         l.Size,
				SrcIndex:     []int{l.BufferOffset},
				DstIndex:     []int{r.BufferOffset},
				ChannelIDs:   append([]int(nil), l.ChannelIDs...),
				ChannelType:  l.ChannelType,
				ReduceOp:     l.ReduceOp,
			}, true
		}
	case k.Merges(): // F10, F11: semaphores (the other data-sync ops are fuser.combineOps')
		if r.Kind == l.Kind {
			f := accumulator(l, fresh)
			f.SemaphoreIDs = append(f.SemaphoreIDs, r.SemaphoreIDs...)
			f.DataSync |= r.DataSync
			return f, true
		}
	case k == plan.OpNop:
		switch {
		case r.Kind == plan.OpNop: // F15
			return l, false
		case r.Kind == plan.OpBarrier: // F16
			return r, false
		case r.Kind == plan.OpPipeline && profile(r)&ir.SyncBefore != 0: // F18 (Q2: r stays unfused)
			return r, false
		}
	case k == plan.OpBarrier:
		if r.Kind == plan.OpNop { // F17
			return l, false
		}
	case k == plan.OpPipeline:
		if r.Kind == plan.OpNop && profile(l)&ir.SyncAfter != 0 { // F19
			return l, false
		}
	}
	elide(l, r)
	return nil, false
}

// combineReduce implements F4–F8, the rules whose left operand is a
// reduction.
func combineReduce(l, r *ir.Op, fresh bool) *ir.Op {
	switch {
	case r.Kind == l.Kind && (l.Kind == plan.OpReduce || l.Kind == plan.OpReducePacket || l.Kind == plan.OpReadReduce): // F4
		if len(l.LocalSrc) == 0 || len(r.LocalSrc) == 0 || l.LocalSrc[0] != r.LocalSrc[0] ||
			!refsEqual(l.LocalDst, r.LocalDst) || l.ChannelType != r.ChannelType || l.ReduceOp != r.ReduceOp || !tbgEqual(l, r) {
			return nil
		}
		f := accumulator(l, fresh)
		f.LocalSrc = append(f.LocalSrc, r.LocalSrc[1:]...)
		f.RemoteSrc = append(f.RemoteSrc, r.RemoteSrc...)
		f.ChannelIDs = append(f.ChannelIDs, r.ChannelIDs...)
		return f
	case r.Kind == plan.OpPut && l.Kind.Family() == plan.FamReduce && !l.Kind.Packet(), // F5
		r.Kind == plan.OpPutPacket && (l.Kind == plan.OpReducePacket || l.Kind == plan.OpReduceSendPacket): // F6
		if !firstEqual(l.LocalDst, r.Src) || r.ChannelType != ir.Memory || !tbgEqual(l, r) {
			return nil
		}
		return absorbPut(l, r, fresh)
	case r.Kind == plan.OpCopyPacket && l.Kind == plan.OpReducePacket: // F7
		if !firstEqual(l.LocalDst, r.Src) || !tbgEqual(l, r) {
			return nil
		}
		f := accumulator(l, fresh)
		f.LocalPktDst = append([]ir.Ref(nil), r.Dst...)
		f.Kind = reduceKind(f)
		return f
	case l.Kind == plan.OpReduceCopyPacket || l.Kind == plan.OpReduceCopySendPacket: // F8
		ok := r.Kind == plan.OpPutPacket && firstEqual(l.LocalDst, r.Src) ||
			r.Kind == plan.OpReadPutPacket && firstEqual(l.LocalPktDst, r.Src)
		if !ok || r.ChannelType != ir.Memory || !tbgEqual(l, r) {
			return nil
		}
		return absorbPut(l, r, fresh)
	}
	return nil
}

// absorbPut appends put r to reduction l (F5, F6, F8).
func absorbPut(l, r *ir.Op, fresh bool) *ir.Op {
	f := accumulator(l, fresh)
	f.RemoteDst = append(f.RemoteDst, r.Dst...)
	f.PutChannelIDs = append(f.PutChannelIDs, r.ChannelIDs...)
	f.ChannelType = ir.Memory
	f.Kind = reduceKind(f)
	return f
}

// reduceKind re-derives a fused reduction's name from its fields (docs/passes.md §2.2).
// The invalid combination is unreachable from the fusion rules.
func reduceKind(o *ir.Op) plan.OpType {
	k, ok := ir.ReduceKindOf(o)
	if !ok {
		panic("passes: fused a packet reduction with remote sources")
	}
	return k
}

// accumulator returns the op a fusion rule extends: l itself when it is
// already a private fused op, else a new op with l's fields and private
// copies of every list a later rule may extend.
func accumulator(l *ir.Op, fresh bool) *ir.Op {
	if fresh {
		return l
	}
	f := new(ir.Op)
	*f = *l
	f.Src = clone(l.Src)
	f.Dst = clone(l.Dst)
	f.LocalSrc = clone(l.LocalSrc)
	f.LocalDst = clone(l.LocalDst)
	f.LocalPktDst = clone(l.LocalPktDst)
	f.RemoteSrc = clone(l.RemoteSrc)
	f.RemoteDst = clone(l.RemoteDst)
	f.ChannelIDs = clone(l.ChannelIDs)
	f.PutChannelIDs = clone(l.PutChannelIDs)
	f.SemaphoreIDs = clone(l.SemaphoreIDs)
	f.Fused = clone(l.Fused)
	return f
}

// clone copies s with room to grow; nil stays nil.
func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, 2*len(s)+2), s...)
}

// elide applies the side effects of a failed combination (docs/passes.md §4.4).
func elide(l, r *ir.Op) {
	lds, rds := l.Kind.IsDataSync(), r.Kind.IsDataSync()
	switch {
	case lds && rds:
		if r.DataSync&ir.SyncBefore != 0 {
			l.DataSync &^= ir.SyncAfter
		}
	case lds && r.Kind.IsSync():
		l.DataSync &^= ir.SyncAfter
	case lds && r.Kind == plan.OpPipeline:
		if profile(r)&ir.SyncBefore != 0 {
			l.DataSync &^= ir.SyncAfter
		}
	case rds && l.Kind.IsSync():
		r.DataSync &^= ir.SyncBefore
	case rds && l.Kind == plan.OpPipeline:
		if profile(l)&ir.SyncAfter != 0 {
			r.DataSync &^= ir.SyncBefore
		}
	}
}

// profile summarizes how a pipeline's body syncs at its ends (docs/passes.md §4.5): before
// if it starts with a sync point or a data-sync op syncing before; a body
// ending with a sync point also counts as before (Q5), one ending with a
// data-sync op syncing after counts as after.
func profile(p *ir.Op) ir.SyncType {
	if len(p.Body) == 0 {
		return ir.SyncNone
	}
	s := ir.SyncNone
	first, last := p.Body[0], p.Body[len(p.Body)-1]
	if first.Kind.IsSync() {
		s |= ir.SyncBefore
	} else if first.Kind.IsDataSync() {
		s |= first.DataSync & ir.SyncBefore
	}
	if last.Kind.IsSync() {
		s |= ir.SyncBefore
	} else if last.Kind.IsDataSync() {
		s |= last.DataSync & ir.SyncAfter
	}
	return s
}

func tbgEqual(l, r *ir.Op) bool {
	if l.TBG == nil || r.TBG == nil {
		return l.TBG == r.TBG
	}
	return *l.TBG == *r.TBG
}

func sameFirstSize(l, r []ir.Ref) bool {
	return len(l) > 0 && len(r) > 0 && l[0].Size == r[0].Size
}

func firstEqual(l, r []ir.Ref) bool {
	return len(l) > 0 && len(r) > 0 && l[0] == r[0]
}

func refsEqual(l, r []ir.Ref) bool {
	if len(l) != len(r) {
		return false
	}
	for i := range l {
		if l[i] != r[i] {
			return false
		}
	}
	return true
}

func intsEqual(l, r []int) bool {
	if len(l) != len(r) {
		return false
	}
	for i := range l {
		if l[i] != r[i] {
			return false
		}
	}
	return true
}

func chunkEqual(l, r *ir.Chunk) bool {
	if l == nil || r == nil {
		return l == r
	}
	return *l == *r
}
