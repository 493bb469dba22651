// traffic.h counts, for the host build of the kernel, the data traffic of
// one launch per block and op: the bytes each op loads and stores, and how
// its warps' accesses coalesce. A warp is 32 consecutive threads of a
// block; its k-th data access in an op is one warp-wide request, whose
// lanes' addresses fall into 32-byte sectors (the unit in which a GPU's
// L2 and memory move data). A request costs the sectors its lanes touch,
// against the fewest that could hold the bytes they move
// (ceil(bytes / 32)): that ratio is the coalescing efficiency.
//
// On the host the lanes of a warp are fibers that run one after another
// (csrc/host/launch.cc runs every fiber of a block on one pool thread, so
// nothing here needs a lock), so a request is assembled from each lane's
// k-th access of the op as the lanes reach it. Lanes that do more
// accesses than others (a loop's last round) form requests of fewer
// lanes, as they would on a GPU, where the others are masked off. The
// repeated loads of an LL packet a lane polls are counted apart (polled)
// and do not advance its access count: a poll moves no data the plan
// asks for.
#ifndef MSCCLGO_HOST_TRAFFIC_H
#define MSCCLGO_HOST_TRAFFIC_H

#include <cstdint>
#include <unordered_map>
#include <vector>

// mg_host_opcount is one op's traffic in a block (every execution of the
// op in the launch: pipeline iterations add up).
struct mg_host_opcount {
  uint64_t loaded, stored;  // data bytes
  uint64_t polled;          // bytes of repeated packet loads (polls)
  uint64_t requests;        // warp-wide accesses
  uint64_t sectors;         // 32-byte sectors those touched
  uint64_t min_sectors;     // the fewest that hold the bytes they moved
};

// The kinds of data access traffic counts.
enum mg_host_access { MG_LOAD = 0, MG_STORE = 1, MG_PKT_LOAD = 2, MG_PKT_STORE = 3 };

class mg_host_traffic {
 public:
  // reset starts a launch of grid blocks of block threads.
  void reset(unsigned grid, unsigned block) {
    block_ = block;
    blocks_.assign(grid, Block{});
    for (Block& b : blocks_) {
      b.threads.assign(block, Thread{});
      b.warps.resize((block + kWarp - 1) / kWarp);
      for (unsigned w = 0; w < b.warps.size(); w++) {
        unsigned left = block - w * kWarp;
        b.warps[w].lanes = left < kWarp ? left : kWarp;
      }
    }
  }

  // begin_op: thread tid of block blk starts (an execution of) op.
  void begin_op(unsigned blk, unsigned tid, uint32_t op) {
    if (blk >= blocks_.size() || tid >= block_) return;
    Block& b = blocks_[blk];
    Thread& t = b.threads[tid];
    Warp& w = b.warps[tid / kWarp];
    if (t.exec != 0) {
      auto it = w.open.find(t.exec);
      if (it != w.open.end() && ++it->second.finished == w.lanes) {
        flush(b, it->second);
        w.open.erase(it);
      }
    }
    t.exec++;
    t.op = op;
    t.seq = 0;
    t.last_pkt = 0;
  }

  // access: thread tid of block blk moves n bytes at address a.
  void access(unsigned blk, unsigned tid, uint64_t a, unsigned n, mg_host_access kind) {
    if (blk >= blocks_.size() || tid >= block_ || n == 0) return;
    Block& b = blocks_[blk];
    Thread& t = b.threads[tid];
    if (t.exec == 0) return;  // the prologue: no op yet
    mg_host_opcount& oc = count(b, t.op);
    if (kind == MG_PKT_LOAD && a == t.last_pkt) {
      oc.polled += n;
      return;
    }
    t.last_pkt = kind == MG_PKT_LOAD ? a : 0;
    if (kind == MG_LOAD || kind == MG_PKT_LOAD) {
      oc.loaded += n;
    } else {
      oc.stored += n;
    }
    Warp& w = b.warps[tid / kWarp];
    Pending& p = w.open[t.exec];
    p.op = t.op;
    if (t.seq >= p.requests.size()) p.requests.resize(t.seq + 1);
    p.requests[t.seq++].add(a, n);
  }

  // result flushes the requests still open (lanes that ended the launch
  // inside an op) and returns the counts of block blk.
  const std::vector<mg_host_opcount>& result(unsigned blk) {
    Block& b = blocks_[blk];
    for (Warp& w : b.warps) {
      for (auto& e : w.open) flush(b, e.second);
      w.open.clear();
    }
    return b.ops;
  }

  unsigned blocks() const { return unsigned(blocks_.size()); }

 private:
  static constexpr unsigned kWarp = 32;
  static constexpr unsigned kSector = 32;

  // Request is one warp-wide access: the sectors its lanes touched, as a
  // mask of the 64 around the first lane's (its lanes' addresses are
  // near each other when it coalesces), and those outside the window
  // counted one by one (a lower bound on the efficiency).
  struct Request {
    uint64_t base = 0, mask = 0, outside = 0, bytes = 0;
    void add(uint64_t a, unsigned n) {
      uint64_t s0 = a / kSector, s1 = (a + n - 1) / kSector;
      if (bytes == 0) base = s0 >= 32 ? s0 - 32 : 0;
      bytes += n;
      for (uint64_t s = s0; s <= s1; s++) {
        if (s >= base && s - base < 64) {
          mask |= uint64_t(1) << (s - base);
        } else {
          outside++;
        }
      }
    }
  };
  // Pending is a warp's requests of one op execution, until every lane
  // has gone on to its next op.
  struct Pending {
    uint32_t op = 0;
    unsigned finished = 0;
    std::vector<Request> requests;
  };
  struct Warp {
    unsigned lanes = 0;
    std::unordered_map<uint32_t, Pending> open;  // by execution number
  };
  struct Thread {
    uint32_t exec = 0, op = 0, seq = 0;
    uint64_t last_pkt = 0;
  };
  struct Block {
    std::vector<Thread> threads;
    std::vector<Warp> warps;
    std::vector<mg_host_opcount> ops;
  };

  static mg_host_opcount& count(Block& b, uint32_t op) {
    if (op >= b.ops.size()) b.ops.resize(op + 1, mg_host_opcount{});
    return b.ops[op];
  }

  static void flush(Block& b, const Pending& p) {
    mg_host_opcount& oc = count(b, p.op);
    for (const Request& r : p.requests) {
      if (r.bytes == 0) continue;
      oc.requests++;
      oc.sectors += uint64_t(__builtin_popcountll(r.mask)) + r.outside;
      oc.min_sectors += (r.bytes + kSector - 1) / kSector;
    }
  }

  unsigned block_ = 0;
  std::vector<Block> blocks_;
};

#endif  // MSCCLGO_HOST_TRAFFIC_H
