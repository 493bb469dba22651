// This file holds the entry points: Load (a file or a bundled example)
// and Replicate (N nodes on a rail network).

package topo

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
)

//go:embed examples/*
var examples embed.FS

// Examples returns the names of the bundled example topologies.
func Examples() []string {
	ents, _ := examples.ReadDir("examples")
	var out []string
	for _, e := range ents {
		n := e.Name()
		out = append(out, strings.TrimSuffix(strings.TrimSuffix(n, ".txt"), ".json"))
	}
	sort.Strings(out)
	return out
}

// exampleFile returns the bundled file of an example's name.
func exampleFile(name string) (string, []byte, bool) {
	for _, ext := range []string{".txt", ".json"} {
		p := path.Join("examples", name+ext)
		if data, err := examples.ReadFile(p); err == nil {
			return "topo/" + p, data, true
		}
	}
	return "", nil, false
}

// maxTopoBytes bounds a topology file.
const maxTopoBytes = 4 << 20

// Load reads the topology of a file (nvidia-smi's matrix or the JSON
// form) or of a bundled example's name, with the speeds of hw.
func Load(nameOrPath string, hw *HW) (*Topology, error) {
	if hw == nil {
		return nil, fmt.Errorf("topology %s: no GPU profile", nameOrPath)
	}
	file, data, ok := "", []byte(nil), false
	if !strings.ContainsAny(nameOrPath, `/\.`) {
		file, data, ok = exampleFile(nameOrPath)
	}
	if !ok {
		if _, err := os.Lstat(nameOrPath); errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrPath, `/\`) {
			return nil, fmt.Errorf("topology %s: no such file, and no bundled example of that name (bundled: %s)", nameOrPath, strings.Join(Examples(), ", "))
		}
		var err error
		if data, err = infile.Read(nameOrPath, "a topology", maxTopoBytes); err != nil {
			return nil, err
		}
		file = nameOrPath
	}
	return Parse(file, data, hw)
}

// Parse reads a topology from data, named file in errors.
func Parse(file string, data []byte, hw *HW) (*Topology, error) {
	if looksLikeSMI(data) {
		return fromSMI(file, data, hw)
	}
	return fromJSON(file, data, hw)
}

// Replicate returns n copies of the node t, GPU vertex v of node k named
// nK.v, each GPU with a NIC of its own (nK.railnicI for GPU I) on rail I: a
// leaf switch railI, all rails joined by a spine of full bisection, so
// the network is non-blocking. n = 1 returns t.
func Replicate(t *Topology, n int) (*Topology, error) {
	if n < 1 {
		return nil, fmt.Errorf("--nodes %d: want at least 1", n)
	}
	if n == 1 {
		return t, nil
	}
	if t.Nodes != 1 {
		return nil, fmt.Errorf("%s: already has %d nodes", t.Name, t.Nodes)
	}
	hw := t.HW
	b := newBuilder(fmt.Sprintf("%s x %d", t.Name, n), hw)
	g := len(t.GPUs)
	nic := hw.raw(Net, 1)
	for k := 0; k < n; k++ {
		base := len(b.t.Vertices)
		for _, v := range t.Vertices {
			i := b.vertex(fmt.Sprintf("n%d.%s", k, v.Name), v.Kind)
			b.t.Vertices[i].Node = k
		}
		for _, l := range t.Links {
			b.t.Links = append(b.t.Links, Link{From: base + l.From, To: base + l.To, Kind: l.Kind, GBps: l.GBps, RawGBps: l.RawGBps})
		}
		for r, gv := range t.GPUs {
			nv := b.vertex(fmt.Sprintf("n%d.railnic%d", k, r), NIC)
			b.t.Vertices[nv].Node = k
			b.link(base+gv, nv, Net, nic, true)
		}
	}
	spine := b.vertex("spine", NetSwitch)
	b.t.Vertices[spine].Node = -1
	for r := 0; r < g; r++ {
		rail := b.vertex(fmt.Sprintf("rail%d", r), NetSwitch)
		b.t.Vertices[rail].Node = -1
		for k := 0; k < n; k++ {
			b.link(b.index[fmt.Sprintf("n%d.railnic%d", k, r)], rail, Net, nic, true)
		}
		b.link(rail, spine, Net, nic*float64(n), true)
	}
	b.t.Nodes, b.t.GPUsPerNode, b.t.Base = n, g, t
	return b.finish()
}
