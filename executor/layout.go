package executor

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/mscclgo/mscclgo/plan"
)

// This file lays out the buffers of one run of a collective at one
// message size, as MSCCL++'s python/test/executor_test.py lays them out
// (docs/semantics.md §5.1). What the inputs are filled with and what the
// outputs must hold afterwards are package harness's.

// CollectiveKind is the class of a collective by its defined result:
// what its buffers are and what they must hold afterwards.
type CollectiveKind uint8

// The collective kinds. TestCollective is any collective without a
// defined result (the "test" plans of MSCCL++'s unit tests): it is only
// run, for deadlocks and races.
const (
	TestCollective CollectiveKind = iota
	AllReduce
	AllGather
	ReduceScatter
	AllToAll
	SendRecv
)

// collectiveOf matches the plan's collective name as executor_test.py
// does, by substring.
func collectiveOf(name string) CollectiveKind {
	for _, c := range []struct {
		sub string
		c   CollectiveKind
	}{
		{plan.AllGatherCollective, AllGather},
		{plan.AllReduceCollective, AllReduce},
		{plan.ReduceScatterCollective, ReduceScatter},
		{plan.AllToAllCollective, AllToAll},
		{plan.SendRecvCollective, SendRecv},
	} {
		if strings.Contains(name, c.sub) {
			return c.c
		}
	}
	return TestCollective
}

// BufferLayout is the buffers of one run of a collective at one message
// size, laid out as executor_test.py lays them out (docs/semantics.md §5.1).
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
	// Sizes are the per-rank byte sizes to instantiate the plan for.
	Sizes Sizes

	c CollectiveKind
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
		return nil, &plan.PlanError{Err: plan.ErrSize, Sizes: []uint64{size}, Msg: fmt.Sprintf("size %d is not a whole number of %d-byte %s elements", size, es, dt.Name())}
	}
	l := &BufferLayout{Collective: collective, NRanks: nranks, Size: size, DType: dt, InPlace: inPlace, c: collectiveOf(collective)}
	l.Sizes = Sizes{Input: size, Output: size}
	switch l.c {
	case AllGather, ReduceScatter, AllToAll:
		if (size/es)%uint64(nranks) != 0 {
			return nil, &plan.PlanError{Err: plan.ErrSize, Sizes: []uint64{size}, Msg: fmt.Sprintf("size %d: %d elements do not divide among %d ranks", size, size/es, nranks)}
		}
		switch l.c {
		case AllGather:
			l.Sizes.Input = size / uint64(nranks)
		case ReduceScatter:
			l.Sizes.Output = size / uint64(nranks)
		}
	case SendRecv:
		l.InPlace = false
	}
	return l, nil
}

// PlanLayout is Layout for plan. A plan without a defined result gets an
// output sized to keep rank 0's chunk size (size/input_chunks ×
// output_chunks, when input_chunks divides size), so that any message
// size the input chunking divides is valid.
func PlanLayout(p *plan.Plan, size uint64, dt Numeric, inPlace bool) (*BufferLayout, error) {
	l, err := Layout(p.Collective, len(p.GPUs), size, dt, inPlace)
	if err != nil {
		return nil, err
	}
	if l.c == TestCollective && len(p.GPUs) > 0 {
		g := p.GPUs[0]
		if in := uint64(g.InputChunks); in > 0 && g.OutputChunks > 0 && size%in == 0 {
			l.Sizes.Output = size / in * uint64(g.OutputChunks)
		}
	}
	return l, nil
}

// Kind returns the class of the layout's collective.
func (l *BufferLayout) Kind() CollectiveKind { return l.c }

// Checked reports whether the collective has a defined result.
func (l *BufferLayout) Checked() bool { return l.c != TestCollective }

// Reduces reports whether the collective sums (allreduce, reducescatter).
func (l *BufferLayout) Reduces() bool { return l.c == AllReduce || l.c == ReduceScatter }

// BusFactor is the nccl-tests bus-bandwidth factor (docs/semantics.md §5.5): 2(n−1)/n for
// allreduce, (n−1)/n for allgather, reducescatter and alltoall, 1 for
// sendrecv and test plans.
func (l *BufferLayout) BusFactor() float64 {
	n := float64(l.NRanks)
	switch l.c {
	case AllReduce:
		return 2 * (n - 1) / n
	case AllGather, ReduceScatter, AllToAll:
		return (n - 1) / n
	}
	return 1
}

// Slots is the number of buffer sets executor_test.py alternates: 2 for
// sendrecv (iteration i uses set i mod 2), 1 otherwise.
func (l *BufferLayout) Slots() int {
	if l.c == SendRecv {
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
			b.Input, b.Output = AlignedBytes(in), AlignedBytes(out)
		case l.c == AllGather:
			b.Output = AlignedBytes(out)
			lo := uint64(r) * in
			b.Input = b.Output[lo : lo+in : lo+in]
		case l.c == ReduceScatter:
			b.Input = AlignedBytes(in)
			lo := uint64(r) * out
			b.Output = b.Input[lo : lo+out : lo+out]
		case in == out:
			b.Input = AlignedBytes(in)
			b.Output = b.Input
		default:
			b.Input, b.Output = AlignedBytes(in), AlignedBytes(out)
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
	case l.c == AllGather:
		return out
	case l.c == ReduceScatter:
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
	i, o := l.Offsets(r)
	return RankBuffers{Input: mem[i : i+in : i+in], Output: mem[o : o+out : o+out]}, nil
}

// Offsets returns where rank r's input and output start in its region
// of RankBytes(r) bytes, as Place lays them out: an in-place plan's two
// buffers share memory, an out-of-place plan's follow each other.
func (l *BufferLayout) Offsets(r int) (in, out uint64) {
	ni, no := l.Sizes.Input, l.Sizes.Output
	switch {
	case !l.InPlace:
		return 0, align8(ni)
	case l.c == AllGather:
		return uint64(r) * ni, 0
	case l.c == ReduceScatter:
		return 0, uint64(r) * no
	case ni == no:
		return 0, 0
	}
	return 0, align8(ni)
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// AlignedBytes returns n zeroed bytes starting at an 8-byte boundary, as
// device allocations start.
func AlignedBytes(n uint64) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
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
	case AllGather:
		lo := uint64(rank) * in
		if off >= lo && off < lo+in {
			return off - lo, true
		}
		return 0, false
	case ReduceScatter:
		return off + uint64(rank)*out, true
	case SendRecv:
		return 0, false
	}
	return off, in == out
}

// OwnLayout is the buffer layout of the instance's collective with the
// instance's sizes, in place or not: the layout a session that places
// its own buffers (one process over several devices) opens for.
func (p *Prepared) OwnLayout(inPlace bool) (*BufferLayout, error) {
	inst := p.Inst
	num, ok := p.Opts.DType.(Numeric)
	if !ok {
		return nil, fmt.Errorf("data type %s has no buffer layout", p.Opts.DType.Name())
	}
	size := inst.Sizes.Input
	if inst.Plan.Collective == "allgather" {
		size = inst.Sizes.Output
	}
	l, err := PlanLayout(inst.Plan, size, num, inPlace)
	if err != nil {
		return nil, err
	}
	l.Sizes = inst.Sizes
	return l, nil
}
