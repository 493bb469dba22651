//go:build cgo

// Package clayout reports the device layout as the C compiler sees it
// (csrc/mscclgo/layout.h): the size of every record and the offset and
// size of every field, named as the Go mirrors in package gpu name them.
// Only the layout test imports it.
package clayout

/*
#cgo CFLAGS: -I${SRCDIR}/../../../csrc
#include <stddef.h>
#include "mscclgo/layout.h"

typedef struct mg_field {
  const char* type;
  const char* field;
  size_t offset;
  size_t size;
} mg_field;

static const mg_field mg_fields[] = {
  {"mgRegion", "", 0, sizeof(mg_region)},
  {"mgRegion", "Offset", offsetof(mg_region, offset), sizeof(((mg_region*)0)->offset)},
  {"mgRegion", "Size", offsetof(mg_region, size), sizeof(((mg_region*)0)->size)},
  {"mgRegion", "Rank", offsetof(mg_region, rank), sizeof(((mg_region*)0)->rank)},
  {"mgRegion", "Buf", offsetof(mg_region, buf), sizeof(((mg_region*)0)->buf)},
  {"mgRegion", "Kind", offsetof(mg_region, kind), sizeof(((mg_region*)0)->kind)},
  {"mgRegion", "Sw", offsetof(mg_region, sw), sizeof(((mg_region*)0)->sw)},
  {"mgOp", "", 0, sizeof(mg_op)},
  {"mgOp", "Type", offsetof(mg_op, type), sizeof(((mg_op*)0)->type)},
  {"mgOp", "ChanType", offsetof(mg_op, chan_type), sizeof(((mg_op*)0)->chan_type)},
  {"mgOp", "NSrc", offsetof(mg_op, n_src), sizeof(((mg_op*)0)->n_src)},
  {"mgOp", "NDst", offsetof(mg_op, n_dst), sizeof(((mg_op*)0)->n_dst)},
  {"mgOp", "NIDs", offsetof(mg_op, n_ids), sizeof(((mg_op*)0)->n_ids)},
  {"mgOp", "BarrierID", offsetof(mg_op, barrier_id), sizeof(((mg_op*)0)->barrier_id)},
  {"mgOp", "Pad0", offsetof(mg_op, pad0), sizeof(((mg_op*)0)->pad0)},
  {"mgOp", "FirstRegion", offsetof(mg_op, first_region), sizeof(((mg_op*)0)->first_region)},
  {"mgOp", "FirstID", offsetof(mg_op, first_id), sizeof(((mg_op*)0)->first_id)},
  {"mgOp", "NThreadBlocks", offsetof(mg_op, n_threadblocks), sizeof(((mg_op*)0)->n_threadblocks)},
  {"mgOp", "Iterations", offsetof(mg_op, iterations), sizeof(((mg_op*)0)->iterations)},
  {"mgOp", "NBody", offsetof(mg_op, n_body), sizeof(((mg_op*)0)->n_body)},
  {"mgOp", "Pad1", offsetof(mg_op, pad1), sizeof(((mg_op*)0)->pad1)},
  {"mgOp", "UnitSize", offsetof(mg_op, unit_size), sizeof(((mg_op*)0)->unit_size)},
  {"mgBlock", "", 0, sizeof(mg_block)},
  {"mgBlock", "Rank", offsetof(mg_block, rank), sizeof(((mg_block*)0)->rank)},
  {"mgBlock", "TB", offsetof(mg_block, tb), sizeof(((mg_block*)0)->tb)},
  {"mgBlock", "FirstOp", offsetof(mg_block, first_op), sizeof(((mg_block*)0)->first_op)},
  {"mgBlock", "NOps", offsetof(mg_block, n_ops), sizeof(((mg_block*)0)->n_ops)},
  {"mgBlock", "FirstRegion", offsetof(mg_block, first_region), sizeof(((mg_block*)0)->first_region)},
  {"mgBlock", "NRegions", offsetof(mg_block, n_regions), sizeof(((mg_block*)0)->n_regions)},
  {"mgBlock", "FirstID", offsetof(mg_block, first_id), sizeof(((mg_block*)0)->first_id)},
  {"mgBlock", "NIDs", offsetof(mg_block, n_ids), sizeof(((mg_block*)0)->n_ids)},
  {"mgSwitch", "", 0, sizeof(mg_switch)},
  {"mgSwitch", "Members", offsetof(mg_switch, members), sizeof(((mg_switch*)0)->members)},
  {"mgSwitch", "MC", offsetof(mg_switch, mc), sizeof(((mg_switch*)0)->mc)},
  {"mgSwitch", "NMembers", offsetof(mg_switch, n_members), sizeof(((mg_switch*)0)->n_members)},
  {"mgSwitch", "Buf", offsetof(mg_switch, buf), sizeof(((mg_switch*)0)->buf)},
  {"mgBarrier", "", 0, sizeof(mg_barrier)},
  {"mgBarrier", "Count", offsetof(mg_barrier, count), sizeof(((mg_barrier*)0)->count)},
  {"mgBarrier", "Gen", offsetof(mg_barrier, gen), sizeof(((mg_barrier*)0)->gen)},
  {"mgTrigger", "", 0, sizeof(mg_trigger)},
  {"mgTrigger", "W", offsetof(mg_trigger, w), sizeof(((mg_trigger*)0)->w)},
  {"mgFifo", "", 0, sizeof(mg_fifo)},
  {"mgFifo", "Tail", offsetof(mg_fifo, tail), sizeof(((mg_fifo*)0)->tail)},
  {"mgFifo", "Pad", offsetof(mg_fifo, pad), sizeof(((mg_fifo*)0)->pad)},
  {"mgFifo", "Slots", offsetof(mg_fifo, slots), sizeof(((mg_fifo*)0)->slots)},
  {"mgRank", "", 0, sizeof(mg_rank)},
  {"mgRank", "Buf", offsetof(mg_rank, buf), sizeof(((mg_rank*)0)->buf)},
  {"mgRank", "MemInbound", offsetof(mg_rank, mem_inbound), sizeof(((mg_rank*)0)->mem_inbound)},
  {"mgRank", "MemExpected", offsetof(mg_rank, mem_expected), sizeof(((mg_rank*)0)->mem_expected)},
  {"mgRank", "MemPeer", offsetof(mg_rank, mem_peer), sizeof(((mg_rank*)0)->mem_peer)},
  {"mgRank", "PortInbound", offsetof(mg_rank, port_inbound), sizeof(((mg_rank*)0)->port_inbound)},
  {"mgRank", "PortExpected", offsetof(mg_rank, port_expected), sizeof(((mg_rank*)0)->port_expected)},
  {"mgRank", "Sems", offsetof(mg_rank, sems), sizeof(((mg_rank*)0)->sems)},
  {"mgRank", "Barriers", offsetof(mg_rank, barriers), sizeof(((mg_rank*)0)->barriers)},
  {"mgRank", "Switches", offsetof(mg_rank, switches), sizeof(((mg_rank*)0)->switches)},
  {"mgRank", "Fifo", offsetof(mg_rank, fifo), sizeof(((mg_rank*)0)->fifo)},
  {"mgRank", "FifoHead", offsetof(mg_rank, fifo_head), sizeof(((mg_rank*)0)->fifo_head)},
  {"mgRank", "ReuseSlot", offsetof(mg_rank, reuse_slot), sizeof(((mg_rank*)0)->reuse_slot)},
  {"mgRank", "FifoTail", offsetof(mg_rank, fifo_tail), sizeof(((mg_rank*)0)->fifo_tail)},
  {"mgRank", "NMem", offsetof(mg_rank, n_mem), sizeof(((mg_rank*)0)->n_mem)},
  {"mgRank", "NPort", offsetof(mg_rank, n_port), sizeof(((mg_rank*)0)->n_port)},
  {"mgRank", "NSwitch", offsetof(mg_rank, n_switch), sizeof(((mg_rank*)0)->n_switch)},
  {"mgRank", "NSems", offsetof(mg_rank, n_sems), sizeof(((mg_rank*)0)->n_sems)},
  {"mgProgress", "", 0, sizeof(mg_progress)},
  {"mgProgress", "Op", offsetof(mg_progress, op), sizeof(((mg_progress*)0)->op)},
  {"mgProgress", "Iter", offsetof(mg_progress, iter), sizeof(((mg_progress*)0)->iter)},
  {"mgProgress", "State", offsetof(mg_progress, state), sizeof(((mg_progress*)0)->state)},
  {"mgProgress", "Beat", offsetof(mg_progress, beat), sizeof(((mg_progress*)0)->beat)},
  {"mgProgress", "WaitKind", offsetof(mg_progress, wait_kind), sizeof(((mg_progress*)0)->wait_kind)},
  {"mgProgress", "WaitA", offsetof(mg_progress, wait_a), sizeof(((mg_progress*)0)->wait_a)},
  {"mgProgress", "WaitCt", offsetof(mg_progress, wait_ct), sizeof(((mg_progress*)0)->wait_ct)},
  {"mgProgress", "Pad", offsetof(mg_progress, pad), sizeof(((mg_progress*)0)->pad)},
  {"mgProgress", "WaitExpect", offsetof(mg_progress, wait_expect), sizeof(((mg_progress*)0)->wait_expect)},
  {"mgProgress", "WaitGot", offsetof(mg_progress, wait_got), sizeof(((mg_progress*)0)->wait_got)},
  {"mgProgress", "WaitAt", offsetof(mg_progress, wait_at), sizeof(((mg_progress*)0)->wait_at)},
  {"mgControl", "", 0, sizeof(mg_control)},
  {"mgControl", "Abort", offsetof(mg_control, abort), sizeof(((mg_control*)0)->abort)},
  {"mgControl", "Ended", offsetof(mg_control, ended), sizeof(((mg_control*)0)->ended)},
  {"mgControl", "Pad", offsetof(mg_control, pad), sizeof(((mg_control*)0)->pad)},
  {"mgArgs", "", 0, sizeof(mg_args)},
  {"mgArgs", "Blocks", offsetof(mg_args, blocks), sizeof(((mg_args*)0)->blocks)},
  {"mgArgs", "Ops", offsetof(mg_args, ops), sizeof(((mg_args*)0)->ops)},
  {"mgArgs", "Regions", offsetof(mg_args, regions), sizeof(((mg_args*)0)->regions)},
  {"mgArgs", "IDs", offsetof(mg_args, ids), sizeof(((mg_args*)0)->ids)},
  {"mgArgs", "Ranks", offsetof(mg_args, ranks), sizeof(((mg_args*)0)->ranks)},
  {"mgArgs", "Progress", offsetof(mg_args, progress), sizeof(((mg_args*)0)->progress)},
  {"mgArgs", "Control", offsetof(mg_args, control), sizeof(((mg_args*)0)->control)},
  {"mgArgs", "ScratchOffset", offsetof(mg_args, scratch_offset), sizeof(((mg_args*)0)->scratch_offset)},
  {"mgArgs", "NBlocks", offsetof(mg_args, n_blocks), sizeof(((mg_args*)0)->n_blocks)},
  {"mgArgs", "NRanks", offsetof(mg_args, n_ranks), sizeof(((mg_args*)0)->n_ranks)},
  {"mgArgs", "Flag", offsetof(mg_args, flag), sizeof(((mg_args*)0)->flag)},
  {"mgArgs", "DType", offsetof(mg_args, dtype), sizeof(((mg_args*)0)->dtype)},
  {"mgArgs", "Packet", offsetof(mg_args, packet), sizeof(((mg_args*)0)->packet)},
  {"mgArgs", "Shmem", offsetof(mg_args, shmem), sizeof(((mg_args*)0)->shmem)},
  {"mgArgs", "VTerms", offsetof(mg_args, vterms), sizeof(((mg_args*)0)->vterms)},
  {"mgArgs", "VTable", offsetof(mg_args, vtable), sizeof(((mg_args*)0)->vtable)},
  {"mgArgs", "Epoch", offsetof(mg_args, epoch), sizeof(((mg_args*)0)->epoch)},
  {"mgArgs", "ScratchHalf", offsetof(mg_args, scratch_half), sizeof(((mg_args*)0)->scratch_half)},
  {"mgArgs", "RedOp", offsetof(mg_args, redop), sizeof(((mg_args*)0)->redop)},
  {"mgArgs", "Pad", offsetof(mg_args, pad), sizeof(((mg_args*)0)->pad)},
  {"mgShared", "", 0, sizeof(mg_shared)},
  {"mgShared", "Blk", offsetof(mg_shared, blk), sizeof(((mg_shared*)0)->blk)},
  {"mgShared", "Ops", offsetof(mg_shared, ops), sizeof(((mg_shared*)0)->ops)},
  {"mgShared", "Regions", offsetof(mg_shared, regions), sizeof(((mg_shared*)0)->regions)},
  {"mgShared", "IDs", offsetof(mg_shared, ids), sizeof(((mg_shared*)0)->ids)},
  {"mgShared", "Dead", offsetof(mg_shared, dead), sizeof(((mg_shared*)0)->dead)},
  {"mgShared", "Flag", offsetof(mg_shared, flag), sizeof(((mg_shared*)0)->flag)},
  {"mgVTerm", "", 0, sizeof(mg_vterm)},
  {"mgVTerm", "Index", offsetof(mg_vterm, index), sizeof(((mg_vterm*)0)->index)},
  {"mgVTerm", "Size", offsetof(mg_vterm, size), sizeof(((mg_vterm*)0)->size)},
  {"mgVTerm", "TBGID", offsetof(mg_vterm, tbg_id), sizeof(((mg_vterm*)0)->tbg_id)},
  {"mgVTerm", "TBGN", offsetof(mg_vterm, tbg_n), sizeof(((mg_vterm*)0)->tbg_n)},
  {"mgVTerm", "Owner", offsetof(mg_vterm, owner), sizeof(((mg_vterm*)0)->owner)},
  {"mgVTerm", "Counterpart", offsetof(mg_vterm, counterpart), sizeof(((mg_vterm*)0)->counterpart)},
  {"mgVTerm", "Buf", offsetof(mg_vterm, buf), sizeof(((mg_vterm*)0)->buf)},
  {"mgVTerm", "Pad", offsetof(mg_vterm, pad), sizeof(((mg_vterm*)0)->pad)},
  {"mgVTable", "", 0, sizeof(mg_vtable)},
  {"mgVTable", "ChunkBytes", offsetof(mg_vtable, chunk_bytes), sizeof(((mg_vtable*)0)->chunk_bytes)},
  {"mgVTable", "NRanks", offsetof(mg_vtable, n_ranks), sizeof(((mg_vtable*)0)->n_ranks)},
  {"mgVTable", "Per", offsetof(mg_vtable, per), sizeof(((mg_vtable*)0)->per)},
  {"mgVTable", "Elem", offsetof(mg_vtable, elem), sizeof(((mg_vtable*)0)->elem)},
  {"mgVTable", "Pad", offsetof(mg_vtable, pad), sizeof(((mg_vtable*)0)->pad)},
};

static const mg_field* mg_field_at(int i) { return &mg_fields[i]; }
static int mg_field_count(void) { return (int)(sizeof(mg_fields) / sizeof(mg_fields[0])); }
*/
import "C"

// Field is one record or field: Field is "" for the whole record.
type Field struct {
	Type, Field  string
	Offset, Size int
}

// Fields returns every record and field of layout.h, in declaration
// order.
func Fields() []Field {
	n := int(C.mg_field_count())
	out := make([]Field, 0, n)
	for i := 0; i < n; i++ {
		f := C.mg_field_at(C.int(i))
		out = append(out, Field{Type: C.GoString(f._type), Field: C.GoString(f.field), Offset: int(f.offset), Size: int(f.size)})
	}
	return out
}
