"""Loads the NCCL library through ctypes, as Python frameworks do, and
calls it: version, unique id (a 128-byte struct passed by value), a
communicator of one rank, an allreduce on a stand-in device pointer and
stream, the last error, destroy. Prints one line per call,
"CALL -> CODE", and "CALL error: TEXT" for a failure.

    python3 ctypes_check.py /path/to/libnccl.so.2
"""

import ctypes
import sys


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def main(path):
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetErrorString.argtypes = [ctypes.c_int]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclCommUserRank.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]

    def report(what, code):
        print(f"{what} -> {code}")
        if code != 0:
            print(f"{what} error: {lib.ncclGetLastError(None).decode()}")
        return code

    version = ctypes.c_int(0)
    report("ncclGetVersion", lib.ncclGetVersion(ctypes.byref(version)))
    print(f"version {version.value}")
    uid = UniqueId()
    if report("ncclGetUniqueId", lib.ncclGetUniqueId(ctypes.byref(uid))) != 0:
        return 1
    comm = ctypes.c_void_p()
    if report("ncclCommInitRank", lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)) != 0:
        return 1
    rank = ctypes.c_int(-1)
    report("ncclCommUserRank", lib.ncclCommUserRank(comm, ctypes.byref(rank)))
    print(f"user rank {rank.value}")
    buf = ctypes.create_string_buffer(4096)  # stands in for a device buffer
    stream = ctypes.c_void_p(0x2000)
    report("ncclAllReduce", lib.ncclAllReduce(buf, buf, 1024, 7, 0, comm, stream))
    report("ncclCommDestroy", lib.ncclCommDestroy(comm))
    print(f"error string 5: {lib.ncclGetErrorString(5).decode()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
