// This file holds the entry points of the model: Predict for one
// instance, PredictSize and Sweep for a plan at message sizes.

package model

import (
	"fmt"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// Options configure a prediction.
type Options struct {
	// PlainLaunch charges the profile's launch_us (a kernel launched from
	// the host) instead of graph_launch_us (the default: calls replayed
	// from a CUDA graph, as MSCCL++'s benchmarks time them).
	PlainLaunch bool
	// LL8 selects 8-byte LL packets instead of 16-byte ones.
	LL8 bool
	// RanksPerNode places ranks on nodes (rank r on node r/RanksPerNode);
	// 0 means the profile's gpus_per_node.
	RanksPerNode int
	// NoTimeline skips building the timeline (faster sweeps).
	NoTimeline bool
	// Network, when set, is the machine's topology (network.go):
	// transfers between GPUs share every link of their route instead of
	// the GPUs' NVLink egress and ingress and NICs, and it places ranks on
	// nodes instead of RanksPerNode.
	Network *Network
	// Kernel is the kernel whose per-op costs are charged: KernelMSCCLPP
	// (also "") or KernelMSCCLGO (kernel.go).
	Kernel string
	// DType names the element type (executor.DType's Name), which picks
	// KernelMSCCLGO's entry point; PredictSize and Sweep set it, "" is
	// float32.
	DType string
	// OneDevice places every rank on one GPU, as make device-check runs
	// 8 ranks on a machine of one: every access is to that GPU's HBM,
	// every signal and packet a store seen by another block of it (the
	// load latency), and no NVLink or NIC is used.
	OneDevice bool
}

// Result is the prediction of one call.
type Result struct {
	// Time is the predicted time per call in µs: Launch plus the time
	// from the first op's start to the last op's end.
	Time float64
	// Launch is the launch overhead charged (µs).
	Launch float64
	// Timeline is the predicted execution (Clock timeline.Micros, times
	// from the kernel's start, so Timeline.Total = Time − Launch); nil
	// with Options.NoTimeline.
	Timeline *timeline.Timeline
}

// Predict simulates one call of inst on hw. A plan whose waits can never
// be satisfied returns an *executor.DeadlockError.
func Predict(inst *executor.Instance, hw *Profile, opts Options) (*Result, error) {
	if inst == nil || hw == nil {
		return nil, fmt.Errorf("model: nil instance or profile")
	}
	s, err := newSim(inst, hw, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", inst.Plan.Name, err)
	}
	if !opts.NoTimeline {
		s.tl = &timeline.Timeline{Plan: inst.Plan.Name, Collective: inst.Plan.Collective, Clock: timeline.Micros,
			Source: "model " + hw.Name, Ranks: len(inst.Ranks), TBs: make([]int, len(inst.Ranks))}
		for r := range inst.Ranks {
			s.tl.TBs[r] = len(inst.Ranks[r].TBs)
		}
	}
	span, err := s.run()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", inst.Plan.Name, err)
	}
	launch := hw.Params.GraphLaunchUS.Value
	if opts.PlainLaunch {
		launch = hw.Params.LaunchUS.Value
	}
	res := &Result{Time: launch + span, Launch: launch, Timeline: s.tl}
	if s.tl != nil {
		s.tl.Total = span
	}
	return res, nil
}

// Point is the prediction of a plan at one message size, with nccl-tests
// bandwidths: AlgBW = Size/Time and BusBW = AlgBW × the collective's bus
// factor, in GB/s.
type Point struct {
	Size         uint64
	Time         float64
	AlgBW, BusBW float64
	// Result is the full prediction.
	Result *Result
}

// PredictSize lays out, instantiates and predicts plan at message size
// (nccl-tests' size: the output of allgather, the input otherwise) with
// elements of dt, in place or not.
func PredictSize(p *plan.Plan, size uint64, dt executor.Numeric, inPlace bool, hw *Profile, opts Options) (*Point, error) {
	inst, l, err := instantiate(p, size, dt, inPlace)
	if err != nil {
		return nil, err
	}
	if opts.DType == "" {
		opts.DType = dt.Name()
	}
	return predictInstance(inst, l, size, hw, opts)
}

// Sweep predicts plan at each size; sizes the plan rejects are skipped
// and reported in skipped (size → error). Points are in size order.
func Sweep(p *plan.Plan, sizes []uint64, dt executor.Numeric, inPlace bool, hw *Profile, opts Options) (pts []Point, skipped map[uint64]error, err error) {
	sorted := append([]uint64(nil), sizes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if opts.DType == "" {
		opts.DType = dt.Name()
	}
	for _, sz := range sorted {
		inst, l, err := instantiate(p, sz, dt, inPlace)
		if err != nil {
			if skipped == nil {
				skipped = map[uint64]error{}
			}
			skipped[sz] = err
			continue
		}
		pt, err := predictInstance(inst, l, sz, hw, opts)
		if err != nil {
			return pts, skipped, err
		}
		pts = append(pts, *pt)
	}
	return pts, skipped, nil
}

// instantiate lays out and instantiates plan at size.
func instantiate(p *plan.Plan, size uint64, dt executor.Numeric, inPlace bool) (*executor.Instance, *executor.BufferLayout, error) {
	l, err := executor.PlanLayout(p, size, dt, inPlace)
	if err != nil {
		return nil, nil, err
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		return nil, nil, err
	}
	return inst, l, nil
}

// predictInstance predicts inst, laid out by l for size.
func predictInstance(inst *executor.Instance, l *executor.BufferLayout, size uint64, hw *Profile, opts Options) (*Point, error) {
	res, err := Predict(inst, hw, opts)
	if err != nil {
		return nil, err
	}
	if res.Timeline != nil {
		res.Timeline.Size = size
	}
	pt := &Point{Size: size, Time: res.Time, Result: res}
	if res.Time > 0 {
		pt.AlgBW = float64(size) / 1e3 / res.Time
		pt.BusBW = pt.AlgBW * l.BusFactor()
	}
	return pt, nil
}

// sortInts sorts a small slice of ints.
func sortInts(a []int) { sort.Ints(a) }
