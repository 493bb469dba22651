// This file bridges topo and model: the model's view of a topology's
// links, and the cost-model profile of a GPU profile.

package synth

import (
	"fmt"

	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/topo"
)

// Network returns the links and routes of tp as the model takes them
// (model.Options.Network): every link with the rate transfers achieve on
// it, and Route between ranks.
func Network(tp *topo.Topology) *model.Network {
	rates := make([]float64, len(tp.Links))
	for i, l := range tp.Links {
		rates[i] = l.GBps
	}
	return &model.Network{
		LinkGBps: rates,
		Route: func(a, b int) []int {
			if !tp.Reach(a, b) {
				return nil
			}
			return tp.Route(a, b)
		},
		Node:  tp.NodeOf,
		Ranks: tp.NumGPUs(),
	}
}

// ModelProfile returns the cost-model profile of a GPU profile: the
// bundled model profile it names (model_base) with its overrides.
func ModelProfile(hw *topo.HW) (*model.Profile, error) {
	base, err := model.LoadProfile(hw.ModelBase)
	if err != nil {
		return nil, fmt.Errorf("GPU profile %s: model_base: %w", hw.Name, err)
	}
	p := base.Clone()
	p.Name = hw.Name
	p.Description = hw.Description
	p.GPUsPerNode = hw.GPUsPerNode
	if !hw.NVSwitch {
		p.NVLS = false
	}
	for name, v := range hw.ModelOverrides {
		q, ok := p.Params.Get(name)
		if !ok {
			return nil, fmt.Errorf("GPU profile %s: model_overrides: no cost-model parameter %q", hw.Name, name)
		}
		q.Value, q.Source = v.Value, v.Source
	}
	if err := p.Validate(hw.Name); err != nil {
		return nil, err
	}
	return p, nil
}
