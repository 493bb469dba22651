"""Hostile Python callers of the library (hostile_test.go): the mscclgo
package with wrong tensors and faulty selectors, and raw ctypes callers
of the NCCL API with wrong arguments. One case per run:

    hostile.py CASE

prints "CASE -> CODE: MESSAGE" (CODE 0 for a call that succeeded) and
lines "CASE data ..." where a case checks the data. Only the package's
cases import mscclgo and torch: importing torch costs a second or more of
CPU, which the ctypes cases need not spend."""

import ctypes
import resource
import sys


def refused(case, fn):
    import mscclgo
    try:
        fn()
    except mscclgo.MscclgoError as e:
        print(f"{case} -> {e.code}: {e}")
        return
    print(f"{case} -> 0: accepted")


def package(case):
    import mscclgo
    import torch
    comm = mscclgo.Communicator(0, 1, mscclgo.unique_id())
    x = torch.full((8,), 7.0)
    small = torch.zeros(4)
    if case == "allgather_small_output":
        refused(case, lambda: comm.all_gather(small, x))
        print(f"{case} data {'untouched' if bool((small == 0).all()) else 'CHANGED'}")
    elif case == "reducescatter_small_input":
        refused(case, lambda: comm.reduce_scatter(x, small))
        print(f"{case} data {'untouched' if bool((x == 7).all()) else 'CHANGED'}")
    elif case == "allgather_dtype_mismatch":
        refused(case, lambda: comm.all_gather(torch.zeros(8, dtype=torch.int32), x))
    elif case == "allreduce_float64":
        refused(case, lambda: comm.all_reduce(torch.zeros(8, dtype=torch.float64)))
    elif case == "allreduce_not_contiguous":
        refused(case, lambda: comm.all_reduce(torch.zeros(4, 4)[:, 0]))
    elif case == "allreduce_not_a_tensor":
        refused(case, lambda: comm.all_reduce([1.0, 2.0]))
    elif case.startswith("selector_"):
        answers = {"selector_raises": None, "selector_int": 5, "selector_bytes": b"plan", "selector_empty": ""}

        def sel(req):
            if case == "selector_raises":
                raise ValueError("the selector's own bug")
            return answers[case]
        comm.selector = sel
        refused(case, lambda: comm.select("allreduce", x))
    else:
        raise SystemExit(f"unknown case {case}")
    comm.close()


def raw(case, path):
    lib = ctypes.CDLL(path)
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]

    def show(code):
        msg = lib.ncclGetLastError(None).decode() if code != 0 else "success"
        print(f"{case} -> {code}: {msg}")

    if case == "ctypes_initall_huge":
        comms = (ctypes.c_void_p * 4)()
        show(lib.ncclCommInitAll(comms, 200000000, None))
        print(f"{case} peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")
        return
    comms = (ctypes.c_void_p * 1)()
    if lib.ncclCommInitAll(comms, 1, None) != 0:
        raise SystemExit("ncclCommInitAll failed: " + lib.ncclGetLastError(None).decode())
    buf = (ctypes.c_float * 64)(*([3.0] * 64))
    if case == "ctypes_op_minus_one":
        show(lib.ncclAllReduce(buf, buf, 64, 7, -1, comms[0], None))
    elif case == "ctypes_dtype_99":
        show(lib.ncclAllReduce(buf, buf, 64, 99, 0, comms[0], None))
    elif case == "ctypes_count_wraps":
        show(lib.ncclAllReduce(buf, buf, (1 << 62) + 256, 7, 0, comms[0], None))
    elif case == "ctypes_destroy_twice":
        lib.ncclCommDestroy(comms[0])
        show(lib.ncclCommDestroy(comms[0]))
        return
    else:
        raise SystemExit(f"unknown case {case}")
    print(f"{case} data {'untouched' if all(v == 3.0 for v in buf) else 'CHANGED'}")
    lib.ncclCommDestroy(comms[0])


def main():
    case = sys.argv[1]
    if case.startswith("ctypes_"):
        raw(case, sys.argv[2])
    else:
        package(case)


if __name__ == "__main__":
    main()
