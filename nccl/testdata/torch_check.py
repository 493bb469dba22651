"""A torch.distributed job over backend "nccl", for checking mscclgo's NCCL
library on a GPU machine (docs/integration.md): all_reduce, all_gather,
reduce_scatter and broadcast at several sizes, each result checked against
the same computation on the CPU, and the mean time per call. Run it under
torchrun, once with LD_PRELOAD of the library and once without:

    torchrun --nproc-per-node 1 nccl/testdata/torch_check.py

Prints one line per collective and size: name, bytes, result, µs per call.
Then an all_reduce captured into a CUDA graph (torch.cuda.graph) and
replayed with new data three times, each result checked, and the µs per
replay. Exits 1 if any result is wrong.
"""

import os
import sys

import torch
import torch.distributed as dist

SIZES = [1 << 10, 1 << 16, 1 << 20, 1 << 24]  # bytes per rank
ITERS = 20


def timed(fn):
    """Runs fn ITERS times after a warm-up; returns µs per call."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / ITERS


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl")
    bad = 0
    for nbytes in SIZES:
        n = nbytes // 4
        # Rank r's input: r + 1 + i % 7, exact in float32 for the sums here.
        base = torch.arange(n, dtype=torch.float32) % 7
        mine = base + rank + 1
        inputs = [base + r + 1 for r in range(world)]
        cases = []

        x = mine.to(dev)
        dist.all_reduce(x)
        cases.append(("all_reduce", x.cpu(), sum(inputs), lambda: dist.all_reduce(x)))

        out = torch.empty(n * world, dtype=torch.float32, device=dev)
        src = mine.to(dev)
        dist.all_gather_into_tensor(out, src)
        cases.append(("all_gather", out.cpu(), torch.cat(inputs), lambda: dist.all_gather_into_tensor(out, src)))

        full = torch.cat([mine] * world).to(dev)
        part = torch.empty(n, dtype=torch.float32, device=dev)
        dist.reduce_scatter_tensor(part, full)
        cases.append(("reduce_scatter", part.cpu(), sum(inputs), lambda: dist.reduce_scatter_tensor(part, full)))

        y = mine.to(dev)
        dist.broadcast(y, src=0)
        cases.append(("broadcast", y.cpu(), inputs[0], lambda: dist.broadcast(y, src=0)))

        for name, got, want, fn in cases:
            ok = torch.equal(got, want)
            bad += not ok
            us = timed(fn)
            if rank == 0:
                print(f"{name:15s} {nbytes:>10d} B  {'ok' if ok else 'WRONG'}  {us:10.1f} us/call", flush=True)
    bad += graph_check(rank, world, dev)
    dist.destroy_process_group()
    return 1 if bad else 0


def graph_check(rank, world, dev):
    """An all_reduce captured into a CUDA graph, replayed with new data."""
    n = 1 << 14
    base = torch.arange(n, dtype=torch.float32) % 7
    x = torch.empty(n, dtype=torch.float32, device=dev)
    # A warm-up call on a side stream first, as torch.cuda.graph asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.copy_((base + rank + 1).to(dev))
        dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(x)
    bad = 0
    for k in range(1, 4):
        x.copy_((base + rank + 1 + 8 * k).to(dev))
        graph.replay()
        torch.cuda.synchronize()
        want = sum(base + r + 1 + 8 * k for r in range(world))
        ok = torch.equal(x.cpu(), want)
        bad += not ok
        if rank == 0:
            print(f"graph_all_reduce {n * 4:>9d} B  replay {k}  {'ok' if ok else 'WRONG'}", flush=True)
    us = timed(graph.replay)
    if rank == 0:
        print(f"graph_all_reduce {n * 4:>9d} B  {us:10.1f} us/replay", flush=True)
    return bad


if __name__ == "__main__":
    sys.exit(main())
