package gpu

// bufcopy.go decides what of the caller's buffers a launch copies to the
// device and back: the bytes the plan's ops read go in, the bytes they
// write come back, and nothing else moves (an allgather reads an eighth
// of what it writes, and nothing of its output). Bytes the plan neither
// reads nor writes stay the caller's on the host, so the result is the
// same as copying both buffers whole in and out. A driver whose kernel
// can address the caller's memory (HostMapper: the emulated device) copies
// nothing at all.

import (
	"runtime"
	"slices"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// byteRange is [lo, hi) of a rank's device allocation of buffers.
type byteRange struct{ lo, hi uint64 }

// copyRanges are, per rank, the ranges of its buffer allocation that a
// launch copies in and out, each sorted and disjoint.
type copyRanges struct {
	in, out [][]byteRange
}

// planCopies returns the ranges of s.bufs (placed for bufs) that the
// plan's ops read (in) and write (out), or nil when every byte must move:
// a rank session (the peers' ops are not resolved here), alltoallv plans
// (their sizes change per launch) or an operand that does not resolve.
// A body op of a pipeline may run fewer iterations than its whole
// operand: its writes count as reads too, so that bytes it leaves alone
// come back as they went in.
func (s *session) planCopies(bufs []executor.RankBuffers) *copyRanges {
	if s.mp != nil || s.v != nil || len(bufs) != len(s.inst.Ranks) || len(s.bufs) != len(bufs) {
		return nil
	}
	view := executor.LaunchView{Bufs: make([][3][]byte, len(bufs))}
	for r, b := range bufs {
		view.Bufs[r] = [3][]byte{b.Input, b.Output, nil}
	}
	ops := s.prep.Operands(view)
	cr := &copyRanges{in: make([][]byteRange, len(bufs)), out: make([][]byteRange, len(bufs))}
	ok := true
	var walk func(ro *executor.RankOperands, list []executor.OpInstance, inPipe bool)
	walk = func(ro *executor.RankOperands, list []executor.OpInstance, inPipe bool) {
		for k := range list {
			op := &list[k]
			if op.Type == plan.OpPipeline {
				walk(ro, op.Body, true)
				continue
			}
			if len(op.Src) == 0 && len(op.Dst) == 0 {
				continue // no data operands (signals, waits, barriers)
			}
			_, err := ro.Resolve(op, 0, executor.NoUnit, func(sp executor.OperandSpan) {
				if sp.Len == 0 || sp.Buffer == plan.Scratch || sp.Rank < 0 || sp.Rank >= len(bufs) {
					return
				}
				at := s.bufs[sp.Rank].inAt
				if sp.Buffer == plan.Output {
					at = s.bufs[sp.Rank].outAt
				}
				r := byteRange{at + sp.Offset, at + sp.Offset + sp.Len}
				switch sp.Role {
				case executor.RoleSrc, executor.RoleRawIn, executor.RolePktIn:
					cr.in[sp.Rank] = append(cr.in[sp.Rank], r)
				default:
					cr.out[sp.Rank] = append(cr.out[sp.Rank], r)
					if inPipe {
						cr.in[sp.Rank] = append(cr.in[sp.Rank], r)
					}
				}
			})
			if err != nil {
				ok = false
			}
		}
	}
	for r := range s.inst.Ranks {
		ro := ops.Rank(r)
		for t := range s.inst.Ranks[r].TBs {
			walk(ro, s.inst.Ranks[r].TBs[t].Ops, false)
		}
	}
	if !ok {
		return nil
	}
	for r := range bufs {
		cr.in[r], cr.out[r] = mergeRanges(cr.in[r]), mergeRanges(cr.out[r])
	}
	return cr
}

// mergeRanges sorts rs and merges the ranges that overlap or touch.
func mergeRanges(rs []byteRange) []byteRange {
	slices.SortFunc(rs, func(a, b byteRange) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// hostPieces hands f, in order, the pieces of the caller's memory that
// range r of allocation d holds: from b.Output where the output lies,
// else from b.Input (overlapping buffers share those bytes on the host).
func hostPieces(d *devBufs, b executor.RankBuffers, r byteRange, f func(at uint64, host []byte) error) error {
	for lo := r.lo; lo < r.hi; {
		var host []byte
		switch {
		case lo >= d.outAt && lo < d.outAt+d.outLen:
			host = b.Output[lo-d.outAt : min(r.hi, d.outAt+d.outLen)-d.outAt]
		case lo >= d.inAt && lo < d.inAt+d.inLen:
			host = b.Input[lo-d.inAt : min(r.hi, d.inAt+d.inLen)-d.inAt]
		default:
			// Between the two buffers (padding): nothing to copy.
			next := r.hi
			if d.outAt > lo {
				next = min(next, d.outAt)
			}
			if d.inAt > lo {
				next = min(next, d.inAt)
			}
			lo = next
			continue
		}
		if err := f(lo, host); err != nil {
			return err
		}
		lo += uint64(len(host))
	}
	return nil
}

// HostMapper is a driver whose kernel can run on host memory in place
// (the emulated device, whose device memory is host memory).
type HostMapper interface {
	// HostAddr returns the device address of b's first byte, or false
	// when the kernel cannot use b in place. The caller keeps b pinned
	// and alive while the kernel may use it.
	HostAddr(b []byte) (DevPtr, bool)
}

// mapBuffers points the launch at the caller's buffers themselves (pinned
// until Launch returns), when the driver is a HostMapper and
// every buffer is placed as a device copy would be: input and output not
// empty, the first byte of each rank's pair 256-byte aligned (of each
// buffer, when they do not overlap), so that every operand has the
// alignment it would have on the device. Rank sessions and alltoallv
// plans copy. It frees the device copies of earlier launches.
func (s *session) mapBuffers(bufs []executor.RankBuffers) bool {
	hm, ok := s.d.(HostMapper)
	if !ok || s.mp != nil || s.v != nil || len(bufs) != len(s.inst.Ranks) {
		return false
	}
	at := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	for _, b := range bufs {
		if len(b.Input) == 0 || len(b.Output) == 0 {
			return false
		}
		lo := min(at(b.Input), at(b.Output))
		if overlapAt(b) == -1<<62 && (at(b.Input)%256 != 0 || at(b.Output)%256 != 0) || lo%256 != 0 {
			return false
		}
	}
	places := make([]devBufs, len(bufs))
	for r, b := range bufs {
		in, ok1 := hm.HostAddr(b.Input)
		out, ok2 := hm.HostAddr(b.Output)
		if !ok1 || !ok2 {
			return false
		}
		places[r] = devBufs{in: in, out: out, inLen: uint64(len(b.Input)), outLen: uint64(len(b.Output))}
	}
	pinBuffers(&s.pin, bufs)
	s.mappedBufs = bufs
	for r := range bufs {
		if s.bufs[r].alloc != 0 {
			_ = s.d.Free(s.bufs[r].alloc)
		}
		s.bufs[r] = places[r]
	}
	return true
}

// pinBuffers pins every rank's input and output with p.
func pinBuffers(p *runtime.Pinner, bufs []executor.RankBuffers) {
	for _, b := range bufs {
		p.Pin(unsafe.SliceData(b.Input))
		p.Pin(unsafe.SliceData(b.Output))
	}
}
