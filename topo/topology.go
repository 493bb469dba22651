// This file holds the topology itself: vertices, directed links, the
// GPUs in rank order, and the routes between GPUs.

package topo

import (
	"fmt"
	"io"
	"sort"
)

// VertexKind is what a vertex is.
type VertexKind int

// The kinds of vertices.
const (
	GPU VertexKind = iota
	NVSwitchV
	PCIeSwitch
	CPU
	NIC
	NetSwitch
)

// kindNames are the kinds' spellings, in VertexKind order.
func kindNames() []string { return []string{"gpu", "nvswitch", "pcie", "cpu", "nic", "net"} }

func (k VertexKind) String() string {
	if int(k) < len(kindNames()) {
		return kindNames()[k]
	}
	return fmt.Sprintf("kind%d", int(k))
}

// LinkKind is the technology of a link, which sets its speed and
// efficiency from the GPU profile.
type LinkKind int

// The kinds of links.
const (
	NVLink LinkKind = iota
	PCIe
	Sys
	Net
)

// linkNames are the link types' spellings, in LinkKind order.
func linkNames() []string { return []string{"nvlink", "pcie", "sys", "nic"} }

func (k LinkKind) String() string {
	if int(k) < len(linkNames()) {
		return linkNames()[k]
	}
	return fmt.Sprintf("link%d", int(k))
}

// Vertex is one device or switch.
type Vertex struct {
	Name string
	Kind VertexKind
	// Node is the machine the vertex is in (0 without --nodes; -1 for
	// the network's switches).
	Node int
}

// Link is one direction of a connection.
type Link struct {
	From, To int
	Kind     LinkKind
	// GBps is what transfers achieve on the link (the data-sheet rate
	// times the profile's efficiency); RawGBps the data-sheet rate.
	GBps, RawGBps float64
}

// Topology is a machine: vertices, links, and the GPUs in rank order.
type Topology struct {
	Name     string
	Vertices []Vertex
	Links    []Link
	// GPUs are the vertex indices of the GPUs: rank r is GPUs[r].
	GPUs []int
	// Nodes is the number of machines; GPUsPerNode the GPUs of each.
	Nodes, GPUsPerNode int
	// HW is the profile the speeds come from.
	HW *HW
	// Base is the topology of one node of a Replicate'd machine (nil on
	// a single node): synth packs its trees within a node on it.
	Base *Topology

	bounds *boundCache // computed once, on first use
	out    [][]int     // links leaving each vertex
	routes [][][]int
	used   []bool // links some route crosses
}

// Used reports whether some route between GPUs crosses link i: the
// others (a GPU's PCIe link where NVLink reaches every peer, a NIC
// without --nodes) carry no collective traffic, and neither the link
// table nor the bounds count them.
func (t *Topology) Used(i int) bool { return t.used[i] }

// builder collects vertices and links by name.
type builder struct {
	t     *Topology
	index map[string]int
}

func newBuilder(name string, hw *HW) *builder {
	return &builder{t: &Topology{Name: name, HW: hw, Nodes: 1}, index: map[string]int{}}
}

func (b *builder) vertex(name string, k VertexKind) int {
	if i, ok := b.index[name]; ok {
		return i
	}
	b.t.Vertices = append(b.t.Vertices, Vertex{Name: name, Kind: k})
	i := len(b.t.Vertices) - 1
	b.index[name] = i
	return i
}

// link adds a link of raw GB/s each way (both) or one way.
func (b *builder) link(from, to int, k LinkKind, raw float64, both bool) {
	eff := raw * b.t.HW.efficiency(k)
	b.t.Links = append(b.t.Links, Link{From: from, To: to, Kind: k, GBps: eff, RawGBps: raw})
	if both {
		b.t.Links = append(b.t.Links, Link{From: to, To: from, Kind: k, GBps: eff, RawGBps: raw})
	}
}

// finish merges parallel links, indexes the GPUs and computes routes.
func (b *builder) finish() (*Topology, error) {
	t := b.t
	merged := map[[3]int]int{}
	var links []Link
	for _, l := range t.Links {
		if l.From == l.To || l.GBps <= 0 {
			continue
		}
		key := [3]int{l.From, l.To, int(l.Kind)}
		if i, ok := merged[key]; ok {
			links[i].GBps += l.GBps
			links[i].RawGBps += l.RawGBps
			continue
		}
		merged[key] = len(links)
		links = append(links, l)
	}
	t.Links = links
	t.GPUs = t.GPUs[:0]
	for i, v := range t.Vertices {
		if v.Kind == GPU {
			t.GPUs = append(t.GPUs, i)
		}
	}
	if len(t.GPUs) == 0 {
		return nil, fmt.Errorf("%s: no GPU", t.Name)
	}
	if t.GPUsPerNode == 0 {
		t.GPUsPerNode = len(t.GPUs) / t.Nodes
	}
	t.index()
	t.bounds = &boundCache{}
	if err := t.computeRoutes(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Topology) index() {
	t.out = make([][]int, len(t.Vertices))
	for i, l := range t.Links {
		t.out[l.From] = append(t.out[l.From], i)
	}
}

// NumGPUs is the number of GPUs (ranks).
func (t *Topology) NumGPUs() int { return len(t.GPUs) }

// GPUName is the name of rank r's GPU.
func (t *Topology) GPUName(r int) string { return t.Vertices[t.GPUs[r]].Name }

// NodeOf is the machine of rank r.
func (t *Topology) NodeOf(r int) int { return t.Vertices[t.GPUs[r]].Node }

// Route returns the links a transfer from rank a to rank b crosses, in
// order: the path with the fewest links that passes through no other GPU
// (a GPU does not forward a peer's stores), of the widest bottleneck
// among those. Nil for a == b and where no such path exists (Reach).
func (t *Topology) Route(a, b int) []int { return t.routes[a][b] }

// computeRoutes finds Route for every ordered pair of GPUs.
func (t *Topology) computeRoutes() error {
	n := len(t.GPUs)
	t.routes = make([][][]int, n)
	t.used = make([]bool, len(t.Links))
	for a := 0; a < n; a++ {
		t.routes[a] = make([][]int, n)
		src := t.GPUs[a]
		// Breadth-first by hops, widest bottleneck among the shortest.
		hops := make([]int, len(t.Vertices))
		width := make([]float64, len(t.Vertices))
		via := make([]int, len(t.Vertices))
		for i := range hops {
			hops[i], via[i] = -1, -1
		}
		hops[src], width[src] = 0, 1e300
		frontier := []int{src}
		for len(frontier) > 0 {
			var next []int
			for _, v := range frontier {
				if v != src && t.Vertices[v].Kind == GPU {
					continue // GPUs end routes
				}
				for _, li := range t.out[v] {
					l := t.Links[li]
					w := min(width[v], l.GBps)
					switch {
					case hops[l.To] < 0:
						hops[l.To], width[l.To], via[l.To] = hops[v]+1, w, li
						next = append(next, l.To)
					case hops[l.To] == hops[v]+1 && w > width[l.To]:
						width[l.To], via[l.To] = w, li
					}
				}
			}
			frontier = next
		}
		for bi := 0; bi < n; bi++ {
			if bi == a {
				continue
			}
			dst := t.GPUs[bi]
			if hops[dst] < 0 {
				continue // only through other GPUs
			}
			var path []int
			for v := dst; v != src; v = t.Links[via[v]].From {
				path = append(path, via[v])
			}
			for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
				path[i], path[j] = path[j], path[i]
			}
			t.routes[a][bi] = path
			for _, li := range path {
				t.used[li] = true
			}
		}
	}
	// Every GPU must reach every other, forwarding through GPUs.
	for a := 0; a < n; a++ {
		seen := make([]bool, n)
		seen[a] = true
		q := []int{a}
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			for v := 0; v < n; v++ {
				if !seen[v] && t.Reach(u, v) {
					seen[v] = true
					q = append(q, v)
				}
			}
		}
		for v := range seen {
			if !seen[v] {
				return fmt.Errorf("%s: no route from %s to %s, even through other GPUs", t.Name, t.GPUName(a), t.GPUName(v))
			}
		}
	}
	return nil
}

// Reach reports whether rank a's stores reach rank b without another GPU
// forwarding them (Route is then their path).
func (t *Topology) Reach(a, b int) bool { return a != b && t.routes[a][b] != nil }

// WriteLinks prints the link table: one line per directed link that
// some route crosses, `link SRC DST GBPS`, GBPS being the rate transfers
// achieve, sorted by source and destination.
func (t *Topology) WriteLinks(w io.Writer) error {
	var idx []int
	for i := range t.Links {
		if t.used[i] {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := t.Links[idx[i]], t.Links[idx[j]]
		if t.Vertices[a.From].Name != t.Vertices[b.From].Name {
			return nameLess(t.Vertices[a.From].Name, t.Vertices[b.From].Name)
		}
		return nameLess(t.Vertices[a.To].Name, t.Vertices[b.To].Name)
	})
	for _, i := range idx {
		l := t.Links[i]
		if _, err := fmt.Fprintf(w, "link %s %s %s\n", t.Vertices[l.From].Name, t.Vertices[l.To].Name, fmtGBps(l.GBps)); err != nil {
			return err
		}
	}
	return nil
}

// fmtGBps prints a rate with at most three decimals and no trailing zeros.
func fmtGBps(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	for len(s) > 0 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// nameLess orders names with their numbers numerically (gpu2 < gpu10).
func nameLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := trimZeros(a[:i]), trimZeros(b[:j])
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
