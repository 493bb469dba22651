package gpu

// traffictable.go writes the traffic counts of a launch as mscclgo run
// --counters prints them.

import (
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// WriteTraffic writes the traffic counts of the last launch of a size
// (the devices' counts, placed on inst's ops by PlaceTraffic), one line
// per op type and channel type, as comment lines of mscclgo run's table
// (--counters).
func WriteTraffic(w io.Writer, size uint64, inst *executor.Instance, counts [][]TrafficCount) error {
	ops, err := PlaceTraffic(inst, counts)
	if err != nil {
		return err
	}
	type key struct {
		t  plan.OpType
		ct plan.ChannelType
	}
	by := map[key]*OpTraffic{}
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
			a = &OpTraffic{Op: o.Op}
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
