package passes

import (
	"fmt"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Replicate is pass 5 for one rank (docs/passes.md §7). With n = p.Instances it rewrites
// the rank in place:
//
//   - input, output and scratch chunk counts are multiplied by n; every
//     memory/port connected_to peer, switch channel and semaphore is
//     repeated n times in a row; remote buffers are left alone (Q15);
//   - thread block t becomes blocks t·n+k (k = 0..n-1), each a deep copy of
//     the original, in that order; block channel tables map c to c·n+k,
//     remote-buffer tables are unchanged;
//   - in copy k, semaphore and barrier ids map id to id·n+k, and every
//     chunk index (local and remote operands, switch offsets and chunks,
//     glres indices) maps index to index·n+k·size, except the packet
//     destination of recpkt/recspkt (Q11); tb-local channel indices,
//     remote buffer indices, tbg_info, sizes and pipeline parameters do not
//     change.
//
// Objects shared inside one thread block stay shared in its copy and are
// shifted once per use, as the reference's deep copy does: a barrier
// listing the block twice (Q12) and a user chunk given to several switch
// ops (Q13). Every signal/wait/flush id set is rebuilt in iteration order,
// which can reorder it (Q6); this happens also for n == 1, where the rest
// is the identity.
//
// With replication_policy none, an op with buffer operands (copy, put, get,
// reduce and switch families, also inside a pipeline) is an error wrapping
// ErrReplicationPolicy at the first such op (the reference's TypeError,
// Q10); other programs replicate as with interleaved.
//
// Needs: the final op lists (fusion, data-sync and auto-sync done).
func Replicate(p *ir.Program, g *ir.GPU) error {
	if p.Policy == ir.NoReplication {
		if tb, o := firstBufferOp(g); o != nil {
			return &Error{Pass: "replicate", Program: p.Name, Pos: o.Pos, Err: ErrReplicationPolicy,
				Msg: fmt.Sprintf("replication_policy=none cannot replicate %s on rank %d tb %d: "+
					"ops with buffer operands need the interleaved policy", o.Kind, g.ID, tb)}
		}
	}
	n := p.Instances
	g.InputChunks *= n
	g.OutputChunks *= n
	g.ScratchChunks *= n
	for i := range g.Channels {
		g.Channels[i].ConnectedTo = repeatEach(g.Channels[i].ConnectedTo, n)
	}
	g.Switches = repeatEach(g.Switches, n)
	g.Semaphores = repeatEach(g.Semaphores, n)
	if n == 1 {
		for _, tb := range g.ThreadBlocks {
			rebuildSets(tb.Ops)
		}
		return nil
	}
	r := replicator{n: n}
	tbs := make([]*ir.ThreadBlock, 0, len(g.ThreadBlocks)*max(n, 0))
	for _, tb := range g.ThreadBlocks {
		for k := 0; k < n; k++ {
			tbs = append(tbs, r.copyTB(tb, k))
		}
	}
	g.ThreadBlocks = tbs
	return nil
}

// firstBufferOp returns the first op with buffer operands in block order,
// looking inside pipelines, and its block id.
func firstBufferOp(g *ir.GPU) (int, *ir.Op) {
	var find func(ops []*ir.Op) *ir.Op
	find = func(ops []*ir.Op) *ir.Op {
		for _, o := range ops {
			switch o.Kind.Family() {
			case plan.FamCopy, plan.FamGet, plan.FamPut, plan.FamReduce, plan.FamSwitch:
				return o
			case plan.FamPipeline:
				if in := find(o.Body); in != nil {
					return in
				}
			}
		}
		return nil
	}
	for _, tb := range g.ThreadBlocks {
		if o := find(tb.Ops); o != nil {
			return tb.ID, o
		}
	}
	return -1, nil
}

// repeatEach returns s with each element repeated n times in a row.
func repeatEach[T any](s []T, n int) []T {
	if n == 1 {
		return s
	}
	out := make([]T, 0, len(s)*max(n, 0))
	for _, x := range s {
		for k := 0; k < n; k++ {
			out = append(out, x)
		}
	}
	return out
}

// rebuildSets replaces every id set by its deep copy (n == 1).
func rebuildSets(ops []*ir.Op) {
	for _, o := range ops {
		if o.IDSet != nil {
			o.IDSet = o.IDSet.Rebuilt()
		}
		if o.Kind == plan.OpPipeline {
			rebuildSets(o.Body)
		}
	}
}

// replicator makes the shifted copies of thread blocks for n > 1. Ops and
// refs are carved from blocks to keep allocations few. Lists a copy does
// not change (channel indices, packet destinations) are shared with the
// original.
type replicator struct {
	n, k     int
	ops      []ir.Op
	refs     []ir.Ref
	ints     []int
	barriers map[*ir.Op]*ir.Op       // this copy's barrier for an original one
	chunks   map[*ir.Chunk]*ir.Chunk // this copy's chunk for a user chunk
}

func (r *replicator) copyTB(tb *ir.ThreadBlock, k int) *ir.ThreadBlock {
	r.k = k
	clear(r.barriers)
	clear(r.chunks)
	c := &ir.ThreadBlock{ID: tb.ID*r.n + k, Ops: r.copyOps(tb.Ops)}
	if tb.Channels != nil {
		c.Channels = make([]ir.IDTable, len(tb.Channels))
		for i, t := range tb.Channels {
			ids := r.takeInts(len(t.IDs))
			for j, id := range t.IDs {
				ids[j] = id*r.n + k
			}
			c.Channels[i] = ir.IDTable{Type: t.Type, IDs: ids}
		}
	}
	if tb.RemoteRefs != nil {
		c.RemoteRefs = make([]ir.IDTable, len(tb.RemoteRefs))
		for i, t := range tb.RemoteRefs {
			c.RemoteRefs[i] = ir.IDTable{Type: t.Type, IDs: append([]int(nil), t.IDs...)}
		}
	}
	return c
}

func (r *replicator) copyOps(ops []*ir.Op) []*ir.Op {
	if ops == nil {
		return nil
	}
	out := make([]*ir.Op, len(ops))
	for i, o := range ops {
		out[i] = r.copyOp(o)
	}
	return out
}

func (r *replicator) copyOp(o *ir.Op) *ir.Op {
	n, k := r.n, r.k
	if o.Kind == plan.OpBarrier {
		c := r.barriers[o]
		if c == nil {
			c = r.newOp()
			*c = *o
			b := *o.Barrier
			c.Barrier = &b
			if r.barriers == nil {
				r.barriers = map[*ir.Op]*ir.Op{}
			}
			r.barriers[o] = c
		}
		c.Barrier.ID = c.Barrier.ID*n + k // once per occurrence (Q12)
		return c
	}
	c := r.newOp()
	*c = *o
	switch o.Kind.Family() {
	case plan.FamDataSync:
		if o.IDSet != nil {
			c.IDSet = o.IDSet.Rebuilt()
		}
		if o.SemaphoreIDs != nil {
			c.SemaphoreIDs = r.takeInts(len(o.SemaphoreIDs))
			for i, id := range o.SemaphoreIDs {
				c.SemaphoreIDs[i] = id*n + k
			}
		}
	case plan.FamCopy, plan.FamGet, plan.FamPut:
		c.Src = r.shiftRefs(o.Src)
		c.Dst = r.shiftRefs(o.Dst)
	case plan.FamReduce:
		c.LocalSrc = r.shiftRefs(o.LocalSrc)
		c.LocalDst = r.shiftRefs(o.LocalDst)
		c.RemoteSrc = r.shiftRefs(o.RemoteSrc)
		c.RemoteDst = r.shiftRefs(o.RemoteDst)
		// LocalPktDst is not shifted (Q11).
	case plan.FamSwitch:
		c.BufferOffset = o.BufferOffset*n + k*o.Size
		if o.SwitchChunk != nil {
			ch := r.chunks[o.SwitchChunk]
			if ch == nil {
				cp := *o.SwitchChunk
				ch = &cp
				if r.chunks == nil {
					r.chunks = map[*ir.Chunk]*ir.Chunk{}
				}
				r.chunks[o.SwitchChunk] = ch
			}
			ch.Index = ch.Index*n + k*o.Size // once per op sharing it (Q13)
			c.SwitchChunk = ch
		}
		c.SrcIndex = r.shiftIndices(o.SrcIndex, o.Size)
		c.DstIndex = r.shiftIndices(o.DstIndex, o.Size)
	case plan.FamPipeline:
		c.Body = r.copyOps(o.Body)
	}
	return c
}

func (r *replicator) shiftRefs(refs []ir.Ref) []ir.Ref {
	if refs == nil {
		return nil
	}
	out := r.takeRefs(len(refs))
	for i, x := range refs {
		x.Index = x.Index*r.n + r.k*x.Size
		out[i] = x
	}
	return out
}

func (r *replicator) shiftIndices(xs []int, size int) []int {
	if xs == nil {
		return nil
	}
	out := r.takeInts(len(xs))
	for i, x := range xs {
		out[i] = x*r.n + r.k*size
	}
	return out
}

const blockLen = 256

func (r *replicator) newOp() *ir.Op {
	if len(r.ops) == 0 {
		r.ops = make([]ir.Op, blockLen)
	}
	o := &r.ops[0]
	r.ops = r.ops[1:]
	return o
}

// takeRefs returns a slice of length m whose capacity is m, so appending
// to it cannot clobber its neighbours in the block.
func (r *replicator) takeRefs(m int) []ir.Ref {
	if m > blockLen {
		return make([]ir.Ref, m)
	}
	if len(r.refs) < m {
		r.refs = make([]ir.Ref, blockLen*4)
	}
	s := r.refs[:m:m]
	r.refs = r.refs[m:]
	return s
}

func (r *replicator) takeInts(m int) []int {
	if m > blockLen {
		return make([]int, m)
	}
	if len(r.ints) < m {
		r.ints = make([]int, blockLen*4)
	}
	s := r.ints[:m:m]
	r.ints = r.ints[m:]
	return s
}
