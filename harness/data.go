package harness

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// This file reproduces the data side of MSCCL++'s python/test/
// executor_test.py (docs/semantics.md §5): the fill generator, the
// expected results and their tolerance. The buffers themselves are
// executor.BufferLayout's.

// ErrNoCheck is returned by Layout.Check for collectives without a
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
func Fill(dst []byte, dt executor.Numeric, rank, seq int) {
	FillWith(dst, dt, rank, seq, ReferenceFill)
}

// FillWith is Fill with a choice of FillMode.
func FillWith(dst []byte, dt executor.Numeric, rank, seq int, mode FillMode) {
	size := dt.Size()
	if size != 2 && size != 4 {
		panic(fmt.Sprintf("harness: fill of %d-byte elements", size))
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

// Layout is a buffer layout with the data of a run: what the inputs are
// filled with and what the outputs must hold afterwards
// (docs/semantics.md §5.3).
type Layout struct {
	*executor.BufferLayout
	Fill FillMode
	// SplitMask groups sendrecv ranks by SplitMask+1: the seed rank of
	// rank r is r/(SplitMask+1), and each group receives from the group
	// before it.
	SplitMask int
	// Reduce is the reduction of an allreduce or reducescatter run
	// (executor.Options.Reduce): the expected result is the ranks' fills
	// combined with it in rank order.
	Reduce executor.ReduceOp
}

// combine is the pairwise reduction of l's type and op; nil when the
// type cannot reduce with the op (executor.CheckReduce).
func (l *Layout) combine() func(dst, a, b []byte) {
	if executor.CheckReduce(l.DType, l.Reduce) != nil {
		return nil
	}
	return executor.Combiner(l.DType, l.Reduce)
}

// tolerant reports whether l's outputs are compared within the
// reduction tolerance: the results of a sum or a product depend on the
// order of the operations; a max or a min, data movement and int32
// results do not, and must be bit-exact (int32's tolerance is 0 anyway).
func (l *Layout) tolerant() bool {
	return l.Reduces() && (l.Reduce == executor.ReduceSum || l.Reduce == executor.ReduceProd)
}

// PlanLayout is executor.PlanLayout with the reference fill.
func PlanLayout(p *plan.Plan, size uint64, dt executor.Numeric, inPlace bool) (*Layout, error) {
	l, err := executor.PlanLayout(p, size, dt, inPlace)
	if err != nil {
		return nil, err
	}
	return &Layout{BufferLayout: l}, nil
}

// NewLayout is executor.Layout with the reference fill.
func NewLayout(collective string, nranks int, size uint64, dt executor.Numeric, inPlace bool) (*Layout, error) {
	l, err := executor.Layout(collective, nranks, size, dt, inPlace)
	if err != nil {
		return nil, err
	}
	return &Layout{BufferLayout: l}, nil
}

// CheckRank is Check for one rank's output only (a process that holds
// one rank of a multi-process run): the number of wrong elements of
// rank's output after iteration seq, ErrNoCheck without a defined result.
func (l *Layout) CheckRank(out []byte, rank, seq int) (uint64, error) {
	if l.Kind() == executor.TestCollective {
		return 0, ErrNoCheck
	}
	if rank < 0 || rank >= l.NRanks {
		return 0, fmt.Errorf("check: rank %d of %d", rank, l.NRanks)
	}
	if l.Kind() == executor.SendRecv && (l.SplitMask < 0 || l.NRanks%(l.SplitMask+1) != 0) {
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

// seedRank is the generator rank of rank r.
func (l *Layout) seedRank(r int) int { return r / (l.SplitMask + 1) }

// FillInputs fills every rank's input for iteration seq.
func (l *Layout) FillInputs(bufs []executor.RankBuffers, seq int) {
	for r := range bufs {
		FillWith(bufs[r].Input, l.DType, l.seedRank(r), seq, l.Fill)
	}
}

// FillRank fills rank r's input (one process's share of FillInputs).
func (l *Layout) FillRank(in []byte, r, seq int) {
	FillWith(in, l.DType, l.seedRank(r), seq, l.Fill)
}

// input returns the fill of seed rank r for iteration seq.
func (l *Layout) input(r, seq int) []byte {
	b := make([]byte, l.Sizes.Input)
	FillWith(b, l.DType, r, seq, l.Fill)
	return b
}

// sum is the reference reduction: the fills of ranks 0..n-1 combined
// with l.Reduce (added, for a sum) in rank order, in T
// (docs/semantics.md §5.3); nil when T cannot reduce with l.Reduce.
func (l *Layout) sum(seq int) []byte {
	comb := l.combine()
	if comb == nil {
		return nil
	}
	acc := l.input(0, seq)
	for r := 1; r < l.NRanks; r++ {
		comb(acc, acc, l.input(l.seedRank(r), seq))
	}
	return acc
}

// Expected returns what rank's output must hold after iteration seq
// (docs/semantics.md §5.3), or nil for a collective without a defined result.
func (l *Layout) Expected(rank, seq int) []byte {
	in, out := l.Sizes.Input, l.Sizes.Output
	n := uint64(l.NRanks)
	me := uint64(rank)
	switch l.Kind() {
	case executor.AllReduce:
		return l.sum(seq)
	case executor.ReduceScatter:
		e := l.sum(seq)
		if e == nil {
			return nil
		}
		return e[me*out : (me+1)*out]
	case executor.AllGather:
		e := make([]byte, 0, out)
		for r := 0; r < l.NRanks; r++ {
			e = append(e, l.input(r, seq)...)
		}
		return e
	case executor.AllToAll:
		m := in / n
		e := make([]byte, 0, out)
		for r := 0; r < l.NRanks; r++ {
			e = append(e, l.input(r, seq)[me*m:(me+1)*m]...)
		}
		return e
	case executor.SendRecv:
		return l.input(l.prevGroup(rank), seq)
	}
	return nil
}

// prevGroup is the sendrecv group rank receives from.
func (l *Layout) prevGroup(rank int) int {
	groups := l.NRanks / (l.SplitMask + 1)
	return (l.seedRank(rank) - 1 + groups) % groups
}

// Check compares every rank's output after iteration seq with the
// expected result and returns the number of wrong elements per rank.
// Data movement must be bit-exact; sums pass when
// |out − E| ≤ eps·n·(1 + |E|) with Numeric.Epsilon (exact for int32).
// For a collective without a defined result it returns ErrNoCheck.
func (l *Layout) Check(bufs []executor.RankBuffers, seq int) ([]uint64, error) {
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
	switch l.Kind() {
	case executor.TestCollective:
		return nil, ErrNoCheck
	case executor.AllReduce, executor.ReduceScatter:
		if err := executor.CheckReduce(l.DType, l.Reduce); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		e := l.sum(seq)
		forRanks(func(me int) {
			want := e
			if l.Kind() == executor.ReduceScatter {
				want = e[uint64(me)*out : uint64(me+1)*out]
			}
			if l.tolerant() {
				wrong[me] = l.near(bufs[me].Output, want)
			} else {
				wrong[me] = l.exact(bufs[me].Output, want)
			}
		})
	case executor.AllGather:
		for r := 0; r < l.NRanks; r++ {
			f := l.input(r, seq)
			lo := uint64(r) * in
			forRanks(func(me int) { wrong[me] += l.exact(bufs[me].Output[lo:lo+in], f) })
		}
	case executor.AllToAll:
		m := in / n
		for r := 0; r < l.NRanks; r++ {
			f := l.input(r, seq)
			forRanks(func(me int) {
				wrong[me] += l.exact(bufs[me].Output[uint64(r)*m:uint64(r+1)*m], f[uint64(me)*m:uint64(me+1)*m])
			})
		}
	case executor.SendRecv:
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
func (l *Layout) exact(got, want []byte) uint64 {
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
func (l *Layout) near(got, want []byte) uint64 {
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
	case executor.Float16, executor.BFloat16:
		conv := executor.F16ToF32
		if dt == executor.BFloat16 {
			conv = executor.BF16ToF32
		}
		for i := 0; i+1 < len(want); i += 2 {
			g, w := binary.LittleEndian.Uint16(got[i:]), binary.LittleEndian.Uint16(want[i:])
			if g != w && far(float64(conv(g)), float64(conv(w))) {
				wrong++
			}
		}
	case executor.Float32:
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
	// Writers are the ops that write the element's byte (Writers), in
	// the reports of Run; Wrong leaves them empty.
	Writers []string
}

// Wrong returns up to max elements of rank's output that Check counts as
// wrong after iteration seq, in offset order.
func (l *Layout) Wrong(bufs []executor.RankBuffers, seq, rank, max int) []WrongElement {
	want := l.Expected(rank, seq)
	if want == nil || rank < 0 || rank >= len(bufs) {
		return nil
	}
	return l.wrongIn(bufs[rank].Output, want, rank, max)
}

// wrongIn returns up to max elements of got, rank's output, that differ
// from want by more than Check allows, in offset order.
func (l *Layout) wrongIn(got, want []byte, rank, max int) []WrongElement {
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
		if l.tolerant() && math.Abs(gv-wv) <= tol*(1+math.Abs(wv)) {
			continue
		}
		out = append(out, WrongElement{Rank: rank, Offset: uint64(i * size), Want: wv, Got: gv})
	}
	return out
}
