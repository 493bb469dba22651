// This file holds the kernels whose per-op costs the model can charge:
// MSCCL++'s (the profile's op_us and block_inflight_kib, the default)
// and this project's interpreter, whose costs are derived from the audit
// of its machine code (gpu-sass's costs summary, kernel_table.go;
// docs/model.md, "The mscclgo kernel").

package model

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/plan"
)

// The kernels of Options.Kernel.
const (
	// KernelMSCCLPP charges MSCCL++'s kernel costs: op_us per op and a
	// block throughput of block_inflight_kib over the load latency.
	KernelMSCCLPP = "mscclpp"
	// KernelMSCCLGO charges this project's interpreter (csrc/): per op
	// the instructions of its dispatch path, per byte the instructions
	// and bytes in flight of the family's loop, from the audit of its
	// SASS (AuditedKernel).
	KernelMSCCLGO = "mscclgo"
)

// Kernels returns the names Options.Kernel accepts, the default first.
func Kernels() []string { return []string{KernelMSCCLPP, KernelMSCCLGO} }

// ParseKernel checks a kernel name ("" is the default, mscclpp).
func ParseKernel(name string) (string, error) {
	switch name {
	case "", KernelMSCCLPP:
		return KernelMSCCLPP, nil
	case KernelMSCCLGO:
		return KernelMSCCLGO, nil
	}
	return "", fmt.Errorf("kernel %q: unknown (want %s)", name, strings.Join(Kernels(), " or "))
}

// LoopCost is one iteration of a loop of the kernel, per thread: its
// instructions and the bytes its data loads and stores move. Insts 0
// means the entry has no such loop.
type LoopCost struct {
	Insts, LoadBytes, StoreBytes int
}

// EntryCost is what the audit says of one entry point of the kernel
// (one element type and packet size) on one architecture.
type EntryCost struct {
	Arch, Entry string
	// Dispatch is the fewest instructions of a path around the op loop:
	// what every op pays besides its own work.
	Dispatch int
	// The fastest innermost loop of each family: Copy (copy, put, get,
	// gstore), Reduce (one source's loads into the sums), Fanout (the
	// sums' stores to each destination), Packet (LL packet put, unpack
	// and the packet reductions).
	Copy, Reduce, Fanout, Packet LoopCost
}

// EntryName is the kernel's entry point for elements of dtype (a name
// of executor.DType: half or float16, bfloat16, float or float32,
// int32; others take float32's) and LL8 or
// LL16 packets (csrc/mscclgo/interp.cuh).
func EntryName(dtype string, ll8 bool) string {
	short := map[string]string{"float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32", "int32": "i32"}[dtype]
	if short == "" {
		short = "f32"
	}
	pkt := 16
	if ll8 {
		pkt = 8
	}
	return fmt.Sprintf("mscclgo_interp_%s_ll%d", short, pkt)
}

// AuditedEntry returns the audited costs of entry on arch
// (kernel_table.go).
func AuditedEntry(arch, entry string) (EntryCost, error) {
	archs := map[string]bool{}
	for _, e := range AuditedKernel() {
		archs[e.Arch] = true
		if e.Arch == arch && e.Entry == entry {
			return e, nil
		}
	}
	var have []string
	for a := range archs {
		have = append(have, a)
	}
	sort.Strings(have)
	return EntryCost{}, fmt.Errorf("kernel %s: no audit of entry %s on %s (audited: %s; make gpu-sass, then go test ./model -run TestKernelTable -update)",
		KernelMSCCLGO, entry, arch, strings.Join(have, ", "))
}

// kernelCosts are the per-op costs of KernelMSCCLGO on one profile, in
// µs and bytes per µs.
type kernelCosts struct {
	entry EntryCost
	// dispatch is the time of the dispatch path; threadInsts the thread
	// instructions a block issues per µs; threads the block's threads.
	dispatch, threadInsts, threads float64
}

// newKernelCosts derives the costs of the entry for dtype on hw with
// blocks of threads threads.
func newKernelCosts(hw *Profile, dtype string, ll8 bool, threads int) (*kernelCosts, error) {
	if hw.SM == nil {
		return nil, fmt.Errorf("kernel %s: hardware profile %s has no sm section (arch, clock_mhz, issue_per_cycle)", KernelMSCCLGO, hw.Name)
	}
	e, err := AuditedEntry(hw.SM.Arch, EntryName(dtype, ll8))
	if err != nil {
		return nil, err
	}
	if threads <= 0 {
		threads = plan.MaxThreadsPerBlock
	}
	warps := math.Ceil(float64(threads) / 32)
	issue := hw.SM.IssuePerCycle.Value
	// A block instruction is one per warp; the SM's schedulers issue
	// issue_per_cycle of them per cycle.
	perInst := math.Max(1, warps/issue)
	clock := hw.SM.ClockMHz.Value // cycles per µs
	return &kernelCosts{
		entry:       e,
		dispatch:    float64(e.Dispatch) * perInst / clock,
		threadInsts: math.Min(float64(threads), 32*issue) * clock,
		threads:     float64(threads),
	}, nil
}

// loopRate is the block throughput, in bytes of work (loads plus
// stores) per µs, of loops that take insts instructions per byte of
// work, keep inflight bytes of loads in flight per thread (one
// iteration's) and load loadFrac of the work's bytes, for loads of
// latency lat µs: the lesser of the issue roof (the block's thread
// instructions per µs over insts) and Little's law (the block's bytes
// in flight over the latency, scaled from loads to work).
func (k *kernelCosts) loopRate(insts, inflight, loadFrac, lat float64) float64 {
	rate := math.Inf(1)
	if insts > 0 {
		rate = k.threadInsts / insts
	}
	if inflight > 0 && loadFrac > 0 {
		rate = math.Min(rate, k.threads*inflight/(lat*loadFrac))
	}
	return rate
}

// perByte returns loop l's instructions per byte of work (its loads'
// and stores' bytes) and the fraction of that work it loads.
func (l LoopCost) perByte() (insts, loadFrac float64) {
	w := float64(l.LoadBytes + l.StoreBytes)
	if l.Insts == 0 || w == 0 {
		return 0, 0
	}
	return float64(l.Insts) / w, float64(l.LoadBytes) / w
}

// rate is the block throughput of op on the kernel, in bytes of work
// per µs, where the op loads srcBytes and stores dstBytes. A packet op
// runs the packet loop; a reduction its sources' loads through the
// reduce loop and its stores through the fan-out loop; other data ops
// (copy, put, get, gstore) the copy loop.
func (k *kernelCosts) rate(op plan.OpType, srcBytes, dstBytes, lat float64) float64 {
	e := k.entry
	switch {
	case op.Packet():
		i, f := e.Packet.perByte()
		return k.loopRate(i, float64(e.Packet.LoadBytes), f, lat)
	case op.Reduces() && e.Reduce.Insts > 0 && e.Fanout.Insts > 0 && e.Reduce.LoadBytes > 0 && e.Fanout.StoreBytes > 0:
		w := srcBytes + dstBytes
		if w <= 0 {
			return math.Inf(1)
		}
		ri := float64(e.Reduce.Insts) / float64(e.Reduce.LoadBytes)
		fi := float64(e.Fanout.Insts) / float64(e.Fanout.StoreBytes)
		return k.loopRate((srcBytes*ri+dstBytes*fi)/w, float64(e.Reduce.LoadBytes), srcBytes/w, lat)
	default:
		i, f := e.Copy.perByte()
		return k.loopRate(i, float64(e.Copy.LoadBytes), f, lat)
	}
}

// KernelRow is one loop family of an entry of KernelMSCCLGO with its
// costs derived on a profile (DescribeKernel; docs/model.md's table).
type KernelRow struct {
	Entry string
	// Dispatch is the dispatch path's instructions, DispatchUS its time.
	Dispatch   int
	DispatchUS float64
	Family     string
	// InstsPer16 are the loop's instructions per 16 B moved (the larger
	// of an iteration's loads and stores); Inflight its load bytes per
	// thread per iteration.
	InstsPer16 float64
	Inflight   int
	// IssueGBps and LittleGBps are a block's throughput in bytes moved
	// per second (GB/s) by the issue roof and by Little's law at the HBM
	// latency (+Inf for a loop without loads).
	IssueGBps, LittleGBps float64
}

// DescribeKernel derives the costs of KernelMSCCLGO's entry for dtype
// on hw with blocks of threads threads, one row per audited family.
func DescribeKernel(hw *Profile, dtype string, ll8 bool, threads int) ([]KernelRow, error) {
	k, err := newKernelCosts(hw, dtype, ll8, threads)
	if err != nil {
		return nil, err
	}
	e := k.entry
	lat := hw.Params.LocalLatencyUS.Value
	var out []KernelRow
	for _, f := range []struct {
		name string
		l    LoopCost
	}{{"copy", e.Copy}, {"reduce", e.Reduce}, {"fanout", e.Fanout}, {"packet", e.Packet}} {
		moved := float64(max(f.l.LoadBytes, f.l.StoreBytes))
		if f.l.Insts == 0 || moved == 0 {
			continue
		}
		r := KernelRow{Entry: e.Entry, Dispatch: e.Dispatch, DispatchUS: k.dispatch, Family: f.name,
			InstsPer16: float64(f.l.Insts) * 16 / moved, Inflight: f.l.LoadBytes,
			IssueGBps: k.threadInsts * moved / float64(f.l.Insts) / 1e3, LittleGBps: math.Inf(1)}
		if f.l.LoadBytes > 0 {
			r.LittleGBps = k.threads * moved / lat / 1e3
		}
		out = append(out, r)
	}
	return out, nil
}
