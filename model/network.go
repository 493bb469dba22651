// This file holds the model on a topology: transfers between GPUs share
// the capacity of every link on their route (Options.Network), instead
// of each GPU's NVLink egress and ingress and its NIC.

package model

import "fmt"

// Network is the machine's links as the model sees them. Package topo
// builds one from a topology (synth.Network); the model knows nothing of
// vertices, only of links and routes.
type Network struct {
	// LinkGBps is the rate transfers achieve on each link (GB/s), already
	// net of the link's efficiency: the profile's nvlink_efficiency and
	// nic_efficiency do not apply again.
	LinkGBps []float64
	// Route returns the links a transfer from rank a to rank b crosses,
	// each carrying all its bytes; nil where a's stores cannot reach b.
	Route func(a, b int) []int
	// Node returns the machine of rank a: transfers between machines pay
	// the cross-node path's latencies (docs/model.md) as with
	// Options.RanksPerNode, which Node replaces.
	Node func(a int) int
	// Ranks is the number of ranks the network has.
	Ranks int
}

// validate checks the network against a plan of n ranks.
func (nw *Network) validate(n int) error {
	if nw.Route == nil || nw.Node == nil {
		return fmt.Errorf("network: no Route or Node function")
	}
	if nw.Ranks != n {
		return fmt.Errorf("the plan has %d ranks, the topology %d GPUs", n, nw.Ranks)
	}
	for i, g := range nw.LinkGBps {
		if !(g > 0) {
			return fmt.Errorf("network: link %d has rate %g GB/s", i, g)
		}
	}
	return nil
}

// addNetwork appends one resource per link; it returns the index of the
// first.
func (s *sim) addNetwork(nw *Network) int {
	base := len(s.res)
	for _, g := range nw.LinkGBps {
		s.res = append(s.res, resource{cap: gbps(g)})
	}
	return base
}

// moveOnNetwork adds b bytes from rank from to rank to over the route's
// links; a pair with no route records the error the run returns.
func (d *demand) moveOnNetwork(from, to int, b float64) {
	s := d.s
	route := s.net.Route(from, to)
	if route == nil {
		if s.netErr == nil {
			s.netErr = fmt.Errorf("rank %d accesses rank %d, which its links reach only through another GPU", from, to)
		}
		return
	}
	for _, li := range route {
		d.add(s.netBase+li, b)
	}
}
