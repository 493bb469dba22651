"""make torch-bench: the time per call of all_reduce, all_gather and
reduce_scatter on CPU tensors, the torch.distributed backend "mscclgo"
against gloo, side by side in one torchrun job. One rank of it:

    MSCCLGO_LIBRARY=build/nccl/libmscclgo_nccl.so MSCCLGO_PLAN_PATH=PLANS PYTHONPATH=python \\
        torchrun --nproc_per_node N --redirects 1 --tee 1 python/tests/backend_bench.py [SIZES]

The default group is mscclgo's; gloo is a second group of the same ranks.
For each call and size (bytes of float32 as NCCL counts a call's
message: all_reduce's tensor, all_gather's output, reduce_scatter's
input; default 4 KiB to 64 MiB by 16),
both run ROUNDS rounds in turn (mscclgo, gloo, mscclgo, ...), each round
a number of calls that depends on the size, after one unmeasured round;
the figure is the median round's time per call. gloo has no
reduce_scatter: its row is what a gloo job does instead, an all_reduce of
the whole input and a copy of this rank's part. Rank 0 prints the table,
each line starting "TORCHBENCH".
"""

import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import mscclgo  # noqa: F401: registers the backend

ROUNDS = int(os.environ.get("TORCHBENCH_ROUNDS", "5"))


_agt = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
_rst = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base


def calls_per_round(size):
    return max(2, min(50, (32 << 20) // size))


def timed(fn, n):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def human(size):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div:
            return f"{size // div} {unit}"
    return f"{size} B"


def main(sizes):
    dist.init_process_group("mscclgo")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    rows = []
    for size in sizes:
        # size is the call's message as NCCL counts it: all_reduce's
        # tensor, all_gather's output, reduce_scatter's input.
        n = size // 4
        part = n // world
        x, piece = torch.ones(n), torch.ones(part)
        gathered = torch.empty(world * part)
        rs_in, rs_out = torch.ones(world * part), torch.empty(part)

        def gloo_rs():
            t = rs_in.clone()
            dist.all_reduce(t, group=gloo)
            rs_out.copy_(t[rank * part:(rank + 1) * part])
        outs = [torch.empty(part) for _ in range(world)]
        cases = (
            ("all_reduce", lambda: dist.all_reduce(x), lambda: dist.all_reduce(x, group=gloo)),
            ("all_gather", lambda: dist.all_gather(outs, piece), lambda: dist.all_gather(outs, piece, group=gloo)),
            ("all_gather_into_tensor", lambda: _agt(gathered, piece),
             lambda: dist.all_gather(list(gathered.chunk(world)), piece, group=gloo)),
            ("reduce_scatter_tensor", lambda: _rst(rs_out, rs_in), gloo_rs),
        )
        k = calls_per_round(size)
        for name, ours, theirs in cases:
            timed(ours, 1)
            timed(theirs, 1)
            a, b = [], []
            for _ in range(ROUNDS):
                a.append(timed(ours, k))
                b.append(timed(theirs, k))
            rows.append((name, size, statistics.median(a), statistics.median(b), k))
    if rank == 0:
        print(f"TORCHBENCH {world} processes, float32 CPU tensors: time per call, median of {ROUNDS} alternated "
              f"rounds ({os.cpu_count()} CPUs)", flush=True)
        print(f"TORCHBENCH {'call':<24}{'size':>9}{'mscclgo':>12}{'gloo':>12}{'gloo/mscclgo':>14}", flush=True)
        for name, size, a, b, k in rows:
            print(f"TORCHBENCH {name:<24}{human(size):>9}{a * 1e6:>10.0f}us{b * 1e6:>10.0f}us{b / a:>13.2f}x",
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    default = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
    sys.exit(main([int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else default))
