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

// Ctx is one thread's view of its block: pointers into shared memory and
// the launch arguments, plus whether this thread saw the host's abort.
struct Ctx {
  const mg_args* a;
  const mg_rank* ranks;
  const mg_rank* me;
  const mg_op* ops;
  const mg_region* regions;
  const uint32_t* ids;
  mg_progress* prog;
  const mg_control* ctl;
  mg_shared* sh;
  int32_t rank;
  uint32_t tid, nt;
  uint32_t beat;
  uint64_t tail;  // the FIFO tail this thread last read (a lower bound)
  bool dead;      // the host aborted the launch
};

// launch_flag is the launch's LL flag, kept in shared memory rather than
// in the context (registers are the kernel's scarcest resource). Thread 0
// writes it in the prologue, before the block's barrier, and nothing
// changes it after: a plain read, which the compiler may keep.
MG_DEV uint32_t launch_flag(const Ctx& c) { return c.sh->flag; }

MG_DEV unsigned char* ptr(uint64_t p) { return reinterpret_cast<unsigned char*>(p); }

// aborted reports whether a thread of the block saw the host's abort
// (shared memory: no global access).
MG_DEV bool aborted(Ctx& c) {
  if (!c.dead && get_shared(&c.sh->dead) != 0) c.dead = true;
  return c.dead;
}

// check_abort reads the host's abort word (device memory) and tells the
// block: called by waiting threads every kAbortEvery spins.
MG_DEV bool check_abort(Ctx& c) {
  if (aborted(c)) return true;
  if (load_acquire_sys32(&c.ctl->abort) != 0) {
    put_shared(&c.sh->dead, 1);
    c.dead = true;
  }
  return c.dead;
}

// heartbeat bumps the block's beat (thread 0 only: one writer).
MG_DEV void heartbeat(Ctx& c) {
  if (c.tid == 0) put_u32(&c.prog->beat, ++c.beat);
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
  if (c.dead) return false;
  uint32_t spins = 0;
  while (!ready()) {
    ++spins;
    if (spins % kAbortEvery == 0 && check_abort(c)) return false;
    if (spins % kReport == 0) {
      put_u32(&c.prog->wait_kind, w.kind);
      put_u32(&c.prog->wait_a, w.a);
      put_u32(&c.prog->wait_ct, w.ct);
      put_u64(&c.prog->wait_expect, w.expect);
      put_u64(&c.prog->wait_at, w.at);
      put_u64(&c.prog->wait_got, got());
      put_u32(&c.prog->state, MG_WAITING);
    }
    wait_for(addr, spins, ready);
  }
  if (spins >= kReport) put_u32(&c.prog->state, MG_RUNNING);
  return true;
}

// ---- addressing (§2.4, mirroring executor/cpu/resolve.go) -----------------

MG_DEV uint64_t base(const Ctx& c, int32_t rank, uint32_t buf) { return c.ranks[rank].buf[buf]; }

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
  if (buf == MG_SCRATCH && c.me->reuse_slot != 0) return o % c.me->reuse_slot;
  return o;
}

// clamp is n(len, o, u) = min(len - o, u), 0 past the end (quirk Q9).
MG_DEV uint64_t clamp(uint64_t n, uint64_t o, uint64_t u) {
  if (n <= o) return 0;
  n -= o;
  return n > u ? u : n;
}

MG_DEV unsigned char* local(const Ctx& c, const mg_region& r, uint64_t o) {
  return ptr(base(c, c.rank, r.buf) + shift(c, r.buf) + r.offset + adj(c, r.buf, o));
}
MG_DEV unsigned char* local_unshifted(const Ctx& c, const mg_region& r, uint64_t o) {
  return ptr(base(c, c.rank, r.buf) + r.offset + adj(c, r.buf, o));
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
  return ptr(base(c, c.rank, r.buf) + shift(c, r.buf) + r.offset);
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

// reduce_t computes ((s0 ⊕ s1) ⊕ s2) ⊕ … over n bytes (§2.6) in element
// type DT with reduction OP and stores the result to every destination:
// 16-byte vectors (kUnroll per thread and round, each source's loads
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
  uint64_t stride = nt * kUnroll, full = OP == MG_SUM ? nv / stride * stride : 0;
  for (uint64_t i = c.tid; i < full;) {
    heartbeat(c);
    uint32_t r = kBeatRounds;
    do {
      v16 acc[kUnroll];
MG_UNROLL
      for (int u = 0; u < kUnroll; u++) acc[u] = load16(s[0] + 16 * (i + u * nt));
      for (int k = 1; k < ns; k++) {
        v16 x[kUnroll];
MG_UNROLL
        for (int u = 0; u < kUnroll; u++) x[u] = load16(s[k] + 16 * (i + u * nt));
MG_UNROLL
        for (int u = 0; u < kUnroll; u++) acc[u] = red_v16<DT, OP>(acc[u], x[u]);
      }
      for (int k = 0; k < nd; k++) {
MG_UNROLL
        for (int u = 0; u < kUnroll; u++) store16(d[k] + 16 * (i + u * nt), acc[u]);
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

// push hands a trigger to the rank's proxy and returns its FIFO position,
// or ~0 when the launch was aborted while the FIFO was full. The tail is
// read (from its device replica) only when the FIFO looks full by the
// last tail this thread saw; the trigger is four stores into the
// host-mapped slot.
static MG_DEV uint64_t push(Ctx& c, uint64_t dst, uint64_t src, uint64_t size, uint32_t kind, uint32_t ch) {
  mg_fifo* f = reinterpret_cast<mg_fifo*>(c.me->fifo);
  const uint64_t* tail = reinterpret_cast<const uint64_t*>(c.me->fifo_tail);
  uint64_t p = fetch_add_gpu(reinterpret_cast<uint64_t*>(c.me->fifo_head), 1);
  if (p >= c.tail + MG_FIFO_DEPTH) {
    c.tail = load_acquire_sys(tail);
    if (p >= c.tail + MG_FIFO_DEPTH) {
      Wait w{MG_WAIT_FIFO, ch, MG_CH_PORT, p, 0};
      if (!poll(
              c, w, tail, [&] { return p < (c.tail = load_acquire_sys(tail)) + MG_FIFO_DEPTH; },
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
  const uint64_t* tail = reinterpret_cast<const uint64_t*>(c.me->fifo_tail);
  if (c.tail > p) return true;
  Wait w{MG_WAIT_PROXY, ch, MG_CH_PORT, p + 1, 0};
  return poll(
      c, w, tail, [&] { return (c.tail = load_acquire_sys(tail)) > p; }, [&] { return load_relaxed_sys(tail); });
}

// ---- ops ---------------------------------------------------------------------

static MG_DEV const uint32_t* op_ids(const Ctx& c, const mg_op* op) { return c.ids + op->first_id; }
static MG_DEV const mg_region* op_src(const Ctx& c, const mg_op* op) { return c.regions + op->first_region; }
static MG_DEV const mg_region* op_dst(const Ctx& c, const mg_op* op) { return c.regions + op->first_region + op->n_src; }

static MG_DEV void op_signal(Ctx& c, const mg_op* op) {
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = c.tid; i < op->n_ids; i += c.nt) {
    uint32_t ch = ids[i];
    if (op->chan_type == MG_CH_PORT) {
      push(c, 0, 0, 0, MG_TRIG_FLAG, ch);
    } else if (op->chan_type == MG_CH_MEMORY) {
      uint64_t peer = reinterpret_cast<const uint64_t*>(c.me->mem_peer)[ch];
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
    uint64_t* inb = reinterpret_cast<uint64_t*>(mem ? c.me->mem_inbound : c.me->port_inbound) + ch;
    uint64_t* exp = reinterpret_cast<uint64_t*>(mem ? c.me->mem_expected : c.me->port_expected) + ch;
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
    add_release_gpu(reinterpret_cast<uint64_t*>(c.me->sems) + ids[i], 1);
  }
}

static MG_DEV void op_sem_acquire(Ctx& c, const mg_op* op) {
  if (c.tid != 0) return;
  const uint32_t* ids = op_ids(c, op);
  for (uint32_t i = 0; i < op->n_ids; i++) {
    uint64_t* sem = reinterpret_cast<uint64_t*>(c.me->sems) + ids[i];
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
    mg_barrier* b = reinterpret_cast<mg_barrier*>(c.me->barriers) + op->barrier_id;
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

// put family: memory channels copy, port channels push one trigger per
// destination (thread 0 pushes them all, in order, and for the flush
// form waits for the last).
static MG_DEV void op_put(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  if (op->chan_type != MG_CH_PORT) {
    for (int i = 0; i < op->n_dst && !c.dead; i++) {
      uint64_t n = clamp(dst[i].size, o, u);
      copy_bytes(c, remote(c, dst[i], o), local(c, src[i], o), n);
    }
    return;
  }
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

static MG_DEV void op_get(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  for (int i = 0; i < op->n_src && !c.dead; i++) {
    uint64_t n = clamp(src[i].size, o, u);
    copy_bytes(c, local(c, dst[i], o), remote(c, src[i], o), n);
  }
}

static MG_DEV void op_reduce(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  uint64_t n = clamp(src[0].size, o, u);
  const unsigned char* s[kMaxOperands];
  unsigned char* d[kMaxOperands];
  for (int k = 0; k < op->n_src; k++) s[k] = src[k].kind == MG_REMOTE ? remote(c, src[k], o) : local(c, src[k], o);
  for (int k = 0; k < op->n_dst; k++) d[k] = dst[k].kind == MG_REMOTE ? remote(c, dst[k], o) : local(c, dst[k], o);
  reduce_any<DT>(c, d, op->n_dst, s, op->n_src, n);
}

static MG_DEV const mg_switch& switch_of(const Ctx& c, const mg_region& r) {
  return reinterpret_cast<const mg_switch*>(c.me->switches)[r.sw];
}

// member_ptr is the bound buffer of switch member m at r's offset (no
// double-buffer shift, quirk Q8 as mirrored by the CPU backend).
static MG_DEV unsigned char* member_ptr(const Ctx& c, const mg_switch& sw, int32_t m, const mg_region& r, uint64_t o) {
  return ptr(base(c, m, sw.buf) + r.offset + adj(c, sw.buf, o));
}

static MG_DEV const int32_t* members(const mg_switch& sw) { return reinterpret_cast<const int32_t*>(sw.members); }

// glres: the sum over every member of its bound buffer, in ascending
// rank order, stored to every member. This is the unicast fallback; with
// a multicast pointer and a toolkit that assembles multimem (sm_90) the
// switch does it (see mc_* in prim.h).
#if defined(MG_HAVE_MULTIMEM)
static MG_DEV void glres_mc(Ctx& c, unsigned char* d, const unsigned char* s, uint64_t n) {
  for (uint64_t i = c.tid; i < n / 16; i += c.nt) mc_st16(d + 16 * i, mc_ld_reduce16<DT>(s + 16 * i));
}
#endif

static MG_DEV void op_glres(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region& sr = op_src(c, op)[0];
  const mg_region& dr = op_dst(c, op)[0];
  const mg_switch& ss = switch_of(c, sr);
  const mg_switch& ds = switch_of(c, dr);
  uint64_t n = clamp(sr.size, o, u);
#if defined(MG_HAVE_MULTIMEM)
  if (ss.mc != 0 && ds.mc != 0 && n % 16 == 0 && c.a->redop == MG_SUM) {
    // The switch reduces: hardware order, element-type precision (§4.4).
    // Other reductions take the unicast path below: multimem.ld_reduce
    // has no product, and no f32 min or max.
    unsigned char* d = ptr(ds.mc + dr.offset + adj(c, ds.buf, o));
    const unsigned char* s = ptr(ss.mc + sr.offset + adj(c, ss.buf, o));
    glres_mc(c, d, s, n);
    return;
  }
#endif
  const unsigned char* s[32];
  unsigned char* d[32];
  int ns = ss.n_members < 32 ? int(ss.n_members) : 32;
  int nd = ds.n_members < 32 ? int(ds.n_members) : 32;
  for (int k = 0; k < ns; k++) s[k] = member_ptr(c, ss, members(ss)[k], sr, o);
  for (int k = 0; k < nd; k++) d[k] = member_ptr(c, ds, members(ds)[k], dr, o);
  reduce_any<DT>(c, d, nd, s, ns, n);
}

static MG_DEV void op_gstore(Ctx& c, const mg_op* op, uint64_t o, uint64_t u) {
  const mg_region& sr = op_src(c, op)[0];
  const mg_region& dr = op_dst(c, op)[0];
  const mg_switch& ds = switch_of(c, dr);
  uint64_t n = clamp(sr.size, o, u);
  const unsigned char* s = local(c, sr, o);
#if defined(MG_HAVE_MULTIMEM)
  if (ds.mc != 0 && n % 16 == 0 && (reinterpret_cast<uintptr_t>(s) & 15) == 0) {
    unsigned char* d = ptr(ds.mc + dr.offset + adj(c, ds.buf, o));
    for (uint64_t i = c.tid; i < n / 16; i += c.nt) mc_st16(d + 16 * i, load16(s + 16 * i));
    return;
  }
#endif
  for (uint32_t k = 0; k < ds.n_members && !c.dead; k++) copy_bytes(c, member_ptr(c, ds, members(ds)[k], dr, o), s, n);
}

static MG_DEV void op_gstorepkt(Ctx& c, const mg_op* op) {
  const mg_region& sr = op_src(c, op)[0];
  const mg_region& dr = op_dst(c, op)[0];
  const mg_switch& ds = switch_of(c, dr);
  uint64_t np = sr.size / (PKT / 2);
  PktIn in{packets(c, c.rank, sr.buf, sr.offset), sr.buf, 2 * sr.offset};
  unsigned char* out[32];
  int nd = ds.n_members < 32 ? int(ds.n_members) : 32;
  for (int k = 0; k < nd; k++) out[k] = packets(c, members(ds)[k], ds.buf, dr.offset);
  packet_op<MG_SUM>(c, np, nullptr, &in, 1, nullptr, out, nd, false);
}

static MG_DEV void op_ppkt(Ctx& c, const mg_op* op) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  if (op->chan_type == MG_CH_PORT) {
    // The source is already in packet form: forward it (§2.5).
    const uint32_t* ids = op_ids(c, op);
    for (uint32_t i = c.tid; i < op->n_dst; i += c.nt) {
      uint64_t np = src[i].size / (PKT / 2);
      uint64_t s = reinterpret_cast<uint64_t>(packets(c, c.rank, src[i].buf, src[i].offset));
      uint64_t d = reinterpret_cast<uint64_t>(packets(c, dst[i].rank, dst[i].buf, dst[i].offset));
      if (push(c, d, s, np * PKT, MG_TRIG_DATA | MG_TRIG_PACKETS, ids[i]) == ~uint64_t(0)) return;
    }
    return;
  }
  for (int i = 0; i < op->n_dst && !c.dead; i++) {
    uint64_t np = src[i].size / (PKT / 2);
    unsigned char* out = packets(c, dst[i].rank, dst[i].buf, dst[i].offset);
    packet_op<MG_SUM>(c, np, raw(c, src[i]), nullptr, 0, nullptr, &out, 1, false);
  }
}

static MG_DEV void op_rppkt(Ctx& c, const mg_op* op) {
  const mg_region& s0 = op_src(c, op)[0];
  const mg_region* dst = op_dst(c, op);
  uint64_t np = s0.size / (PKT / 2);
  PktIn in{packets(c, c.rank, MG_SCRATCH, s0.offset), MG_SCRATCH, 2 * s0.offset};
  if (op->chan_type == MG_CH_PORT) {
    // Every thread waits for its packets, then thread i pushes the whole
    // packet region to destination i.
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
    return;
  }
  unsigned char* out[kMaxOperands];
  for (int k = 0; k < op->n_dst; k++) out[k] = packets(c, dst[k].rank, dst[k].buf, dst[k].offset);
  packet_op<MG_SUM>(c, np, nullptr, &in, 1, nullptr, out, op->n_dst, false);
}

static MG_DEV void op_cpkt(Ctx& c, const mg_op* op) {
  const mg_region& s0 = op_src(c, op)[0];
  const mg_region& d0 = op_dst(c, op)[0];
  uint64_t np = s0.size / (PKT / 2);
  unsigned char* out = packets(c, c.rank, d0.buf, d0.offset);
  packet_op<MG_SUM>(c, np, raw(c, s0), nullptr, 0, nullptr, &out, 1, false);
}

static MG_DEV void op_upkt(Ctx& c, const mg_op* op) {
  const mg_region& s0 = op_src(c, op)[0];
  const mg_region& d0 = op_dst(c, op)[0];
  uint64_t np = s0.size / (PKT / 2);
  // The source is always local scratch, whatever its declared type.
  PktIn in{packets(c, c.rank, MG_SCRATCH, s0.offset), MG_SCRATCH, 2 * s0.offset};
  packet_op<MG_SUM>(c, np, nullptr, &in, 1, raw(c, d0), nullptr, 0, false);
}

// The packet reductions: src0 raw, src1.. local scratch packets; dst0 raw,
// then (copy forms) a local packet copy, then (send forms) remote packets.
static MG_DEV void op_reduce_packets(Ctx& c, const mg_op* op) {
  const mg_region* src = op_src(c, op);
  const mg_region* dst = op_dst(c, op);
  uint64_t np = src[0].size / (PKT / 2);
  PktIn in[kMaxOperands];
  int npin = 0;
  for (int k = 1; k < op->n_src; k++) {
    in[npin++] = PktIn{packets(c, c.rank, MG_SCRATCH, src[k].offset), MG_SCRATCH, 2 * src[k].offset};
  }
  unsigned char* out[kMaxOperands];
  int npout = 0;
  for (int k = 1; k < op->n_dst; k++) {
    int32_t owner = dst[k].kind == MG_REMOTE ? dst[k].rank : c.rank;
    out[npout++] = packets(c, owner, dst[k].buf, dst[k].offset);
  }
  unsigned char* ri = raw(c, src[0]);
  unsigned char* ro = raw(c, dst[0]);
  switch (c.a->redop) {
    case MG_PROD:
      packet_op<MG_PROD>(c, np, ri, in, npin, ro, out, npout, true);
      break;
    case MG_MAX:
      packet_op<MG_MAX>(c, np, ri, in, npin, ro, out, npout, true);
      break;
    case MG_MIN:
      packet_op<MG_MIN>(c, np, ri, in, npin, ro, out, npout, true);
      break;
    default:
      packet_op<MG_SUM>(c, np, ri, in, npin, ro, out, npout, true);
  }
}

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
      op_rppkt(c, op);
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
      if (!aborted(c)) op_put(c, op, o, u);
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
      break;
    case MG_SEM_RELEASE:
      op_sem_release(c, op);
      break;
    case MG_COPY: {
      const mg_region& s0 = op_src(c, op)[0];
      copy_bytes(c, local(c, op_dst(c, op)[0], o), local(c, s0, o), clamp(s0.size, o, u));
      break;
    }
    case MG_GET:
      op_get(c, op, o, u);
      break;
    case MG_PUT:
    case MG_PWS:
    case MG_PWSF:
      op_put(c, op, o, u);
      break;
    case MG_RE:
    case MG_RES:
    case MG_RRE:
    case MG_RRES:
      op_reduce(c, op, o, u);
      break;
    case MG_GLRES:
      op_glres(c, op, o, u);
      break;
    case MG_GSTORE:
      op_gstore(c, op, o, u);
      break;
    case MG_GSTOREPKT:
      op_gstorepkt(c, op);
      break;
    case MG_PPKT:
      op_ppkt(c, op);
      break;
    case MG_RPPKT:
      op_rppkt(c, op);
      break;
    case MG_CPKT:
      op_cpkt(c, op);
      break;
    case MG_UPKT:
      op_upkt(c, op);
      break;
    case MG_REPKT:
    case MG_RESPKT:
    case MG_RECPKT:
    case MG_RECSPKT:
      op_reduce_packets(c, op);
      break;
    default:
      break;
  }
}

// mark publishes the op about to run (thread 0 only; every thread tells
// the host build's traffic counters, begin_op).
static MG_DEV void mark(Ctx& c, uint32_t i, int32_t iter) {
  begin_op(i);
  if (c.tid != 0) return;
  count_op();
  put_u32(&c.prog->op, i + 1);
  put_i32(&c.prog->iter, iter);
  put_u32(&c.prog->state, MG_RUNNING);
  heartbeat(c);
}

// copy_words copies n bytes (a multiple of 8) with every thread.
static MG_DEV void copy_words(uint64_t* d, const uint64_t* s, uint64_t n) {
  for (uint64_t i = tid(); i < n / 8; i += nthreads()) d[i] = s[i];
}

static MG_DEV uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t(7); }

// run is the body of the kernel for one block.
static MG_DEV void run(const mg_args* a) {
  unsigned char* sm = dyn_shmem();
  mg_shared* sh = reinterpret_cast<mg_shared*>(sm);
  const mg_block* blk = reinterpret_cast<const mg_block*>(a->blocks) + block_id();
  // Prologue: the block's record, ops, regions and ids into shared memory.
  uint64_t ops_at = align8(sizeof(mg_shared));
  uint64_t regions_at = ops_at + align8(uint64_t(blk->n_ops) * sizeof(mg_op));
  uint64_t ids_at = regions_at + align8(uint64_t(blk->n_regions) * sizeof(mg_region));
  if (tid() == 0) {
    put_shared(&sh->dead, 0);
    sh->blk = *blk;
    sh->ops = reinterpret_cast<uint64_t>(sm + ops_at);
    sh->regions = reinterpret_cast<uint64_t>(sm + regions_at);
    sh->ids = reinterpret_cast<uint64_t>(sm + ids_at);
    sh->flag = a->epoch != 0 ? get_u32(reinterpret_cast<const uint32_t*>(a->epoch)) + 1 : a->flag;
  }
  copy_words(reinterpret_cast<uint64_t*>(sm + ops_at),
             reinterpret_cast<const uint64_t*>(reinterpret_cast<const mg_op*>(a->ops) + blk->first_op),
             uint64_t(blk->n_ops) * sizeof(mg_op));
  copy_words(reinterpret_cast<uint64_t*>(sm + regions_at),
             reinterpret_cast<const uint64_t*>(reinterpret_cast<const mg_region*>(a->regions) + blk->first_region),
             uint64_t(blk->n_regions) * sizeof(mg_region));
  const uint32_t* gids = reinterpret_cast<const uint32_t*>(a->ids) + blk->first_id;
  uint32_t* sids = reinterpret_cast<uint32_t*>(sm + ids_at);
  for (uint32_t i = tid(); i < blk->n_ids; i += nthreads()) sids[i] = gids[i];
  block_sync();
  // Variable-size plans: this call's regions and pipeline iterations.
  if (a->vtable != 0) {
    resolve_var(a, blk, reinterpret_cast<mg_region*>(sm + regions_at), reinterpret_cast<mg_op*>(sm + ops_at));
  }

  Ctx c;
  c.a = a;
  c.ranks = reinterpret_cast<const mg_rank*>(a->ranks);
  c.rank = sh->blk.rank;
  c.me = c.ranks + c.rank;
  c.ops = reinterpret_cast<const mg_op*>(sh->ops);
  c.regions = reinterpret_cast<const mg_region*>(sh->regions);
  c.ids = reinterpret_cast<const uint32_t*>(sh->ids);
  c.prog = reinterpret_cast<mg_progress*>(a->progress) + block_id();
  c.ctl = reinterpret_cast<const mg_control*>(a->control);
  c.tid = tid();
  c.nt = nthreads();
  c.beat = 0;
  c.sh = sh;
  c.tail = 0;
  c.dead = false;
  if (c.tid == 0) c.beat = get_u32(&c.prog->beat);

  uint32_t n = sh->blk.n_ops;
  for (uint32_t i = 0; i < n;) {
    const mg_op* op = c.ops + i;
    if (op->type != MG_PIPELINE) {
      mark(c, i, -1);
      exec(c, op, 0, kNoUnit);
      i++;
      continue;
    }
    for (uint32_t it = 0; it < op->iterations; it++) {
      uint64_t o = uint64_t(it) * op->unit_size;
      for (uint32_t j = 0; j < op->n_body; j++) {
        mark(c, i + 1 + j, int32_t(it));
        exec(c, c.ops + i + 1 + j, o, op->unit_size);
      }
    }
    i += 1 + op->n_body;
  }
  block_sync();
  if (c.tid == 0) {
    put_u32(&c.prog->state, aborted(c) ? MG_ABORTED : MG_DONE);
    if (a->epoch != 0) advance_epoch(c);
  }
}

// advance_epoch counts the block as ended; the last block of the launch
// stores its flag in the epoch word for the next launch. Every block read
// the word in its prologue, before it counted itself.
static MG_DEV void advance_epoch(const Ctx& c) {
  mg_control* ctl = const_cast<mg_control*>(c.ctl);
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
