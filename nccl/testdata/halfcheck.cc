// halfcheck: a program written against NVIDIA's nccl.h, which includes
// the CUDA toolkit's cuda_fp16.h and cuda_bf16.h, so that half and
// __nv_bfloat16 need no include of their own (nccl-tests relies on it).
// It includes nccl.h alone, and on two ranks as threads allreduces 1024
// elements of each type in place on host memory (MSCCLGO_NCCL_HOSTMEM=1,
// api_test.go TestHalfHeader), converting with the toolkit's host
// conversions. Each rank prints "rank R: half ok" and "rank R: bfloat16
// ok", or the first wrong element.
#include "nccl.h"

#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <vector>

namespace {

const size_t kCount = 1024;

struct Rank {
  int rank;
  ncclUniqueId id;
};

// value is what rank r holds at i: small integers, exact in both types.
float value(int r, size_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 7)); }

template <typename T>
bool allreduce(ncclComm_t comm, int r, ncclDataType_t dt, const char *name) {
  std::vector<T> buf(kCount);
  for (size_t i = 0; i < kCount; i++) {
    buf[i] = T(value(r, i)); // the toolkit's float conversion
  }
  ncclResult_t res = ncclAllReduce(buf.data(), buf.data(), kCount, dt, ncclSum, comm, nullptr);
  if (res != ncclSuccess) {
    std::printf("rank %d: %s: ncclAllReduce -> %d: %s\n", r, name, static_cast<int>(res), ncclGetLastError(comm));
    return false;
  }
  for (size_t i = 0; i < kCount; i++) {
    float want = value(0, i) + value(1, i), got = static_cast<float>(buf[i]);
    if (got != want) {
      std::printf("rank %d: %s WRONG at %zu: %g, want %g\n", r, name, i, static_cast<double>(got), static_cast<double>(want));
      return false;
    }
  }
  std::printf("rank %d: %s ok\n", r, name);
  return true;
}

void *rankMain(void *p) {
  Rank *a = static_cast<Rank *>(p);
  ncclComm_t comm = nullptr;
  ncclResult_t res = ncclCommInitRank(&comm, 2, a->id, a->rank);
  if (res != ncclSuccess) {
    std::printf("rank %d: ncclCommInitRank -> %d: %s\n", a->rank, static_cast<int>(res), ncclGetLastError(nullptr));
    return nullptr;
  }
  bool ok = allreduce<half>(comm, a->rank, ncclHalf, "half");
  ok = allreduce<__nv_bfloat16>(comm, a->rank, ncclBfloat16, "bfloat16") && ok;
  ncclCommDestroy(comm);
  return ok ? p : nullptr;
}

} // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::printf("ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  Rank ranks[2] = {{0, id}, {1, id}};
  pthread_t ts[2];
  for (int i = 0; i < 2; i++) {
    if (pthread_create(&ts[i], nullptr, rankMain, &ranks[i]) != 0) {
      return 1;
    }
  }
  int failed = 0;
  for (int i = 0; i < 2; i++) {
    void *ok = nullptr;
    pthread_join(ts[i], &ok);
    failed += ok == nullptr;
  }
  return failed == 0 ? 0 : 1;
}
