// This file holds the fitting of a profile to measurements: the parser
// of nccl-tests and `mscclgo run` tables, and a coordinate search over
// chosen parameters that minimises the squared log error of the
// predicted times.

package model

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Measurement is one measured point: a message size and the time per
// call in µs.
type Measurement struct {
	Size uint64
	Time float64
	// Line is the line of the results file it comes from.
	Line int
}

// ParseResults reads the rows of an nccl-tests output or a `mscclgo run`
// table: lines "size count type redop root time algbw busbw #wrong
// [time algbw busbw #wrong]"; comment lines (#) and other text are
// skipped. nccl-tests prints out-of-place then in-place columns: inPlace
// picks the in-place time when a row has both. name names the input in
// errors.
func ParseResults(name string, r io.Reader, inPlace bool) ([]Measurement, error) {
	var out []Measurement
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 8 || strings.HasPrefix(f[0], "#") {
			continue
		}
		size, err1 := strconv.ParseUint(f[0], 10, 64)
		_, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue // not a row of the table
		}
		col := 5
		if inPlace && len(f) >= 13 {
			col = 9
		}
		t, err := strconv.ParseFloat(f[col], 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t <= 0 {
			return nil, fmt.Errorf("%s:%d: time %q: want a positive number of µs", name, line, f[col])
		}
		out = append(out, Measurement{Size: size, Time: t, Line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no result rows (want nccl-tests or mscclgo run output: size count type redop root time ...)", name)
	}
	return out, nil
}

// FitOptions configure Fit.
type FitOptions struct {
	// Params are the JSON names of the parameters to fit; nil means
	// DefaultFitParams for the plan and profile.
	Params []string
	// DType and InPlace lay the plan out as the measurements ran it.
	DType   executor.Numeric
	InPlace bool
	// Source names the measurements in the fitted parameters' sources.
	Source string
}

// FitPoint is one measurement with the predictions before and after the
// fit.
type FitPoint struct {
	Measurement
	Before, After float64
}

// FitResult is the outcome of Fit.
type FitResult struct {
	Profile *Profile
	Points  []FitPoint
	// Params are the fitted parameters' names.
	Params []string
}

// RelErr is (predicted − measured) / measured.
func RelErr(pred, meas float64) float64 { return (pred - meas) / meas }

// DefaultFitParams are the parameters Fit adjusts by default for plan on
// hw. For a plan whose port channels cross nodes (ranks placed by
// opts.RanksPerNode, else hw's gpus_per_node): the terms of the
// cross-node path, CrossNodeFitParams. Otherwise the launch overhead
// charged, the per-op and latency terms, and the bandwidth efficiencies
// the plan's transfers depend on.
func DefaultFitParams(p *plan.Plan, hw *Profile, opts Options) []string {
	perNode := opts.RanksPerNode
	if perNode <= 0 {
		perNode = hw.GPUsPerNode
	}
	if crossesNodes(p, perNode) {
		return CrossNodeFitParams()
	}
	ps := []string{"graph_launch_us", "op_us", "nvlink_latency_us", "nvlink_efficiency", "block_inflight_kib"}
	if opts.PlainLaunch {
		ps[0] = "launch_us"
	}
	if opts.Kernel == KernelMSCCLGO {
		// This kernel's per-op costs come from its audit, not from
		// op_us and block_inflight_kib.
		ps = []string{ps[0], "nvlink_latency_us", "nvlink_efficiency", "local_latency_us"}
	}
	sw, port := false, false
	for _, g := range p.GPUs {
		for _, ch := range g.Channels {
			sw = sw || ch.Type == plan.Switch
			port = port || ch.Type == plan.Port
		}
	}
	if sw {
		ps = append(ps, "nvls_efficiency", "nvls_latency_us")
	}
	if port {
		ps = append(ps, "nic_efficiency", "nic_latency_us", "proxy_us")
	}
	return ps
}

// CrossNodeFitParams are the parameters of the cross-node path that Fit
// adjusts by default for a multi-node plan: the proxy's wait and time per
// trigger, the PCIe traversal, the NIC-to-NIC latency and the NIC's
// efficiency.
func CrossNodeFitParams() []string {
	return []string{"proxy_poll_us", "proxy_us", "pcie_latency_us", "nic_latency_us", "nic_efficiency"}
}

// crossesNodes reports whether a port channel of plan connects ranks on
// different nodes, perNode ranks to a node.
func crossesNodes(p *plan.Plan, perNode int) bool {
	for _, g := range p.GPUs {
		for _, ch := range g.Channels {
			if ch.Type != plan.Port {
				continue
			}
			for _, peer := range ch.ConnectedTo {
				if peer/perNode != g.ID/perNode {
					return true
				}
			}
		}
	}
	return false
}

// Fit adjusts the parameters fo.Params of hw so that plan's predicted
// times match meas: a coordinate search in log space that minimises the
// mean squared log error. hw is not changed.
func Fit(pl *plan.Plan, meas []Measurement, hw *Profile, opts Options, fo FitOptions) (*FitResult, error) {
	opts.NoTimeline = true
	if fo.DType == nil {
		fo.DType = executor.Float16
	}
	names := fo.Params
	if names == nil {
		names = DefaultFitParams(pl, hw, opts)
	}
	prof := hw.Clone()
	var params []*Param
	for _, n := range names {
		p, ok := prof.Params.Get(n)
		if !ok {
			return nil, fmt.Errorf("fit: unknown parameter %q (want one of %s)", n, strings.Join(ParamNames(), ", "))
		}
		if opts.Kernel == KernelMSCCLGO && unusedByAuditedKernel(n) {
			return nil, fmt.Errorf("fit: parameter %s does not change kernel %s's predictions (its per-op costs come from the audit of its machine code)", n, KernelMSCCLGO)
		}
		if p.Value <= 0 {
			return nil, fmt.Errorf("fit: parameter %s is %v: only positive parameters can be fitted", n, p.Value)
		}
		params = append(params, p)
	}
	insts := make([]*executor.Instance, len(meas))
	for i, m := range meas {
		inst, _, err := instantiate(pl, m.Size, fo.DType, fo.InPlace)
		if err != nil {
			return nil, fmt.Errorf("fit: line %d: size %d: %w", m.Line, m.Size, err)
		}
		insts[i] = inst
	}
	predict := func(p *Profile) ([]float64, error) {
		out := make([]float64, len(insts))
		for i, inst := range insts {
			r, err := Predict(inst, p, opts)
			if err != nil {
				return nil, err
			}
			out[i] = r.Time
		}
		return out, nil
	}
	loss := func(p *Profile) (float64, error) {
		pred, err := predict(p)
		if err != nil {
			return 0, err
		}
		var s float64
		for i, m := range meas {
			d := math.Log(pred[i] / m.Time)
			s += d * d
		}
		return s / float64(len(meas)), nil
	}
	before, err := predict(prof)
	if err != nil {
		return nil, err
	}
	best, err := loss(prof)
	if err != nil {
		return nil, err
	}
	step := math.Log(2)
	for round := 0; round < 60 && step > 1e-3; round++ {
		improved := false
		for i, p := range params {
			for _, dir := range []float64{1, -1} {
				old := p.Value
				nv := old * math.Exp(dir*step)
				if isFraction(names[i]) {
					nv = min(nv, 1)
				}
				if nv == old {
					continue
				}
				p.Value = nv
				l, err := loss(prof)
				if err == nil && l < best-1e-12 {
					best, improved = l, true
					break
				}
				p.Value = old
			}
		}
		if !improved {
			step /= 2
		}
	}
	after, err := predict(prof)
	if err != nil {
		return nil, err
	}
	src := fo.Source
	if src == "" {
		src = "measurements"
	}
	for i, p := range params {
		orig, _ := hw.Params.Get(names[i])
		p.Source = fmt.Sprintf("fitted to %s (%d points, mscclgo model --fit); was %.4g: %s", src, len(meas), orig.Value, orig.Source)
	}
	res := &FitResult{Profile: prof, Params: names}
	for i, m := range meas {
		res.Points = append(res.Points, FitPoint{Measurement: m, Before: before[i], After: after[i]})
	}
	return res, nil
}

// ErrorSummary returns the median and the largest absolute relative
// error of pred against meas.
func ErrorSummary(pred, meas []float64) (median, worst float64) {
	if len(pred) == 0 {
		return 0, 0
	}
	errs := make([]float64, len(pred))
	for i := range pred {
		errs[i] = math.Abs(RelErr(pred[i], meas[i]))
	}
	sort.Float64s(errs)
	n := len(errs)
	median = errs[n/2]
	if n%2 == 0 {
		median = (errs[n/2-1] + errs[n/2]) / 2
	}
	return median, errs[n-1]
}

// unusedByAuditedKernel reports whether parameter name is MSCCL++'s
// kernel cost that KernelMSCCLGO replaces with its audited costs.
func unusedByAuditedKernel(name string) bool {
	switch name {
	case "op_us", "block_inflight_kib", "ll8_factor":
		return true
	}
	return false
}
