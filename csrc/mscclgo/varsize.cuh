// varsize.cuh holds the prologue step of variable-size (alltoallv) plans:
// every block resolves the byte regions of its operands and the iteration
// counts of its pipelines from the call's table (mg_vtable, written by the
// host before each launch) and the plan's operand terms (mg_vterm), into
// the shared-memory copies the interpreter reads. It computes what
// executor.VarPlan.Bind computes on the host (docs/executor.md §14), so
// the op records and the launch arguments stay the same for every call
// and a captured CUDA graph replays with new counts. Included by
// interp.cuh, unchanged under nvcc and g++.
#ifndef MSCCLGO_VARSIZE_CUH
#define MSCCLGO_VARSIZE_CUH

#include "mscclgo/layout.h"
#include "mscclgo/prim.h"

namespace mg {

// var_split is the start of part i of total units cut into n parts, the
// remainder going to the lowest parts (executor.splitUnits).
MG_DEV uint64_t var_split(uint64_t total, uint64_t i, uint64_t n) {
  uint64_t q = total / n, r = total % n;
  return i * q + (i < r ? i : r);
}

// var_block_bytes resolves an input or output term: its byte offset and
// its size before any thread-block-group split.
MG_DEV void var_block_bytes(const mg_vtable* v, const mg_vterm& t, uint64_t* off, uint64_t* size) {
  uint64_t n = v->n_ranks, per = v->per, e = v->elem;
  const uint64_t* tab = reinterpret_cast<const uint64_t*>(v + 1);
  const uint64_t* counts = tab + (t.buf == MG_OUTPUT ? 2 * n * n : 0) + uint64_t(t.owner) * n;
  const uint64_t* displs = counts + n * n;
  uint64_t b = t.index / per, j = t.index % per;
  uint64_t c = counts[b];
  uint64_t lo = var_split(c, j, per), hi = var_split(c, j + t.size, per);
  *off = (displs[b] + lo) * e;
  *size = (hi - lo) * e;
}

// resolve_var overwrites the block's shared-memory regions (n_regions,
// term i for region i) and the iteration counts of its pipelines (a
// pipeline runs until its body's largest operand is covered). Every
// thread of the block calls it.
MG_DEV void resolve_var(const mg_args* a, const mg_block* blk, mg_region* regs, mg_op* ops) {
  const mg_vtable* v = reinterpret_cast<const mg_vtable*>(a->vtable);
  const mg_vterm* terms = reinterpret_cast<const mg_vterm*>(a->vterms) + blk->first_region;
  uint64_t e = v->elem;
  for (uint32_t i = tid(); i < blk->n_regions; i += nthreads()) {
    const mg_vterm& t = terms[i];
    uint64_t off = 0, size = 0;
    if (t.buf == MG_SCRATCH) {
      off = uint64_t(t.index) * v->chunk_bytes;
      size = uint64_t(t.size) * v->chunk_bytes;
      if (t.counterpart >= 0) {
        uint64_t ignored;
        var_block_bytes(v, terms[t.counterpart], &ignored, &size);
      }
    } else {
      var_block_bytes(v, t, &off, &size);
    }
    if (t.tbg_n > 0) {
      // In elements, or in bytes where a scratch span of whole chunks is
      // not a multiple of the element.
      uint64_t u = size % e == 0 ? e : 1;
      uint64_t lo = var_split(size / u, t.tbg_id, t.tbg_n) * u;
      uint64_t hi = var_split(size / u, uint64_t(t.tbg_id) + 1, t.tbg_n) * u;
      off += lo;
      size = hi - lo;
    }
    regs[i].offset = off;
    regs[i].size = size;
  }
  block_sync();
  for (uint32_t i = tid(); i < blk->n_ops; i += nthreads()) {
    mg_op* op = ops + i;
    if (op->type != MG_PIPELINE) continue;
    uint64_t big = 0;
    for (uint32_t j = 1; j <= op->n_body; j++) {
      const mg_op* b = op + j;
      uint32_t nr = uint32_t(b->n_src) + b->n_dst;
      for (uint32_t k = 0; k < nr; k++) {
        uint64_t s = regs[b->first_region + k].size;
        big = s > big ? s : big;
      }
    }
    op->iterations = op->unit_size == 0 ? 0 : uint32_t((big + op->unit_size - 1) / op->unit_size);
  }
  block_sync();
}

}  // namespace mg

#endif  // MSCCLGO_VARSIZE_CUH
