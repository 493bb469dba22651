// This file holds Host and the grouping of the rank table per host.

package bootstrap

import (
	"fmt"
	"slices"
)

// Host is one host of the job and the ranks that run on it.
type Host struct {
	// Name is the host name the ranks reported. When ranks that share a
	// name report colliding local ranks (containers that all call
	// themselves "localhost", say), the launcher's local ranks split them
	// into several hosts, named "NAME#0", "NAME#1", ...
	Name string

	// Ranks are the ranks on this host, by local rank (the launcher's if
	// every rank of the host reported one, else ascending).
	Ranks []int
}

// groupHosts groups the rank table per host, hosts ordered by their
// lowest rank.
func groupHosts(peers []Peer) []Host {
	var names []string
	byName := map[string][]Peer{}
	for _, p := range peers {
		if _, ok := byName[p.Host]; !ok {
			names = append(names, p.Host)
		}
		byName[p.Host] = append(byName[p.Host], p)
	}
	var hosts []Host
	for _, name := range names {
		members := byName[name]
		local := true
		for _, p := range members {
			if p.LocalSize <= 0 {
				local = false
			}
		}
		if !local {
			h := Host{Name: name}
			for _, p := range members {
				h.Ranks = append(h.Ranks, p.Rank)
			}
			hosts = append(hosts, h)
			continue
		}
		// Each rank goes to the first group that lacks its local rank
		// and is not yet full; ranks arrive in rank order.
		var groups [][]Peer
	next:
		for _, p := range members {
			for i, g := range groups {
				if len(g) < p.LocalSize && !slices.ContainsFunc(g, func(q Peer) bool { return q.LocalRank == p.LocalRank }) {
					groups[i] = append(g, p)
					continue next
				}
			}
			groups = append(groups, []Peer{p})
		}
		for i, g := range groups {
			slices.SortStableFunc(g, func(a, b Peer) int { return a.LocalRank - b.LocalRank })
			h := Host{Name: name}
			if len(groups) > 1 {
				h.Name = fmt.Sprintf("%s#%d", name, i)
			}
			for _, p := range g {
				h.Ranks = append(h.Ranks, p.Rank)
			}
			hosts = append(hosts, h)
		}
	}
	slices.SortStableFunc(hosts, func(a, b Host) int { return slices.Min(a.Ranks) - slices.Min(b.Ranks) })
	return hosts
}

// PlaceRanks returns each of the job's n ranks' host (its index in
// hosts) and rank's local rank: its index on its host, the device it
// takes on a GPU host.
func PlaceRanks(hosts []Host, n, rank int) (hostOf []int, local int) {
	hostOf = make([]int, n)
	for h, host := range hosts {
		for i, r := range host.Ranks {
			hostOf[r] = h
			if r == rank {
				local = i
			}
		}
	}
	return hostOf, local
}

// LauncherName says where the job's shape came from: the launcher, or
// "MSCCLGO_* variables".
func (w World) LauncherName() string {
	if w.Launcher == "" {
		return "MSCCLGO_* variables"
	}
	return w.Launcher
}
