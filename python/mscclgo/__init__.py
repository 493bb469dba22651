"""mscclgo for PyTorch programs: the torch.distributed backend "mscclgo",
which importing the package registers (backend.py):

    import mscclgo
    torch.distributed.init_process_group("mscclgo")   # under torchrun

and mscclgo's own communicator, a ctypes wrapper of mscclgo.h in
libmscclgo_nccl.so (nothing to compile):

    import mscclgo
    comm = mscclgo.Communicator()              # from torchrun's environment
    comm.register_plan("plans/")               # a plan file or a plan-set directory
    comm.selector = lambda req: "allreduce_packet_8gpu" if req.size <= 1 << 20 else None
    comm.all_reduce(tensor)                    # in place, on the current CUDA stream

Tensors are used through data_ptr(), numel() and dtype (float16, bfloat16,
float32, int32). CUDA tensors run on the caller's current stream through
the library's device build; CPU tensors (is_cuda false) run on host memory
on the CPU backend, synchronously, with ranks as threads of one process
or as processes (torchrun, mpirun), with no variable to set. The library
is MSCCLGO_LIBRARY, else libmscclgo_nccl.so through the loader's search.

Under torchrun, Communicator() does not bind torchrun's MASTER_PORT: rank
0 makes a unique id (its bootstrap listens on a port the system picks)
and hands it to the other ranks through torch.distributed: the default
process group when one is initialized, else torchrun's own store at
MASTER_ADDR:MASTER_PORT (docs/integration.md, Host memory).
"""

import collections
import ctypes
import datetime
import itertools
import os

__all__ = ["Communicator", "MscclgoError", "Request", "unique_id"]

# Reductions by name: ncclRedOp_t, and mscclgo.h's MSCCLGO_PREMUL_SUM.
_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4, "premul_sum": 5}
_DTYPES = {"torch.float16": 6, "torch.bfloat16": 9, "torch.float32": 7, "torch.int32": 2}


class MscclgoError(RuntimeError):
    """A call of the library failed: code is its ncclResult_t."""

    def __init__(self, code, message):
        super().__init__(f"{message} (ncclResult_t {code})")
        self.code = code


# What a selector is given for one call.
Request = collections.namedtuple("Request", "collective size world_size ranks_per_node in_place dtype")


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class _Request(ctypes.Structure):
    _fields_ = [("collective", ctypes.c_char_p), ("size", ctypes.c_size_t), ("worldSize", ctypes.c_int),
                ("ranksPerNode", ctypes.c_int), ("inPlace", ctypes.c_int), ("dtype", ctypes.c_int)]


_SELECTOR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_Request), ctypes.c_void_p)

_libs = {}


def _load(path=None):
    path = path or os.environ.get("MSCCLGO_LIBRARY") or "libmscclgo_nccl.so"
    lib = _libs.get(path)
    if lib is None:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        lib.mscclgoGetLastError.restype = ctypes.c_char_p
        lib.mscclgoGetLastError.argtypes = []
        lib.mscclgoCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, _UniqueId, ctypes.c_int]
        lib.mscclgoCommInitEnv.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        for f in (lib.mscclgoCommRank, lib.mscclgoCommSize):
            f.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        lib.mscclgoRegisterPlan.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        lib.mscclgoSetSelector.argtypes = [ctypes.c_void_p, _SELECTOR, ctypes.c_void_p]
        lib.mscclgoSelect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        lib.mscclgoExecute.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.mscclgoExecuteHost.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                                           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        op_args = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        if hasattr(lib, "mscclgoExecuteHostOp"):
            lib.mscclgoExecuteHostOp.argtypes = op_args
            lib.mscclgoExecuteOp.argtypes = op_args + [ctypes.c_void_p]
        if hasattr(lib, "mscclgoExecuteHostGather"):
            lib.mscclgoExecuteHostGather.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                                     ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
        lib.mscclgoCommDestroy.argtypes = [ctypes.c_void_p]
        _libs[path] = lib
    return lib


def _check(lib, code):
    if code != 0:
        raise MscclgoError(code, lib.mscclgoGetLastError().decode())


def unique_id(library=None):
    """A new unique id (128 bytes) for Communicator(rank, world_size, id),
    made in the process of rank 0."""
    lib = _load(library)
    uid = _UniqueId()
    _check(lib, lib.ncclGetUniqueId(ctypes.byref(uid)))
    return bytes(uid)  # all 128 bytes (uid.internal would stop at the first NUL)


def _dtype(tensor):
    name = str(tensor.dtype)
    if name not in _DTYPES:
        raise MscclgoError(4, f"tensor type {name}: mscclgo plans compute {', '.join(sorted(_DTYPES))}")
    return _DTYPES[name]


def _check_tensors(collective, output, input, world_size):
    """Checks a call's tensors as torch.distributed does, before the
    library reads or writes them through their data pointers: one dtype
    that plans compute, one device, dense (contiguous) storage, and sizes
    that fit the collective (all_gather's output world_size x its input,
    reduce_scatter's input world_size x its output)."""
    for what, t in (("output", output), ("input", input)):
        if not hasattr(t, "data_ptr") or not hasattr(t, "numel"):
            raise MscclgoError(4, f"{collective}: {what} is a {type(t).__name__}, not a tensor")
        if hasattr(t, "is_contiguous") and not t.is_contiguous():
            raise MscclgoError(4, f"{collective}: the {what} tensor is not contiguous (call .contiguous() first)")
    if str(input.dtype) != str(output.dtype):
        raise MscclgoError(4, f"{collective}: input {input.dtype} and output {output.dtype} differ")
    _dtype(output)
    if getattr(input, "device", None) != getattr(output, "device", None):
        raise MscclgoError(4, f"{collective}: input on {input.device} and output on {output.device}: one device")
    n_in, n_out = input.numel(), output.numel()
    want = {"allreduce": (n_out, "input", n_in, "output's"),
            "allgather": (world_size * n_in, "output", n_out, f"{world_size} ranks x the input's"),
            "reducescatter": (world_size * n_out, "input", n_in, f"{world_size} ranks x the output's")}[collective]
    if want[0] != want[2]:
        raise MscclgoError(4, f"{collective}: the {want[1]} has {want[2]} elements, want {want[0]} (the {want[3]} {n_in if collective == 'allgather' else n_out})")


def _stream(tensor):
    import torch  # only for CUDA tensors
    return torch.cuda.current_stream(tensor.device).cuda_stream


# Numbers the communicators this process makes from torchrun's store, so
# that every rank's n-th communicator reads the n-th key.
_store_keys = itertools.count()


def _timeout():
    """MSCCLGO_NCCL_TIMEOUT in seconds (a number or a Go-style "30s"), else
    the library's 120 s."""
    v = os.environ.get("MSCCLGO_NCCL_TIMEOUT", "").strip()
    try:
        return float(v[:-1] if v.endswith("s") and not v.endswith("ms") else v) if v else 120.0
    except ValueError:
        return 120.0


def _torch_id(rank, library):
    """Rank 0's unique id, handed out through torch.distributed, or None
    where there is no torch way to hand it out: the default process group
    when it is initialized, else torchrun's agent store (the TCPStore that
    torchrun's static rendezvous serves at MASTER_ADDR:MASTER_PORT)."""
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    try:
        import torch.distributed as dist
    except ImportError:
        if agent_store:
            raise MscclgoError(5, "under torchrun mscclgo needs torch.distributed to hand out rank 0's unique id "
                               "(it does not bind torchrun's MASTER_PORT)")
        return None
    if dist.is_available() and dist.is_initialized():
        box = [unique_id(library) if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]
    if not agent_store:
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=datetime.timedelta(seconds=_timeout()))
    key = "mscclgo/{}/{}/{}".format(os.environ.get("TORCHELASTIC_RUN_ID", ""),
                                    os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), next(_store_keys))
    if rank == 0:
        uid = unique_id(library)
        store.set(key, uid)
        return uid
    return bytes(store.get(key))


class Communicator:
    """One rank's mscclgo communicator: from the launcher's environment
    (torchrun, mpirun) when rank is None, else rank of world_size with the
    unique id of rank 0's unique_id()."""

    def __init__(self, rank=None, world_size=None, uid=None, library=None, selector=None):
        self._lib = _load(library)
        self._comm = ctypes.c_void_p()
        if rank is None and "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            # torchrun's environment: rank 0's id through torch, if it can.
            env_rank, env_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            uid = _torch_id(env_rank, library)
            if uid is not None:
                rank, world_size = env_rank, env_size
        if rank is None:
            _check(self._lib, self._lib.mscclgoCommInitEnv(ctypes.byref(self._comm)))
        else:
            _check(self._lib, self._lib.mscclgoCommInitRank(ctypes.byref(self._comm), world_size,
                                                            _UniqueId.from_buffer_copy(uid), rank))
        self._selector = None
        self._selector_error = None
        self._callback = None
        self._names = {}
        self._closed = False
        if selector is not None:
            self.selector = selector

    def _int(self, f):
        v = ctypes.c_int()
        _check(self._lib, f(self._comm, ctypes.byref(v)))
        return v.value

    @property
    def rank(self):
        return self._int(self._lib.mscclgoCommRank)

    @property
    def world_size(self):
        return self._int(self._lib.mscclgoCommSize)

    def register_plan(self, path):
        """Registers a plan file or every plan of a plan-set directory;
        returns how many."""
        n = ctypes.c_int()
        _check(self._lib, self._lib.mscclgoRegisterPlan(self._comm, os.fsencode(path), ctypes.byref(n)))
        return n.value

    @property
    def selector(self):
        return self._selector

    @selector.setter
    def selector(self, fn):
        """fn(Request) returns a registered plan's name, or None; None as
        fn restores mscclgo select's rules."""
        if fn is None:
            self._callback = _SELECTOR()
        else:
            def call(req, _user):
                # Nothing may escape a ctypes callback (its return value
                # would be garbage): an exception or a wrong type refuses
                # the call (NULL), and _refused names why.
                try:
                    r = req.contents
                    name = fn(Request(r.collective.decode(), r.size, r.worldSize, r.ranksPerNode, bool(r.inPlace), r.dtype))
                    if name is None:
                        return None
                    if not isinstance(name, str):
                        raise TypeError(f"the selector returned {name!r} ({type(name).__name__}), want a plan name (str) or None")
                    buf = self._names.setdefault(name, ctypes.create_string_buffer(name.encode()))
                    return ctypes.addressof(buf)
                except BaseException as e:  # noqa: B036 (a callback must not raise)
                    self._selector_error = e
                    return None
            self._selector_error = None
            self._callback = _SELECTOR(call)
        _check(self._lib, self._lib.mscclgoSetSelector(self._comm, self._callback, None))
        self._selector = fn

    def _args(self, collective, output, input, plan):
        _check_tensors(collective, output, input, self.world_size)
        count = {"allreduce": output.numel(), "allgather": input.numel(), "reducescatter": output.numel()}[collective]
        return (self._comm, collective.encode(), plan.encode() if plan else None, input.data_ptr(), output.data_ptr(),
                count, _dtype(output))

    def _call(self, f, *args):
        """Calls f; a failure raises MscclgoError, naming the selector's
        exception or wrong answer when that refused the call."""
        self._selector_error = None
        code = f(*args)
        err, self._selector_error = self._selector_error, None
        if code != 0 and err is not None:
            raise MscclgoError(code, f"{self._lib.mscclgoGetLastError().decode()}: the selector failed: {err!r}") from err
        _check(self._lib, code)

    def select(self, collective, output, input=None, plan=None):
        """The name of the plan a call would run."""
        name = ctypes.create_string_buffer(256)
        self._call(self._lib.mscclgoSelect, *self._args(collective, output, output if input is None else input, plan), name, 256)
        return name.value.decode()

    def _execute(self, collective, output, input, plan, op="sum", scalar=None):
        args = self._args(collective, output, input, plan)
        code = _OPS.get(op) if isinstance(op, str) else op
        if code is None:
            raise MscclgoError(4, f"{collective}: reduction {op!r}: want one of {', '.join(_OPS)}")
        cuda = getattr(output, "is_cuda", False)
        if code == 0 and scalar is None:
            if cuda:
                self._call(self._lib.mscclgoExecute, *args, _stream(output))
            else:
                # Host memory: the CPU backend, synchronously.
                self._call(self._lib.mscclgoExecuteHost, *args)
            return
        if code == _OPS["premul_sum"] and scalar is None:
            raise MscclgoError(4, f"{collective}: premul_sum needs its scalar")
        sc = None
        if scalar is not None:
            import torch  # a tensor of the call's dtype holds the scalar
            sc = torch.tensor([scalar], dtype=output.dtype)
        ptr = sc.data_ptr() if sc is not None else None
        if cuda:
            self._call(self._lib.mscclgoExecuteOp, *args, code, ptr, _stream(output))
        else:
            self._call(self._lib.mscclgoExecuteHostOp, *args, code, ptr)

    def all_reduce(self, tensor, plan=None, out=None, op="sum", scalar=None):
        """Reduces tensor over the ranks (op: "sum", "prod", "max", "min",
        "avg", or "premul_sum" with scalar, as NCCL defines them): in
        place, or into out (tensor is then left as it was)."""
        output = tensor if out is None else out
        self._execute("allreduce", output, tensor, plan, op, scalar)
        return output

    def all_gather(self, output, input, plan=None):
        """Gathers every rank's input into output (world_size × input)."""
        self._execute("allgather", output, input, plan)
        return output

    def reduce_scatter(self, output, input, plan=None, op="sum", scalar=None):
        """Reduces input over the ranks (op as for all_reduce); output gets
        this rank's part."""
        self._execute("reducescatter", output, input, plan, op, scalar)
        return output

    def close(self):
        """Destroys the communicator; later calls fail, naming the destroy."""
        if not self._closed:
            self._closed = True
            _check(self._lib, self._lib.mscclgoCommDestroy(self._comm))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _register_backend():
    """Registers the torch.distributed backend "mscclgo" (backend.py)
    where torch.distributed is there; the package works without torch."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    from . import backend
    backend.register()


_register_backend()
