// This file holds the bandwidth sharing of the simulation: transfers
// (flows) over shared resources (a GPU's NVLink egress or ingress, HBM,
// NIC), with rates set by max-min fair sharing (progressive filling).

package model

import (
	"math"
	"slices"
)

// resource is a shared bandwidth, in bytes per µs.
type resource struct {
	cap float64
	// During a rate computation: the capacity left and the weight of the
	// flows not yet fixed, and the flows using it.
	left, weight float64
	flows        []*flow
	listed       bool // in this computation's list of used resources
}

// use is a flow's demand on one resource: weight bytes per unit of the
// flow's progress.
type use struct {
	res    int
	weight float64
}

// flow is one transfer in progress: work units left, the flow's own
// maximum rate (a block's throughput; +Inf for none), its demands, and
// the rate last computed.
type flow struct {
	left, cap, rate float64
	uses            []use
	fixed           bool
	// pos is the flow's index in the active list.
	pos  int
	done func()
}

// shareRates sets the rate of every active flow by progressive filling:
// raise all rates together until a resource (or a flow's own cap) is
// full, fix the flows it limits, repeat.
//
// Only the resources some flow uses take part (used, returned for reuse
// as the next call's scratch): on a large machine most resources carry
// nothing at a given moment, and visiting them in index order, as the
// loops below do, gives the same rates as visiting all of them.
func shareRates(res []resource, flows []*flow, used []int) []int {
	used = used[:0]
	for _, f := range flows {
		for _, u := range f.uses {
			if r := &res[u.res]; !r.listed {
				r.listed = true
				r.left, r.weight, r.flows = r.cap, 0, r.flows[:0]
				used = append(used, u.res)
			}
		}
	}
	slices.Sort(used)
	for _, f := range flows {
		f.fixed, f.rate = false, 0
		for _, u := range f.uses {
			r := &res[u.res]
			r.weight += u.weight
			r.flows = append(r.flows, f)
		}
	}
	open := len(flows)
	const eps = 1e-9
	for open > 0 {
		level := math.Inf(1)
		for _, i := range used {
			if r := &res[i]; r.weight > eps {
				level = min(level, r.left/r.weight)
			}
		}
		for _, f := range flows {
			if !f.fixed {
				level = min(level, f.cap)
			}
		}
		if math.IsInf(level, 1) {
			// Flows that use nothing and have no cap: instantaneous.
			for _, f := range flows {
				if !f.fixed {
					f.rate, f.fixed = math.Inf(1), true
					open--
				}
			}
			break
		}
		limit := level * (1 + 1e-9)
		fix := func(f *flow) {
			f.rate, f.fixed = level, true
			open--
			for _, u := range f.uses {
				r := &res[u.res]
				r.left = max(0, r.left-u.weight*level)
				r.weight -= u.weight
			}
		}
		for _, f := range flows {
			if !f.fixed && f.cap <= limit {
				fix(f)
			}
		}
		for _, i := range used {
			r := &res[i]
			if r.weight > eps && r.left/r.weight <= limit {
				for _, f := range r.flows {
					if !f.fixed {
						fix(f)
					}
				}
			}
		}
	}
	for _, i := range used {
		res[i].listed = false
	}
	return used
}
