// interp.cuh holds the plan interpreter: the kernels mscclgo_interp_*
// run one CUDA block per plan thread block, every rank's blocks in one
// launch, with the semantics of docs/semantics.md §2-§4 as the CPU
// reference backend (executor/cpu) implements them. It is included by
// interp.cu (nvcc) and by host/kernel.cc (g++), unchanged.
// Section numbers (§) in this file refer to docs/semantics.md.
//
// One kernel per element type and LL packet size (Interp<DT, PKT>): the
// host picks the entry once per session, so nothing inside the data loops
// switches on either. Waits follow one discipline: the thread that needs
// a value polls device memory, reads the host's abort word (device
// memory) every kAbortEvery spins and publishes its wait after kReport
// spins; the other threads of the block wait at the block's barriers. No
// wait reads host-mapped memory: the only host-mapped accesses are the
// stores of port-channel triggers into the FIFO slots.
#ifndef MSCCLGO_INTERP_CUH
#define MSCCLGO_INTERP_CUH

#include "mscclgo/arith.h"
#include "mscclgo/layout.h"
#include "mscclgo/prim.h"
#include "mscclgo/varsize.cuh"

namespace mg {

// kNoUnit is the unit of ops outside pipelines (no clamping).
constexpr uint64_t kNoUnit = ~uint64_t(0);

// ops_at is the offset of the block's ops in its dynamic shared memory
// (the regions and the ids follow them, each array 8-byte aligned).
MG_DEV uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t(7); }
MG_DEV constexpr uint64_t ops_at() { return (sizeof(mg_shared) + 7) & ~uint64_t(7); }
MG_DEV uint64_t regions_at(uint32_t n_ops) { return ops_at() + align8(uint64_t(n_ops) * sizeof(mg_op)); }
MG_DEV uint64_t ids_at(uint32_t n_ops, uint32_t n_regions) {
  return regions_at(n_ops) + align8(uint64_t(n_regions) * sizeof(mg_region));
}

// Cold is a thread's state that is used rarely: kept in local memory
// (get_cold/put_cold, prim.h), a variable of run that Ctx points to (the
// Ctx itself stays in registers: were the cold fields in it, the whole
// Ctx would be kept in local memory, and the shared memory behind c.sh
// reached by generic accesses).
struct Cold {
  uint64_t tail;  // the FIFO tail this thread last read (a lower bound)
  uint32_t beat;  // thread 0's heartbeat count
  // The op loop's position (run): i, the op to run; p, the pipeline
  // whose body it is in; it, the iteration of that pipeline.
  uint32_t i, p, it;
};

// Ctx is one thread's view of its block: the launch arguments, the
// block's shared memory, the thread's index and its Cold state (in
// local memory). Everything else is recomputed where it is used
// from the arguments (device memory) and the block's shared memory,
// instead of being kept in registers across the op dispatch: under the
// 64-register cap of 1024-thread blocks those long-lived values were what
// the data loops spilled (make gpu-sass, docs/gpu.md §16). The loads
// are of values nothing changes after the prologue.
struct Ctx {
  const mg_args* a;
  mg_shared* sh;
  uint32_t tid, nt;
  Cold* cold;

  MG_DEV int32_t rank() const { return sh->blk.rank; }
  MG_DEV const mg_rank* ranks() const { return reinterpret_cast<const mg_rank*>(a->ranks); }
  MG_DEV const mg_rank* me() const { return ranks() + rank(); }
  MG_DEV const mg_op* ops() const {
    return reinterpret_cast<const mg_op*>(reinterpret_cast<const unsigned char*>(sh) + ops_at());
  }
  MG_DEV const mg_region* regions() const {
    return reinterpret_cast<const mg_region*>(reinterpret_cast<const unsigned char*>(sh) + regions_at(sh->blk.n_ops));
  }
  MG_DEV const uint32_t* ids() const {
    return reinterpret_cast<const uint32_t*>(reinterpret_cast<const unsigned char*>(sh) +
                                             ids_at(sh->blk.n_ops, sh->blk.n_regions));
  }
  MG_DEV mg_progress* prog() const { return reinterpret_cast<mg_progress*>(a->progress) + block_id(); }
  MG_DEV const mg_control* ctl() const { return reinterpret_cast<const mg_control*>(a->control); }
};

// launch_flag is the launch's LL flag, kept in shared memory rather than
// in the context (registers are the kernel's scarcest resource). Thread 0
// writes it in the prologue, before the block's barrier, and nothing
// changes it after: a plain read, which the compiler may keep.
MG_DEV uint32_t launch_flag(const Ctx& c) { return c.sh->flag; }

MG_DEV unsigned char* ptr(uint64_t p) { return reinterpret_cast<unsigned char*>(p); }

// aborted reports whether a thread of the block saw the host's abort
// (shared memory: no global access). Nothing clears the flag after the
// prologue, so once seen it stays seen.
MG_DEV bool aborted(const Ctx& c) { return get_shared(&c.sh->dead) != 0; }

// check_abort reads the host's abort word (device memory) and tells the
// block: called by waiting threads every kAbortEvery spins.
MG_DEV bool check_abort(Ctx& c) {
  if (aborted(c)) return true;
  if (load_acquire_sys32(&c.ctl()->abort) != 0) {
    put_shared(&c.sh->dead, 1);
    return true;
  }
  return false;
}

// heartbeat bumps the block's beat (thread 0 only: one writer).
MG_DEV void heartbeat(Ctx& c) {
  if (c.tid != 0) return;
  uint32_t b = get_cold(&c.cold->beat) + 1;
  put_cold(&c.cold->beat, b);
  put_u32(&c.prog()->beat, b);
}

// Wait describes a wait for the progress record.
struct Wait {
  uint32_t kind, a, ct;
  uint64_t expect, at;
};

// poll spins until ready() holds, reading the abort word every
// kAbortEvery spins, publishing w (with got()) and the block state
// MG_WAITING once it has spun kReport times and again every kReport spins
// after (another thread of the block may have set MG_RUNNING meanwhile),
// and MG_RUNNING when the wait ends. The host's watchdog sees a stuck
// block as MG_WAITING. It returns false when the host aborts the launch.
// ready() and got() read device memory only.
template <class Ready, class Got>
MG_DEV bool poll(Ctx& c, const Wait& w, const void* addr, Ready ready, Got got) {
  if (aborted(c)) return false;
  uint32_t spins = 0;
  while (!ready()) {
    ++spins;
    if (spins % kAbortEvery == 0 && check_abort(c)) return false;
    if (spins % kReport == 0) {
      put_u32(&c.prog()->wait_kind, w.kind);
      put_u32(&c.prog()->wait_a, w.a);
      put_u32(&c.prog()->wait_ct, w.ct);
      put_u64(&c.prog()->wait_expect, w.expect);
      put_u64(&c.prog()->wait_at, w.at);
      put_u64(&c.prog()->wait_got, got());
      put_u32(&c.prog()->state, MG_WAITING);
    }
    wait_for(addr, spins, ready);
  }
  if (spins >= kReport) put_u32(&c.prog()->state, MG_RUNNING);
  return true;
}

// ---- addressing (§2.4, mirroring executor/cpu/resolve.go) -----------------

MG_DEV uint64_t base(const Ctx& c, int32_t rank, uint32_t buf) { return c.ranks()[rank].buf[buf]; }

// shift is the double-buffer offset of a shifted access to buf.
// shift is the offset of this launch's half of a double-buffered scratch
// (by the flag's parity when the flag comes from the epoch word).
MG_DEV uint64_t shift(const Ctx& c, uint32_t buf) {
  if (buf != MG_SCRATCH) return 0;
  if (c.a->epoch == 0) return c.a->scratch_offset;
  return launch_flag(c) % 2 == 0 ? c.a->scratch_half : 0;
}

// adj is the pipeline offset o of an operand of buffer buf, reduced
// modulo the scratch ring of reuse_resources plans.
MG_DEV uint64_t adj(const Ctx& c, uint32_t buf, uint64_t o) {
  if (buf == MG_SCRATCH && c.me()->reuse_slot != 0) return o % c.me()->reuse_slot;
  return o;
}

// clamp is n(len, o, u) = min(len - o, u), 0 past the end (quirk Q9).
MG_DEV uint64_t clamp(uint64_t n, uint64_t o, uint64_t u) {
  if (n <= o) return 0;
  n -= o;
  return n > u ? u : n;
}

MG_DEV unsigned char* local(const Ctx& c, const mg_region& r, uint64_t o) {
  return ptr(base(c, c.rank(), r.buf) + shift(c, r.buf) + r.offset + adj(c, r.buf, o));
}
MG_DEV unsigned char* local_unshifted(const Ctx& c, const mg_region& r, uint64_t o) {
  return ptr(base(c, c.rank(), r.buf) + r.offset + adj(c, r.buf, o));
}
MG_DEV unsigned char* remote(const Ctx& c, const mg_region& r, uint64_t o) {
  return ptr(base(c, r.rank, r.buf) + r.offset + adj(c, r.buf, o));
}
// packets addresses the packet region of data offset off: 2·off in the
// shifted window of the buffer.
MG_DEV unsigned char* packets(const Ctx& c, int32_t rank, uint32_t buf, uint64_t off) {
  return ptr(base(c, rank, buf) + shift(c, buf) + 2 * off);
}
MG_DEV unsigned char* raw(const Ctx& c, const mg_region& r) {
  return ptr(base(c, c.rank(), r.buf) + shift(c, r.buf) + r.offset);
}

// ---- data movement ---------------------------------------------------------

// kUnroll is how many 16-byte vectors a thread has in flight per round
// of the data loops: its loads are issued before its stores (or adds).
constexpr int kUnroll = 4;

// kBeatRounds is how many rounds of a vector loop run between two
// heartbeats of thread 0. The beat sits between chunks of rounds, not in
// the loop: the inner loop then holds data accesses only, weak and
// global (make gpu-sass, docs/gpu.md §16).
constexpr uint32_t kBeatRounds = 0x4000;

// copy_fallback copies n bytes with every thread where the ends are not
// both 16-byte aligned (words: 4-byte words when both are 4-byte
// aligned, then bytes), or, words false, the tail of fewer than 16 bytes
// after the vectors, in bytes. Each iteration carries fallback_mark.
MG_DEV void copy_fallback(uint32_t tid, uint32_t nt, unsigned char* d, const unsigned char* s, uint64_t n,
                           bool words) {
  uint64_t done = 0;
  if (words && ((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 3) == 0) {
    uint64_t nw = n / 4;
    for (uint64_t i = tid; i < nw; i += nt) {
      fallback_mark();
      store32(d + 4 * i, load32(s + 4 * i));
    }
    done = nw * 4;
  }
  for (uint64_t i = done + tid; i < n; i += nt) {
    fallback_mark();
    store8(d + i, load8(s + i));
  }
}

// copy_bytes copies n bytes with every thread of the block: 16-byte
// vectors when both ends are 16-byte aligned (kUnroll per thread and
// round, a warp's accesses adjacent) and the tail in bytes, otherwise
// copy_fallback; where copy_share takes each thread's share at once (the
// host build), that instead.
MG_DEV void copy_bytes(Ctx& c, unsigned char* d, const unsigned char* s, uint64_t n) {
  if (copy_share(c.tid, c.nt, d, s, n)) {
    heartbeat(c);
    return;
  }
  uintptr_t mis = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s);
  if ((mis & 15) != 0) {
    copy_fallback(c.tid, c.nt, d, s, n, true);
    return;
  }
  uint64_t nv = n / 16, nt = c.nt;
  uint64_t stride = nt * kUnroll, full = nv / stride * stride;
  for (uint64_t i = c.tid; i < full;) {
    heartbeat(c);
    uint32_t r = kBeatRounds;
    do {
      v16 v[kUnroll];
MG_UNROLL
      for (int u = 0; u < kUnroll; u++) v[u] = load16(s + 16 * (i + u * nt));
MG_UNROLL
      for (int u = 0; u < kUnroll; u++) store16(d + 16 * (i + u * nt), v[u]);
      i += stride;
    } while (--r != 0 && i < full);
  }
  for (uint64_t i = full + c.tid; i < nv; i += nt) store16(d + 16 * i, load16(s + 16 * i));
  if (nv * 16 < n) copy_fallback(c.tid, c.nt, d + nv * 16, s + nv * 16, n - nv * 16, false);
}

// kMaxOperands bounds the operands of one side (plan.MaxOperandsPerSide).
constexpr int kMaxOperands = 10;

// reduce_fallback is reduce_t's element-wise loop, for operands or a
// size that are not 16-byte aligned. Each iteration of each of its
// loops carries fallback_mark.
template <int DT, int OP>
MG_DEV void reduce_fallback(uint32_t tid, uint32_t nt, unsigned char* const* d, int nd, const unsigned char* const* s,
                             int ns, uint64_t n) {
  constexpr uint64_t es = (DT == MG_F16 || DT == MG_BF16) ? 2 : 4;
  for (uint64_t i = tid; i < n / es; i += nt) {
    fallback_mark();
    if (es == 2) {
      uint32_t acc = load16b(s[0] + 2 * i);
      for (int k = 1; k < ns; k++) {
        fallback_mark();
        acc = red_elem<DT, OP>(acc, load16b(s[k] + 2 * i));
      }
      for (int k = 0; k < nd; k++) {
        fallback_mark();
        store16b(d[k] + 2 * i, acc);
      }
    } else {
      uint32_t acc = load32(s[0] + 4 * i);
      for (int k = 1; k < ns; k++) {
        fallback_mark();
        acc = red_elem<DT, OP>(acc, load32(s[k] + 4 * i));
      }
      for (int k = 0; k < nd; k++) {
        fallback_mark();
        store32(d[k] + 4 * i, acc);
      }
    }
  }
}

// kReduceUnroll is kUnroll for the sum's rounds: two 16-byte vectors per
// thread and round of each source, since the accumulators and the next
// source's vectors are both live (4 each took 32 registers and made
// the kernel spill under the 64-register cap: make gpu-sass,
// docs/gpu.md §16).
constexpr int kReduceUnroll = 2;

// reduce_t computes ((s0 ⊕ s1) ⊕ s2) ⊕ … over n bytes (§2.6) in element
// type DT with reduction OP and stores the result to every destination:
// 16-byte vectors (kReduceUnroll per thread and round, each source's loads
// issued together) when every operand and n are 16-byte aligned,
// elements otherwise (reduce_fallback). The order of the operations is the CPU backend's
// for every element.
template <int DT, int OP>
MG_DEV void reduce_t(Ctx& c, unsigned char* const* d, int nd, const unsigned char* const* s, int ns, uint64_t n) {
  uintptr_t mis = n;
  for (int k = 0; k < ns; k++) mis |= reinterpret_cast<uintptr_t>(s[k]);
  for (int k = 0; k < nd; k++) mis |= reinterpret_cast<uintptr_t>(d[k]);
  if ((mis & 15) != 0) {
    reduce_fallback<DT, OP>(c.tid, c.nt, d, nd, s, ns, n);
    return;
  }
  uint64_t nv = n / 16, nt = c.nt;
  // Only the sum runs the unrolled rounds: for prod, max and min they
  // raised the kernels' spills (whole kernel, 64-register cap) to up
  // to 432 B of loads, against 168 B with the plain loop for every
  // other reduction (sm_90 f16_ll16, docs/gpu.md §6), and nearly
  // doubled the cubin.
  uint64_t stride = nt * kReduceUnroll, full = OP == MG_SUM ? nv / stride * stride : 0;
  for (uint64_t i = c.tid; i < full;) {
    heartbeat(c);
    uint32_t r = kBeatRounds;
    do {
      v16 acc[kReduceUnroll];
MG_UNROLL
      for (int u = 0; u < kReduceUnroll; u++) acc[u] = load16(s[0] + 16 * (i + u * nt));
      for (int k = 1; k < ns; k++) {
        v16 x[kReduceUnroll];
MG_UNROLL
        for (int u = 0; u < kReduceUnroll; u++) x[u] = load16(s[k] + 16 * (i + u * nt));
MG_UNROLL
        for (int u = 0; u < kReduceUnroll; u++) acc[u] = red_v16<DT, OP>(acc[u], x[u]);
      }
      for (int k = 0; k < nd; k++) {
MG_UNROLL
        for (int u = 0; u < kReduceUnroll; u++) store16(d[k] + 16 * (i + u * nt), acc[u]);
      }
      i += stride;
    } while (--r != 0 && i < full);
  }
  for (uint64_t i = full + c.tid; i < nv; i += nt) {
    v16 acc = load16(s[0] + 16 * i);
    for (int k = 1; k < ns; k++) acc = red_v16<DT, OP>(acc, load16(s[k] + 16 * i));
    for (int k = 0; k < nd; k++) store16(d[k] + 16 * i, acc);
  }
}

// reduce_any is reduce_t with the launch's reduction (mg_args.redop),
// chosen once per op: the loops are instantiated per reduction, so no
// element pays for the choice, and the kernel entries stay one per
// element type and packet size (docs/gpu.md §3, "Reductions").
template <int DT>
MG_DEV void reduce_any(Ctx& c, unsigned char* const* d, int nd, const unsigned char* const* s, int ns, uint64_t n) {
  switch (c.a->redop) {
    case MG_PROD:
      reduce_t<DT, MG_PROD>(c, d, nd, s, ns, n);
      break;
    case MG_MAX:
      reduce_t<DT, MG_MAX>(c, d, nd, s, ns, n);
      break;
    case MG_MIN:
      reduce_t<DT, MG_MIN>(c, d, nd, s, ns, n);
      break;
    default:
      reduce_t<DT, MG_SUM>(c, d, nd, s, ns, n);
  }
}

// Interp is the interpreter for element type DT and LL packets of PKT
// bytes (16 or 8): every op, and run, the body of one block.
template <int DT, int PKT>
struct Interp {
static_assert(PKT == 16 || PKT == 8, "LL packets are 16 or 8 bytes");

// ---- LL packets (§3) ---------------------------------------------------------

// Payload is one packet's payload: lo (and hi for LL16).
struct Payload {
  uint32_t lo, hi;
};

static MG_DEV void write_packet(const Ctx& c, unsigned char* base, uint64_t w, Payload p) {
  if (PKT == 16) {
    store_pkt16(base + 16 * w, p.lo, p.hi, launch_flag(c));
  } else {
    store_pkt8(base + 8 * w, p.lo, launch_flag(c));
  }
}

// try_packet reads packet w and reports whether it carries the flag.
static MG_DEV bool try_packet(const Ctx& c, const unsigned char* base, uint64_t w, Payload* p, uint32_t* seen) {
  uint32_t f = launch_flag(c);
  if (PKT == 16) {
    uint32_t f0, f1;
    load_pkt16(base + 16 * w, &p->lo, &f0, &p->hi, &f1);
    *seen = f0 != f ? f0 : f1;
    return f0 == f && f1 == f;
  }
  uint32_t f0;
  load_pkt8(base + 8 * w, &p->lo, &f0);
  p->hi = 0;
  *seen = f0;
  return f0 == f;
}

// read_packet spins until packet w of the region at base (buffer buf, at
// byte offset at of it, for reports) carries the flag.
static MG_DEV bool read_packet(Ctx& c, const unsigned char* base, uint32_t buf, uint64_t at, uint64_t w, Payload* p) {
  uint32_t seen = 0;
  if (try_packet(c, base, w, p, &seen)) return true;
  Wait wt{MG_WAIT_PACKET, buf, 0, launch_flag(c), at + w * PKT};
  return poll(
      c, wt, base + PKT * w, [&] { return try_packet(c, base, w, p, &seen); }, [&] { return uint64_t(seen); });
}

static MG_DEV Payload load_payload(const unsigned char* raw, uint64_t w) {
  Payload p;
  if (PKT == 16) {
    p.lo = load32(raw + 8 * w);
    p.hi = load32(raw + 8 * w + 4);
  } else {
    p.lo = load32(raw + 4 * w);
    p.hi = 0;
  }
  return p;
}

static MG_DEV void store_payload(unsigned char* raw, uint64_t w, Payload p) {
  if (PKT == 16) {
    store32(raw + 8 * w, p.lo);
    store32(raw + 8 * w + 4, p.hi);
  } else {
    store32(raw + 4 * w, p.lo);
  }
}

template <int OP>
static MG_DEV Payload red_payload(Payload a, Payload b) {
  return Payload{red_word<DT, OP>(a.lo, b.lo), red_word<DT, OP>(a.hi, b.hi)};
}

// PktIn is a packet source: its packets and, for reports, where they are.
struct PktIn {
  const unsigned char* p;
  uint32_t buf;
  uint64_t at;
};

// packet_op is the common shape of the packet ops (§2.6): for each of np
// packets, with every thread: read the raw source and/or wait for the
// packet sources, reduce with OP if asked ((pkt1 ⊕ pkt2 …) ⊕ raw: the
// accumulator starts at the first packet, not at zero, since 0 + (−0) is
// +0 and zero is no identity of PROD, MAX or MIN), store the raw
// destination and write the packet destinations. OP is only used with
// reduce (op_reduce_packets chooses it from mg_args.redop).
template <int OP>
static MG_DEV void packet_op(Ctx& c, uint64_t np, const unsigned char* raw_in, const PktIn* pin, int npin,
                      unsigned char* raw_out, unsigned char* const* pout, int npout, bool reduce) {
  for (uint64_t w = c.tid; w < np; w += c.nt) {
    Payload acc{0, 0};
    if (reduce && npin > 0) {
      if (!read_packet(c, pin[0].p, pin[0].buf, pin[0].at, w, &acc)) return;
      for (int k = 1; k < npin; k++) {
        Payload x;
        if (!read_packet(c, pin[k].p, pin[k].buf, pin[k].at, w, &x)) return;
        acc = red_payload<OP>(acc, x);
      }
      acc = red_payload<OP>(acc, load_payload(raw_in, w));
    } else if (reduce) {
      acc = load_payload(raw_in, w);
    } else if (raw_in != nullptr) {
      acc = load_payload(raw_in, w);
    } else if (!read_packet(c, pin[0].p, pin[0].buf, pin[0].at, w, &acc)) {
      return;
    }
    if (raw_out != nullptr) store_payload(raw_out, w, acc);
    for (int k = 0; k < npout; k++) write_packet(c, pout[k], w, acc);
    if (c.tid == 0 && (w & 0xffff) == 0) heartbeat(c);
  }
}

// ---- port channels: the FIFO (§4.3) -----------------------------------------

// tail_seen records t as the FIFO tail this thread last read and returns it.
static MG_DEV uint64_t tail_seen(Ctx& c, uint64_t t) {
  put_cold(&c.cold->tail, t);
  return t;
}

// push hands a trigger to the rank's proxy and returns its FIFO position,
// or ~0 when the launch was aborted while the FIFO was full. The tail is
// read (from its device replica) only when the FIFO looks full by the
// last tail this thread saw; the trigger is four stores into the
// host-mapped slot.
static MG_DEV uint64_t push(Ctx& c, uint64_t dst, uint64_t src, uint64_t size, uint32_t kind, uint32_t ch) {
  mg_fifo* f = reinterpret_cast<mg_fifo*>(c.me()->fifo);
  const uint64_t* tail = reinterpret_cast<const uint64_t*>(c.me()->fifo_tail);
  uint64_t p = fetch_add_gpu(reinterpret_cast<uint64_t*>(c.me()->fifo_head), 1);
  if (p >= get_cold(&c.cold->tail) + MG_FIFO_DEPTH) {
    put_cold(&c.cold->tail, load_acquire_sys(tail));
    if (p >= get_cold(&c.cold->tail) + MG_FIFO_DEPTH) {
      Wait w{MG_WAIT_FIFO, ch, MG_CH_PORT, p, 0};
      if (!poll(
              c, w, tail, [&] { return p < tail_seen(c, load_acquire_sys(tail)) + MG_FIFO_DEPTH; },
              [&] { return load_relaxed_sys(tail); })) {
        return ~uint64_t(0);
      }
    }
  }
  mg_trigger* t = &f->slots[p % MG_FIFO_DEPTH];
  store_relaxed_sys(&t->w[0], dst);
  store_relaxed_sys(&t->w[1], src);
  store_relaxed_sys(&t->w[2], size);
  uint64_t commit = ((p / MG_FIFO_DEPTH) & 1) ^ 1;
  store_release_sys(&t->w[3], uint64_t(kind) | uint64_t(ch) << 8 | commit << 63);
  return p;
}

// await_proxy spins until the proxy has completed FIFO position p (the
// tail's device replica, which the proxy's copy stream writes after the
// transfers it completes).
static MG_DEV bool await_proxy(Ctx& c, uint64_t p, uint32_t ch) {
  const uint64_t* tail = reinterpret_cast<const uint64_t*>(c.me()->fifo_tail);
  if (get_cold(&c.cold->tail) > p) return true;
  Wait w{MG_WAIT_PROXY, ch, MG_CH_PORT, p + 1, 0};
  return poll(
      c, w, tail, [&] { return tail_seen(c, load_acquire_sys(tail)) > p; }, [&] { return load_relaxed_sys(tail); });
}

// ---- ops ---------------------------------------------------------------------

static MG_DEV const uint32_t* op_ids(const Ctx& c, const mg_op* op) { return c.ids() + op->first_id; }
static MG_DEV const mg_region* op_src(const Ctx& c, const mg_op* op) { return c.regions() + op->first_region; }
static MG_DEV const mg_region* op_dst(const Ctx& c, const mg_op* op) { return c.regions() + op->first_region + op->n_src; }

static MG_DEV void op_signal(Ctx& c, const mg_op* op) {
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = c.tid; i < op->n_ids; i += c.nt) {
    uint32_t ch = ids[i];
    if (op->chan_type == MG_CH_PORT) {
      push(c, 0, 0, 0, MG_TRIG_FLAG, ch);
    } else if (op->chan_type == MG_CH_MEMORY) {
      uint64_t peer = reinterpret_cast<const uint64_t*>(c.me()->mem_peer)[ch];
      if (peer == 0) continue;  // unpaired: the signal is lost
      // Relaxed signals are as strong as the others (docs/semantics.md
      // §2.9, item 3, allows it): the CPU oracle orders data by them, and the
      // shipped NVLS plans rely on relaxed pairs around their stores.
      add_release_sys(reinterpret_cast<uint64_t*>(peer), 1);
    }
  }
}

// The waiting ops (wait, flush, semaphore acquire, put-with-signal-and-
// flush on port channels) poll with thread 0 alone; exec ends them with a
// block barrier, so the block's other threads wait there, off the memory
// system, and see an abort in shared memory after it.
static MG_DEV void op_wait(Ctx& c, const mg_op* op) {
  if (op->chan_type != MG_CH_MEMORY && op->chan_type != MG_CH_PORT) return;
  if (c.tid != 0) return;
  const uint32_t* ids = op_ids(c, op);
  bool mem = op->chan_type == MG_CH_MEMORY;
  for (uint32_t i = 0; i < op->n_ids; i++) {
    uint32_t ch = ids[i];
    uint64_t* inb = reinterpret_cast<uint64_t*>(mem ? c.me()->mem_inbound : c.me()->port_inbound) + ch;
    uint64_t* exp = reinterpret_cast<uint64_t*>(mem ? c.me()->mem_expected : c.me()->port_expected) + ch;
    uint64_t e = fetch_add_gpu(exp, 1) + 1;
    Wait w{MG_WAIT_CHANNEL, ch, op->chan_type, e, 0};
    // Relaxed waits acquire too, like relaxed signals release.
    if (!poll(
            c, w, inb, [&] { return load_acquire_sys(inb) >= e; }, [&] { return load_relaxed_sys(inb); })) {
      return;
    }
  }
}

static MG_DEV void op_flush(Ctx& c, const mg_op* op) {
  if (op->chan_type != MG_CH_PORT || c.tid != 0) return;
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = 0; i < op->n_ids; i++) {
    uint64_t p = push(c, 0, 0, 0, MG_TRIG_SYNC, ids[i]);
    if (p == ~uint64_t(0) || !await_proxy(c, p, ids[i])) return;
  }
}

static MG_DEV void op_sem_release(Ctx& c, const mg_op* op) {
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = c.tid; i < op->n_ids; i += c.nt) {
    add_release_gpu(reinterpret_cast<uint64_t*>(c.me()->sems) + ids[i], 1);
  }
}

static MG_DEV void op_sem_acquire(Ctx& c, const mg_op* op) {
  if (c.tid != 0) return;
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = 0; i < op->n_ids; i++) {
    uint64_t* sem = reinterpret_cast<uint64_t*>(c.me()->sems) + ids[i];
    int64_t old = int64_t(fetch_add_acq_rel_gpu(sem, ~uint64_t(0)));
    if (old > 0) continue;
    Wait w{MG_WAIT_SEM, ids[i], 0, uint64_t(old), 0};
    if (!poll(
            c, w, sem, [&] { return int64_t(load_acquire_gpu(sem)) >= old; }, [&] { return load_acquire_gpu(sem); })) {
      return;
    }
  }
}

static MG_DEV void op_barrier(Ctx& c, const mg_op* op) {
  block_sync();
  if (op->n_threadblocks > 1 && c.tid == 0 && !aborted(c)) {
    mg_barrier* b = reinterpret_cast<mg_barrier*>(c.me()->barriers) + op->barrier_id;
    uint32_t gen = load_acquire_gpu32(&b->gen);
    uint32_t n = op->n_threadblocks;
    if (fetch_add_acq_rel_gpu32(&b->count, 1) == n - 1) {
      store_relaxed_gpu32(&b->count, 0);
      store_release_gpu32(&b->gen, gen + 1);
    } else {
      Wait w{MG_WAIT_BARRIER, op->barrier_id, 0, n, 0};
      poll(
          c, w, &b->gen, [&] { return load_acquire_gpu32(&b->gen) != gen; },
          [&] { return uint64_t(get_u32(&b->count)); });
    }
  }
  block_sync();
}

static MG_DEV const mg_switch& switch_of(const Ctx& c, const mg_region& r) {
  return reinterpret_cast<const mg_switch*>(c.me()->switches)[r.sw];
}

// member_ptr is the bound buffer of switch member m at r's offset (no
// double-buffer shift, quirk Q8 as mirrored by the CPU backend).
static MG_DEV unsigned char* member_ptr(const Ctx& c, const mg_switch& sw, int32_t m, const mg_region& r, uint64_t o) {
  return ptr(base(c, m, sw.buf) + r.offset + adj(c, sw.buf, o));
}

static MG_DEV const int32_t* members(const mg_switch& sw) { return reinterpret_cast<const int32_t*>(sw.members); }

// ---- data ops: each data loop at one call site --------------------------------
//
// Every op that moves data describes its operands (copies_of, reduction_of,
// packets_of) and exec runs the description at one call site per data
// loop: copy_bytes once, reduce_any once, packet_op once per reduction.
// Each loop is then inlined once per kernel rather than once per op, and
// the values live across the dispatch (the op, the loop counters) cross
// a few register-hungry loops instead of a score of copies of them: under
// the 64-register cap of 1024-thread blocks that is what they spilled
// around (make gpu-sass, docs/gpu.md §16). The operands and their order
// are the ones each op had when it called the loops itself.

// Copy is one copy of a copying op: n bytes from s to d.
struct Copy {
  unsigned char* d;
  const unsigned char* s;
  uint64_t n;
};

// n_copies is how many copies op makes: copy one, get one per source,
// put/pws/pwsf on memory channels one per destination (§2.6), gstore's
// unicast form one per member of the switch; 0 for any other op.
static MG_DEV uint32_t n_copies(const Ctx& c, const mg_op* op) {
  switch (op->type) {
    case MG_COPY:
      return 1;
    case MG_GET:
      return op->n_src;
    case MG_PUT:
    case MG_PWS:
    case MG_PWSF:
      return op->chan_type == MG_CH_PORT ? 0 : op->n_dst;
    case MG_GSTORE:
      return switch_of(c, op_dst(c, op)[0]).n_members;
    default:
      return 0;
  }
}

// copy_of is copy k of op at pipeline offset o with unit u. Put sources
// each use their own buffer; get uses its own offsets (§2.4).
static MG_DEV Copy copy_of(const Ctx& c, const mg_op* op, uint32_t k, uint64_t o, uint64_t u) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  switch (op->type) {
    case MG_COPY:
      return Copy{local(c, dst[0], o), local(c, src[0], o), clamp(src[0].size, o, u)};
    case MG_GET:
      return Copy{local(c, dst[k], o), remote(c, src[k], o), clamp(src[k].size, o, u)};
    case MG_GSTORE: {
      const mg_switch& ds = switch_of(c, dst[0]);
      return Copy{member_ptr(c, ds, members(ds)[k], dst[0], o), local(c, src[0], o), clamp(src[0].size, o, u)};
    }
    default:  // put, pws, pwsf on a memory channel
      return Copy{remote(c, dst[k], o), local(c, src[k], o), clamp(dst[k].size, o, u)};
  }
}

// put family on port channels: thread 0 pushes one trigger per
// destination, in order, and for the flush form waits for each.
static MG_DEV void op_put_port(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  uint32_t kind = MG_TRIG_DATA;
  if (op->type == MG_PWS) kind |= MG_TRIG_FLAG;
  if (op->type == MG_PWSF) kind |= MG_TRIG_FLAG | MG_TRIG_SYNC;
  if (c.tid != 0) return;
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = 0; i < op->n_dst; i++) {
    uint64_t n = clamp(dst[i].size, o, u);
    // Port transfers read the source through its registration at the
    // buffer's base: no double-buffer shift.
    uint64_t s = reinterpret_cast<uint64_t>(local_unshifted(c, src[i], o));
    uint64_t d = reinterpret_cast<uint64_t>(remote(c, dst[i], o));
    uint64_t p = push(c, d, s, n, kind, ids[i]);
    if (p == ~uint64_t(0)) return;
    if (op->type == MG_PWSF && !await_proxy(c, p, ids[i])) return;
  }
}

// kMaxMembers bounds the members of a switch that glres and gstorepkt use.
static constexpr int kMaxMembers = 32;

// Reduction is what reduction_of found: ns sources and nd destinations
// of n bytes each.
struct Reduction {
  int ns, nd;
  uint64_t n;
};

// reduction_of fills s and d with the operands of a reduction (re, res,
// rre, rres: its regions; glres: the bound buffer of every member of
// each switch, in ascending rank order; both at most kMaxMembers).
static MG_DEV Reduction reduction_of(const Ctx& c, const mg_op* op, uint64_t o, uint64_t u, const unsigned char** s,
                                     unsigned char** d) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  uint64_t n = clamp(src[0].size, o, u);
  if (op->type == MG_GLRES) {
    const mg_switch& ss = switch_of(c, src[0]);
    const mg_switch& ds = switch_of(c, dst[0]);
    int ns = ss.n_members < kMaxMembers ? int(ss.n_members) : kMaxMembers;
    int nd = ds.n_members < kMaxMembers ? int(ds.n_members) : kMaxMembers;
    for (int k = 0; k < ns; k++) s[k] = member_ptr(c, ss, members(ss)[k], src[0], o);
    for (int k = 0; k < nd; k++) d[k] = member_ptr(c, ds, members(ds)[k], dst[0], o);
    return Reduction{ns, nd, n};
  }
  for (int k = 0; k < op->n_src; k++) s[k] = src[k].kind == MG_REMOTE ? remote(c, src[k], o) : local(c, src[k], o);
  for (int k = 0; k < op->n_dst; k++) d[k] = dst[k].kind == MG_REMOTE ? remote(c, dst[k], o) : local(c, dst[k], o);
  return Reduction{op->n_src, op->n_dst, n};
}

// glres and gstore through the switch: with a multicast pointer and a
// toolkit that assembles multimem (sm_90) the switch reduces or
// replicates (see mc_* in prim.h); they report false where the unicast
// form must run instead.
#if defined(MG_HAVE_MULTIMEM)
static MG_DEV bool glres_mc(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region& sr = op_src(c, op)[0];
  const mg_region& dr = op_dst(c, op)[0];
  const mg_switch& ss = switch_of(c, sr);
  const mg_switch& ds = switch_of(c, dr);
  uint64_t n = clamp(sr.size, o, u);
  if (ss.mc == 0 || ds.mc == 0 || n % 16 != 0 || c.a->redop != MG_SUM) return false;
  // The switch reduces: hardware order, element-type precision (§4.4).
  // Other reductions take the unicast path: multimem.ld_reduce has no
  // product, and no f32 min or max.
  unsigned char* d = ptr(ds.mc + dr.offset + adj(c, ds.buf, o));
  const unsigned char* s = ptr(ss.mc + sr.offset + adj(c, ss.buf, o));
  for (uint64_t i = c.tid; i < n / 16; i += c.nt) mc_st16(d + 16 * i, mc_ld_reduce16<DT>(s + 16 * i));
  return true;
}

static MG_DEV bool gstore_mc(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region& sr = op_src(c, op)[0];
  const mg_region& dr = op_dst(c, op)[0];
  const mg_switch& ds = switch_of(c, dr);
  uint64_t n = clamp(sr.size, o, u);
  const unsigned char* s = local(c, sr, o);
  if (ds.mc == 0 || n % 16 != 0 || (reinterpret_cast<uintptr_t>(s) & 15) != 0) return false;
  unsigned char* d = ptr(ds.mc + dr.offset + adj(c, ds.buf, o));
  for (uint64_t i = c.tid; i < n / 16; i += c.nt) mc_st16(d + 16 * i, load16(s + 16 * i));
  return true;
}
#endif

// PacketJob is one call of packet_op: np packets, the raw source and
// destination (or null), npin packet sources and npout packet
// destinations, reduce for the packet reductions.
struct PacketJob {
  uint64_t np;
  const unsigned char* raw_in;
  unsigned char* raw_out;
  int npin, npout;
  bool reduce;
};

// n_packet_jobs is how many packet_op calls op makes: ppkt on memory
// channels one per destination, the other packet ops one; 0 for an op
// that is not a packet op or runs on a port channel (exec).
static MG_DEV uint32_t n_packet_jobs(const mg_op* op) {
  switch (op->type) {
    case MG_PPKT:
      return op->chan_type == MG_CH_PORT ? 0 : op->n_dst;
    case MG_RPPKT:
      return op->chan_type == MG_CH_PORT ? 0 : 1;
    case MG_GSTOREPKT:
    case MG_CPKT:
    case MG_UPKT:
    case MG_REPKT:
    case MG_RESPKT:
    case MG_RECPKT:
    case MG_RECSPKT:
      return 1;
    default:
      return 0;
  }
}

// packets_of fills in and out with the packet sources and destinations
// of job k of op. The packet reductions: src0 raw, src1.. local scratch
// packets; dst0 raw, then (copy forms) a local packet copy, then (send
// forms) remote packets. rppkt and upkt read local scratch, whatever the
// source's declared type.
static MG_DEV PacketJob packets_of(const Ctx& c, const mg_op* op, uint32_t k, PktIn* in, unsigned char** out) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  switch (op->type) {
    case MG_GSTOREPKT: {
      const mg_switch& ds = switch_of(c, dst[0]);
      in[0] = PktIn{packets(c, c.rank(), src[0].buf, src[0].offset), src[0].buf, 2 * src[0].offset};
      int nd = ds.n_members < kMaxMembers ? int(ds.n_members) : kMaxMembers;
      for (int m = 0; m < nd; m++) out[m] = packets(c, members(ds)[m], ds.buf, dst[0].offset);
      return PacketJob{src[0].size / (PKT / 2), nullptr, nullptr, 1, nd, false};
    }
    case MG_PPKT:
      out[0] = packets(c, dst[k].rank, dst[k].buf, dst[k].offset);
      return PacketJob{src[k].size / (PKT / 2), raw(c, src[k]), nullptr, 0, 1, false};
    case MG_RPPKT:
      in[0] = PktIn{packets(c, c.rank(), MG_SCRATCH, src[0].offset), MG_SCRATCH, 2 * src[0].offset};
      for (int m = 0; m < op->n_dst; m++) out[m] = packets(c, dst[m].rank, dst[m].buf, dst[m].offset);
      return PacketJob{src[0].size / (PKT / 2), nullptr, nullptr, 1, op->n_dst, false};
    case MG_CPKT:
      out[0] = packets(c, c.rank(), dst[0].buf, dst[0].offset);
      return PacketJob{src[0].size / (PKT / 2), raw(c, src[0]), nullptr, 0, 1, false};
    case MG_UPKT:
      in[0] = PktIn{packets(c, c.rank(), MG_SCRATCH, src[0].offset), MG_SCRATCH, 2 * src[0].offset};
      return PacketJob{src[0].size / (PKT / 2), nullptr, raw(c, dst[0]), 1, 0, false};
    default: {  // repkt, respkt, recpkt, recspkt
      int npin = 0;
      for (int m = 1; m < op->n_src; m++) {
        in[npin++] = PktIn{packets(c, c.rank(), MG_SCRATCH, src[m].offset), MG_SCRATCH, 2 * src[m].offset};
      }
      int npout = 0;
      for (int m = 1; m < op->n_dst; m++) {
        int32_t owner = dst[m].kind == MG_REMOTE ? dst[m].rank : c.rank();
        out[npout++] = packets(c, owner, dst[m].buf, dst[m].offset);
      }
      return PacketJob{src[0].size / (PKT / 2), raw(c, src[0]), raw(c, dst[0]), npin, npout, true};
    }
  }
}

// run_packets runs job j: the packet reductions with the launch's
// reduction (mg_args.redop), the others with the sum's instantiation
// (which they do not use).
static MG_DEV void run_packets(Ctx& c, const PacketJob& j, const PktIn* in, unsigned char* const* out) {
  switch (j.reduce ? c.a->redop : uint32_t(MG_SUM)) {
    case MG_PROD:
      packet_op<MG_PROD>(c, j.np, j.raw_in, in, j.npin, j.raw_out, out, j.npout, true);
      break;
    case MG_MAX:
      packet_op<MG_MAX>(c, j.np, j.raw_in, in, j.npin, j.raw_out, out, j.npout, true);
      break;
    case MG_MIN:
      packet_op<MG_MIN>(c, j.np, j.raw_in, in, j.npin, j.raw_out, out, j.npout, true);
      break;
    default:
      packet_op<MG_SUM>(c, j.np, j.raw_in, in, j.npin, j.raw_out, out, j.npout, j.reduce);
  }
}

// ppkt on a port channel: the source is already in packet form; thread
// t forwards it to destination t (§2.5).
static MG_DEV void op_ppkt_port(Ctx& c, const mg_op* op) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = c.tid; i < op->n_dst; i += c.nt) {
    uint64_t np = src[i].size / (PKT / 2);
    uint64_t s = reinterpret_cast<uint64_t>(packets(c, c.rank(), src[i].buf, src[i].offset));
    uint64_t d = reinterpret_cast<uint64_t>(packets(c, dst[i].rank, dst[i].buf, dst[i].offset));
    if (push(c, d, s, np * PKT, MG_TRIG_DATA | MG_TRIG_PACKETS, ids[i]) == ~uint64_t(0)) return;
  }
}

// rppkt on a port channel: every thread waits for its packets, block
// barrier, then thread i pushes the whole packet region to destination i.
static MG_DEV void op_rppkt_port(Ctx& c, const mg_op* op) {
  const mg_region& s0 = op_src(c, op)[0];
  const mg_region* dst = op_dst(c, op);
  uint64_t np = s0.size / (PKT / 2);
  PktIn in{packets(c, c.rank(), MG_SCRATCH, s0.offset), MG_SCRATCH, 2 * s0.offset};
  bool ok = true;
  for (uint64_t w = c.tid; w < np && ok; w += c.nt) {
    Payload p;
    ok = read_packet(c, in.p, in.buf, in.at, w, &p);
  }
  block_sync();
  if (aborted(c)) return;
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = c.tid; i < op->n_dst; i += c.nt) {
    uint64_t d = reinterpret_cast<uint64_t>(packets(c, dst[i].rank, dst[i].buf, dst[i].offset));
    if (push(c, d, reinterpret_cast<uint64_t>(in.p), np * PKT, MG_TRIG_DATA | MG_TRIG_PACKETS, ids[i]) ==
        ~uint64_t(0)) {
      return;
    }
  }
}

// Operands holds the pointers of one reduction or one packet job (never
// both at once: they share the frame).
union Operands {
  struct {
    const unsigned char* s[kMaxMembers];
    unsigned char* d[kMaxMembers];
  } red;
  struct {
    PktIn in[kMaxOperands];
    unsigned char* out[kMaxMembers];
  } pkt;
};

// exec runs one op at pipeline offset o with unit u.
static MG_DEV void exec(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  if (op->type == MG_NOP) {
    block_sync();
    return;
  }
  if (op->type == MG_BARRIER) {
    op_barrier(c, op);
    return;
  }
  // Ops with a block barrier inside run even after an abort (their waits
  // return at once), so that every thread meets the same barriers.
  switch (op->type) {
    case MG_RPPKT:
      if (op->chan_type != MG_CH_PORT) break;
      op_rppkt_port(c, op);
      return;
    case MG_WAIT:
    case MG_RLXWAIT:
      op_wait(c, op);
      block_sync();
      return;
    case MG_FLUSH:
      op_flush(c, op);
      block_sync();
      return;
    case MG_SEM_ACQUIRE:
      op_sem_acquire(c, op);
      block_sync();
      return;
    case MG_PWSF:
      if (op->chan_type != MG_CH_PORT) break;
      if (!aborted(c)) op_put_port(c, op, o, u);
      block_sync();
      return;
    default:
      break;
  }
  if (aborted(c)) return;
  switch (op->type) {
    case MG_SIGNAL:
    case MG_RLXSIGNAL:
      op_signal(c, op);
      return;
    case MG_SEM_RELEASE:
      op_sem_release(c, op);
      return;
    case MG_PUT:
    case MG_PWS:
      if (op->chan_type == MG_CH_PORT) {
        op_put_port(c, op, o, u);
        return;
      }
      break;
    case MG_PPKT:
      if (op->chan_type == MG_CH_PORT) {
        op_ppkt_port(c, op);
        return;
      }
      break;
#if defined(MG_HAVE_MULTIMEM)
    case MG_GLRES:
      if (glres_mc(c, op, o, u)) return;
      break;
    case MG_GSTORE:
      if (gstore_mc(c, op, o, u)) return;
      break;
#endif
    default:
      break;
  }
  uint32_t nc = n_copies(c, op);
  for (uint32_t k = 0; k < nc && !aborted(c); k++) {
    Copy x = copy_of(c, op, k, o, u);
    copy_bytes(c, x.d, x.s, x.n);
  }
  Operands x;
  if (op->type == MG_GLRES || op->type == MG_RE || op->type == MG_RES || op->type == MG_RRE || op->type == MG_RRES) {
    Reduction r = reduction_of(c, op, o, u, x.red.s, x.red.d);
    reduce_any<DT>(c, x.red.d, r.nd, x.red.s, r.ns, r.n);
    return;
  }
  uint32_t nj = n_packet_jobs(op);
  for (uint32_t k = 0; k < nj && !aborted(c); k++) {
    PacketJob j = packets_of(c, op, k, x.pkt.in, x.pkt.out);
    run_packets(c, j, x.pkt.in, x.pkt.out);
  }
}

// mark publishes the op about to run (thread 0 only; every thread tells
// the host build's traffic counters, begin_op).
static MG_DEV void mark(Ctx& c, uint32_t i, int32_t iter) {
  begin_op(i);
  if (c.tid != 0) return;
  count_op();
  put_u32(&c.prog()->op, i + 1);
  put_i32(&c.prog()->iter, iter);
  put_u32(&c.prog()->state, MG_RUNNING);
  heartbeat(c);
}

// copy_words copies n bytes (a multiple of 8) with every thread.
static MG_DEV void copy_words(uint64_t* d, const uint64_t* s, uint64_t n) {
  for (uint64_t i = tid(); i < n / 8; i += nthreads()) d[i] = s[i];
}

// run is the body of the kernel for one block.
static MG_DEV void run(const mg_args* a) {
  unsigned char* sm = dyn_shmem();
  mg_shared* sh = reinterpret_cast<mg_shared*>(sm);
  const mg_block* blk = reinterpret_cast<const mg_block*>(a->blocks) + block_id();
  // Prologue: the block's record, ops, regions and ids into shared memory.
  uint64_t regions_off = regions_at(blk->n_ops);
  uint64_t ids_off = ids_at(blk->n_ops, blk->n_regions);
  if (tid() == 0) {
    put_shared(&sh->dead, 0);
    sh->blk = *blk;
    sh->ops = reinterpret_cast<uint64_t>(sm + ops_at());
    sh->regions = reinterpret_cast<uint64_t>(sm + regions_off);
    sh->ids = reinterpret_cast<uint64_t>(sm + ids_off);
    sh->flag = a->epoch != 0 ? get_u32(reinterpret_cast<const uint32_t*>(a->epoch)) + 1 : a->flag;
  }
  copy_words(reinterpret_cast<uint64_t*>(sm + ops_at()),
             reinterpret_cast<const uint64_t*>(reinterpret_cast<const mg_op*>(a->ops) + blk->first_op),
             uint64_t(blk->n_ops) * sizeof(mg_op));
  copy_words(reinterpret_cast<uint64_t*>(sm + regions_off),
             reinterpret_cast<const uint64_t*>(reinterpret_cast<const mg_region*>(a->regions) + blk->first_region),
             uint64_t(blk->n_regions) * sizeof(mg_region));
  const uint32_t* gids = reinterpret_cast<const uint32_t*>(a->ids) + blk->first_id;
  uint32_t* sids = reinterpret_cast<uint32_t*>(sm + ids_off);
  for (uint32_t i = tid(); i < blk->n_ids; i += nthreads()) sids[i] = gids[i];
  block_sync();
  // Variable-size plans: this call's regions and pipeline iterations.
  if (a->vtable != 0) {
    resolve_var(a, blk, reinterpret_cast<mg_region*>(sm + regions_off), reinterpret_cast<mg_op*>(sm + ops_at()));
  }

  Ctx c;
  c.a = a;
  c.sh = sh;
  c.tid = tid();
  c.nt = nthreads();
  Cold k;
  c.cold = &k;
  put_cold(&c.cold->beat, c.tid == 0 ? get_u32(&c.prog()->beat) : 0u);
  put_cold(&c.cold->tail, uint64_t(0));

  // The op loop's position is cold (local memory: get_cold/put_cold,
  // prim.h): i, the op to run; p, the pipeline whose body it is in
  // (kNoPipe outside one); it, the iteration of that pipeline. Each step
  // reads them and writes them back before the op runs, so that no
  // register holds them across the data loops (make gpu-sass,
  // docs/gpu.md §16); the op, the pipeline offset and unit are recomputed
  // from them (shared memory). Ops run in the order of the nested loops
  // they replace: a pipeline's body n_body ops, iterations times, then
  // the op after the body.
  constexpr uint32_t kNoPipe = ~uint32_t(0);
  put_cold(&k.i, 0u);
  put_cold(&k.p, kNoPipe);
  put_cold(&k.it, 0u);
  for (;;) {
    uint32_t i = get_cold(&k.i), p = get_cold(&k.p);
    if (p != kNoPipe && i == p + 1 + c.ops()[p].n_body) {
      uint32_t it = get_cold(&k.it) + 1;
      if (it < c.ops()[p].iterations) {
        put_cold(&k.it, it);
        put_cold(&k.i, p + 1);
      } else {
        put_cold(&k.p, kNoPipe);
      }
      continue;
    }
    if (i >= sh->blk.n_ops) break;
    const mg_op* op = c.ops() + i;
    if (p == kNoPipe && op->type == MG_PIPELINE) {
      if (op->iterations == 0 || op->n_body == 0) {
        put_cold(&k.i, i + 1 + op->n_body);
      } else {
        put_cold(&k.i, i + 1);
        put_cold(&k.p, i);
        put_cold(&k.it, 0u);
      }
      continue;
    }
    put_cold(&k.i, i + 1);
    if (p == kNoPipe) {
      mark(c, i, -1);
      exec(c, op, 0, kNoUnit);
    } else {
      uint32_t it = get_cold(&k.it);
      mark(c, i, int32_t(it));
      exec(c, op, uint64_t(it) * c.ops()[p].unit_size, c.ops()[p].unit_size);
    }
  }
  block_sync();
  if (c.tid == 0) {
    put_u32(&c.prog()->state, aborted(c) ? MG_ABORTED : MG_DONE);
    if (a->epoch != 0) advance_epoch(c);
  }
}

// advance_epoch counts the block as ended; the last block of the launch
// stores its flag in the epoch word for the next launch. Every block read
// the word in its prologue, before it counted itself.
static MG_DEV void advance_epoch(const Ctx& c) {
  mg_control* ctl = const_cast<mg_control*>(c.ctl());
  if (fetch_add_acq_rel_gpu32(&ctl->ended, 1) + 1 == c.a->n_blocks) {
    store_release_gpu32(reinterpret_cast<uint32_t*>(c.a->epoch), launch_flag(c));
  }
}

};  // struct Interp

}  // namespace mg

// The kernels, one per element type and packet size: grid = every block
// of every rank, one argument (a device pointer to mg_args), dynamic
// shared memory mg_args.shmem bytes, at most 1024 threads per block (the
// register budget is set for that). The host (gpu.KernelName) names the
// entry by mg_args.dtype and mg_args.packet.
#define MG_ENTRY(name, dt, pkt) \
  extern "C" __global__ void MG_LAUNCH_BOUNDS name(const mg_args* a) { mg::Interp<dt, pkt>::run(a); }
MG_ENTRY(mscclgo_interp_f16_ll16, MG_F16, 16)
MG_ENTRY(mscclgo_interp_bf16_ll16, MG_BF16, 16)
MG_ENTRY(mscclgo_interp_f32_ll16, MG_F32, 16)
MG_ENTRY(mscclgo_interp_i32_ll16, MG_I32, 16)
MG_ENTRY(mscclgo_interp_f16_ll8, MG_F16, 8)
MG_ENTRY(mscclgo_interp_bf16_ll8, MG_BF16, 8)
MG_ENTRY(mscclgo_interp_f32_ll8, MG_F32, 8)
MG_ENTRY(mscclgo_interp_i32_ll8, MG_I32, 8)
#undef MG_ENTRY

#endif  // MSCCLGO_INTERP_CUH
