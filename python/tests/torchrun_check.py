"""One rank of a torchrun job that drives the mscclgo package on CPU
tensors and checks every value: all_reduce, all_gather and reduce_scatter,
float32 and float16, several sizes, in place and out of place. Run by go
test ./nccl (TestPythonTorchrun) as

    MSCCLGO_LIBRARY=build/nccl/libmscclgo_nccl.so PYTHONPATH=python \\
        torchrun --nproc_per_node 2 --master_port PORT --redirects 1 --tee 1 \\
        python/tests/torchrun_check.py PLANS [--gloo]

PLANS is a plan-set directory (or a directory of plan files) with the
allreduce, allgather and reducescatter plans for the job's world size.
With --gloo the ranks first join a gloo process group, so the package
hands rank 0's unique id out through it rather than through torchrun's
store. Each rank prints "rank R: CASE ok" or "... WRONG", then
"rank R: done N cases"; the exit status is 1 if a case was wrong.
"""

import os
import sys

import torch
import torch.distributed as dist

import mscclgo

SIZES = (256, 4096, 65536)  # elements per rank
DTYPES = (torch.float32, torch.float16)


def values(rank, n, dtype):
    """Rank rank's input: small integers, exact in float16 sums."""
    return ((torch.arange(n) % 7) + rank + 1).to(dtype)


def main(plans, gloo):
    if gloo:
        dist.init_process_group("gloo")
    comm = mscclgo.Communicator()
    rank, world = comm.rank, comm.world_size
    if rank != int(os.environ["RANK"]) or world != int(os.environ["WORLD_SIZE"]):
        print(f"rank {rank} of {world}: torchrun says rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
        return 1
    comm.register_plan(plans)
    wrong, cases = 0, 0

    def check(name, got, want):
        nonlocal wrong, cases
        cases += 1
        ok = bool(torch.equal(got, want))
        if not ok:
            wrong += 1
            bad = (got != want).nonzero()[0].item()
            print(f"rank {rank}: {name} WRONG at {bad}: got {got[bad].item()}, want {want[bad].item()}", flush=True)
        else:
            print(f"rank {rank}: {name} ok", flush=True)

    for dtype in DTYPES:
        for n in SIZES:
            tag = f"{str(dtype)[6:]} {n}"
            total = sum(values(q, n, torch.float64) for q in range(world)).to(dtype)
            gathered = torch.cat([values(q, n, dtype) for q in range(world)])

            x = values(rank, n, dtype)
            comm.all_reduce(x)
            check(f"all_reduce {tag} in-place", x, total)
            x, out = values(rank, n, dtype), torch.zeros(n, dtype=dtype)
            comm.all_reduce(x, out=out)
            check(f"all_reduce {tag} out-of-place", out, total)
            check(f"all_reduce {tag} out-of-place input kept", x, values(rank, n, dtype))

            out = torch.zeros(world * n, dtype=dtype)
            comm.all_gather(out, values(rank, n, dtype))
            check(f"all_gather {tag} out-of-place", out, gathered)
            out = torch.zeros(world * n, dtype=dtype)
            out[rank * n:(rank + 1) * n] = values(rank, n, dtype)
            comm.all_gather(out, out[rank * n:(rank + 1) * n])
            check(f"all_gather {tag} in-place", out, gathered)

            # reduce_scatter: rank q's input is values(q, world*n); this
            # rank gets part rank of the sum.
            full = sum(values(q, world * n, torch.float64) for q in range(world)).to(dtype)
            part = full[rank * n:(rank + 1) * n]
            out = torch.zeros(n, dtype=dtype)
            comm.reduce_scatter(out, values(rank, world * n, dtype))
            check(f"reduce_scatter {tag} out-of-place", out, part)
            inp = values(rank, world * n, dtype)
            comm.reduce_scatter(inp[rank * n:(rank + 1) * n], inp)
            check(f"reduce_scatter {tag} in-place", inp[rank * n:(rank + 1) * n], part)
    # Reductions other than sum (float32, 4096 elements per rank).
    n = 4096
    ins = [values(q, n, torch.float64) for q in range(world)]
    stack = torch.stack(ins)
    for op, want in (("max", stack.max(0).values), ("min", stack.min(0).values), ("avg", stack.mean(0)),
                     ("premul_sum", stack.sum(0) * 2)):
        x = values(rank, n, torch.float32)
        comm.all_reduce(x, op=op, scalar=2.0 if op == "premul_sum" else None)
        check(f"all_reduce float32 {n} {op}", x, want.to(torch.float32))
    out = torch.zeros(n // world, dtype=torch.float32)
    comm.reduce_scatter(out, values(rank, n, torch.float32), op="max")
    check(f"reduce_scatter float32 {n} max", out, stack.max(0).values[rank * (n // world):(rank + 1) * (n // world)].to(torch.float32))
    comm.close()
    if gloo:
        dist.destroy_process_group()
    print(f"rank {rank}: done {cases} cases, {wrong} wrong", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--gloo" in sys.argv[2:]))
