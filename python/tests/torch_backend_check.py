"""One rank of a torchrun job that drives the torch.distributed backend
"mscclgo" as a training job would, with no call of mscclgo's own API:

    MSCCLGO_LIBRARY=build/nccl/libmscclgo_nccl.so MSCCLGO_PLAN_PATH=PLANS PYTHONPATH=python \\
        torchrun --nproc_per_node N --redirects 1 --tee 1 python/tests/torch_backend_check.py [PART ...]

PARTs (default: all of them):
- collectives: every collective torch.distributed has, at odd sizes, in
  every dtype and reduction it takes, each result checked against its
  closed form;
- errors: bad calls (a sparse tensor, shapes that differ across ranks, a
  reduction the dtype cannot take) raise an exception naming the call,
  the shape, the dtype and the rank, write nothing, and leave the group
  usable;
- async: a Work returned with async_op=True lets a computation run while
  the collective waits for a peer;
- ddp: 20 steps of DistributedDataParallel training of a small model on
  the mscclgo group and on a gloo group side by side, parameters equal to
  a tolerance, and the first bucket's all_reduce issued before the
  backward pass ends.

Each rank prints "rank R: CASE ok" or "rank R: CASE WRONG ...", then
"rank R: PART done N cases, W wrong"; the exit status is 1 if a case was
wrong.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

import mscclgo  # noqa: F401: registers the backend

# MSCCLGO_TEST_SIZES (comma-separated element counts) narrows the sweep.
SIZES = tuple(int(n) for n in os.environ.get("MSCCLGO_TEST_SIZES", "1,3,17,1000,12345,262151").split(","))
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int32, torch.int64,
          torch.uint8, torch.bool)
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
R = dist.ReduceOp


class Checker:
    def __init__(self, rank, part):
        self.rank, self.part, self.cases, self.wrong = rank, part, 0, 0

    def equal(self, name, got, want, tol=0.0):
        self.cases += 1
        if got.shape != want.shape or got.dtype != want.dtype:
            return self.bad(name, f"shape {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {want.dtype}")
        if tol:
            ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
        else:
            ok = torch.equal(got, want)
        if not ok:
            diff = (got != want).nonzero()
            at = diff[0].tolist() if len(diff) else "?"
            return self.bad(name, f"at {at}: got {got.flatten()[diff[0][0]].item() if len(diff) else '?'}, "
                                  f"want {want.flatten()[diff[0][0]].item() if len(diff) else '?'}")
        print(f"rank {self.rank}: {name} ok", flush=True)

    def true(self, name, cond, why):
        self.cases += 1
        if not cond:
            return self.bad(name, why)
        print(f"rank {self.rank}: {name} ok", flush=True)

    def bad(self, name, why):
        self.wrong += 1
        print(f"rank {self.rank}: {name} WRONG {why}", flush=True)

    def done(self):
        print(f"rank {self.rank}: {self.part} done {self.cases} cases, {self.wrong} wrong", flush=True)
        return self.wrong


def values(rank, n, dtype, small=False):
    """Rank rank's input: small integers (exact in every dtype's sums of up
    to 8 ranks); with small, 1 or 2 (exact products); bool: alternating
    with the rank."""
    i = torch.arange(n)
    if dtype == torch.bool:
        return ((i + rank) % 3 == 0)
    v = (i % 2 + 1) if small else (i % 5 + rank + 1)
    if small:
        v = torch.where((i + rank) % 3 == 0, torch.ones_like(v), v)
    return v.to(dtype)


def reduce_ref(tensors, op, world):
    """The closed form of a reduction of the ranks' inputs, as NCCL
    defines it (bool: SUM or, PRODUCT and; AVG: a sum divided by the ranks,
    toward zero for integers; PREMUL_SUM by 2: twice the sum)."""
    dtype = tensors[0].dtype
    if dtype == torch.bool:
        stack = torch.stack(tensors)
        return {"SUM": stack.any(0), "MAX": stack.any(0), "PRODUCT": stack.all(0), "MIN": stack.all(0)}[op]
    wide = torch.stack([t.to(torch.float64 if dtype in FLOATS else torch.int64) for t in tensors])
    if op in ("SUM", "PREMUL_SUM", "AVG"):
        out = wide.sum(0)
        if op == "PREMUL_SUM":
            out = out * 2
        if op == "AVG":
            out = out / world if dtype in FLOATS else torch.div(out, world, rounding_mode="trunc")
    elif op == "PRODUCT":
        out = wide.prod(0)
    elif op == "MAX":
        out = wide.max(0).values
    else:
        out = wide.min(0).values
    return out.to(dtype)


def op_of(name):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(2.0)
    return getattr(R, name)


def ops_for(dtype):
    if dtype == torch.bool:
        return ("SUM", "PRODUCT", "MAX", "MIN")
    ops = ["SUM", "PRODUCT", "MAX", "MIN", "AVG"]
    if dtype in FLOATS:
        ops.append("PREMUL_SUM")
    return ops


def all_gather_tensor(out, inp):
    if hasattr(dist, "all_gather_into_tensor"):
        return dist.all_gather_into_tensor(out, inp)
    return dist._all_gather_base(out, inp)


def reduce_scatter_tensor(out, inp, op):
    if hasattr(dist, "reduce_scatter_tensor"):
        return dist.reduce_scatter_tensor(out, inp, op=op)
    return dist._reduce_scatter_base(out, inp, op=op)


def collectives(rank, world):
    c = Checker(rank, "collectives")
    for dtype in DTYPES:
        dn = str(dtype)[6:]
        for n in SIZES:
            for op in ops_for(dtype):
                small = op == "PRODUCT"
                x = values(rank, n, dtype, small)
                want = reduce_ref([values(q, n, dtype, small) for q in range(world)], op, world)
                # AVG scales each input by 1/world before the sum, as
                # NCCL does: exact where world is a power of two.
                tol = 0.0
                if op == "AVG" and dtype in FLOATS and world & (world - 1):
                    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
                dist.all_reduce(x, op=op_of(op))
                c.equal(f"all_reduce {dn} {n} {op}", x, want, tol)
                # reduce_scatter: rank q's input is values(q, world*n).
                full = reduce_ref([values(q, world * n, dtype, small) for q in range(world)], op, world)
                part = full[rank * n:(rank + 1) * n]
                out = torch.zeros(n, dtype=dtype)
                reduce_scatter_tensor(out, values(rank, world * n, dtype, small), op_of(op))
                c.equal(f"reduce_scatter_tensor {dn} {n} {op}", out, part, tol)
                if op in ("SUM", "MAX"):
                    out = torch.zeros(n, dtype=dtype)
                    dist.reduce_scatter(out, list(values(rank, world * n, dtype, small).chunk(world)), op=op_of(op))
                    c.equal(f"reduce_scatter list {dn} {n} {op}", out, part)
                    y = values(rank, n, dtype, small)
                    dist.reduce(y, world - 1, op=op_of(op))
                    if rank == world - 1:
                        c.equal(f"reduce {dn} {n} {op}", y, want)
            gathered = torch.cat([values(q, n, dtype) for q in range(world)])
            out = torch.zeros(world * n, dtype=dtype)
            all_gather_tensor(out, values(rank, n, dtype))
            c.equal(f"all_gather_into_tensor {dn} {n}", out, gathered)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, values(rank, n, dtype))
            c.equal(f"all_gather list {dn} {n}", torch.cat(outs), gathered)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, values(rank, n, dtype))  # the group's staging tensor again
            c.equal(f"all_gather list again {dn} {n}", torch.cat(outs), gathered)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            outs[rank].copy_(values(rank, n, dtype))
            dist.all_gather(outs, outs[rank])  # the input is this rank's own tensor of the list
            c.equal(f"all_gather list own input {dn} {n}", torch.cat(outs), gathered)
            whole = torch.zeros(world * n, dtype=dtype)
            dist.all_gather(list(whole.chunk(world)), values(rank, n, dtype))  # gathered in place of the list
            c.equal(f"all_gather list of chunks {dn} {n}", whole, gathered)
            whole = torch.zeros(world * n, dtype=dtype)
            whole[rank * n:(rank + 1) * n] = values(rank, n, dtype)
            dist.all_gather(list(whole.chunk(world)), whole[rank * n:(rank + 1) * n])  # in place
            c.equal(f"all_gather list of chunks in place {dn} {n}", whole, gathered)
            b = values(rank, n, dtype)
            dist.broadcast(b, 1 % world)
            c.equal(f"broadcast {dn} {n}", b, values(1 % world, n, dtype))
            # all_to_all: rank q's block j holds q*8+j (fits every dtype).
            blocks = [torch.full((n,), rank * 8 + j).to(dtype) for j in range(world)]
            got = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_to_all(got, blocks)
            c.equal(f"all_to_all {dn} {n}", torch.cat(got),
                    torch.cat([torch.full((n,), q * 8 + rank).to(dtype) for q in range(world)]))
            single = torch.zeros(world * n, dtype=dtype)
            dist.all_to_all_single(single, torch.cat(blocks))
            c.equal(f"all_to_all_single {dn} {n}", single,
                    torch.cat([torch.full((n,), q * 8 + rank).to(dtype) for q in range(world)]))
            # send/recv around the ring (even ranks send first).
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            mine, got1 = values(rank, n, dtype), torch.zeros(n, dtype=dtype)
            if rank % 2 == 0:
                dist.send(mine, nxt)
                dist.recv(got1, prv)
            else:
                dist.recv(got1, prv)
                dist.send(mine, nxt)
            c.equal(f"send/recv {dn} {n}", got1, values(prv, n, dtype))
            z = torch.zeros(0, dtype=dtype)
            dist.all_reduce(z)
            c.equal(f"all_reduce {dn} 0 elements", z, torch.zeros(0, dtype=dtype))
    dist.barrier()
    return c.done()


def expect_error(c, name, fn, words, untouched=None):
    """fn must raise an exception whose text holds every word, and leave
    untouched = (tensor, its value before) as it was."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        text = str(e)
        missing = [w for w in words if w not in text]
        c.true(f"{name} raises", not missing, f"{type(e).__name__}: {text!r} lacks {missing}")
        if untouched is not None:
            c.equal(f"{name} writes nothing", untouched[0], untouched[1])
        return
    c.bad(f"{name} raises", "no exception")


def errors(rank, world):
    c = Checker(rank, "errors")
    sp = torch.eye(4).to_sparse()
    expect_error(c, "sparse all_reduce", lambda: dist.all_reduce(sp), ["all_reduce", "sparse", "(4, 4)", "float32",
                                                                       f"rank {rank}"])
    b = torch.ones(5, dtype=torch.bool)
    expect_error(c, "AVG of bool", lambda: dist.all_reduce(b, op=R.AVG), ["all_reduce", "AVG", "bool", "(5,)",
                                                                           f"rank {rank}"],
                 (b, torch.ones(5, dtype=torch.bool)))
    # Shapes that differ across ranks: every rank raises, naming both.
    for n in (1000, 4096):
        x = torch.ones(n + rank)
        expect_error(c, f"all_reduce of {n} + rank elements", lambda: dist.all_reduce(x),
                     ["all_reduce", f"{n}", f"{n + 1}", "float32", "rank"], (x, torch.ones(n + rank)))
    x = torch.ones(64, dtype=torch.float32 if rank == 0 else torch.float16)
    expect_error(c, "all_reduce of float32 and float16", lambda: dist.all_reduce(x), ["all_reduce", "float32",
                                                                                      "float16"])
    out = torch.zeros(world * 3)
    expect_error(c, "all_gather_into_tensor of a wrong output", lambda: all_gather_tensor(out, torch.ones(4)),
                 ["all_gather_into_tensor", "(4,)", "float32", f"rank {rank}", "elements"], (out, torch.zeros(world * 3)))
    # The group still serves calls, those of the mismatched sizes too.
    for n in (4096, 1000, 1001):
        y = torch.ones(n) * (rank + 1)
        dist.all_reduce(y)
        c.equal(f"all_reduce of {n} after the errors", y, torch.full((n,), world * (world + 1) / 2))
    dist.barrier()
    return c.done()


def async_work(rank, world):
    """Rank 0 issues an async all_reduce, runs a computation, and only
    then lets the other ranks make theirs (through the store): the work
    cannot have completed while it computed, and its value is right."""
    c = Checker(rank, "async")
    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(1 << 16) * (rank + 1)
    if rank == 0:
        work = dist.all_reduce(x, async_op=True)
        a = torch.randn(128, 128)
        for _ in range(10):
            a = torch.tanh(a @ a)
        c.true("async all_reduce pending while computing", not work.is_completed(), "completed before the peers called")
        store.set("mscclgo-test/async-go", "1")
        fut = work.get_future()
        work.wait()
        c.true("async all_reduce done after wait", work.is_completed(), "not completed after wait()")
        c.equal("async all_reduce future value", fut.value()[0], torch.full((1 << 16,), world * (world + 1) / 2))
    else:
        store.get("mscclgo-test/async-go")
        dist.all_reduce(x)
    c.equal("async all_reduce value", x, torch.full((1 << 16,), world * (world + 1) / 2))
    dist.barrier()
    return c.done()


class Net(torch.nn.Module):
    """Big enough that DDP's first bucket (1 MiB: d and c, whose
    gradients come first) fills before the backward pass reaches a."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 64)
        self.b = torch.nn.Linear(64, 512)
        self.c = torch.nn.Linear(512, 640)
        self.d = torch.nn.Linear(640, 4)

    def forward(self, x):
        return self.d(torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x)))))))


def ddp(rank, world):
    c = Checker(rank, "ddp")
    gloo = dist.new_group(backend="gloo")
    ours = dist.new_group(backend="mscclgo")
    models = {}
    for name, group in (("mscclgo", None), ("mscclgo new_group", ours), ("gloo", gloo)):
        torch.manual_seed(0)
        models[name] = torch.nn.parallel.DistributedDataParallel(Net(), process_group=group, bucket_cap_mb=0.01)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for k, m in models.items()}
    # How many all_reduce calls the default group had taken when the
    # first layer's gradient (the last the backward pass computes) came.
    issued_early = []
    pg = dist.distributed_c10d._get_default_group()
    calls = [0]
    orig = type(pg).allreduce

    def counting(self, tensors, opts=None):
        if self is pg:
            calls[0] += 1
        return orig(self, tensors, opts)
    type(pg).allreduce = counting
    start = [0]
    models["mscclgo"].module.a.weight.register_hook(lambda g: issued_early.append(calls[0] - start[0]) or g)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        start[0] = calls[0]
        x, y = torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g)
        for name, m in models.items():
            opts[name].zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opts[name].step()
    type(pg).allreduce = orig
    for name in ("mscclgo", "mscclgo new_group"):
        for (pn, p), (_, q) in zip(models[name].module.named_parameters(), models["gloo"].module.named_parameters()):
            c.equal(f"ddp {name} 20 steps {pn} equals gloo's", p.detach(), q.detach(), tol=1e-5)
    # DDP puts every gradient in one bucket in its first step, then
    # rebuilds the buckets in the order the gradients came.
    c.true("ddp buckets reduced during the backward pass", len(issued_early) == 20 and min(issued_early[1:]) > 0,
           f"all_reduce calls made in the step before the first layer's gradient came: {issued_early}")
    dist.barrier()
    return c.done()


PARTS = {"collectives": collectives, "errors": errors, "async": async_work, "ddp": ddp}


def main(parts):
    dist.init_process_group("mscclgo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "mscclgo", dist.get_backend()
    wrong = 0
    for p in parts or list(PARTS):
        start = time.perf_counter()
        wrong += PARTS[p](rank, world)
        if rank == 0:
            print(f"rank 0: {p} took {time.perf_counter() - start:.1f} s", flush=True)
    dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
