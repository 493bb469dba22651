"""Tests of the mscclgo package with stand-in tensors (data_ptr, numel,
dtype over host memory, no is_cuda): two ranks as threads of this
process, plans run on host memory (mscclgoExecuteHost, no variable to
set). Run by go test ./nccl with
MSCCLGO_LIBRARY (the library) and MSCCLGO_TEST_PLANS (a directory holding
allreduce.json, a 2-rank in-place allreduce plan) set:

    PYTHONPATH=python python3 python/tests/test_mscclgo.py
"""

import ctypes
import os
import threading
import unittest

import mscclgo

WORLD = 2


class StandIn:
    """What the package uses of a torch tensor, over ctypes memory."""

    def __init__(self, values, dtype="torch.float32"):
        ctype, conv = (ctypes.c_int32, int) if dtype == "torch.int32" else (ctypes.c_float, float)
        self.buf = (ctype * len(values))(*map(conv, values))
        self.dtype = dtype

    def data_ptr(self):
        return ctypes.addressof(self.buf)

    def numel(self):
        return len(self.buf)

    def tolist(self):
        return list(self.buf)


def on_ranks(fn):
    """Runs fn(comm) on WORLD ranks as threads; returns their results or
    raises the first exception."""
    uid = mscclgo.unique_id()
    results, errors = [None] * WORLD, []

    def rank(r):
        try:
            comm = mscclgo.Communicator(r, WORLD, uid)
            try:
                results[r] = fn(comm)
            finally:
                comm.close()
        except Exception as e:  # reported to the test below
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORLD)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        if t.is_alive():
            raise AssertionError("a rank did not finish within 60 s")
    if errors:
        raise errors[0]
    return results


def values(rank, n):
    return [float(rank + 1 + i % 7) for i in range(n)]


class CommunicatorTest(unittest.TestCase):
    plans = os.environ["MSCCLGO_TEST_PLANS"]

    def test_all_reduce_with_selector(self):
        seen = []

        def body(comm):
            self.assertEqual(comm.register_plan(os.path.join(self.plans, "allreduce.json")), 1)
            comm.selector = lambda req: (seen.append(req), "allreduce_packet_2gpu")[1]
            t = StandIn(values(comm.rank, 1024))
            self.assertEqual(comm.select("allreduce", t), "allreduce_packet_2gpu")
            comm.all_reduce(t)
            return t.tolist()

        for got in on_ranks(body):
            self.assertEqual(got, [sum(values(r, 1024)[i] for r in range(WORLD)) for i in range(1024)])
        self.assertIn(mscclgo.Request("allreduce", 4096, WORLD, WORLD, True, 7), seen)

    def test_default_rules_and_named_plan(self):
        def body(comm):
            comm.register_plan(self.plans)
            t = StandIn(values(comm.rank, 256), "torch.int32")
            comm.all_reduce(t, plan="allreduce_packet_2gpu")
            comm.all_reduce(t)  # select's rules pick the same plan
            return t.tolist()

        for got in on_ranks(body):
            self.assertEqual(got, [WORLD * sum(values(r, 256)[i] for r in range(WORLD)) for i in range(256)])

    def test_errors(self):
        def body(comm):
            comm.register_plan(self.plans)
            t = StandIn(values(comm.rank, 64))
            errs = []
            comm.selector = lambda req: None
            with self.assertRaises(mscclgo.MscclgoError) as e:
                comm.all_reduce(t)
            errs.append(str(e.exception))
            comm.selector = None
            with self.assertRaises(mscclgo.MscclgoError) as e:
                comm.all_reduce(t, plan="nonesuch")
            errs.append(str(e.exception))
            with self.assertRaises(mscclgo.MscclgoError) as e:
                comm.all_reduce(StandIn([1.0], "torch.float64"))
            errs.append(str(e.exception))
            return errs

        for errs in on_ranks(body):
            self.assertIn("the selector chose no plan for allreduce of 256 bytes (in-place)", errs[0])
            self.assertIn('no registered plan is named "nonesuch"', errs[1])
            self.assertIn("tensor type torch.float64", errs[2])

    def test_use_after_close(self):
        uid = mscclgo.unique_id()
        comm = mscclgo.Communicator(0, 1, uid)
        comm.close()
        with self.assertRaises(mscclgo.MscclgoError) as e:
            comm.rank
        self.assertIn("was used after mscclgoCommDestroy", str(e.exception))


if __name__ == "__main__":
    unittest.main()
