package passes

import (
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// ResolveDependencies is pass 4, auto-sync (docs/passes.md §6). It reads the local buffer
// accesses of one thread block's ops (docs/passes.md §6.1: which operands are read and
// written; remote operands, switch ops, rppkt and the packet side of packet
// ops are not tracked) and returns the list with a new nop before every op
// that reads or writes a range of the rank's input, output or scratch
// buffer that an earlier op wrote, or writes a range an earlier op read,
// since the last sync point. Nops and barriers are sync points; data-sync
// ops are not (their pass-3 nops are). After a conflict the tracker keeps
// only the conflicting access and what follows, so hazards against the
// op's earlier accesses are missed (Q7), as in the reference.
//
// A pipeline's body is resolved with its own tracker; at the outer level
// the pipeline is one op owning every access of its body. Fused ops are
// single owners. At most one nop is inserted per op; nothing is removed.
// The input slice is not modified.
//
// Needs: data-sync nops in place. Establishes: no unsynchronized
// intra-block hazard on local buffers (as the reference defines them).
func ResolveDependencies(ops []*ir.Op) []*ir.Op {
	var s state
	return s.resolveTB(ops)
}

func (s *state) resolveTB(ops []*ir.Op) []*ir.Op { return s.resolve(ops, &s.outer) }

func (s *state) resolve(ops []*ir.Op, t *tracker) []*ir.Op {
	t.clear()
	var out []*ir.Op
	for i, o := range ops {
		if o.Kind.IsSync() {
			t.clear()
		} else {
			if o.Kind == plan.OpPipeline {
				o.Body = s.resolve(o.Body, &s.inner)
			}
			if t.recordOp(o, o) {
				if out == nil {
					out = make([]*ir.Op, i, len(ops)+len(ops)/4+4)
					copy(out, ops[:i])
				}
				out = append(out, s.nops.nop())
			}
		}
		if out != nil {
			out = append(out, o)
		}
	}
	if out == nil {
		return ops
	}
	return out
}

// recordOp feeds the accesses of o, in the order of docs/passes.md §6.1, to the tracker
// with the given owner and reports whether any of them conflicted. Every
// access is recorded, also after a conflict.
func (t *tracker) recordOp(o, owner *ir.Op) bool {
	c := false
	switch k := o.Kind; {
	case k == plan.OpCopy:
		c = t.refs(o.Src, owner, false)
		c = t.refs(o.Dst, owner, true) || c
	case k == plan.OpCopyPacket, k.Family() == plan.FamPut && k != plan.OpReadPutPacket: // the put family reads its local sources
		c = t.refs(o.Src, owner, false)
	case k == plan.OpUnpackPacket, k == plan.OpGet:
		c = t.refs(o.Dst, owner, true)
	case k.Family() == plan.FamReduce && !k.Packet(): // the reduce family, without packets
		c = t.refs(o.LocalSrc, owner, false)
		c = t.refs(o.LocalDst, owner, true) || c
	case k.Family() == plan.FamReduce: // the reduce family, with packets
		if len(o.LocalSrc) > 0 {
			c = t.refs(o.LocalSrc[1:], owner, false) // Q8: the first source is not tracked
		}
		c = t.refs(o.LocalDst, owner, true) || c
	case k == plan.OpPipeline:
		for _, in := range o.Body {
			c = t.recordOp(in, owner) || c
		}
	}
	return c
}

func (t *tracker) refs(refs []ir.Ref, owner *ir.Op, write bool) bool {
	c := false
	for _, r := range refs {
		if r.Remote || r.Buffer > ir.Scratch {
			continue
		}
		c = t.record(&t.lists[r.Buffer], access{start: r.Index, end: r.Index + r.Size - 1, owner: owner, write: write}) || c
	}
	return c
}

// access is one tracked interval [start, end] (end inclusive, as in the
// reference; a size-0 chunk has end = start-1) with its owner and kind.
// keyWrite is the kind used for conflict checks, valWrite the kind given to
// the pieces that survive a trim: they differ only when a size-0 access
// re-stores an interval with the same bounds (the reference's dict keeps
// the old key and takes the new value).
type access struct {
	start, end int
	owner      *ir.Op
	write      bool // keyWrite
	valWrite   bool
}

// tracker is the hazard tracker of docs/passes.md §6.2: per buffer type, the stored
// intervals sorted by (start, end). With chunks of size ≥ 1 they are
// disjoint.
type tracker struct {
	lists [3]ivList
}

func (t *tracker) clear() {
	for i := range t.lists {
		t.lists[i].reset()
	}
}

// record stores a in l, trimming the overlapped parts of stored intervals
// or, on a conflict (overlap with another owner's interval where either
// side writes), clearing every list first. It reports the conflict.
func (t *tracker) record(l *ivList, a access) bool {
	a.valWrite = a.write
	conflict := false
	for l.len() > 0 {
		i := l.lowerBound(a.start)
		e := *l.at(i)
		if !(a.start <= e.end && e.start <= a.end) {
			break
		}
		if e.owner != a.owner && (e.write || a.write) {
			t.clear()
			conflict = true
			break
		}
		l.remove(i)
		if e.end > a.end {
			l.store(access{start: a.end + 1, end: e.end, owner: e.owner, write: e.valWrite, valWrite: e.valWrite})
		}
		if e.start < a.start {
			l.store(access{start: e.start, end: a.start - 1, owner: e.owner, write: e.valWrite, valWrite: e.valWrite})
		}
	}
	l.store(a)
	return conflict
}

// ivList is a sorted list of accesses kept in the middle of a buffer with
// slack on both sides, so that the usual ascending or descending streams
// of accesses insert at an end in O(1); other insertions move the shorter
// side.
type ivList struct {
	buf    []access
	lo, hi int // live items are buf[lo:hi]
}

func (l *ivList) len() int         { return l.hi - l.lo }
func (l *ivList) at(i int) *access { return &l.buf[l.lo+i] }
func (l *ivList) items() []access  { return l.buf[l.lo:l.hi] }
func (l *ivList) reset()           { l.lo, l.hi = len(l.buf)/2, len(l.buf)/2 }

func less(a, b *access) bool       { return a.start < b.start || a.start == b.start && a.end < b.end }
func sameBounds(a, b *access) bool { return a.start == b.start && a.end == b.end }

// lowerBound is the reference's binary search for the first stored
// interval whose end is ≥ start, over positions [0, len-1] (it returns
// len-1 when there is none). With disjoint intervals the ends ascend; the
// exact probe sequence matters only for size-0 intervals.
func (l *ivList) lowerBound(start int) int {
	lo, hi := 0, l.len()-1
	for lo < hi {
		mid := (lo + hi) / 2
		if start <= l.at(mid).end {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// store is the reference's dict assignment: a stored interval with the
// same bounds keeps its owner and key kind and takes a's kind as value;
// otherwise a is inserted in (start, end) order.
func (l *ivList) store(a access) {
	items := l.items()
	n := len(items)
	// Fast path: append after the last item.
	if n == 0 || less(&items[n-1], &a) {
		l.insertAt(n, a)
		return
	}
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if less(&items[mid], &a) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < n && sameBounds(&items[lo], &a) {
		items[lo].valWrite = a.write
		return
	}
	l.insertAt(lo, a)
}

func (l *ivList) insertAt(i int, a access) {
	n := l.len()
	front := i < n/2
	switch {
	case front && l.lo > 0:
		copy(l.buf[l.lo-1:], l.buf[l.lo:l.lo+i])
		l.lo--
	case !front && l.hi < len(l.buf):
		copy(l.buf[l.lo+i+1:l.hi+1], l.buf[l.lo+i:l.hi])
		l.hi++
	default:
		// Re-centre in a buffer twice the live size: a side runs out of
		// slack again only after n/2 more insertions.
		size := max(16, 2*(n+1))
		nb := make([]access, size)
		lo := (size - n - 1) / 2
		copy(nb[lo:], l.buf[l.lo:l.lo+i])
		copy(nb[lo+i+1:], l.buf[l.lo+i:l.hi])
		l.buf, l.lo, l.hi = nb, lo, lo+n+1
	}
	l.buf[l.lo+i] = a
}

func (l *ivList) remove(i int) {
	n := l.len()
	if i < n/2 {
		copy(l.buf[l.lo+1:], l.buf[l.lo:l.lo+i])
		l.buf[l.lo] = access{}
		l.lo++
		return
	}
	copy(l.buf[l.lo+i:], l.buf[l.lo+i+1:l.hi])
	l.hi--
	l.buf[l.hi] = access{}
}
