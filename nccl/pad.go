package main

// pad.go: counts that no plan takes whole. A plan divides each rank's
// buffers into chunks of whole alignment units (planset's sizeProblem),
// so a count such as 121 floats (484 bytes) on 2 ranks fits none of the
// default set's plans. Such a call runs the plan at the next count it
// takes (padCount): the input is copied into a staging buffer of the
// padded layout (allgather: each rank's block; reducescatter: each rank's
// block of the input, at a stride of the padded count), the plan runs
// there, and the first count elements of each output block are copied
// out; the pad is never read back. See docs/integration.md, "Counts no
// plan takes whole".

import (
	"errors"
	"math"
	"math/bits"

	"github.com/mscclgo/mscclgo/planset"
)

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// lcm is the least common multiple of a and b, 0 when it passes 2^63.
func lcm(a, b uint64) uint64 {
	g := gcd(a, b)
	hi, lo := bits.Mul64(a/g, b)
	if hi != 0 || lo > math.MaxInt64 {
		return 0
	}
	return lo
}

// padUnit is the smallest number of bytes each rank's block must be a
// multiple of for plan e on n ranks with elements of es bytes: its
// alignment times its chunks for the input and the output, whole
// elements; 0 when that passes 2^63.
func padUnit(e planset.Entry, coll collective, n, es uint64) uint64 {
	a := e.BufferAlignment
	if a == 0 {
		a = 16
	}
	in, out := max(uint64(e.InputChunks), 1)*a, max(uint64(e.OutputChunks), 1)*a
	// A buffer of n blocks is a multiple of m when one block is a
	// multiple of m / gcd(m, n).
	switch coll {
	case collAllGather:
		out /= gcd(out, n)
	case collReduceScatter:
		in /= gcd(in, n)
	}
	u := lcm(lcm(in, out), es)
	return u
}

// paddedSize is the smallest message size of at least req.Size (a
// request whose per-rank block is block bytes) that some plan of the
// first source with a plan of req's shape takes, in either placement:
// the per-rank block rounded up to the plan's unit and into its size
// range. ok is false when no plan of the shape takes any size at or
// above it.
func paddedSize(sources []planset.Source, req planset.Request, coll collective, block uint64) (size, padBlock uint64, ok bool) {
	n := uint64(req.WorldSize)
	per := func(size uint64) uint64 { // a message size's per-rank block
		if coll == collAllReduce {
			return size
		}
		return size / n
	}
	whole := func(b uint64) uint64 {
		if coll == collAllReduce {
			return b
		}
		return b * n
	}
	for _, src := range sources {
		for _, e := range src.Index.Plans {
			if e.Collective != req.Collective || e.WorldSize != req.WorldSize || e.RanksPerNode != req.RanksPerNode || (e.NVLS && !req.NVLS) {
				continue
			}
			u := padUnit(e, coll, n, uint64(req.ElementSize))
			if u == 0 {
				continue
			}
			lo, hi := req.SizeRange(e)
			b := max(block, per(lo))
			b = (b + u - 1) / u * u
			if b < block || b > math.MaxUint64/n {
				continue
			}
			if s := whole(b); s <= hi && s >= lo && (!ok || b < padBlock) {
				size, padBlock, ok = s, b, true
			}
		}
		if ok {
			return size, padBlock, true
		}
	}
	return 0, 0, false
}

// selectPadded is selectEitherPlace for req, or, where no plan takes
// req's size whole, for the padded size (padBlock: the padded per-rank
// block in bytes, 0 when not padded).
func selectPadded(sources []planset.Source, req planset.Request, coll collective, block uint64) (choice *planset.Choice, planInPlace bool, padBlock uint64, err error) {
	choice, planInPlace, err = selectEitherPlace(sources, req)
	if err == nil || !errors.Is(err, planset.ErrNoPlan) {
		return choice, planInPlace, 0, err
	}
	size, pb, ok := paddedSize(sources, req, coll, block)
	if !ok {
		return choice, planInPlace, 0, err
	}
	padded := req
	padded.Size = size
	c, in, perr := selectEitherPlace(sources, padded)
	if perr != nil {
		return choice, planInPlace, 0, err
	}
	return c, in, pb, nil
}

// layout maps a call's buffers (count elements per rank block) to a
// plan's (padCount per rank block): how its input is staged and its
// output copied back.
type layout struct {
	coll          collective
	n, rank       int
	es            uint64
	count, padded uint64 // elements per rank block: the call's, the plan's
}

// block and padBlock are a rank block's bytes in the call and in the plan.
func (l layout) block() uint64    { return l.count * l.es }
func (l layout) padBlock() uint64 { return l.padded * l.es }

// inBytes and outBytes are the plan's buffer sizes.
func (l layout) inBytes() uint64 {
	if l.coll == collReduceScatter {
		return uint64(l.n) * l.padBlock()
	}
	return l.padBlock()
}

func (l layout) outBytes() uint64 {
	if l.coll == collAllGather {
		return uint64(l.n) * l.padBlock()
	}
	return l.padBlock()
}

// planSize is the plan's message size: the output for allgather, the
// input otherwise.
func (l layout) planSize() uint64 {
	if l.coll == collAllGather {
		return l.outBytes()
	}
	return l.inBytes()
}

// copies calls f for each copy of a rank's input into the plan's input
// (in true) or of the plan's output to the caller's output: its offsets
// in the caller's buffer and in the plan's, and its length.
func (l layout) copies(in bool, f func(callAt, planAt, n uint64)) {
	b, pb := l.block(), l.padBlock()
	if (in && l.coll == collReduceScatter) || (!in && l.coll == collAllGather) {
		for j := range uint64(l.n) {
			f(j*b, j*pb, b)
		}
		return
	}
	f(0, 0, b)
}

// copyFunc copies src into dst (one length, apart): the built-in copy
// (plainCopy), or a multi-process session's, split over its goroutines
// (cpu.RankSession.Copy).
type copyFunc func(dst, src []byte)

// plainCopy is copy as a copyFunc.
func plainCopy(dst, src []byte) { copy(dst, src) }

// stageIn copies the caller's input src into the plan's input dst with
// cp, each element pre-multiplied as r says (then without cp).
func (l layout) stageIn(cp copyFunc, d int, r reduction, dst, src []byte) {
	l.copies(true, func(callAt, planAt, n uint64) {
		if r.preMul == nil {
			cp(dst[planAt:planAt+n], src[callAt:callAt+n])
			return
		}
		stageInput(d, r, dst[planAt:planAt+n], src[callAt:callAt+n])
	})
}

// stageOut copies the plan's output src into the caller's output dst
// with cp, each element divided as r says.
func (l layout) stageOut(cp copyFunc, d int, r reduction, dst, src []byte) {
	l.copies(false, func(callAt, planAt, n uint64) {
		cp(dst[callAt:callAt+n], src[planAt:planAt+n])
	})
	if r.postDiv > 0 {
		divide(d, dst, r.postDiv)
	}
}

// stageOutParts copies the plan's allgather output src into parts with
// cp, rank j's block into parts[j] (each a block long).
func (l layout) stageOutParts(cp copyFunc, parts [][]byte, src []byte) {
	b, pb := l.block(), l.padBlock()
	for j, p := range parts {
		at := uint64(j) * pb
		cp(p, src[at:at+b])
	}
}

// stageBytes is the staging a run of a plan of placement planInPlace
// needs: its input and output apart, or the one buffer of an in-place
// plan.
func (l layout) stageBytes(planInPlace bool) uint64 {
	if planInPlace {
		return max(l.inBytes(), l.outBytes())
	}
	return l.inBytes() + l.outBytes()
}

// stageOffsets are the offsets of the plan's input and output in a
// staging buffer of stageBytes(planInPlace): an in-place plan's input is
// the rank's block of its output (allgather), its output the rank's
// block of its input (reducescatter), or the same buffer (allreduce).
func (l layout) stageOffsets(planInPlace bool) (in, out uint64) {
	switch {
	case !planInPlace:
		return 0, l.inBytes()
	case l.coll == collAllGather:
		return uint64(l.rank) * l.padBlock(), 0
	case l.coll == collReduceScatter:
		return 0, uint64(l.rank) * l.padBlock()
	}
	return 0, 0
}

// stageBuffers are the plan's input and output in stage (of at least
// stageBytes(planInPlace) bytes).
func (l layout) stageBuffers(stage []byte, planInPlace bool) (in, out []byte) {
	i, o := l.stageOffsets(planInPlace)
	return stage[i : i+l.inBytes()], stage[o : o+l.outBytes()]
}

// fitsWhole reports whether plan e's chunking takes a per-rank block of
// block bytes on n ranks whole (its size range aside).
func fitsWhole(e planset.Entry, coll collective, n, es, block uint64) bool {
	u := padUnit(e, coll, n, es)
	return u != 0 && block%u == 0
}

// bulkBlock is the largest per-rank block of at most block bytes that
// plan e takes whole on n ranks (elements of es bytes), inside its size
// range for req (Request.SizeRange); 0 for none. An allreduce on ranks as threads runs that bulk on
// the callers' buffers and the rest on the built-in path, rather than
// copying the whole through a padded staging buffer (decide).
func bulkBlock(e planset.Entry, req planset.Request, n, es, block uint64) uint64 {
	u := padUnit(e, collAllReduce, n, es)
	if u == 0 {
		return 0
	}
	b := block / u * u
	if lo, hi := req.SizeRange(e); b == 0 || b < lo || b > hi {
		return 0
	}
	return b
}
