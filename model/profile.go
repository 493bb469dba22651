// This file holds hardware profiles: the parameters of the cost model for
// one kind of machine, each with its source, read from JSON (the bundled
// profiles are embedded from profiles/).

package model

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"reflect"
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
)

//go:embed profiles/*.json
var bundled embed.FS

// Param is one parameter of a profile: its value and where it comes from
// (a datasheet, a paper, a measurement or a derivation).
type Param struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// Profile is the hardware a plan is predicted on. Bandwidths are in GB/s
// (10^9 bytes per second), times in µs.
type Profile struct {
	// Name is the profile's name ("h100-sxm"); Description says what
	// machine it describes.
	Name        string `json:"name"`
	Description string `json:"description"`
	// GPUsPerNode is the default ranks per node.
	GPUsPerNode int `json:"gpus_per_node"`
	// NVLS says whether the node has NVLink SHARP (multicast objects and
	// in-switch reduction); a plan with switch channels needs it.
	NVLS bool `json:"nvls"`
	// Params are the model's parameters, see the fields of Params.
	Params Params `json:"params"`
	// SM describes the GPU's streaming multiprocessors, which the model
	// of this project's kernel needs (Options.Kernel KernelMSCCLGO);
	// nil where the profile has none.
	SM *SM `json:"sm,omitempty"`
}

// SM is what the model of this project's kernel needs of a GPU's
// streaming multiprocessors.
type SM struct {
	// Arch is the architecture whose audit applies ("sm_90").
	Arch string `json:"arch"`
	// ClockMHz is the SM clock; IssuePerCycle the warp instructions one
	// SM issues per cycle (one per warp scheduler).
	ClockMHz      Param `json:"clock_mhz"`
	IssuePerCycle Param `json:"issue_per_cycle"`
}

// Params are the numeric parameters of a profile.
type Params struct {
	// LaunchUS is the time per call of a plain kernel launch, seen by a
	// host loop of back-to-back calls (launch, start of the blocks and
	// completion); GraphLaunchUS the same for a launch from a CUDA graph.
	LaunchUS      Param `json:"launch_us"`
	GraphLaunchUS Param `json:"graph_launch_us"`
	// OpUS is the dispatch cost of one op of the plan interpreter (read
	// the op, set up its operands); NopUS the cost of a block barrier.
	OpUS  Param `json:"op_us"`
	NopUS Param `json:"nop_us"`
	// BlockInflightKiB are the bytes one block of 1024 threads keeps in
	// flight; a block's throughput is that divided by the latency of the
	// memory it reaches (Little's law), scaled by the plan's threads per
	// block.
	BlockInflightKiB Param `json:"block_inflight_kib"`
	// LocalLatencyUS is the latency of a load from local HBM.
	LocalLatencyUS Param `json:"local_latency_us"`
	// HBMGBps is the GPU's memory bandwidth, shared by all its blocks.
	HBMGBps Param `json:"hbm_gbps"`
	// NVLinkGBps is a GPU's NVLink bandwidth per direction, shared by all
	// its transfers to (egress) or from (ingress) other GPUs of the node;
	// NVLinkEfficiency the fraction of it that transfers achieve.
	NVLinkGBps       Param `json:"nvlink_gbps"`
	NVLinkEfficiency Param `json:"nvlink_efficiency"`
	// NVLinkLatencyUS is the latency of an access to a peer GPU: the time
	// until a store (data or a signal's flag) is visible there, or a load
	// returns.
	NVLinkLatencyUS Param `json:"nvlink_latency_us"`
	// NVLSEfficiency is the fraction of the NVLink bandwidth multimem
	// loads-with-reduction and stores achieve; NVLSLatencyUS the latency
	// of a multimem access (to the switch and back).
	NVLSEfficiency Param `json:"nvls_efficiency"`
	NVLSLatencyUS  Param `json:"nvls_latency_us"`
	// LL8Factor is the block throughput of 8-byte LL packets relative to
	// 16-byte ones (half the payload per store).
	LL8Factor Param `json:"ll8_factor"`
	// NICGBps is a GPU's NIC bandwidth per direction and NICEfficiency
	// the fraction achieved; NICLatencyUS the one-way latency of an RDMA
	// write from the sending NIC to the receiving NIC (both NICs'
	// pipelines, the cable and the switch; the PCIe traversals at either
	// end are PCIeLatencyUS); NICMsgUS the time a NIC spends on each work
	// request (an RDMA write, or the write of a flag), one after another.
	NICGBps       Param `json:"nic_gbps"`
	NICEfficiency Param `json:"nic_efficiency"`
	NICLatencyUS  Param `json:"nic_latency_us"`
	NICMsgUS      Param `json:"nic_msg_us"`
	// ProxyUS is the port-channel proxy's host time per trigger, from
	// reading it out of the FIFO to posting its work request; the proxy
	// serves triggers one after another.
	ProxyUS Param `json:"proxy_us"`
	// FIFOPushUS is the GPU thread's time to push a trigger into the
	// proxy's FIFO (claim a slot with an atomic, store the trigger);
	// ProxyPollUS the mean time from a trigger (or a completion) landing
	// in host memory to the proxy thread acting on it: the wait for its
	// polling loop.
	FIFOPushUS  Param `json:"fifo_push_us"`
	ProxyPollUS Param `json:"proxy_poll_us"`
	// PCIeLatencyUS is one PCIe traversal: a trigger reaching the host's
	// FIFO, the proxy's doorbell reaching the NIC, each way of the NIC's
	// read of the payload from GPU memory, the receiving NIC's write into
	// GPU memory, a completion reaching the host.
	PCIeLatencyUS Param `json:"pcie_latency_us"`
	// AtomicUS is the latency of a device-scope atomic seen by another
	// block (semaphores, device barriers).
	AtomicUS Param `json:"atomic_us"`
}

// fields returns the parameters by JSON name, in declaration order.
func (p *Params) fields() []namedParam {
	v := reflect.ValueOf(p).Elem()
	t := v.Type()
	out := make([]namedParam, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, namedParam{name, v.Field(i).Addr().Interface().(*Param)})
	}
	return out
}

// namedParam is a parameter with its JSON name.
type namedParam struct {
	name string
	p    *Param
}

// ParamNames returns the JSON names of the parameters, in order.
func ParamNames() []string {
	var p Params
	var names []string
	for _, f := range p.fields() {
		names = append(names, f.name)
	}
	return names
}

// Get returns the parameter named name (its JSON name).
func (p *Params) Get(name string) (*Param, bool) {
	for _, f := range p.fields() {
		if f.name == name {
			return f.p, true
		}
	}
	return nil, false
}

// isFraction reports whether parameter name must lie in (0, 1].
func isFraction(name string) bool {
	switch name {
	case "nvlink_efficiency", "nvls_efficiency", "nic_efficiency", "ll8_factor":
		return true
	}
	return false
}

// isPositive reports whether parameter name must be above 0 (bandwidths,
// the block's bytes in flight and the latencies it is divided by).
func isPositive(name string) bool {
	switch name {
	case "block_inflight_kib", "local_latency_us", "hbm_gbps", "nvlink_gbps", "nvlink_latency_us", "nic_gbps":
		return true
	}
	return false
}

// Validate checks p's values; name is the file it came from, for errors.
func (p *Profile) Validate(name string) error {
	if p.Name == "" {
		return fmt.Errorf("%s: field name: missing", name)
	}
	if p.GPUsPerNode < 1 {
		return fmt.Errorf("%s: field gpus_per_node: %d, want at least 1", name, p.GPUsPerNode)
	}
	for _, f := range p.Params.fields() {
		v := f.p.Value
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return fmt.Errorf("%s: field params.%s.value: %v, want a finite value ≥ 0", name, f.name, v)
		case isFraction(f.name) && (v <= 0 || v > 1):
			return fmt.Errorf("%s: field params.%s.value: %v, want a fraction in (0, 1]", name, f.name, v)
		case isPositive(f.name) && v <= 0:
			return fmt.Errorf("%s: field params.%s.value: %v, want a value above 0", name, f.name, v)
		case strings.TrimSpace(f.p.Source) == "":
			return fmt.Errorf("%s: field params.%s.source: missing; say where the value comes from", name, f.name)
		}
	}
	if sm := p.SM; sm != nil {
		if sm.Arch == "" {
			return fmt.Errorf("%s: field sm.arch: missing (an architecture of the audit, such as sm_90)", name)
		}
		for _, f := range []namedParam{{"clock_mhz", &sm.ClockMHz}, {"issue_per_cycle", &sm.IssuePerCycle}} {
			v := f.p.Value
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
				return fmt.Errorf("%s: field sm.%s.value: %v, want a finite value above 0", name, f.name, v)
			case strings.TrimSpace(f.p.Source) == "":
				return fmt.Errorf("%s: field sm.%s.source: missing; say where the value comes from", name, f.name)
			}
		}
	}
	return nil
}

// ParseProfile reads a profile from JSON; name names the input in errors.
// Unknown fields and missing parameters are errors.
func ParseProfile(name string, data []byte) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %s", name, describeJSONError(data, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: data after the profile object", name)
	}
	var raw struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(data, &raw); err == nil {
		for _, n := range ParamNames() {
			if _, ok := raw.Params[n]; !ok {
				return nil, fmt.Errorf("%s: field params.%s: missing", name, n)
			}
		}
	}
	if err := p.Validate(name); err != nil {
		return nil, err
	}
	return &p, nil
}

// describeJSONError says where in data a decoding error is.
func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		return fmt.Sprintf("line %d: field %s: %v", lineAt(data, off), te.Field, err)
	}
	if off >= 0 {
		return fmt.Sprintf("line %d: %v", lineAt(data, off), err)
	}
	return err.Error()
}

func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte("\n"))
}

// Profiles returns the names of the bundled profiles, sorted.
func Profiles() []string {
	ents, _ := bundled.ReadDir("profiles")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// MaxProfileBytes bounds the size of a hardware profile file.
const MaxProfileBytes = 1 << 20

// LoadProfile returns the bundled profile called nameOrPath, or reads the
// profile file at nameOrPath (a name with a slash or a .json suffix is a
// path).
func LoadProfile(nameOrPath string) (*Profile, error) {
	if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".json") {
		data, err := bundled.ReadFile(path.Join("profiles", nameOrPath+".json"))
		if err != nil {
			return nil, fmt.Errorf("hardware profile %q: unknown (bundled: %s; or give a path to a .json file)", nameOrPath, strings.Join(Profiles(), ", "))
		}
		return ParseProfile(nameOrPath, data)
	}
	data, err := infile.Read(nameOrPath, "a hardware profile (.json)", MaxProfileBytes)
	if err != nil {
		return nil, fmt.Errorf("hardware profile: %w", err)
	}
	return ParseProfile(nameOrPath, data)
}

// Marshal returns p as indented JSON, the format LoadProfile reads.
func (p *Profile) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Clone returns a deep copy of p.
func (p *Profile) Clone() *Profile {
	q := *p
	if p.SM != nil {
		sm := *p.SM
		q.SM = &sm
	}
	return &q
}
