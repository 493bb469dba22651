package harness

// memory.go holds the estimate of the memory a run of an instance
// allocates (EstimateMemory, Footprint), computed from the instance and
// the buffer layout before anything size-dependent is allocated, so that
// `mscclgo run` can refuse a run above its memory budget and `mscclgo
// install` can schedule validations by size.

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/memlimit"
	"github.com/mscclgo/mscclgo/plan"
)

// MemoryOptions say what a run allocates besides the buffers and scratch.
type MemoryOptions struct {
	// Iters is the number of launches per size (warm-up included); it
	// sizes the generator tables, whose rows get one column per launch.
	Iters int
	// Race: the CPU backend's race detector keeps a shadow of the
	// accesses of each launch.
	Race bool
	// Tables: the inputs are filled and the outputs checked from a
	// Checker's generator and expected-result tables (mscclgo run and
	// install), for collectives with a defined result. Without it the
	// caller fills and checks with the BufferLayout's methods, whose
	// temporaries are not counted.
	Tables bool
	// DeviceCopies: a device backend whose device memory is host memory
	// (gpu-emu) holds a copy of every rank's buffers and its own scratch.
	DeviceCopies bool
}

// MemoryUse is an estimate of the bytes one run allocates, by part. The
// parts are host memory; a real GPU's device memory is not counted.
type MemoryUse struct {
	// Ranks is the number of ranks.
	Ranks int
	// Buffers are every rank's input and output, for every buffer set
	// (sendrecv alternates two), aliased as the layout says.
	Buffers uint64
	// Scratch is every rank's scratch.
	Scratch uint64
	// Tables are the generator and expected-result tables of a Checker.
	Tables uint64
	// Race is the race detector's shadow and vector clocks: those of a
	// launch, and those of the launch before, which may not have been
	// collected yet.
	Race uint64
	// Device are the device copies of the buffers and scratch and the
	// scratch of the CPU backend's launch check (MemoryOptions).
	Device uint64
	// Instance are the per-op tables (the instance, the thread blocks'
	// working buffers and stacks) and the Go runtime's own memory.
	Instance uint64
}

// Total returns the sum of the parts.
func (m MemoryUse) Total() uint64 {
	return m.Buffers + m.Scratch + m.Tables + m.Race + m.Device + m.Instance
}

// String describes the estimate: "8 ranks × 8.0 GiB (4.0 GiB of buffers,
// 4.0 GiB of scratch) + 8.0 GiB of generator and expected-result tables".
func (m MemoryUse) String() string {
	var b strings.Builder
	n := uint64(max(m.Ranks, 1))
	ranks := "ranks"
	if m.Ranks == 1 {
		ranks = "rank"
	}
	fmt.Fprintf(&b, "%d %s × %s", m.Ranks, ranks, executor.FormatBytes((m.Buffers+m.Scratch)/n))
	if m.Scratch > 0 {
		fmt.Fprintf(&b, " (%s of buffers, %s of scratch)", executor.FormatBytes(m.Buffers/n), executor.FormatBytes(m.Scratch/n))
	} else {
		b.WriteString(" of buffers")
	}
	for _, p := range []struct {
		n    uint64
		what string
	}{
		{m.Tables, "generator and expected-result tables"},
		{m.Race, "race detector shadow"},
		{m.Device, "device copies"},
		{m.Instance, "op tables and runtime"},
	} {
		if p.n >= 1<<20 {
			fmt.Fprintf(&b, " + %s of %s", executor.FormatBytes(p.n), p.what)
		}
	}
	return b.String()
}

// Per-item costs of the estimate, in bytes: a race detector access (its
// record and shadow segment, before its vector clock), a thread block's
// working buffers and goroutine stack, the packets the CPU backend
// handles as one race detector access, and the process's own memory
// (runtime, binary, the loaded plan of a small run).
const (
	raceAccessBytes = 256
	tbWorkBytes     = 2*(64<<10) + 16<<10
	racePacketBlock = 2048
	runtimeBytes    = 32 << 20
)

// EstimateMemory estimates what a run of inst with the buffers of l
// allocates: the buffers Alloc makes (every buffer set), every rank's
// scratch, and what o adds. It allocates nothing, so a caller can refuse a
// run before it allocates.
func EstimateMemory(inst *executor.Instance, l *executor.BufferLayout, o MemoryOptions) MemoryUse {
	m := MemoryUse{Ranks: l.NRanks}
	set := uint64(0)
	in, out := round8(l.Sizes.Input), round8(l.Sizes.Output)
	for r := 0; r < l.NRanks; r++ {
		switch {
		case !l.InPlace:
			set += in + out
		case l.Kind() == executor.AllGather:
			set += out
		case l.Kind() == executor.ReduceScatter:
			set += in
		case l.Sizes.Input == l.Sizes.Output:
			set += in
		default:
			set += in + out
		}
	}
	m.Buffers = set * uint64(l.Slots())
	scratch := round8(inst.ScratchBytes) * uint64(len(inst.Ranks))
	m.Scratch = scratch
	if o.Tables {
		m.Tables = tableBytes(l, o.Iters)
	}
	if o.DeviceCopies {
		m.Device += set + scratch
	}
	ops, regions, tbs, accesses := 0, 0, 0, uint64(0)
	payload := uint64(4) // LL8, the most packets per byte
	for r := range inst.Ranks {
		for _, tb := range inst.Ranks[r].TBs {
			tbs++
			for i := range tb.Ops {
				op := &tb.Ops[i]
				ops++
				regions += len(op.Src) + len(op.Dst)
				if op.Type != plan.OpPipeline {
					accesses += opAccesses(&inst.Ranks[r], op, payload)
					continue
				}
				for j := range op.Body {
					b := &op.Body[j]
					ops++
					regions += len(b.Src) + len(b.Dst)
					accesses += uint64(max(op.Iterations, 0)) * opAccesses(&inst.Ranks[r], b, payload)
				}
			}
		}
	}
	m.Instance = uint64(ops)*uint64(unsafe.Sizeof(executor.OpInstance{})) + uint64(regions)*uint64(unsafe.Sizeof(executor.Region{})) +
		uint64(tbs)*tbWorkBytes + runtimeBytes
	if o.Race {
		// Every access leaves a record and a shadow segment; packet
		// writes keep a vector clock of one word per thread block and
		// proxy. Segments never outnumber the bytes touched.
		threads := uint64(tbs + len(inst.Ranks))
		bytes := m.Buffers + m.Scratch
		m.Race = min(accesses, bytes) * (raceAccessBytes + 4*threads)
		if o.Iters > 1 {
			m.Race *= 2
		}
	}
	return m
}

// opAccesses counts the race detector accesses of one execution of op:
// one per operand (per member for switch operands), and for packet ops
// one per operand and block of racePacketBlock packets.
func opAccesses(ri *executor.RankInstance, op *executor.OpInstance, payload uint64) uint64 {
	n := uint64(0)
	members := func(r executor.Region) uint64 {
		if r.Switch >= 0 && r.Switch < len(ri.Switches) {
			return uint64(len(ri.Switches[r.Switch].Ranks))
		}
		return 1
	}
	for i, r := range op.Src {
		if plan.SrcKind(op.Type, i) == plan.SwitchOperand {
			n += members(r)
		} else {
			n++
		}
	}
	for i, r := range op.Dst {
		if plan.DstKind(op.Type, i) == plan.SwitchOperand {
			n += members(r)
		} else {
			n++
		}
	}
	if op.Type.Packet() && len(op.Src) > 0 {
		blocks := op.Src[0].Size/payload/racePacketBlock + 1
		n *= blocks
	}
	return n
}

// tableBytes estimates a Checker's tables for l with iters launches: the
// generator table (every input element, or of the larger buffer for
// reductions, one column per generator thread plus the shifts of the
// ranks and launches), and for reductions the table of reference sums,
// of the same shape. A table
// that grows is rebuilt beside the old one, so the generator table is
// counted twice when the shifts outgrow its first headroom.
func tableBytes(l *executor.BufferLayout, iters int) uint64 {
	if !l.Checked() {
		return 0 // nothing to check: filled in place, without a table
	}
	es := uint64(l.DType.Size())
	// The generator serves the inputs (and the outputs of data movement,
	// which are windows of it); the sums serve the larger buffer.
	elems := l.Sizes.Input / max(es, 1)
	if l.Reduces() {
		elems = max(l.Sizes.Input, l.Sizes.Output) / max(es, 1)
	}
	rows := (elems + fillThreads - 1) / fillThreads
	shift := uint64(l.NRanks + max(iters, 1) + genHeadroom)
	gen := rows * (fillThreads + shift) * es
	t := gen
	if uint64(l.NRanks+max(iters, 1)) > genHeadroom {
		t += gen
	}
	if l.Reduces() {
		t += rows * (fillThreads + uint64(max(iters, 1)) + sumHeadroom) * es
	}
	return t
}

func round8(n uint64) uint64 { return (n + 7) &^ 7 }

// Footprint is EstimateMemory for plan at message size bytes of dt, laid
// out as the plan's inplace field says: PlanLayout and Instantiate
// (which allocates per op, never per byte) followed by the estimate.
func Footprint(p *plan.Plan, size uint64, dt executor.ElemType, o MemoryOptions) (MemoryUse, error) {
	l, err := executor.PlanLayout(p, size, dt, p.Inplace)
	if err != nil {
		return MemoryUse{}, err
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		return MemoryUse{}, err
	}
	return EstimateMemory(inst, l, o), nil
}

// fallbackBudget is the budget when the machine's memory cannot be read.
const fallbackBudget = 8 << 30

// DefaultBudget is the memory budget of a run when none is given (mscclgo
// run without --max-memory), and where it comes from: half the machine's
// memory ("half of this machine's 23.5 GiB"), or less when what the
// process may really still use (an address-space limit, the cgroup's
// usage, the free memory) is less (a quarter of it is left to the Go
// runtime and what the estimate does not count).
func DefaultBudget() (bytes uint64, why string) {
	total, src := memlimit.Machine()
	bytes, why = total/2, "half of "+src
	if total == 0 {
		bytes, why = fallbackBudget, "the default when the machine's memory cannot be read"
	}
	if h := memlimit.Now(); h.What != "" && h.Bytes-h.Bytes/4 < bytes {
		bytes, why = h.Bytes-h.Bytes/4, "three quarters of what this process may still use, bounded by "+h.What
	}
	return bytes, why
}
