"""An allreduce through mscclgo's own communicator, launched with torchrun:

    MSCCLGO_LIBRARY=$PWD/build/nccl/libmscclgo_nccl.so PYTHONPATH=$PWD/python \
        torchrun --nnodes 1 --nproc-per-node 8 python/examples/customized_comm.py PLANS

PLANS is a plan file or a plan-set directory (mscclgo install writes one;
mscclgo eval allreduce_packet -D world_size=8 -o plans/allreduce.json makes
a file). Each rank builds the communicator from torchrun's environment,
registers the plans, installs a selector that takes the registered
allreduce plan for messages up to 1 MiB, runs the allreduce on a CUDA
tensor and checks the sum. Not run yet: plans do not run on CUDA memory
(docs/integration.md, What is missing).
"""

import os
import sys

import torch

import mscclgo


def main(plans):
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    comm = mscclgo.Communicator()  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    n = comm.register_plan(plans)
    print(f"rank {comm.rank} of {comm.world_size}: {n} plans registered", flush=True)

    # The plan select's rules take for an in-place allreduce of 1 MiB...
    probe = torch.empty(1 << 18, dtype=torch.float32, device="cuda")
    name = comm.select("allreduce", probe)

    # ...and a selector that takes it for every in-place allreduce up to
    # that size, and nothing else.
    def selector(req):
        if req.collective == "allreduce" and req.in_place and req.size <= 1 << 20:
            return name
        return None

    comm.selector = selector
    x = torch.full((1 << 18,), float(comm.rank + 1), dtype=torch.float32, device="cuda")
    comm.all_reduce(x)
    torch.cuda.synchronize()
    want = comm.world_size * (comm.world_size + 1) / 2
    ok = bool(torch.all(x == want))
    print(f"rank {comm.rank}: allreduce {'ok' if ok else 'WRONG'}", flush=True)
    comm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
