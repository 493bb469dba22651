// This file reads the matrix that `nvidia-smi topo -m` prints.

package topo

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// relation is a cell of the matrix, closest first.
type relation int

const (
	relSelf relation = iota
	relPIX
	relPXB
	relPHB
	relNode
	relSys
	relNV // NV#: the PCIe relation is not shown
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// smiDevice is a row of the matrix.
type smiDevice struct {
	name     string // as printed: GPU0, NIC1, mlx5_0
	gpu      int    // GPU index, -1 for a NIC
	cells    []relation
	nv       []int // NV# counts (0 where not NVLink)
	affinity string
	line     int
}

// looksLikeSMI reports whether data is nvidia-smi's matrix rather than
// JSON.
func looksLikeSMI(data []byte) bool {
	t := bytes.TrimSpace(ansi.ReplaceAll(data, nil))
	return len(t) > 0 && t[0] != '{'
}

// parseSMI reads the matrix into devices.
func parseSMI(file string, data []byte) ([]smiDevice, error) {
	sc := bufio.NewScanner(bytes.NewReader(ansi.ReplaceAll(data, nil)))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	var cols []string
	var devs []smiDevice
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), " \t\r")
		if strings.TrimSpace(text) == "" {
			if cols != nil && len(devs) > 0 {
				break // the legend follows
			}
			continue
		}
		fields := strings.Fields(text)
		if cols == nil {
			if !strings.HasPrefix(fields[0], "GPU") {
				return nil, fmt.Errorf("%s:%d: want the header row of `nvidia-smi topo -m` (GPU0 GPU1 ...), got %q", file, line, fields[0])
			}
			for _, f := range fields {
				if f == "CPU" || f == "NUMA" {
					break
				}
				cols = append(cols, f)
			}
			continue
		}
		if strings.HasPrefix(fields[0], "Legend") || strings.HasPrefix(fields[0], "NIC") && strings.HasSuffix(fields[0], ":") {
			break
		}
		if len(fields) < len(cols)+1 {
			return nil, fmt.Errorf("%s:%d: row %s has %d cells, want %d (one per column of the header)", file, line, fields[0], len(fields)-1, len(cols))
		}
		d := smiDevice{name: fields[0], gpu: -1, line: line}
		if d.name != cols[len(devs)] {
			return nil, fmt.Errorf("%s:%d: row %q, want %q (rows in the order of the header's columns)", file, line, d.name, cols[len(devs)])
		}
		if g, ok := strings.CutPrefix(d.name, "GPU"); ok {
			n, err := strconv.Atoi(g)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: device %q: want GPU followed by its index", file, line, d.name)
			}
			d.gpu = n
		}
		for i, c := range fields[1 : len(cols)+1] {
			r, nv, err := parseRelation(c)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s to %s: %v", file, line, d.name, cols[i], err)
			}
			d.cells = append(d.cells, r)
			d.nv = append(d.nv, nv)
		}
		if rest := fields[len(cols)+1:]; len(rest) > 0 {
			d.affinity = strings.Join(rest, " ")
		}
		devs = append(devs, d)
		if len(devs) == len(cols) {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if len(devs) != len(cols) || len(cols) == 0 {
		return nil, fmt.Errorf("%s:%d: %d rows for %d columns", file, line, len(devs), len(cols))
	}
	for i := range devs {
		if devs[i].cells[i] != relSelf {
			return nil, fmt.Errorf("%s:%d: %s to itself: want X", file, devs[i].line, devs[i].name)
		}
		for j := range devs {
			if (devs[i].cells[j] == relSelf) != (i == j) {
				return nil, fmt.Errorf("%s:%d: %s to %s: X off the diagonal", file, devs[i].line, devs[i].name, devs[j].name)
			}
			if devs[i].cells[j] == relNV && devs[j].cells[i] != relNV {
				return nil, fmt.Errorf("%s:%d: %s to %s is NV%d, but %s to %s is not NVLink", file, devs[i].line, devs[i].name, devs[j].name, devs[i].nv[j], devs[j].name, devs[i].name)
			}
		}
	}
	return devs, nil
}

func parseRelation(c string) (relation, int, error) {
	switch c {
	case "X":
		return relSelf, 0, nil
	case "PIX":
		return relPIX, 0, nil
	case "PXB", "PSB":
		return relPXB, 0, nil
	case "PHB":
		return relPHB, 0, nil
	case "NODE":
		return relNode, 0, nil
	case "SYS", "SOC":
		return relSys, 0, nil
	}
	if n, ok := strings.CutPrefix(c, "NV"); ok {
		k, err := strconv.Atoi(n)
		if err == nil && k > 0 && k <= 64 {
			return relNV, k, nil
		}
	}
	return 0, 0, fmt.Errorf("unknown cell %q (want X, NV#, PIX, PXB, PHB, NODE or SYS)", c)
}

// unionFind groups devices.
type unionFind []int

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for i := range u {
		u[i] = i
	}
	return u
}

func (u unionFind) find(i int) int {
	for u[i] != i {
		u[i] = u[u[i]]
		i = u[i]
	}
	return i
}

func (u unionFind) union(a, b int) { u[u.find(a)] = u.find(b) }

// fromSMI builds a topology from nvidia-smi's matrix.
func fromSMI(file string, data []byte, hw *HW) (*Topology, error) {
	devs, err := parseSMI(file, data)
	if err != nil {
		return nil, err
	}
	b := newBuilder(file, hw)
	// GPUs first, in index order (rank order), then the NICs.
	order := make([]int, len(devs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, c := devs[order[i]], devs[order[j]]
		if (a.gpu >= 0) != (c.gpu >= 0) {
			return a.gpu >= 0
		}
		return a.gpu < c.gpu
	})
	vid := make([]int, len(devs))
	ngpu := 0
	for _, i := range order {
		d := devs[i]
		if d.gpu >= 0 {
			if d.gpu != ngpu {
				return nil, fmt.Errorf("%s:%d: GPU%d: GPU indices must run 0, 1, ... without gaps (expected GPU%d)", file, d.line, d.gpu, ngpu)
			}
			ngpu++
			vid[i] = b.vertex(fmt.Sprintf("gpu%d", d.gpu), GPU)
		} else {
			vid[i] = b.vertex(strings.ToLower(d.name), NIC)
		}
	}
	// NVLink.
	maxLinks := int(hw.NVLinks.Value)
	if hw.NVSwitch {
		sw := -1
		for i, d := range devs {
			ports := 0
			for _, k := range d.nv {
				ports = max(ports, k)
			}
			if ports == 0 {
				continue
			}
			if d.gpu < 0 {
				return nil, fmt.Errorf("%s:%d: %s: NVLink on a device that is not a GPU", file, d.line, d.name)
			}
			if ports > maxLinks {
				return nil, fmt.Errorf("%s:%d: %s: NV%d, but a %s GPU has %d NVLinks", file, d.line, d.name, ports, hw.Name, maxLinks)
			}
			if sw < 0 {
				sw = b.vertex("nvswitch", NVSwitchV)
			}
			b.link(vid[i], sw, NVLink, hw.raw(NVLink, float64(ports)), true)
		}
	} else {
		for i, d := range devs {
			total := 0
			for j, k := range d.nv {
				if k == 0 {
					continue
				}
				if d.gpu < 0 || devs[j].gpu < 0 {
					return nil, fmt.Errorf("%s:%d: %s to %s: NVLink on a device that is not a GPU", file, d.line, d.name, devs[j].name)
				}
				if devs[j].nv[i] != k {
					return nil, fmt.Errorf("%s:%d: %s to %s is NV%d, but %s to %s is NV%d", file, d.line, d.name, devs[j].name, k, devs[j].name, d.name, devs[j].nv[i])
				}
				total += k
				if j > i {
					b.link(vid[i], vid[j], NVLink, hw.raw(NVLink, float64(k)), true)
				}
			}
			if total > maxLinks {
				return nil, fmt.Errorf("%s:%d: %s has %d NVLinks in its row, but a %s GPU has %d", file, d.line, d.name, total, hw.Name, maxLinks)
			}
		}
	}
	// Sockets: by the affinity columns where every row has them, else the
	// groups of PCIe relations closer than SYS.
	n := len(devs)
	sock := newUnionFind(n)
	haveAff := true
	for _, d := range devs {
		if d.affinity == "" {
			haveAff = false
		}
	}
	for i := range devs {
		for j := range devs {
			r := devs[i].cells[j]
			switch {
			case haveAff && devs[i].affinity == devs[j].affinity:
				sock.union(i, j)
			case !haveAff && r >= relPIX && r <= relNode:
				sock.union(i, j)
			}
		}
	}
	if !haveAff {
		// Devices whose PCIe relations are all hidden by NV#: socket of
		// device 0.
		for i := range devs {
			known := false
			for j := range devs {
				if i != j && devs[i].cells[j] != relNV {
					known = true
				}
			}
			if !known {
				sock.union(i, 0)
			}
		}
	}
	sockets := map[int]int{}
	var sockOf = make([]int, n)
	for _, i := range order {
		root := sock.find(i)
		s, ok := sockets[root]
		if !ok {
			s = len(sockets)
			sockets[root] = s
		}
		sockOf[i] = s
	}
	cpus := make([]int, len(sockets))
	for s := range cpus {
		cpus[s] = b.vertex(fmt.Sprintf("cpu%d", s), CPU)
	}
	// The PCIe tree of each device: PIX groups share a switch, PXB groups
	// a switch above it; the socket's CPU (its host bridges: PHB, NODE)
	// is the root.
	levels := []relation{relPIX, relPXB}
	groups := make([]unionFind, len(levels))
	for li, lvl := range levels {
		groups[li] = newUnionFind(n)
		for i := range devs {
			for j := range devs {
				if r := devs[i].cells[j]; r >= relPIX && r <= lvl && sockOf[i] == sockOf[j] {
					groups[li].union(i, j)
				}
			}
		}
	}
	size := func(u unionFind, i int) int {
		c := 0
		for j := range u {
			if u.find(j) == u.find(i) {
				c++
			}
		}
		return c
	}
	switchOf := map[[2]int]int{} // (level, group root) -> vertex
	added := map[[2]int]bool{}
	npcie := 0
	pcie := hw.raw(PCIe, 1)
	for _, i := range order {
		at := vid[i]
		prevSize := 1
		for li := range levels {
			sz := size(groups[li], i)
			if sz <= prevSize {
				continue
			}
			prevSize = sz
			key := [2]int{li, groups[li].find(i)}
			v, ok := switchOf[key]
			if !ok {
				v = b.vertex(fmt.Sprintf("pcie%d", npcie), PCIeSwitch)
				npcie++
				switchOf[key] = v
			}
			if !added[[2]int{at, v}] {
				added[[2]int{at, v}] = true
				b.link(at, v, PCIe, pcie, true)
			}
			at = v
		}
		if !added[[2]int{at, cpus[sockOf[i]]}] {
			added[[2]int{at, cpus[sockOf[i]]}] = true
			b.link(at, cpus[sockOf[i]], PCIe, pcie, true)
		}
	}
	for s := 0; s < len(cpus); s++ {
		for t := s + 1; t < len(cpus); t++ {
			b.link(cpus[s], cpus[t], Sys, hw.raw(Sys, 1), true)
		}
	}
	b.t.GPUsPerNode = ngpu
	return b.finish()
}
