package executor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// This file reproduces the data side of MSCCL++'s python/test/
// executor_test.py (docs/semantics.md §5): the buffers of each
// collective, the fill generator, the expected results and their
// tolerance, and the bus-bandwidth factors.

// ErrNoCheck is returned by BufferLayout.Check for collectives without a
// defined result (the "test" plans of MSCCL++'s unit tests): they can
// only be run for deadlocks and races.
var ErrNoCheck = errors.New("no check: the collective has no defined result")

// FillMode selects the input values Fill writes.
type FillMode uint8

const (
	// ReferenceFill is executor_test.py's generator, bit for bit:
	// T(k)/T(1024) for a pseudo-random k in [0, 1024). For int32 the
	// division is an integer one, so every element is 0.
	ReferenceFill FillMode = iota
	// IntegerFill is an mscclgo extension for int32 (any integer type,
	// one whose Epsilon is 0), whose reference fill is all zeros and so
	// checks nothing: the element is k itself, from the same generator.
	// Floating-point types fill as with ReferenceFill.
	IntegerFill
)

// fillThreads is the generator's grid: 64 blocks of 1024 threads, each
// with its own LCG sequence.
const fillThreads = 64 * 1024

// Fill writes the input of rank for iteration seq into dst, as the
// fill_data kernel of executor_test.py does (docs/semantics.md §5.2): generator thread g
// starts at seed = uint32(g + rank + seq) and, for the elements g,
// g+65536, ..., steps seed = seed·1664525 + 1013904223 (mod 2^32) and
// stores T(seed mod 1024) / T(1024). For bf16 the integer is rounded to
// bf16 before the (exact) division. rank is the seed rank: the rank
// divided by split_mask+1.
func Fill(dst []byte, dt Numeric, rank, seq int) { FillWith(dst, dt, rank, seq, ReferenceFill) }

// FillWith is Fill with a choice of FillMode.
func FillWith(dst []byte, dt Numeric, rank, seq int, mode FillMode) {
	size := dt.Size()
	if size != 2 && size != 4 {
		panic(fmt.Sprintf("executor: fill of %d-byte elements", size))
	}
	// tab[k] is the element for seed mod 1024 == k. Dividing the rounded
	// integer by 1024 is exact and commutes with rounding, so
	// SetFloat64(k/1024) is the reference value for every type (an
	// integer type truncates it to 0, as the integer division does).
	tab := make([]byte, 1024*size)
	for k := 0; k < 1024; k++ {
		v := float64(k) / 1024
		if mode == IntegerFill && dt.Epsilon() == 0 {
			v = float64(k)
		}
		dt.SetFloat64(tab, k, v)
	}
	var tab16 [1024]uint16
	var tab32 [1024]uint32
	for k := range 1024 {
		if size == 2 {
			tab16[k] = binary.LittleEndian.Uint16(tab[2*k:])
		} else {
			tab32[k] = binary.LittleEndian.Uint32(tab[4*k:])
		}
	}
	n := len(dst) / size
	base := uint32(rank + seq)
	// fill runs the generator threads [lo, hi) row by row, so that each
	// worker writes contiguous runs.
	fill := func(lo, hi int) {
		seeds := make([]uint32, hi-lo)
		for g := range seeds {
			seeds[g] = uint32(lo+g) + base
		}
		for row := 0; row+lo < n; row += fillThreads {
			end := min(hi, n-row)
			for g := lo; g < end; g++ {
				s := seeds[g-lo]*1664525 + 1013904223
				seeds[g-lo] = s
				if size == 2 {
					binary.LittleEndian.PutUint16(dst[2*(row+g):], tab16[s%1024])
				} else {
					binary.LittleEndian.PutUint32(dst[4*(row+g):], tab32[s%1024])
				}
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 16)
	if n < 1<<20 || workers < 2 {
		fill(0, fillThreads)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*fillThreads/workers, (w+1)*fillThreads/workers
		wg.Go(func() { fill(lo, hi) })
	}
	wg.Wait()
}

// collective is a collective with a defined result.
type collective uint8

const (
	noResult collective = iota
	allReduce
	allGather
	reduceScatter
	allToAll
	sendRecv
)

// collectiveOf matches the plan's collective name as executor_test.py
// does, by substring.
func collectiveOf(name string) collective {
	for _, c := range []struct {
		sub string
		c   collective
	}{{"allgather", allGather}, {"allreduce", allReduce}, {"reducescatter", reduceScatter}, {"alltoall", allToAll}, {"sendrecv", sendRecv}} {
		if strings.Contains(name, c.sub) {
			return c.c
		}
	}
	return noResult
}

// BufferLayout is the buffers of one run of a collective at one message
// size, laid out as executor_test.py lays them out (docs/semantics.md §5.1), and what they
// must hold afterwards (docs/semantics.md §5.3).
type BufferLayout struct {
	// Collective is the plan's collective name. allreduce, allgather,
	// reducescatter, alltoall and sendrecv have a checked result; any
	// other (test) only runs.
	Collective string
	NRanks     int
	// Size is the message size in bytes, as --size gives it: the
	// output of allgather, the input of every other collective.
	Size  uint64
	DType Numeric
	// InPlace aliases the buffers: allreduce and alltoall (and
	// equal-sized test buffers) use one buffer as input and output;
	// allgather's input is the rank's slice of its output; reducescatter's
	// output is the rank's slice of its input. sendrecv is never in place.
	InPlace bool
	Fill    FillMode
	// SplitMask groups sendrecv ranks by SplitMask+1: the seed rank of
	// rank r is r/(SplitMask+1), and each group receives from the group
	// before it.
	SplitMask int
	// Sizes are the per-rank byte sizes to instantiate the plan for.
	Sizes Sizes

	c collective
}

// Layout returns the layout of collective on nranks ranks for a message
// of size bytes of dt (docs/semantics.md §5.1): allreduce, alltoall and sendrecv have size
// bytes of input and output, allgather size/nranks bytes of input,
// reducescatter size/nranks bytes of output; any other collective (test
// plans) size bytes of each. The element count must divide among the
// ranks where the layout splits it.
func Layout(collective string, nranks int, size uint64, dt Numeric, inPlace bool) (*BufferLayout, error) {
	if nranks < 1 {
		return nil, fmt.Errorf("layout: %d ranks", nranks)
	}
	es := uint64(dt.Size())
	if size%es != 0 {
		return nil, fmt.Errorf("size %d is not a whole number of %d-byte %s elements", size, es, dt.Name())
	}
	l := &BufferLayout{Collective: collective, NRanks: nranks, Size: size, DType: dt, InPlace: inPlace, c: collectiveOf(collective)}
	l.Sizes = Sizes{Input: size, Output: size}
	switch l.c {
	case allGather, reduceScatter, allToAll:
		if (size/es)%uint64(nranks) != 0 {
			return nil, fmt.Errorf("size %d: %d elements do not divide among %d ranks", size, size/es, nranks)
		}
		switch l.c {
		case allGather:
			l.Sizes.Input = size / uint64(nranks)
		case reduceScatter:
			l.Sizes.Output = size / uint64(nranks)
		}
	case sendRecv:
		l.InPlace = false
	}
	return l, nil
}

// PlanLayout is Layout for plan. A plan without a defined result gets an
// output sized to keep rank 0's chunk size (size/input_chunks ×
// output_chunks, when input_chunks divides size), so that any message
// size the input chunking divides is valid.
func PlanLayout(plan *Plan, size uint64, dt Numeric, inPlace bool) (*BufferLayout, error) {
	l, err := Layout(plan.Collective, len(plan.GPUs), size, dt, inPlace)
	if err != nil {
		return nil, err
	}
	if l.c == noResult && len(plan.GPUs) > 0 {
		g := plan.GPUs[0]
		if in := uint64(g.InputChunks); in > 0 && g.OutputChunks > 0 && size%in == 0 {
			l.Sizes.Output = size / in * uint64(g.OutputChunks)
		}
	}
	return l, nil
}

// Checked reports whether the collective has a defined result.
func (l *BufferLayout) Checked() bool { return l.c != noResult }

// Reduces reports whether the collective sums (allreduce, reducescatter).
func (l *BufferLayout) Reduces() bool { return l.c == allReduce || l.c == reduceScatter }

// BusFactor is the nccl-tests bus-bandwidth factor (docs/semantics.md §5.5): 2(n−1)/n for
// allreduce, (n−1)/n for allgather, reducescatter and alltoall, 1 for
// sendrecv and test plans.
func (l *BufferLayout) BusFactor() float64 {
	n := float64(l.NRanks)
	switch l.c {
	case allReduce:
		return 2 * (n - 1) / n
	case allGather, reduceScatter, allToAll:
		return (n - 1) / n
	}
	return 1
}

// Slots is the number of buffer sets executor_test.py alternates: 2 for
// sendrecv (iteration i uses set i mod 2), 1 otherwise.
func (l *BufferLayout) Slots() int {
	if l.c == sendRecv {
		return 2
	}
	return 1
}

// Alloc returns one zeroed buffer set: every rank's input and output,
// aliased as InPlace says. Every allocation starts 8-byte aligned, as
// device allocations are (LL packet words are accessed atomically), so
// that the alignment of an access depends on its offset only (see
// CheckLaunch).
func (l *BufferLayout) Alloc() []RankBuffers {
	bufs := make([]RankBuffers, l.NRanks)
	in, out := l.Sizes.Input, l.Sizes.Output
	for r := range bufs {
		b := &bufs[r]
		switch {
		case !l.InPlace:
			b.Input, b.Output = alignedBytes(in), alignedBytes(out)
		case l.c == allGather:
			b.Output = alignedBytes(out)
			lo := uint64(r) * in
			b.Input = b.Output[lo : lo+in : lo+in]
		case l.c == reduceScatter:
			b.Input = alignedBytes(in)
			lo := uint64(r) * out
			b.Output = b.Input[lo : lo+out : lo+out]
		case in == out:
			b.Input = alignedBytes(in)
			b.Output = b.Input
		default:
			b.Input, b.Output = alignedBytes(in), alignedBytes(out)
		}
	}
	return bufs
}

// RankBytes is the size of one memory region that holds rank r's input
// and output as Place lays them out (the two are aliased as Alloc
// aliases them).
func (l *BufferLayout) RankBytes(r int) uint64 {
	in, out := l.Sizes.Input, l.Sizes.Output
	switch {
	case !l.InPlace:
		return align8(in) + out
	case l.c == allGather:
		return out
	case l.c == reduceScatter:
		return in
	case in == out:
		return in
	}
	return align8(in) + out
}

// Place lays out rank r's input and output in mem (RankBytes(r) bytes,
// 8-byte aligned, e.g. a shared mapping), aliased as Alloc aliases them.
func (l *BufferLayout) Place(r int, mem []byte) (RankBuffers, error) {
	if need := l.RankBytes(r); uint64(len(mem)) < need {
		return RankBuffers{}, fmt.Errorf("layout: rank %d needs %d bytes, the region has %d", r, need, len(mem))
	}
	in, out := l.Sizes.Input, l.Sizes.Output
	sep := func() RankBuffers {
		o := align8(in)
		return RankBuffers{Input: mem[:in:in], Output: mem[o : o+out : o+out]}
	}
	switch {
	case !l.InPlace:
		return sep(), nil
	case l.c == allGather:
		lo := uint64(r) * in
		return RankBuffers{Input: mem[lo : lo+in : lo+in], Output: mem[:out:out]}, nil
	case l.c == reduceScatter:
		lo := uint64(r) * out
		return RankBuffers{Input: mem[:in:in], Output: mem[lo : lo+out : lo+out]}, nil
	case in == out:
		return RankBuffers{Input: mem[:in:in], Output: mem[:in:in]}, nil
	}
	return sep(), nil
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// CheckRank is Check for one rank's output only (a process that holds
// one rank of a multi-process run): the number of wrong elements of
// rank's output after iteration seq, ErrNoCheck without a defined result.
func (l *BufferLayout) CheckRank(out []byte, rank, seq int) (uint64, error) {
	if l.c == noResult {
		return 0, ErrNoCheck
	}
	if rank < 0 || rank >= l.NRanks {
		return 0, fmt.Errorf("check: rank %d of %d", rank, l.NRanks)
	}
	if l.c == sendRecv && (l.SplitMask < 0 || l.NRanks%(l.SplitMask+1) != 0) {
		return 0, fmt.Errorf("check: split mask %d does not group %d ranks evenly", l.SplitMask, l.NRanks)
	}
	want := l.Expected(rank, seq)
	if uint64(len(out)) != uint64(len(want)) {
		return 0, fmt.Errorf("check: rank %d output has %d bytes, want %d", rank, len(out), len(want))
	}
	if l.Reduces() {
		return l.near(out, want), nil
	}
	return l.exact(out, want), nil
}

// alignedBytes returns n zeroed bytes starting at an 8-byte boundary.
func alignedBytes(n uint64) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// seedRank is the generator rank of rank r.
func (l *BufferLayout) seedRank(r int) int { return r / (l.SplitMask + 1) }

// FillInputs fills every rank's input for iteration seq.
func (l *BufferLayout) FillInputs(bufs []RankBuffers, seq int) {
	for r := range bufs {
		FillWith(bufs[r].Input, l.DType, l.seedRank(r), seq, l.Fill)
	}
}

// FillRank fills rank r's input (one process's share of FillInputs).
func (l *BufferLayout) FillRank(in []byte, r, seq int) {
	FillWith(in, l.DType, l.seedRank(r), seq, l.Fill)
}

// input returns the fill of seed rank r for iteration seq.
func (l *BufferLayout) input(r, seq int) []byte {
	b := make([]byte, l.Sizes.Input)
	FillWith(b, l.DType, r, seq, l.Fill)
	return b
}

// sum is the reference reduction: the fills of ranks 0..n-1 added in
// rank order, in T (docs/semantics.md §5.3).
func (l *BufferLayout) sum(seq int) []byte {
	acc := l.input(0, seq)
	for r := 1; r < l.NRanks; r++ {
		l.DType.Add(acc, acc, l.input(l.seedRank(r), seq))
	}
	return acc
}

// Expected returns what rank's output must hold after iteration seq
// (docs/semantics.md §5.3), or nil for a collective without a defined result.
func (l *BufferLayout) Expected(rank, seq int) []byte {
	in, out := l.Sizes.Input, l.Sizes.Output
	n := uint64(l.NRanks)
	me := uint64(rank)
	switch l.c {
	case allReduce:
		return l.sum(seq)
	case reduceScatter:
		return l.sum(seq)[me*out : (me+1)*out]
	case allGather:
		e := make([]byte, 0, out)
		for r := 0; r < l.NRanks; r++ {
			e = append(e, l.input(r, seq)...)
		}
		return e
	case allToAll:
		m := in / n
		e := make([]byte, 0, out)
		for r := 0; r < l.NRanks; r++ {
			e = append(e, l.input(r, seq)[me*m:(me+1)*m]...)
		}
		return e
	case sendRecv:
		return l.input(l.prevGroup(rank), seq)
	}
	return nil
}

// prevGroup is the sendrecv group rank receives from.
func (l *BufferLayout) prevGroup(rank int) int {
	groups := l.NRanks / (l.SplitMask + 1)
	return (l.seedRank(rank) - 1 + groups) % groups
}

// Check compares every rank's output after iteration seq with the
// expected result and returns the number of wrong elements per rank.
// Data movement must be bit-exact; sums pass when
// |out − E| ≤ eps·n·(1 + |E|) with Numeric.Epsilon (exact for int32).
// For a collective without a defined result it returns ErrNoCheck.
func (l *BufferLayout) Check(bufs []RankBuffers, seq int) ([]uint64, error) {
	if len(bufs) != l.NRanks {
		return nil, fmt.Errorf("check: %d buffer sets for %d ranks", len(bufs), l.NRanks)
	}
	wrong := make([]uint64, l.NRanks)
	in, out := l.Sizes.Input, l.Sizes.Output
	n := uint64(l.NRanks)
	forRanks := func(f func(me int)) {
		var wg sync.WaitGroup
		for me := range bufs {
			wg.Go(func() { f(me) })
		}
		wg.Wait()
	}
	switch l.c {
	case noResult:
		return nil, ErrNoCheck
	case allReduce, reduceScatter:
		e := l.sum(seq)
		forRanks(func(me int) {
			want := e
			if l.c == reduceScatter {
				want = e[uint64(me)*out : uint64(me+1)*out]
			}
			wrong[me] = l.near(bufs[me].Output, want)
		})
	case allGather:
		for r := 0; r < l.NRanks; r++ {
			f := l.input(r, seq)
			lo := uint64(r) * in
			forRanks(func(me int) { wrong[me] += l.exact(bufs[me].Output[lo:lo+in], f) })
		}
	case allToAll:
		m := in / n
		for r := 0; r < l.NRanks; r++ {
			f := l.input(r, seq)
			forRanks(func(me int) {
				wrong[me] += l.exact(bufs[me].Output[uint64(r)*m:uint64(r+1)*m], f[uint64(me)*m:uint64(me+1)*m])
			})
		}
	case sendRecv:
		if l.SplitMask < 0 || l.NRanks%(l.SplitMask+1) != 0 {
			return nil, fmt.Errorf("check: split mask %d does not group %d ranks evenly", l.SplitMask, l.NRanks)
		}
		groups := l.NRanks / (l.SplitMask + 1)
		fills := make([][]byte, groups)
		for g := range fills {
			fills[g] = l.input(g, seq)
		}
		forRanks(func(me int) { wrong[me] = l.exact(bufs[me].Output, fills[l.prevGroup(me)]) })
	}
	return wrong, nil
}

// exact counts the elements of got that differ from want in any bit.
func (l *BufferLayout) exact(got, want []byte) uint64 {
	if bytes.Equal(got, want) {
		return 0
	}
	size := l.DType.Size()
	var wrong uint64
	for i := 0; i+size <= len(want); i += size {
		if !bytes.Equal(got[i:i+size], want[i:i+size]) {
			wrong++
		}
	}
	return wrong
}

// near counts the elements of got farther from want than the reduction
// tolerance.
func (l *BufferLayout) near(got, want []byte) uint64 {
	if bytes.Equal(got, want) {
		return 0
	}
	dt := l.DType
	tol := dt.Epsilon() * float64(l.NRanks)
	far := func(o, e float64) bool { return !(math.Abs(o-e) <= tol*(1+math.Abs(e))) }
	var wrong uint64
	// Bit-identical elements pass without conversion; the element types
	// get loops of their own.
	switch dt {
	case Float16, BFloat16:
		conv := F16ToF32
		if dt == BFloat16 {
			conv = BF16ToF32
		}
		for i := 0; i+1 < len(want); i += 2 {
			g, w := binary.LittleEndian.Uint16(got[i:]), binary.LittleEndian.Uint16(want[i:])
			if g != w && far(float64(conv(g)), float64(conv(w))) {
				wrong++
			}
		}
	case Float32:
		for i := 0; i+3 < len(want); i += 4 {
			g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:])
			if g != w && far(float64(math.Float32frombits(g)), float64(math.Float32frombits(w))) {
				wrong++
			}
		}
	default:
		size := dt.Size()
		for i := 0; i < len(want)/size; i++ {
			if !bytes.Equal(got[i*size:(i+1)*size], want[i*size:(i+1)*size]) && far(dt.Float64(got, i), dt.Float64(want, i)) {
				wrong++
			}
		}
	}
	return wrong
}

// WrongElement is an output element that differs from the expected
// result.
type WrongElement struct {
	Rank int
	// Offset is the element's byte offset in the rank's output.
	Offset    uint64
	Want, Got float64
}

// Wrong returns up to max elements of rank's output that Check counts as
// wrong after iteration seq, in offset order.
func (l *BufferLayout) Wrong(bufs []RankBuffers, seq, rank, max int) []WrongElement {
	want := l.Expected(rank, seq)
	if want == nil || rank < 0 || rank >= len(bufs) {
		return nil
	}
	got := bufs[rank].Output
	dt := l.DType
	size := dt.Size()
	tol := dt.Epsilon() * float64(l.NRanks)
	var out []WrongElement
	for i := 0; (i+1)*size <= len(want) && (i+1)*size <= len(got) && len(out) < max; i++ {
		g, w := got[i*size:(i+1)*size], want[i*size:(i+1)*size]
		if bytes.Equal(g, w) {
			continue
		}
		gv, wv := dt.Float64(got, i), dt.Float64(want, i)
		if l.Reduces() && math.Abs(gv-wv) <= tol*(1+math.Abs(wv)) {
			continue
		}
		out = append(out, WrongElement{Rank: rank, Offset: uint64(i * size), Want: wv, Got: gv})
	}
	return out
}

// OutputInInput maps a byte offset of rank's output to the same byte of
// its input when the layout is in place and the two share it (allreduce:
// the same buffer; allgather: the input is the rank's slice of the
// output; reduce-scatter: the output is the rank's slice of the input).
func (l *BufferLayout) OutputInInput(rank int, off uint64) (uint64, bool) {
	if !l.InPlace {
		return 0, false
	}
	in, out := l.Sizes.Input, l.Sizes.Output
	switch l.c {
	case allGather:
		lo := uint64(rank) * in
		if off >= lo && off < lo+in {
			return off - lo, true
		}
		return 0, false
	case reduceScatter:
		return off + uint64(rank)*out, true
	case sendRecv:
		return 0, false
	}
	return off, in == out
}
