"""The torch.distributed backend "mscclgo": a ProcessGroup that runs each
collective on an mscclgo plan where one fits, and otherwise on a built-in
path or the backend it wraps (gloo for CPU tensors, NCCL for CUDA ones).

    import mscclgo                      # registers the backend
    torch.distributed.init_process_group("mscclgo")
    torch.distributed.new_group(backend="mscclgo")

Importing mscclgo registers it (torch.distributed.Backend.register_backend);
nothing else changes in the job. The plans are the installed plan set
(mscclgo install, MSCCLGO_PLAN_PATH; MSCCLGO_PLANS names more plan files or
directories). MSCCLGO_NCCL_DEBUG=INFO logs, once per kind of call, which
plan runs it or why it goes elsewhere.

How a call runs (docs/integration.md, "The torch.distributed backend"):
- CPU tensors: on one worker thread per group, in the order the calls were
  made; a call returns a Work at once (async_op=True, Work.wait(),
  get_future()), so DDP overlaps its buckets' reductions with the backward
  pass. A plan runs on host memory through the library
  (mscclgoExecuteHostOp); everything else runs on the wrapped gloo group,
  with the dtypes and reductions gloo lacks (bfloat16, bool, AVG,
  PREMUL_SUM, reduce_scatter, all_gather into one tensor) built on top.
- CUDA tensors (torch 2.x with the library's CUDA build): a plan is
  enqueued on the current stream (mscclgoExecuteOp); everything else goes
  to the wrapped NCCL group.
"""

import ctypes
import datetime
import functools
import logging
import os
import queue
import struct
import sys
import threading
import time
import weakref

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from . import Communicator, MscclgoError, _load, _timeout as _library_timeout

__all__ = ["ProcessGroupMscclgo", "register"]

_log = logging.getLogger("mscclgo")

# torch dtype -> ncclDataType_t, for the dtypes plans compute.
_PLAN_DTYPES = {torch.float16: 6, torch.bfloat16: 9, torch.float32: 7, torch.int32: 2}
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# The reductions' kinds (ReduceOp.RedOpType: a ReduceOp's .op; ReduceOp.SUM
# and the like are ReduceOp objects, which do not compare with kinds).
_R = dist.ReduceOp.RedOpType
# ReduceOp kind -> (ncclRedOp_t, torch's name). PREMUL_SUM is mscclgo.h's
# MSCCLGO_PREMUL_SUM; the rest are NCCL's enum.
_OPS = {_R.SUM: (0, "SUM"), _R.PRODUCT: (1, "PRODUCT"), _R.MAX: (2, "MAX"), _R.MIN: (3, "MIN"),
        _R.AVG: (4, "AVG"), _R.PREMUL_SUM: (5, "PREMUL_SUM")}


def _op_kind(op):
    """The kind (RedOpType) of op, a ReduceOp or a kind."""
    kind = op.op if isinstance(op, dist.ReduceOp) else op
    if not isinstance(kind, _R):
        raise TypeError(f"reduction {op!r}: not a torch.distributed.ReduceOp")
    return kind


def _op_name(kind):
    return _OPS[kind][1] if kind in _OPS else str(kind).rsplit(".", 1)[-1]


def _premul_factor(op):
    """The factor of a PREMUL_SUM ReduceOp (torch.distributed's
    _make_nccl_premul_sum(factor)). torch keeps it in the op's C++
    supplement and shows it nowhere in Python, so it is read from the op's
    memory, after checking the layout on ops whose factors are known
    (_premul_layout); a torch whose layout differs gets a clear error."""
    layout = _premul_layout()
    if layout is None:
        raise NotImplementedError("PREMUL_SUM: this torch build keeps its factor where mscclgo cannot read it "
                                  f"(torch {torch.__version__}); use SUM after scaling the input")
    factor = _read_premul(op, layout)
    if factor is None:
        raise NotImplementedError("PREMUL_SUM: the op carries no factor that mscclgo can read "
                                  "(a tensor factor, _make_nccl_premul_sum([t]), is not served: pass a float)")
    return factor


@functools.lru_cache(maxsize=None)
def _premul_layout():
    """(supplement offset, factor offset) in torch's ReduceOp and its
    NCCLPreMulSumSupplement (32 and 24 in torch 1.13; other versions are
    checked the same way before any use), checked on ops made here, or
    None when the check fails."""
    layout = (32, 24)
    ok = hasattr(_c10d, "_make_nccl_premul_sum")
    if ok:
        plain = dist.ReduceOp(_R.SUM)
        # A plain op: no supplement at the offset (a null pointer).
        obj = _object_address(plain)
        ok = obj is not None and _u64(obj + layout[0]) == 0
    if ok:
        for f in (1234.5678125, -0.0078125, 3.0e7):
            if _read_premul(_c10d._make_nccl_premul_sum(f), layout) != f:
                ok = False
                break
    return layout if ok else None


def _object_address(op):
    """The C++ object behind a pybind11 object (its first value slot,
    right after the Python object header)."""
    obj = _u64(id(op) + 16)
    return obj if obj >= 0x10000 and obj % 8 == 0 else None


def _u64(addr):
    return struct.unpack("Q", ctypes.string_at(addr, 8))[0]


def _read_premul(op, layout):
    obj = _object_address(op)
    if obj is None:
        return None
    sup = _u64(obj + layout[0])
    if sup < 0x10000 or sup % 8:
        return None
    f = struct.unpack("d", ctypes.string_at(sup + layout[1], 8))[0]
    return f if f != 0.0 else None


class _Work(_c10d.Work):
    """What a call made from Python returns: wait() raises the call's
    error (torch 1.13's future-wrapping Work would swallow it)."""

    def __init__(self, fut, what):
        super().__init__()
        self._fut = fut
        self._what = what

    def wait(self, timeout=None):
        self._fut.wait()  # raises the call's exception
        return True

    def get_future(self):
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            raise RuntimeError(f"{self._what}: not completed yet")
        try:
            self._fut.value()
        except Exception:  # noqa: BLE001
            return False
        return True

    def exception(self):
        try:
            self._fut.value()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def result(self):
        return self._fut.value()

    def synchronize(self):
        self.wait()

    def source_rank(self):
        raise RuntimeError(f"{self._what}: source_rank() is for recv_anysource only")


def _caller():
    """How this group method was called: "sync" from one of
    torch.distributed's Python functions with async_op false (it waits on
    the returned Work at once), "async" from one with async_op true (it
    hands the Work to the caller), None from C++ (DDP's reducer, torch's
    own C++ helpers), which can only wait on a Work of C++."""
    f = sys._getframe(3)  # this, _submit, the group method, its caller
    if f is None or f.f_globals.get("__name__") != "torch.distributed.distributed_c10d":
        return None
    return "async" if f.f_locals.get("async_op") else "sync"


class _Gate:
    """Orders a group's calls: queued counts the calls given to the
    worker and not yet done; running is held while a call runs, on the
    worker or on its caller's thread."""

    def __init__(self):
        self.count = threading.Lock()
        self.running = threading.Lock()
        self.queued = 0


class _Call:
    """One queued call: fn runs on the worker; its value completes fut."""

    __slots__ = ("fn", "fut", "what")

    def __init__(self, fn, fut, what):
        self.fn, self.fut, self.what = fn, fut, what


def _worker_loop(q, pending, gate):
    while True:
        c = q.get()
        if c is None:
            return
        with gate.running:
            _run_call(c, pending)
            with gate.count:
                gate.queued -= 1
        # Nothing of the call stays referenced while the loop waits: the
        # group is freed when torch drops it (destroy_process_group).
        del c


def _run_call(c, pending):
    """Runs call c. Its function, which holds the group, is dropped before
    the caller is told: a group freed by the caller right after its last
    call must not be freed on this thread (that ended the process in
    std::terminate, from torch's destructors)."""
    fn, c.fn = c.fn, None
    try:
        value = fn()
    except BaseException as e:  # noqa: B036: every failure goes to the caller's Work
        del fn
        c.fut.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
        return
    del fn
    if isinstance(value, _Later):
        # A point-to-point call: its gloo Work completes later, without
        # holding up the calls behind it.
        pending.put((value, c))
    else:
        c.fut.set_result(value)


def _pending_loop(pending):
    while True:
        item = pending.get()
        if item is None:
            return
        later, c = item
        del item
        try:
            later.work.wait()
            c.fut.set_result(later.value)
        except BaseException as e:  # noqa: B036
            c.fut.set_exception(RuntimeError(f"{c.what}: {e}"))
        del later, c


class _Later:
    """A gloo Work the worker does not wait for (send, recv)."""

    __slots__ = ("work", "value")

    def __init__(self, work, value):
        self.work, self.value = work, value


def _describe(what, rank, tensor):
    return f"{what} on rank {rank}: tensor of shape {tuple(tensor.shape)} and dtype {str(tensor.dtype)[6:]}"


class ProcessGroupMscclgo(_c10d.ProcessGroup):
    """One rank's group on the mscclgo backend. Made by
    torch.distributed (init_process_group("mscclgo"), new_group) with the
    group's store, rank, size and timeout."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._timeout = timeout
        # The ranks' comparison of a call outlasts a plan's wait for its
        # peers (MSCCLGO_NCCL_TIMEOUT) by as much again, at most the
        # group's timeout: a rank whose peer waited in the library for a
        # call this rank took elsewhere finds this rank still comparing
        # when the peer's wait ends and it comes to compare too.
        self._check_timeout = min(timeout, datetime.timedelta(seconds=2 * _library_timeout() + 5))
        self._gloo = dist.ProcessGroupGloo(_c10d.PrefixStore("mscclgo/gloo/", store), rank, size, timeout)
        self._nccl = None
        if torch.cuda.is_available() and dist.is_nccl_available():
            self._nccl = dist.ProcessGroupNCCL(_c10d.PrefixStore("mscclgo/nccl/", store), rank, size)
        self._lib = _load()
        self._has_op = hasattr(self._lib, "mscclgoExecuteHostOp")
        self._has_gather = hasattr(self._lib, "mscclgoExecuteHostGather")
        self._detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
        self._device_plans = self._nccl is not None
        self._store = store
        self._generation = 0
        self._held = [None]  # the communicator, for the finalizer
        self._connect()
        self._decisions = {}
        self._logged = set()
        self._flats = {}  # (dtype, device): the staging tensor of _flat
        self._queue = queue.SimpleQueue()
        self._gate = _Gate()
        self._pending = queue.SimpleQueue()
        self._threads = [threading.Thread(target=_worker_loop, args=(self._queue, self._pending, self._gate), daemon=True,
                                          name=f"mscclgo-rank{rank}"),
                         threading.Thread(target=_pending_loop, args=(self._pending,), daemon=True,
                                          name=f"mscclgo-rank{rank}-p2p")]
        for t in self._threads:
            t.start()
        self._finalizer = weakref.finalize(self, _shutdown, self._queue, self._pending, self._held, self._threads,
                                           _library_timeout() + 5)
        self._info(f"group of {size} ranks: {self._plans} plans registered; "
                   f"CPU tensors wrap gloo{', CUDA tensors NCCL' if self._nccl is not None else ''}")

    def _connect(self):
        """Makes the group's mscclgo communicator (rank 0's unique id
        through the group's store, one key per generation) and registers
        the plan set."""
        key = f"mscclgo/uid/{self._generation}"
        if self._rank == 0:
            from . import unique_id
            uid = unique_id()
            self._store.set(key, uid)
        else:
            uid = bytes(self._store.get(key))
        self._comm = self._held[0] = Communicator(self._rank, self._size, uid)
        self._plans = 0
        for path in _plan_dirs():
            try:
                self._plans += self._comm.register_plan(path)
            except MscclgoError as e:
                self._info(f"plans at {path} not registered: {e}")
        self._decisions = {}

    def _reset(self, why):
        """Replaces the communicator after calls that differed across the
        ranks: a plan whose run one rank began while a peer made another
        call cannot run again in its session. Every rank gets here at the
        same call (each has seen the same comparison), so every rank
        replaces its communicator, and forgets its decisions, which the
        ranks then compare again on their next calls."""
        self._info(f"replacing the communicator: {why}")
        old = self._comm
        self._generation += 1
        try:
            old.close()
        except MscclgoError as e:
            self._info(f"closing the old communicator: {e}")
        self._connect()

    # -- torch's ProcessGroup API -------------------------------------

    def getBackendName(self):
        return "mscclgo"

    def _get_backend_name(self):
        return "mscclgo"

    def name(self):
        return "mscclgo"

    def allreduce(self, tensors, opts=None):
        if _cuda_in(tensors):
            return self._cuda("allreduce", tensors, opts)
        kind, op = self._opts_op(opts)
        t = self._one("all_reduce", tensors)
        self._check_op("all_reduce", t, kind)
        scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None
        return self._submit("all_reduce", t, lambda: self._allreduce(t, t, kind, scalar) or tensors, t)

    def allreduce_coalesced(self, tensors, opts=None):
        if _cuda_in(tensors):
            return self._cuda("allreduce_coalesced", tensors, opts)
        kind, op = self._opts_op(opts)
        for t in tensors:
            self._check_dense("all_reduce_coalesced", t)
            self._check_op("all_reduce_coalesced", t, kind)
        scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None

        def run():
            for t in tensors:
                self._allreduce(t, t, kind, scalar)
            return tensors
        return self._submit("all_reduce_coalesced", tensors[0] if tensors else None, run, *tensors)

    def allgather(self, output_lists, input_tensors, opts=None):
        if _cuda_in(input_tensors):
            return self._cuda("allgather", output_lists, input_tensors, opts)
        inp = self._one("all_gather", input_tensors)
        if len(output_lists) != 1 or len(output_lists[0]) != self._size:
            raise ValueError(f"all_gather on rank {self._rank}: want one list of {self._size} output tensors")
        outs = output_lists[0]
        for o in outs:
            self._check_dense("all_gather", o)
            if o.dtype != inp.dtype or o.numel() != inp.numel() or o.device != inp.device:
                raise ValueError(f"{_describe('all_gather', self._rank, inp)}: an output tensor has shape "
                                 f"{tuple(o.shape)} and dtype {str(o.dtype)[6:]} on {o.device}, want the input's")

        def run():
            self._allgather_list(outs, inp)
            return output_lists
        return self._submit("all_gather", inp, run, inp, *outs)

    def _allgather_list(self, outs, inp):
        """all_gather of inp into the list outs (one tensor per rank)."""
        flat = self._adjacent(outs)
        if flat is not None and _apart_or_own(inp, flat, outs[self._rank]):
            # The list is one tensor's consecutive parts (a chunk()):
            # gathered into it, nothing copied.
            self._allgather(flat, inp.reshape(-1))
            return
        flat = self._flat(self._size * inp.numel(), inp.dtype, inp.device)
        own = outs[self._rank]
        if all(o.is_contiguous() and _apart_or_own(inp, o, own) for o in outs):
            # Each part written once: by the library (a plan's output
            # copied to the parts, mscclgoExecuteHostGather) or by gloo;
            # flat only stands for the output in choosing the plan.
            self._allgather(flat, inp.reshape(-1), [o.view(-1) for o in outs])
            return
        self._allgather(flat, inp.reshape(-1))
        for i, o in enumerate(outs):
            o.copy_(flat[i * inp.numel():(i + 1) * inp.numel()].view(o.shape))

    def _allgather_base(self, output, input, opts=None):
        if _cuda_in([input]):
            return self._cuda("_allgather_base", output, input, opts)
        self._check_dense("all_gather_into_tensor", input)
        self._check_dense("all_gather_into_tensor", output)
        self._check_pair("all_gather_into_tensor", output, input, output.numel() == self._size * input.numel(),
                         f"{self._size} x the input's elements")
        return self._submit("all_gather_into_tensor", input,
                            lambda: self._allgather(output.view(-1), input.reshape(-1)) or [output], input, output)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        if _cuda_in(input_list):
            return self._cuda("allgather_coalesced", output_lists, input_list, opts)
        def run():
            for outs, inp in zip(output_lists, input_list):
                self._allgather_list(outs, inp)
            return output_lists
        for t in input_list:
            self._check_dense("all_gather_coalesced", t)
        return self._submit("all_gather_coalesced", input_list[0] if input_list else None, run, *input_list)

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        if _cuda_in(output_tensors):
            return self._cuda("reduce_scatter", output_tensors, input_lists, opts)
        kind, op = self._opts_op(opts)
        out = self._one("reduce_scatter", output_tensors)
        if len(input_lists) != 1 or len(input_lists[0]) != self._size:
            raise ValueError(f"reduce_scatter on rank {self._rank}: want one list of {self._size} input tensors")
        ins = input_lists[0]
        for i in ins:
            self._check_dense("reduce_scatter", i)
            if i.dtype != out.dtype or i.numel() != out.numel():
                raise ValueError(f"{_describe('reduce_scatter', self._rank, out)}: an input tensor has shape "
                                 f"{tuple(i.shape)} and dtype {str(i.dtype)[6:]}, want the output's")
        self._check_op("reduce_scatter", out, kind)
        scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None

        def run():
            flat = self._flat(sum(i.numel() for i in ins), out.dtype, out.device)
            if ins:
                torch.cat([i.reshape(-1) for i in ins], out=flat)
            self._reducescatter(out.view(-1), flat, kind, scalar)
            return output_tensors
        return self._submit("reduce_scatter", out, run, out, *ins)

    def _reduce_scatter_base(self, output, input, opts=None):
        if _cuda_in([output]):
            return self._cuda("_reduce_scatter_base", output, input, opts)
        kind, op = self._opts_op(opts)
        self._check_dense("reduce_scatter_tensor", input)
        self._check_dense("reduce_scatter_tensor", output)
        self._check_pair("reduce_scatter_tensor", output, input, input.numel() == self._size * output.numel(),
                         f"{self._size} x the output's elements")
        self._check_op("reduce_scatter_tensor", output, kind)
        scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None
        return self._submit("reduce_scatter_tensor", output,
                            lambda: self._reducescatter(output.view(-1), input.reshape(-1), kind, scalar) or [output],
                            input, output)

    def broadcast(self, tensors, opts=None):
        if _cuda_in(tensors):
            return self._cuda("broadcast", tensors, opts)
        t = self._one("broadcast", tensors)
        root = opts.rootRank if opts is not None else 0
        return self._submit("broadcast", t, lambda: self._gloo_op("broadcast", t, root) or tensors, t)

    def reduce(self, tensors, opts=None):
        if _cuda_in(tensors):
            return self._cuda("reduce", tensors, opts)
        kind, op = self._opts_op(opts)
        t = self._one("reduce", tensors)
        self._check_op("reduce", t, kind)
        root = opts.rootRank if opts is not None else 0
        scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None
        return self._submit("reduce", t, lambda: self._reduce(t, root, kind, scalar) or tensors, t)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if _cuda_in(input_tensors):
            return self._cuda("alltoall", output_tensors, input_tensors, opts)
        for t in list(output_tensors) + list(input_tensors):
            self._check_dense("all_to_all", t)

        def run():
            # gloo has all_to_all only as one tensor with split sizes.
            dtype = input_tensors[0].dtype if input_tensors else torch.float32
            inp = torch.cat([i.reshape(-1) for i in input_tensors]) if input_tensors else torch.empty(0, dtype=dtype)
            out = torch.empty(sum(o.numel() for o in output_tensors), dtype=dtype)
            self._gloo.alltoall_base(_wire(out), _wire(inp), [o.numel() for o in output_tensors],
                                     [i.numel() for i in input_tensors], _c10d.AllToAllOptions()).wait()
            at = 0
            for o in output_tensors:
                o.copy_(out[at:at + o.numel()].view(o.shape))
                at += o.numel()
            return output_tensors
        first = input_tensors[0] if input_tensors else None
        return self._submit("all_to_all", first, run, *output_tensors, *input_tensors)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if _cuda_in([input]):
            return self._cuda("alltoall_base", output, input, output_split_sizes, input_split_sizes, opts)
        self._check_dense("all_to_all_single", input)
        self._check_dense("all_to_all_single", output)

        def run():
            o, i = _wire(output), _wire(input)
            self._gloo.alltoall_base(o, i, list(output_split_sizes), list(input_split_sizes),
                                     _c10d.AllToAllOptions()).wait()
            return [output]
        return self._submit("all_to_all_single", input, run, input, output)

    def barrier(self, opts=None):
        return self._submit("barrier", None, lambda: self._gloo.barrier(_c10d.BarrierOptions()).wait() and [])

    def gather(self, output_lists, input_tensors, opts=None):
        if _cuda_in(input_tensors):
            return self._cuda("gather", output_lists, input_tensors, opts)
        inp = self._one("gather", input_tensors)
        root = opts.rootRank if opts is not None else 0

        def run():
            outs = [[_wire(o) for o in lst] for lst in output_lists]
            o = _c10d.GatherOptions()
            o.rootRank = root
            self._gloo.gather(outs, [_wire(inp)], o).wait()
            return output_lists
        return self._submit("gather", inp, run, inp)

    def scatter(self, output_tensors, input_lists, opts=None):
        if _cuda_in(output_tensors):
            return self._cuda("scatter", output_tensors, input_lists, opts)
        out = self._one("scatter", output_tensors)
        root = opts.rootRank if opts is not None else 0

        def run():
            w = [_wire(out)]
            o = _c10d.ScatterOptions()
            o.rootRank = root
            self._gloo.scatter(w, [[_wire(i) for i in lst] for lst in input_lists], o).wait()
            return output_tensors
        return self._submit("scatter", out, run, out)

    def send(self, tensors, dst, tag=0):
        if _cuda_in(tensors):
            return self._cuda("send", tensors, dst, tag)
        t = self._one("send", tensors)
        return self._submit("send", t, lambda: _Later(self._gloo.send([_wire(t)], dst, tag), tensors), t)

    def recv(self, tensors, src, tag=0):
        if _cuda_in(tensors):
            return self._cuda("recv", tensors, src, tag)
        t = self._one("recv", tensors)
        w = _wire(t)

        return self._submit("recv", t, lambda: _Later(self._gloo.recv([w], src, tag), tensors), t)

    def recv_anysource(self, tensors, tag=0):
        raise NotImplementedError("recv from any source: mscclgo's backend takes a named source rank")

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        return self._gloo.monitored_barrier(opts, wait_all_ranks)

    def _cuda(self, name, *args):
        """A call on CUDA tensors: a plan enqueued on the current stream
        where one fits (all_reduce, all_gather_into_tensor,
        reduce_scatter_tensor, through the library's CUDA build), else the
        wrapped NCCL group's method of the same name. Not run: no torch
        with CUDA was at hand (docs/integration.md)."""
        if self._nccl is None:
            raise RuntimeError(f"{name} on rank {self._rank}: CUDA tensors, and torch has no NCCL group to wrap "
                               "(torch.distributed.is_nccl_available() is false)")
        served = {"allreduce": "allreduce", "_allgather_base": "allgather", "_reduce_scatter_base": "reducescatter"}
        if self._device_plans and name in served and self._has_op:
            coll = served[name]
            if coll == "allreduce":
                out = inp = self._one("all_reduce", args[0])
                opts = args[1]
            else:
                out, inp, opts = args
            kind, op = self._opts_op(opts) if coll != "allgather" else (None, None)
            plan, why = self._plan(coll, out, inp, kind)
            if plan:
                scalar = _premul_factor(op) if kind == _R.PREMUL_SUM else None
                try:
                    self._execute(coll, plan, out, inp, kind, scalar,
                                  stream=torch.cuda.current_stream(out.device).cuda_stream)
                except MscclgoError as e:
                    if "device backend" not in str(e):
                        raise RuntimeError(f"{_describe(name, self._rank, out)}: {e}") from e
                    # The same library on every rank: every rank turns away here.
                    self._device_plans = False
                    self._info(f"plans on CUDA tensors off: {e}; calls go to NCCL")
                else:
                    fut = torch.futures.Future()
                    fut.set_result([out])  # enqueued on the caller's stream: ordered as NCCL's calls are
                    return _Work(fut, name) if _caller() else _c10d._create_work_from_future(fut)
            else:
                self._note((name, out.dtype, kind, out.numel(), "cuda"), f"{name} of {out.numel()} "
                           f"{str(out.dtype)[6:]} on CUDA: {why}: NCCL")
        return getattr(self._nccl, name)(*args)

    # -- the calls' paths ----------------------------------------------

    def _allreduce(self, out, inp, kind, scalar):
        """out = the reduction of inp over the ranks (out may be inp)."""
        if out.numel() == 0:
            return
        plan, why = self._plan("allreduce", out, inp, kind)
        if plan:
            self._run_plan("allreduce", plan, out, inp, kind, scalar)
            return
        self._note(("allreduce", out.dtype, kind, out.numel()), f"all_reduce of {out.numel()} {str(out.dtype)[6:]} "
                   f"{_op_name(kind)}: {why}: the built-in path over gloo")
        if out is not inp:
            out.copy_(inp)
        self._gloo_reduce(out, kind, scalar, None)

    def _allgather(self, out, inp, parts=None):
        """out = every rank's inp in rank order; with parts (a flat
        contiguous tensor per rank, none overlapping inp but the rank's
        own), rank j's block goes to parts[j] and out is left alone (it
        stands for the output in choosing the plan)."""
        if inp.numel() == 0:
            return
        plan, why = self._plan("allgather", out, inp, None)
        if plan and parts is not None and not self._has_gather:
            # A library without mscclgoExecuteHostGather: gathered into
            # out, then copied.
            self._run_plan("allgather", plan, out, inp, None, None)
            for i, p in enumerate(parts):
                p.copy_(out[i * inp.numel():(i + 1) * inp.numel()])
            return
        if plan:
            self._run_plan("allgather", plan, out, inp, None, None, parts)
            return
        self._note(("allgather", out.dtype, inp.numel()), f"all_gather of {inp.numel()} {str(inp.dtype)[6:]}: {why}: "
                   f"gloo's all_gather")
        self._signature("all_gather", inp)
        n = inp.numel()
        if parts is None:
            wo = _wire(out)
            parts = [wo[i * n:(i + 1) * n] for i in range(self._size)]
        else:
            parts = [_wire(p) for p in parts]
        self._gloo.allgather([parts], [_wire(inp.contiguous())], _c10d.AllgatherOptions()).wait()

    def _reducescatter(self, out, inp, kind, scalar):
        if out.numel() == 0:
            return
        plan, why = self._plan("reducescatter", out, inp, kind)
        if plan:
            self._run_plan("reducescatter", plan, out, inp, kind, scalar)
            return
        self._note(("reducescatter", out.dtype, kind, out.numel()), f"reduce_scatter of {out.numel()} "
                   f"{str(out.dtype)[6:]} {_op_name(kind)}: {why}: the built-in path (an all_reduce over gloo, "
                   f"this rank's part kept)")
        full = inp.clone()
        self._gloo_reduce(full, kind, scalar, None)
        n = out.numel()
        out.copy_(full[self._rank * n:(self._rank + 1) * n])

    def _reduce(self, t, root, kind, scalar):
        if t.numel():
            self._gloo_reduce(t, kind, scalar, root)

    def _gloo_reduce(self, t, kind, scalar, root):
        """Reduces t in place over gloo (to root, or to every rank when
        root is None), with NCCL's definitions for what gloo lacks: AVG
        and PREMUL_SUM (the input scaled first for floating types; a sum
        then a division toward zero for integers), bool as uint8 with SUM
        a logical or, bfloat16 through float32."""
        self._signature("all_reduce" if root is None else "reduce", t, kind)
        gloo_kind = kind
        work = t
        if t.dtype == torch.bool:
            work = t.view(torch.uint8)
            gloo_kind = {_R.SUM: _R.MAX, _R.PRODUCT: _R.MIN}.get(kind, kind)
        elif t.dtype == torch.bfloat16:
            work = t.float()
        post_div = False
        if kind in (_R.AVG, _R.PREMUL_SUM):
            factor = 1.0 / self._size if kind == _R.AVG else scalar
            if t.dtype in _FLOATS:
                work.mul_(factor)
            elif kind == _R.AVG:
                post_div = True
            else:
                work.mul_(int(factor))
            gloo_kind = _R.SUM
        if root is None:
            o = _c10d.AllreduceOptions()
            o.reduceOp = dist.ReduceOp(gloo_kind)
            self._gloo.allreduce([work], o).wait()
        else:
            o = _c10d.ReduceOptions()
            o.reduceOp = dist.ReduceOp(gloo_kind)
            o.rootRank = root
            self._gloo.reduce([work], o).wait()
        if post_div and (root is None or root == self._rank):
            work.copy_(torch.div(work, self._size, rounding_mode="trunc"))
        if work is not t and t.dtype == torch.bfloat16:
            t.copy_(work)

    def _gloo_op(self, what, t, root):
        w = _wire(t)
        o = _c10d.BroadcastOptions()
        o.rootRank = root
        self._gloo.broadcast([w], o).wait()

    def _signature(self, what, t, kind=None, path=0, failed=False):
        """Checks that every rank makes the same call (elements, dtype,
        reduction) and takes the same path (path: 1 for a plan, 0 for
        gloo): before every call gloo runs (gloo itself would hang or crash
        on a mismatch) and before the first call of each kind that a plan
        runs (its later calls are the library's to check). Each rank
        raises, naming every rank's call, and nothing is written."""
        code = -1 if kind is None else int(_OPS.get(kind, (99,))[0])
        mine = torch.tensor([t.numel(), _DTYPE_CODES.get(t.dtype, 99), code, path], dtype=torch.int64)
        all_ = [torch.empty(4, dtype=torch.int64) for _ in range(self._size)]
        o = _c10d.AllgatherOptions()
        o.timeout = self._check_timeout
        try:
            self._gloo.allgather([all_], [mine], o).wait()
        except RuntimeError as e:
            raise RuntimeError(f"{_describe(what, self._rank, t)}: comparing the call with the other ranks' "
                               f"(within {self._check_timeout}): {e}") from e
        if any(not torch.equal(a[:3], mine[:3]) for a in all_):
            desc = "; ".join(f"rank {r}: {int(a[0])} elements of {_DTYPE_NAMES.get(int(a[1]), '?')}"
                             + (f" {_CODE_OPS.get(int(a[2]), '?')}" if int(a[2]) >= 0 else "")
                             for r, a in enumerate(all_))
            if failed or any(int(a[3]) for a in all_):
                self._reset(f"{what}: the ranks' calls differ ({desc})")
            raise ValueError(f"{_describe(what, self._rank, t)}: the ranks' calls differ ({desc}); "
                             "nothing was written")
        if any(int(a[3]) != path for a in all_):
            raise RuntimeError(f"{_describe(what, self._rank, t)}: the ranks chose different paths for the same call "
                               f"(plan on ranks {[r for r, a in enumerate(all_) if int(a[3])]}): their plan sets differ")

    def _plan(self, collective, out, inp, kind):
        """The registered plan that runs this call, or None and why."""
        dt = _PLAN_DTYPES.get(out.dtype)
        if dt is None:
            return None, f"plans compute float16, bfloat16, float32 and int32, not {str(out.dtype)[6:]}"
        if not out.is_contiguous() or not inp.is_contiguous():
            return None, "a tensor is not contiguous"
        if kind is not None and kind not in _OPS:
            return None, f"plans do not reduce by {_op_name(kind)}"
        if kind is not None and kind != _R.SUM and not self._has_op:
            return None, f"this library reduces by SUM only (no mscclgoExecuteHostOp)"
        if self._plans == 0:
            return None, "no plan set installed (run mscclgo install, or set MSCCLGO_PLAN_PATH)"
        count = inp.numel() if collective == "allgather" else out.numel()
        in_place = _in_place(collective, out, inp, self._rank)
        key = (collective, count, out.dtype, in_place, kind)
        d = self._decisions.get(key)
        if d is None:
            try:
                d = (self._comm.select(collective, out, inp), "")
            except MscclgoError as e:
                d = (None, str(e))
            if d[0] and out.is_cuda:
                # The first call of its kind on the device: every rank
                # must make it (the fallback checks each of its calls
                # itself; on host memory the library compares every call
                # of every rank as the ranks arrive, and names both calls
                # of a mismatch at once).
                self._signature(_TORCH_NAMES[collective], inp if collective == "allgather" else out, kind, 1)
            if len(self._decisions) > 4096:
                self._decisions.clear()
            self._decisions[key] = d
            if d[0]:
                self._info(f"{collective} of {count} {str(out.dtype)[6:]} ({'in' if in_place else 'out-of'}-place): "
                           f"plan {d[0]}")
        return d

    def _run_plan(self, collective, plan, out, inp, kind, scalar, parts=None):
        """Runs plan on host memory. With TORCH_DISTRIBUTED_DEBUG=DETAIL
        (torch's own switch for checking every call) the ranks compare
        the call first; otherwise only a call whose run failed waiting for
        a peer is compared afterwards, so that a mismatch with a peer's
        call (which went elsewhere) is named rather than reported as the
        peer's absence."""
        sig = inp if collective == "allgather" else out
        if self._detail:
            self._signature(_TORCH_NAMES[collective], sig, kind, 1)
        try:
            self._execute(collective, plan, out, inp, kind, scalar, parts=parts)
        except MscclgoError as e:
            if "mismatched calls" in str(e):
                # The library compared the ranks' calls before any ran
                # (every rank fails the same call): the ranks compare
                # again over gloo, so that each names every rank's call.
                self._signature(_TORCH_NAMES[collective], sig, kind, 1)
                raise
            if not any(w in str(e) for w in _PEER_WAITS):
                raise
            self._signature(_TORCH_NAMES[collective], sig, kind, 1, failed=True)
            raise

    def _execute(self, collective, plan, out, inp, kind, scalar, stream=None, parts=None):
        """Runs plan: on host memory, or on stream (CUDA tensors); an
        all_gather with parts into them (_allgather)."""
        lib, count = self._lib, (inp.numel() if collective == "allgather" else out.numel())
        dt = _PLAN_DTYPES[out.dtype]
        # "builtin" is select's name for the library's own path where no
        # plan serves the call; the library takes it when given no name.
        plan = None if plan == "builtin" else plan.encode()
        if parts is not None:
            ptrs = (ctypes.c_void_p * len(parts))(*(p.data_ptr() for p in parts))
            self._comm._call(lib.mscclgoExecuteHostGather, self._comm._comm, plan, inp.data_ptr(), ptrs, count, dt)
            return
        if stream is not None:
            sc = torch.tensor([scalar], dtype=out.dtype) if kind == _R.PREMUL_SUM else None
            self._comm._call(lib.mscclgoExecuteOp, self._comm._comm, collective.encode(), plan,
                             inp.data_ptr(), out.data_ptr(), count, dt, _OPS[kind][0] if kind is not None else 0,
                             sc.data_ptr() if sc is not None else None, ctypes.c_void_p(stream))
            return
        if kind is None or (kind == _R.SUM and not self._has_op):
            self._comm._call(lib.mscclgoExecuteHost, self._comm._comm, collective.encode(), plan,
                             inp.data_ptr(), out.data_ptr(), count, dt)
            return
        sc = None
        if kind == _R.PREMUL_SUM:
            sc = torch.tensor([scalar], dtype=out.dtype)
        self._comm._call(lib.mscclgoExecuteHostOp, self._comm._comm, collective.encode(), plan,
                         inp.data_ptr(), out.data_ptr(), count, dt, _OPS[kind][0],
                         sc.data_ptr() if sc is not None else None)

    # -- checks, queueing, logging -------------------------------------

    def _opts_op(self, opts):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return _op_kind(op), op

    def _flat(self, n, dtype, device):
        """A tensor of n elements of dtype on device for a call's staging
        (all_gather into a list chooses its plan by it as the output, and
        gathers into it and copies out where a tensor of the list is not
        contiguous or the input overlaps another rank's; reduce_scatter
        of a list concatenates into it): the
        group's last one where it is large enough, else a new one that
        replaces it. A fresh tensor of some MiB each call costs its pages'
        faults and zeroing on every call, more than the copy; the group's
        calls run one at a time (_Gate), so one buffer serves them all."""
        key = (dtype, device)
        t = self._flats.get(key)
        if t is None or t.numel() < n:
            t = torch.empty(n, dtype=dtype, device=device)
            self._flats[key] = t
        return t[:n]

    @staticmethod
    def _adjacent(outs):
        """The one flat tensor whose consecutive parts are outs (each
        contiguous, of one dtype, size and device, each starting where the
        last ends, in the first's storage), None where they are not."""
        if not outs or outs[0].numel() == 0:
            return None
        first, n = outs[0], outs[0].numel()
        step, base = n * first.element_size(), first.data_ptr()
        for i, o in enumerate(outs):
            if not o.is_contiguous() or o.numel() != n or o.dtype != first.dtype or o.device != first.device or \
                    o.data_ptr() != base + i * step:
                return None
        try:
            # The first's storage holds them all where it is large enough
            # (no other allocation can lie inside it); as_strided refuses
            # a view past its end.
            return first.as_strided((len(outs) * n,), (1,))
        except RuntimeError:
            return None

    def _one(self, what, tensors):
        if len(tensors) != 1:
            raise ValueError(f"{what} on rank {self._rank}: mscclgo takes one tensor per rank, got {len(tensors)}")
        self._check_dense(what, tensors[0])
        return tensors[0]

    def _check_dense(self, what, t):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what} on rank {self._rank}: a {type(t).__name__}, not a tensor")
        if t.is_sparse:
            raise ValueError(f"{_describe(what, self._rank, t)}: a sparse tensor; mscclgo takes dense (strided) tensors")
        if not t.is_contiguous():
            raise ValueError(f"{_describe(what, self._rank, t)}: not contiguous (call .contiguous() first)")

    def _check_pair(self, what, out, inp, sizes_ok, want):
        if out.dtype != inp.dtype:
            raise ValueError(f"{_describe(what, self._rank, inp)}: the output's dtype is {str(out.dtype)[6:]}")
        if not sizes_ok:
            raise ValueError(f"{_describe(what, self._rank, inp)}: the output has shape {tuple(out.shape)} "
                             f"({out.numel()} elements), want {want}")

    def _check_op(self, what, t, kind):
        if t.dtype == torch.bool and kind == _R.AVG:
            raise TypeError(f"{_describe(what, self._rank, t)}: AVG does not take bool")
        if kind in (_R.BAND, _R.BOR, _R.BXOR) and t.dtype in _FLOATS:
            raise TypeError(f"{_describe(what, self._rank, t)}: {_op_name(kind)} takes integer tensors")
        if t.is_complex():
            raise TypeError(f"{_describe(what, self._rank, t)}: complex tensors are not served")

    def _submit(self, what, t, fn, *tensors):
        fut = torch.futures.Future()
        desc = _describe(what, self._rank, t) if t is not None else f"{what} on rank {self._rank}"

        def run():
            try:
                return fn()
            except MscclgoError as e:
                raise RuntimeError(f"{desc}: {e}") from e
        call, how = _Call(run, fut, desc), _caller()
        if how == "sync":
            # A caller that waits at once: where nothing is queued, the
            # call runs on its thread, without a hand-over to the worker.
            with self._gate.running:
                with self._gate.count:
                    idle = self._gate.queued == 0
                if idle:
                    _run_call(call, self._pending)
                    return _Work(fut, desc)
        with self._gate.count:
            self._gate.queued += 1
        self._queue.put(call)
        if how is None:
            return _c10d._create_work_from_future(fut)
        return _Work(fut, desc)

    def _info(self, msg):
        _log.info("rank %d of %d: %s", self._rank, self._size, msg)
        if _debug():
            print(f"mscclgo INFO rank {self._rank} of {self._size}: {msg}", file=sys.stderr, flush=True)

    def _note(self, key, msg):
        if key not in self._logged:
            if len(self._logged) > 4096:
                self._logged.clear()
            self._logged.add(key)
            self._info(msg)


# What the library's errors say when a run waited for a peer in vain.
_PEER_WAITS = ("deadlock", "had not arrived", "did not call", "has moved on", "deadline", "timed out", "timeout")
_TORCH_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter"}
_DTYPE_CODES = {d: i for i, d in enumerate((torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
                                            torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool))}
_DTYPE_NAMES = {i: str(d)[6:] for d, i in _DTYPE_CODES.items()}
_CODE_OPS = {code: name for code, name in _OPS.values()}


def _apart_or_own(inp, flat, own):
    """Whether inp lies outside flat's bytes, or is own (this rank's part
    of flat: an in-place all_gather), so that gathering into flat reads
    it as it was."""
    lo, hi = inp.data_ptr(), inp.data_ptr() + inp.numel() * inp.element_size()
    flo = flat.data_ptr()
    fhi = flo + flat.numel() * flat.element_size()
    return hi <= flo or lo >= fhi or (lo == own.data_ptr() and inp.numel() == own.numel())


def _wire(t):
    """t as gloo can move it (gloo has neither bfloat16, nor bool, nor
    int16): bfloat16 as float16 and bool as uint8, views of the same bytes
    (gloo moves them without arithmetic, and nothing is copied back);
    other dtypes as they are."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.float16)
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t


def _cuda_in(tensors):
    return bool(tensors) and getattr(tensors[0], "is_cuda", False)


def _in_place(collective, out, inp, rank):
    if collective == "allgather":
        return inp.data_ptr() == out.data_ptr() + rank * inp.numel() * inp.element_size()
    if collective == "reducescatter":
        return out.data_ptr() == inp.data_ptr() + rank * out.numel() * out.element_size()
    return out.data_ptr() == inp.data_ptr()


def _debug():
    return os.environ.get("MSCCLGO_NCCL_DEBUG", "").upper() in ("INFO", "TRACE")


def _plan_dirs():
    """The plan directories a group registers: MSCCLGO_PLANS and
    MSCCLGO_PLAN_PATH (colon-separated), then the installed default set
    (MSCCLGO_CACHE_DIR/default, else ~/.cache/mscclgo/default)."""
    dirs = []
    for var in ("MSCCLGO_PLANS", "MSCCLGO_PLAN_PATH"):
        dirs += [p for p in os.environ.get(var, "").split(":") if p]
    cache = os.environ.get("MSCCLGO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mscclgo")
    default = os.path.join(cache, "default")
    if os.path.isdir(default):
        dirs.append(default)
    seen, out = set(), []
    for d in dirs:
        if d not in seen and os.path.exists(d):
            seen.add(d)
            out.append(d)
    return out


def _shutdown(q, pending, held, threads, timeout):
    """Ends a group's threads and closes its communicator: when torch
    frees the group (destroy_process_group) or, at the latest, at exit.
    The threads are joined first (each bounded by the library's wait for
    peers): a call still running at interpreter shutdown frees its tensors
    on a thread that may no longer take the GIL, which ends the process
    in std::terminate from torch's destructors."""
    q.put(None)
    pending.put(None)
    me = threading.current_thread()
    end = time.monotonic() + timeout
    for t in threads:
        if t is not me:
            t.join(max(0.0, end - time.monotonic()))
    try:
        held[0].close()
    except Exception:  # noqa: BLE001: at exit, nothing is left to tell
        pass


def _create(store, rank, size, timeout):
    return ProcessGroupMscclgo(store, rank, size, timeout)


def register():
    """Registers the backend "mscclgo" with torch.distributed (once)."""
    if "MSCCLGO" in getattr(dist.Backend, "_plugins", {}):
        return
    try:
        dist.Backend.register_backend("mscclgo", _create, devices=["cpu", "cuda"])
    except TypeError:  # torch before 2.1: no devices argument
        dist.Backend.register_backend("mscclgo", _create)
