package cli

import (
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
	planfmt "github.com/mscclgo/mscclgo/plan"
)

// trafficBackend is the gpu-emu backend of mscclgo run --counters: its
// devices count every op's data traffic, and last returns what the
// device of the latest session counted in its last launch.
func trafficBackend(threads int) (executor.Backend, func() ([][]gpu.TrafficCount, error)) {
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
	return gpu.New(gpu.NewConfig("gpu-emu", open, gpu.Settings{Threads: threads})), last
}

// printTraffic prints the traffic of the last launch of a size, one line
// per op type and channel type, as comment lines of the run's table.
func printTraffic(w io.Writer, size uint64, inst *executor.Instance, counts [][]gpu.TrafficCount) error {
	ops, err := gpu.PlaceTraffic(inst, counts)
	if err != nil {
		return err
	}
	type key struct {
		t  planfmt.OpType
		ct planfmt.ChannelType
	}
	by := map[key]*gpu.OpTraffic{}
	var order []key
	over := 0
	for _, o := range ops {
		if o.Moved() > o.Required {
			over++
		}
		if o.Required == 0 && o.Moved() == 0 && o.Polled == 0 {
			continue
		}
		k := key{o.Op.Type, o.Op.ChannelType}
		a := by[k]
		if a == nil {
			a = &gpu.OpTraffic{Op: o.Op}
			by[k] = a
			order = append(order, k)
		}
		a.Required += o.Required
		a.TrafficCount.Add(o.TrafficCount)
	}
	fmt.Fprintf(w, "# counters, size %d, last launch: bytes each op type moved (loads + stores) against the plan's, 32-byte sectors per warp access against the fewest\n", size)
	fmt.Fprintf(w, "#   %-10s %-7s %14s %14s %12s %10s %12s %12s %6s\n", "op", "channel", "moved", "required", "polled", "requests", "sectors", "min-sectors", "eff")
	for _, k := range order {
		a := by[k]
		fmt.Fprintf(w, "#   %-10s %-7s %14d %14d %12d %10d %12d %12d %6.3f\n", k.t, k.ct, a.Moved(), a.Required,
			a.Polled, a.Requests, a.Sectors, a.MinSectors, a.Efficiency())
	}
	fmt.Fprintf(w, "#   ops that moved more than the plan requires: %d\n", over)
	return nil
}
