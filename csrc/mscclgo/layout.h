// layout.h holds the device layout of an instantiated plan: the records
// the Go host runtime (gpu/layout.go) writes into device memory and the
// interpreter kernel (interp.cuh) reads. Go mirrors every struct field for
// field; TestLayoutMatchesC (gpu/layout_test.go) checks sizes and offsets against this file.
// Every field has a fixed width and every struct a size that is a multiple
// of 8, so the layout is the same under nvcc, g++ and Go.
#ifndef MSCCLGO_LAYOUT_H
#define MSCCLGO_LAYOUT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Buffer types (plan-format "i", "o", "s").
enum { MG_INPUT = 0, MG_OUTPUT = 1, MG_SCRATCH = 2 };

// Operand kinds: how a region is addressed.
enum { MG_LOCAL = 0, MG_REMOTE = 1, MG_SWITCH = 2 };

// Channel types of an op.
enum { MG_CH_NONE = 0, MG_CH_MEMORY = 1, MG_CH_PORT = 2, MG_CH_SWITCH = 3 };

// Element types of a launch.
enum { MG_F16 = 0, MG_BF16 = 1, MG_F32 = 2, MG_I32 = 3 };
// The reductions (mg_args.redop): executor.ReduceOp's values.
enum { MG_SUM = 0, MG_PROD = 1, MG_MAX = 2, MG_MIN = 3 };

// Op types, in the order of plan.OpType. TestKernelLayoutNumbering
// (plan/plan_test.go) checks this enum, the buffer types' and the channel
// types' against package plan.
enum {
  MG_NOP = 0,
  MG_BARRIER,
  MG_SIGNAL,
  MG_RLXSIGNAL,
  MG_WAIT,
  MG_RLXWAIT,
  MG_FLUSH,
  MG_SEM_ACQUIRE,
  MG_SEM_RELEASE,
  MG_COPY,
  MG_CPKT,
  MG_UPKT,
  MG_GET,
  MG_PUT,
  MG_PWS,
  MG_PWSF,
  MG_PPKT,
  MG_RPPKT,
  MG_RE,
  MG_RES,
  MG_RRE,
  MG_RRES,
  MG_REPKT,
  MG_RESPKT,
  MG_RECPKT,
  MG_RECSPKT,
  MG_GLRES,
  MG_GSTORE,
  MG_GSTOREPKT,
  MG_PIPELINE,
  MG_NUM_OPS
};

// mg_region is one resolved operand: a byte range of a buffer of a rank,
// or of a switch channel's bound buffer in every member.
typedef struct mg_region {
  uint64_t offset;  // data offset in the buffer (packet ops double it)
  uint64_t size;    // bytes, before pipeline clamping
  int32_t rank;     // owner rank (MG_LOCAL: the executing rank); -1 for switch
  uint8_t buf;      // MG_INPUT, MG_OUTPUT, MG_SCRATCH
  uint8_t kind;     // MG_LOCAL, MG_REMOTE, MG_SWITCH
  uint16_t sw;      // MG_SWITCH: the executing rank's switch index
} mg_region;

// mg_op is one op. Pipeline ops are followed by their n_body nested ops.
// first_region and first_id are relative to the block's own arrays.
typedef struct mg_op {
  uint8_t type;        // MG_NOP...
  uint8_t chan_type;   // MG_CH_*
  uint8_t n_src;       // source regions (first_region...)
  uint8_t n_dst;       // destination regions (after the sources)
  uint8_t n_ids;       // channel indices (global, of chan_type) or semaphore ids
  uint8_t barrier_id;  // barrier
  uint16_t pad0;
  uint32_t first_region;
  uint32_t first_id;
  uint32_t n_threadblocks;  // barrier
  uint32_t iterations;      // pipeline
  uint32_t n_body;          // pipeline
  uint32_t pad1;
  uint64_t unit_size;  // pipeline
} mg_op;

// mg_block is one CUDA block: one plan thread block of one rank.
typedef struct mg_block {
  int32_t rank;
  int32_t tb;
  uint32_t first_op;  // into mg_args.ops
  uint32_t n_ops;     // flat, pipeline bodies included
  uint32_t first_region;
  uint32_t n_regions;
  uint32_t first_id;
  uint32_t n_ids;
} mg_block;

// mg_switch is one switch (NVLS) channel of a rank.
typedef struct mg_switch {
  uint64_t members;  // device pointer to int32_t[n_members], ascending ranks
  uint64_t mc;       // multicast pointer of the bound buffer, 0: unicast fallback
  uint32_t n_members;
  uint32_t buf;  // bound buffer type
} mg_switch;

// mg_barrier is one of a rank's 16 device barriers.
typedef struct mg_barrier {
  uint32_t count;
  uint32_t gen;
} mg_barrier;

// Port-channel FIFO: MG_FIFO_DEPTH slots of four words in host-mapped
// memory, pushed by the device, served in order by the rank's proxy. The
// kernel only stores into the slots: the proxy's progress (the tail)
// reaches it through a replica in device memory (mg_rank.fifo_tail).
#define MG_FIFO_DEPTH 512

// Trigger kinds (or-able), in word 3 bits 0-7.
enum { MG_TRIG_DATA = 1, MG_TRIG_FLAG = 2, MG_TRIG_SYNC = 4, MG_TRIG_PACKETS = 8 };

// mg_trigger is one FIFO slot: word 0 destination pointer, word 1 source
// pointer, word 2 size in bytes, word 3 kind (bits 0-7), global port
// channel index (bits 8-39) and the commit bit (bit 63) = 1 - lap parity
// of the slot's position, written last with a release store.
typedef struct mg_trigger {
  uint64_t w[4];
} mg_trigger;

// mg_fifo is a rank's host-mapped FIFO. tail is the proxy's own record
// of the positions it has handled; the kernel never reads it.
typedef struct mg_fifo {
  uint64_t tail;
  uint64_t pad[3];
  mg_trigger slots[MG_FIFO_DEPTH];
} mg_fifo;

// mg_rank is the per-rank state of a session; every pointer is a device
// address, of device memory unless marked host-mapped.
typedef struct mg_rank {
  uint64_t buf[3];         // input, output, scratch base
  uint64_t mem_inbound;    // uint64_t[n_mem]: signals received per memory channel
  uint64_t mem_expected;   // uint64_t[n_mem]: waits issued per memory channel
  uint64_t mem_peer;       // uint64_t[n_mem]: the paired inbound counter of the peer, 0 if unpaired
  uint64_t port_inbound;   // uint64_t[n_port]: written by the peer's proxy (copy stream)
  uint64_t port_expected;  // uint64_t[n_port]
  uint64_t sems;           // int64_t[n_sems]
  uint64_t barriers;       // mg_barrier[16]
  uint64_t switches;       // mg_switch[n_switch]
  uint64_t fifo;           // mg_fifo, host-mapped
  uint64_t fifo_head;      // uint64_t in device memory: positions handed out
  uint64_t reuse_slot;     // scratch ring of reuse_resources pipelines, 0 if none
  uint64_t fifo_tail;      // uint64_t: the proxy's tail, replicated by its copy stream
  uint32_t n_mem;
  uint32_t n_port;
  uint32_t n_switch;
  uint32_t n_sems;
} mg_rank;

// Block states in mg_progress.state.
enum { MG_IDLE = 0, MG_RUNNING = 1, MG_WAITING = 2, MG_DONE = 3, MG_ABORTED = 4 };

// What a waiting thread waits for (mg_progress.wait_kind) and its values.
enum {
  MG_WAIT_NONE = 0,
  MG_WAIT_CHANNEL = 1,  // wait_a: global channel index (wait_ct its type), expect/got: counters
  MG_WAIT_PACKET = 2,   // wait_a: buffer type, expect: flag, got: seen flag, wait_at: packet offset
  MG_WAIT_BARRIER = 3,  // wait_a: barrier id, expect: thread blocks, got: arrived
  MG_WAIT_SEM = 4,      // wait_a: semaphore id, expect: value wanted, got: value
  MG_WAIT_PROXY = 5,    // expect: FIFO position to complete, got: tail
  MG_WAIT_FIFO = 6      // FIFO full: expect: position, got: tail
};

// mg_progress is a block's progress record, in device memory: thread 0
// stores the op when it starts, a thread that has waited long stores
// what it waits for; the host's watchdog copies the records out on a
// side stream while the kernel runs.
typedef struct mg_progress {
  uint32_t op;     // flat op index + 1 of the current op, 0 before the first
  int32_t iter;    // pipeline iteration, -1 outside pipelines
  uint32_t state;  // MG_IDLE...
  uint32_t beat;   // bumped on every op start and every completed wait
  uint32_t wait_kind;
  uint32_t wait_a;
  uint32_t wait_ct;
  uint32_t pad;
  uint64_t wait_expect;
  uint64_t wait_got;
  uint64_t wait_at;
} mg_progress;

// mg_control is in device memory: the host sets abort (a write on a side
// stream) to stop every spin; waiting threads read it every few thousand
// spins.
typedef struct mg_control {
  uint32_t abort;
  uint32_t ended;  // blocks of this launch that have ended (launches with an epoch word)
  uint32_t pad[14];
} mg_control;

// mg_args is the kernel's only parameter (by device pointer).
typedef struct mg_args {
  uint64_t blocks;          // mg_block[n_blocks]
  uint64_t ops;             // mg_op[]
  uint64_t regions;         // mg_region[]
  uint64_t ids;             // uint32_t[]
  uint64_t ranks;           // mg_rank[n_ranks]
  uint64_t progress;        // mg_progress[n_blocks]
  uint64_t control;         // mg_control
  uint64_t scratch_offset;  // double-buffer half of this launch (0 without)
  uint32_t n_blocks;
  uint32_t n_ranks;
  uint32_t flag;    // LL flag of this launch
  uint32_t dtype;   // MG_F16... (the kernel entry is chosen by it)
  uint32_t packet;  // LL packet bytes: 16 or 8 (likewise)
  uint32_t shmem;   // dynamic shared memory bytes of every block
  uint64_t vterms;  // mg_vterm[], one per region, of an alltoallv plan; 0 otherwise
  uint64_t vtable;  // mg_vtable of this call (alltoallv plans); 0 otherwise
  // epoch, when not 0, is a uint32_t in device memory holding the last
  // launch's LL flag: the kernel then takes flag = *epoch + 1 and the
  // double-buffer half from it (scratch_half for even flags, else 0),
  // ignoring flag and scratch_offset, and the last block to end stores
  // the flag back. A launch captured into a CUDA graph advances its flag
  // at every replay this way, with no host involved.
  uint64_t epoch;
  uint64_t scratch_half;  // with epoch: the scratch offset of even launches' half (0: one buffer)
  uint32_t redop;         // MG_SUM...: the reduction of every reduce op (the session's)
  uint32_t pad;
} mg_args;

// ---- variable-size (alltoallv) plans ----------------------------------------
// Their operands' bytes come from each call's counts and displacements
// (docs/executor.md §14). The host writes the call's mg_vtable into a
// fixed device buffer before the launch; every block resolves its regions
// and pipeline iteration counts from it in its prologue (varsize.cuh), so
// the op records, regions and launch arguments never change between calls.

// mg_vterm is how one region is computed (executor.VarTerm).
typedef struct mg_vterm {
  uint32_t index;       // first chunk
  uint32_t size;        // chunks
  uint32_t tbg_id;      // thread-block-group member
  uint32_t tbg_n;       // group size, 0 without a group
  int32_t owner;        // rank whose counts and displacements apply
  int32_t counterpart;  // scratch: block-relative region whose whole size it takes, -1: none
  uint8_t buf;          // MG_INPUT, MG_OUTPUT, MG_SCRATCH
  uint8_t pad[7];
} mg_vterm;

// mg_vtable is one call's table, followed by four n_ranks x n_ranks
// arrays of uint64_t in elements, row = owner rank: send counts, send
// displacements, receive counts, receive displacements.
typedef struct mg_vtable {
  uint64_t chunk_bytes;  // scratch chunk bytes of this call
  uint32_t n_ranks;
  uint32_t per;   // chunks per block
  uint32_t elem;  // element bytes
  uint32_t pad;
} mg_vtable;

// mg_shared is the head of a block's dynamic shared memory; its ops,
// regions and ids follow, each array 8-byte aligned.
typedef struct mg_shared {
  mg_block blk;
  uint64_t ops;  // shared-memory pointers of the copied arrays
  uint64_t regions;
  uint64_t ids;
  uint32_t dead;  // set by the thread that saw the host's abort
  uint32_t flag;  // this launch's LL flag: mg_args.flag, or from the epoch word
} mg_shared;

#ifdef __cplusplus
}
#endif

#endif  // MSCCLGO_LAYOUT_H
