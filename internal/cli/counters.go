package cli

import (
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
	"github.com/mscclgo/mscclgo/runconfig"
)

// trafficBackend is the gpu-emu backend of mscclgo run --counters: its
// devices count every op's data traffic, and last returns what the
// device of the latest session counted in its last launch.
func trafficBackend(s runconfig.Settings) (executor.Backend, func() ([][]gpu.TrafficCount, error)) {
	var dev gpu.Driver
	open := func() (gpu.Driver, error) {
		d, err := emu.Open()
		if err != nil {
			return nil, err
		}
		if err := emu.CountTraffic(d); err != nil {
			return nil, err
		}
		dev = d
		return d, nil
	}
	last := func() ([][]gpu.TrafficCount, error) {
		if dev == nil {
			return nil, fmt.Errorf("no launch")
		}
		return emu.Traffic(dev)
	}
	return gpu.New(s.GPUConfig(runconfig.Device{Name: "gpu-emu", Open: open})), last
}
