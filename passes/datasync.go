package passes

import (
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// InsertDataSync is pass 3 (docs/passes.md §5). It reads the data_sync bits of the
// data-sync ops (semaphores, signal, wait, flush and their relaxed forms)
// as fusion left them, and returns the list with a new nop before every
// such op whose bits include before and after every one whose bits include
// after, recursing into pipeline bodies. No other op gets nops, and
// adjacent nops are kept. The data_sync bits themselves are left as they
// are. The input slice is not modified (a new one is returned when nops
// are added).
//
// Needs: fusion done (or skipped). Establishes: every sync a data-sync op
// asks for is an explicit nop, which auto-sync relies on to reset its
// hazard tracker.
func InsertDataSync(ops []*ir.Op) []*ir.Op {
	var s state
	return s.insertDataSync(ops)
}

func (s *state) insertDataSync(ops []*ir.Op) []*ir.Op {
	extra := 0
	for _, o := range ops {
		if o.Kind == plan.OpPipeline {
			o.Body = s.insertDataSync(o.Body)
		}
		if o.Kind.IsDataSync() {
			extra += int(o.DataSync&ir.SyncBefore) + int(o.DataSync&ir.SyncAfter)>>1
		}
	}
	if extra == 0 {
		return ops
	}
	out := make([]*ir.Op, 0, len(ops)+extra)
	for _, o := range ops {
		ds := o.Kind.IsDataSync()
		if ds && o.DataSync&ir.SyncBefore != 0 {
			out = append(out, s.nops.nop())
		}
		out = append(out, o)
		if ds && o.DataSync&ir.SyncAfter != 0 {
			out = append(out, s.nops.nop())
		}
	}
	return out
}

// nopAlloc hands out distinct nop ops carved from larger blocks, so that
// inserting many nops costs few allocations.
type nopAlloc struct {
	block []ir.Op
}

func (n *nopAlloc) nop() *ir.Op {
	if len(n.block) == 0 {
		n.block = make([]ir.Op, 128)
	}
	o := &n.block[0]
	n.block = n.block[1:]
	o.Kind = plan.OpNop
	return o
}
