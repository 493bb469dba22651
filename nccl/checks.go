package main

import (
	"fmt"
	"math/bits"
)

// checks.go: the arguments of a collective or point-to-point call,
// checked before anything else (plan choice, a run, the fallback): a data
// type and a reduction of NCCL's enums (or a reduction created on the
// communicator), a root or peer among its ranks, and a message whose size
// in bytes neither wraps 64 bits nor exceeds maxCallBytes, nor runs a
// buffer past the end of the address space.

// numOps is ncclNumOps: reductions from it up are user-defined, created
// by ncclRedOpCreatePreMulSum.
const numOps = 5

// maxCallBytes bounds the bytes one call names, per buffer: 2^48, the
// virtual address space of today's CPUs and GPUs. A larger count is a
// caller's mistake (often a negative value cast to size_t).
const maxCallBytes = 1 << 48

// hasOp reports whether the collective takes a reduction.
func (c collective) hasOp() bool {
	return c == collAllReduce || c == collReduceScatter || c == collReduce
}

// checkCall checks call k on c; the error is ncclInvalidArgument, naming
// the argument.
func (c *comm) checkCall(k call) error {
	if k.dtype < 0 || k.dtype >= len(dtypeNames) {
		return errorf(resultInvalidArgument, "data type %d is not an ncclDataType_t (0 to %d)", k.dtype, len(dtypeNames)-1)
	}
	if k.coll.hasOp() {
		switch {
		case k.op < 0:
			return errorf(resultInvalidArgument, "reduction %d is not an ncclRedOp_t", k.op)
		case k.op >= numOps && !c.hasOp(k.op):
			return errorf(resultInvalidArgument, "reduction %d is neither one of ncclSum to ncclAvg (0 to %d) nor created on this communicator by ncclRedOpCreatePreMulSum", k.op, numOps-1)
		}
	}
	switch {
	case k.coll.rooted():
		if k.peer < 0 || k.peer >= c.size {
			return errorf(resultInvalidArgument, "root %d outside the %d ranks of the communicator", k.peer, c.size)
		}
	case k.coll == collSend, k.coll == collRecv:
		if k.peer < 0 || k.peer >= c.size {
			return errorf(resultInvalidArgument, "peer %d outside the %d ranks of the communicator", k.peer, c.size)
		}
	}
	one, err := callBytes(k, 1)
	if err != nil {
		return err
	}
	total := one
	switch k.coll {
	case collAllGather, collReduceScatter, collAllToAll, collGather, collScatter:
		if total, err = callBytes(k, c.size); err != nil {
			return err
		}
	}
	// Each buffer: its size, and its end inside the address space. The
	// root's gather receives, and its scatter sends, count from each
	// rank; the other ranks' buffer on that side is not used.
	in, out := one, one
	switch k.coll {
	case collAllGather:
		out = total
	case collReduceScatter:
		in = total
	case collAllToAll:
		in, out = total, total
	case collGather:
		out = 0
		if c.rank == k.peer {
			out = total
		}
	case collScatter:
		in = 0
		if c.rank == k.peer {
			in = total
		}
	case collSend:
		out = 0
	case collRecv:
		in = 0
	}
	for _, b := range []struct {
		name  string
		addr  uintptr
		bytes uint64
	}{{"send", k.send, in}, {"receive", k.recv, out}} {
		if _, carry := bits.Add64(uint64(b.addr), b.bytes, 0); carry != 0 {
			return errorf(resultInvalidArgument, "the %s buffer %#x of %d bytes runs past the end of the address space", b.name, b.addr, b.bytes)
		}
	}
	return nil
}

// callBytes is k's count in bytes, times ranks; an error when that
// wraps 64 bits or exceeds maxCallBytes.
func callBytes(k call, ranks int) (uint64, error) {
	size := elemSize(k.dtype)
	hi, lo := bits.Mul64(k.count, size)
	if hi == 0 {
		hi, lo = bits.Mul64(lo, uint64(ranks))
	}
	if hi == 0 && lo <= maxCallBytes {
		return lo, nil // the steady state: no string is made
	}
	what := fmt.Sprintf("count %d of %s (%d bytes each)", k.count, dtypeName(k.dtype), size)
	if ranks > 1 {
		what += fmt.Sprintf(" on each of %d ranks", ranks)
	}
	if hi != 0 {
		return 0, errorf(resultInvalidArgument, "%s overflows 64 bits", what)
	}
	return 0, errorf(resultInvalidArgument, "%s is %d bytes, more than the %d (2^48) one call may name", what, lo, uint64(maxCallBytes))
}
