// This file holds the GPU profiles that give a topology's links their
// speeds (bundled in hw/, or a file of the same fields).

package topo

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
)

//go:embed hw/*.json
var bundledHW embed.FS

// Param is one figure of a GPU profile and where it comes from.
type Param struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// HW is a GPU profile: the link speeds of one kind of GPU and its
// machine, per direction, and the fraction of each that transfers
// achieve. Bandwidths are GB/s (10^9 B/s).
type HW struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// GPUsPerNode is the size of a node when a topology does not say.
	GPUsPerNode int `json:"gpus_per_node"`
	// SMs is the GPU's streaming multiprocessors: the most thread blocks
	// a plan may run per rank.
	SMs Param `json:"sms"`
	// NVSwitch says that NV# in nvidia-smi's matrix counts a GPU's ports
	// into a switch fabric, not links private to the pair.
	NVSwitch bool `json:"nvswitch"`
	// NVLinks is the number of NVLinks of a GPU; NVLinkGBps the rate of
	// one link.
	NVLinks          Param `json:"nvlinks"`
	NVLinkGBps       Param `json:"nvlink_gbps"`
	NVLinkEfficiency Param `json:"nvlink_efficiency"`
	// PCIeGBps is a x16 PCIe link (a GPU's, a switch's uplink).
	PCIeGBps       Param `json:"pcie_gbps"`
	PCIeEfficiency Param `json:"pcie_efficiency"`
	// SysGBps is the link between two CPU sockets (SYS).
	SysGBps       Param `json:"sys_gbps"`
	SysEfficiency Param `json:"sys_efficiency"`
	// NICGBps is one NIC (one per GPU with --nodes).
	NICGBps       Param `json:"nic_gbps"`
	NICEfficiency Param `json:"nic_efficiency"`
	// ModelBase names the bundled cost-model profile (package model) the
	// GPU's other figures start from; ModelOverrides replace some of its
	// parameters, each with its source.
	ModelBase      string           `json:"model_base"`
	ModelOverrides map[string]Param `json:"model_overrides"`
}

// HWNames returns the names of the bundled GPU profiles, sorted.
func HWNames() []string {
	ents, _ := bundledHW.ReadDir("hw")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// LoadHW returns the bundled GPU profile called nameOrPath, or reads the
// file of that path.
func LoadHW(nameOrPath string) (*HW, error) {
	var data []byte
	var err error
	file := nameOrPath
	if !strings.ContainsAny(nameOrPath, `/\`) && !strings.HasSuffix(nameOrPath, ".json") {
		data, err = bundledHW.ReadFile(path.Join("hw", nameOrPath+".json"))
		if err != nil {
			return nil, fmt.Errorf("GPU profile %q: unknown (bundled: %s; or give a path to a .json file)", nameOrPath, strings.Join(HWNames(), ", "))
		}
		file = "hw/" + nameOrPath + ".json"
	} else if data, err = infile.Read(nameOrPath, "a GPU profile", 1<<20); err != nil {
		return nil, err
	}
	return ParseHW(file, data)
}

// ParseHW reads a GPU profile; errors name file and the field.
func ParseHW(file string, data []byte) (*HW, error) {
	var h HW
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if h.Name == "" {
		return nil, fmt.Errorf("%s: name: empty", file)
	}
	if h.GPUsPerNode <= 0 {
		return nil, fmt.Errorf("%s: gpus_per_node: %d, want a positive count", file, h.GPUsPerNode)
	}
	for _, f := range []struct {
		name     string
		p        Param
		fraction bool
	}{
		{"sms", h.SMs, false}, {"nvlinks", h.NVLinks, false}, {"nvlink_gbps", h.NVLinkGBps, false}, {"nvlink_efficiency", h.NVLinkEfficiency, true},
		{"pcie_gbps", h.PCIeGBps, false}, {"pcie_efficiency", h.PCIeEfficiency, true},
		{"sys_gbps", h.SysGBps, false}, {"sys_efficiency", h.SysEfficiency, true},
		{"nic_gbps", h.NICGBps, false}, {"nic_efficiency", h.NICEfficiency, true},
	} {
		if f.p.Source == "" {
			return nil, fmt.Errorf("%s: %s: missing, or no source", file, f.name)
		}
		if f.p.Value < 0 || (f.fraction && (f.p.Value <= 0 || f.p.Value > 1)) {
			return nil, fmt.Errorf("%s: %s: %g out of range", file, f.name, f.p.Value)
		}
	}
	if h.SMs.Value < 1 {
		return nil, fmt.Errorf("%s: sms: %g, want at least 1", file, h.SMs.Value)
	}
	if h.PCIeGBps.Value <= 0 || h.NICGBps.Value <= 0 || h.SysGBps.Value <= 0 {
		return nil, fmt.Errorf("%s: pcie_gbps, sys_gbps and nic_gbps must be positive", file)
	}
	if h.ModelBase == "" {
		return nil, fmt.Errorf("%s: model_base: empty (name a bundled cost-model profile)", file)
	}
	for k, v := range h.ModelOverrides {
		if v.Source == "" {
			return nil, fmt.Errorf("%s: model_overrides.%s: no source", file, k)
		}
	}
	return &h, nil
}

// efficiency returns the fraction of a link of kind k's rate that
// transfers achieve.
func (h *HW) efficiency(k LinkKind) float64 {
	switch k {
	case NVLink:
		return h.NVLinkEfficiency.Value
	case PCIe:
		return h.PCIeEfficiency.Value
	case Sys:
		return h.SysEfficiency.Value
	case Net:
		return h.NICEfficiency.Value
	}
	return 1
}

// raw returns the data-sheet rate of count links of kind k.
func (h *HW) raw(k LinkKind, count float64) float64 {
	switch k {
	case NVLink:
		return h.NVLinkGBps.Value * count
	case PCIe:
		return h.PCIeGBps.Value * count
	case Sys:
		return h.SysGBps.Value * count
	case Net:
		return h.NICGBps.Value * count
	}
	return 0
}
