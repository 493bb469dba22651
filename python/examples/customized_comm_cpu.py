"""customized_comm.py on CPU tensors: an allreduce through mscclgo's own
communicator, launched with torchrun, with no GPU:

    make build nccl
    bin/mscclgo install --dir plans
    MSCCLGO_LIBRARY=$PWD/build/nccl/libmscclgo_nccl.so PYTHONPATH=$PWD/python \\
        torchrun --nproc_per_node 4 --redirects 1 --tee 1 python/examples/customized_comm_cpu.py plans

(Debian's torch 1.13 on Python 3.11 needs --redirects 1 --tee 1.) PLANS
is a plan-set directory (mscclgo install writes one with plans for 2, 4
and 8 ranks) or a plan file. Each rank builds the communicator from
torchrun's environment (rank 0's unique id goes through torchrun's store:
nothing binds torchrun's MASTER_PORT), registers the plans, installs a
selector that takes the plan select's rules pick for a 1 MiB allreduce
for every allreduce up to that size, runs an allreduce on a CPU tensor
and checks the sum. CPU tensors run on the CPU backend, one process per
rank, over its multi-process transport (docs/integration.md, Host
memory); no variable is needed.
"""

import sys

import torch

import mscclgo


def main(plans):
    comm = mscclgo.Communicator()  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    n = comm.register_plan(plans)
    print(f"rank {comm.rank} of {comm.world_size}: {n} plans registered", flush=True)

    # The plan select's rules take for an in-place allreduce of 1 MiB...
    probe = torch.empty(1 << 18, dtype=torch.float32)
    name = comm.select("allreduce", probe)

    # ...and a selector that takes it for every in-place allreduce up to
    # that size, and nothing else.
    def selector(req):
        if req.collective == "allreduce" and req.in_place and req.size <= 1 << 20:
            return name
        return None

    comm.selector = selector
    x = torch.full((1 << 18,), float(comm.rank + 1), dtype=torch.float32)
    comm.all_reduce(x)
    want = comm.world_size * (comm.world_size + 1) / 2
    ok = bool(torch.all(x == want))
    print(f"rank {comm.rank}: allreduce with plan {name} {'ok' if ok else 'WRONG'}", flush=True)
    comm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
