"""The time per call of the mscclgo package's all_reduce on CPU tensors
against torch.distributed's gloo on the same tensors, in the same run. One
rank of a torchrun job:

    MSCCLGO_LIBRARY=build/nccl/libmscclgo_nccl.so PYTHONPATH=python \\
        torchrun --nproc_per_node N --redirects 1 --tee 1 python/tests/bench_torch.py PLANS [ITERS]

PLANS is a plan-set directory (mscclgo install writes one). Each size is
run 20 times unmeasured, then ITERS times (default 200) by each; rank 0
prints one line per size: "BENCH python ranks N all_reduce S B: mscclgo T
us/call, gloo T us/call".
"""

import sys
import time

import torch
import torch.distributed as dist

import mscclgo

SIZES = (128, 4096, 1 << 20)  # bytes of float32


def per_call(fn, iters):
    for _ in range(20):
        fn()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters * 1e6


def main(plans, iters):
    dist.init_process_group("gloo")
    comm = mscclgo.Communicator()
    comm.register_plan(plans)
    for size in SIZES:
        t = torch.zeros(size // 4, dtype=torch.float32)
        ours = per_call(lambda: comm.all_reduce(t), iters)
        gloo = per_call(lambda: dist.all_reduce(t), iters)
        if comm.rank == 0:
            print(f"BENCH python ranks {comm.world_size} all_reduce {size} B: mscclgo {ours:.1f} us/call, "
                  f"gloo {gloo:.1f} us/call", flush=True)
    comm.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200))
