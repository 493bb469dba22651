package sass

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// The costs summary is what the cost model of this kernel reads
// (`mscclgo model --kernel mscclgo`, docs/model.md): per entry point,
// the instructions of its dispatch path and, per data-loop family, the
// counts of one iteration of its fastest innermost loop. `gpu-sass
// -costs FILE` writes it; ParseCosts reads it back.

// CostRow is one line of the costs summary.
type CostRow struct {
	Arch, Entry string
	// Row is RowDispatch or a family (FamCopy, FamReduce, FamFanout,
	// FamPacket).
	Row string
	// Loops is how many innermost, non-fallback loops of the family the
	// entry has (1 for the dispatch row).
	Loops int
	// Insts, LoadBytes, StoreBytes, Loads and Stores are one iteration's
	// own instructions and data accesses, per thread, of the family's
	// loop with the fewest instructions per 16 B moved among those that
	// both load and store (a packet put, unpack or copy, not the inner
	// loop of a fan-out to several destinations), or among all where
	// none does (the reduce and fanout loops); for the dispatch
	// row, Insts is the fewest instructions of a path from the op loop's
	// header back to it.
	Insts, LoadBytes, StoreBytes, Loads, Stores int
}

// RowDispatch names the dispatch row of an entry in the costs summary.
const RowDispatch = "dispatch"

// costFamilies are the families with a row in the costs summary.
var costFamilies = []string{FamCopy, FamReduce, FamFanout, FamPacket}

// Costs returns the costs summary of the audited entries (Report.Funcs
// that have a dispatch loop), in the order of the SASS.
func (rep Report) Costs() []CostRow {
	var out []CostRow
	for _, k := range rep.Funcs {
		d, ok := rep.Dispatch[k]
		if !ok {
			continue
		}
		out = append(out, CostRow{Arch: k.Arch, Entry: k.Name, Row: RowDispatch, Loops: 1, Insts: d})
		for _, fam := range costFamilies {
			var best *LoopReport
			n := 0
			both := false // some loop of the family loads and stores
			for i := range rep.Loops {
				l := &rep.Loops[i]
				if l.Arch != k.Arch || l.Entry != k.Name || l.Family != fam || !l.Leaf || l.Fallback || l.Moved() == 0 {
					continue
				}
				n++
				lb := l.LoadBytes > 0 && l.StoreBytes > 0
				switch {
				case best == nil, lb && !both:
					best, both = l, lb
				case lb == both && l.Per16(l.Insts) < best.Per16(best.Insts):
					best = l
				}
			}
			if best == nil {
				continue
			}
			out = append(out, CostRow{Arch: k.Arch, Entry: k.Name, Row: fam, Loops: n, Insts: best.Insts,
				LoadBytes: best.LoadBytes, StoreBytes: best.StoreBytes, Loads: best.Loads, Stores: best.Stores})
		}
	}
	return out
}

// costsHeader is the first line of the costs summary.
const costsHeader = "arch\tentry\trow\tloops\tinsts\tload_bytes\tstore_bytes\tloads\tstores"

// WriteCosts writes rows as the costs summary: a comment line (note,
// when given), the header, then one tab-separated line per row.
func WriteCosts(w io.Writer, note string, rows []CostRow) error {
	var b strings.Builder
	b.WriteString("# gpu-sass costs: per entry, the dispatch path's instructions and, per family, one iteration of its fastest innermost loop (per thread)\n")
	if note != "" {
		b.WriteString("# " + note + "\n")
	}
	b.WriteString(costsHeader + "\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Arch, r.Entry, r.Row, r.Loops, r.Insts,
			r.LoadBytes, r.StoreBytes, r.Loads, r.Stores)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ParseCosts reads a costs summary; name names the input in errors.
func ParseCosts(name string, r io.Reader) ([]CostRow, error) {
	sc := bufio.NewScanner(r)
	var rows []CostRow
	header := false
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if !header {
			if s != costsHeader {
				return nil, fmt.Errorf("%s:%d: header %q, want %q", name, line, s, costsHeader)
			}
			header = true
			continue
		}
		f := strings.Split(s, "\t")
		if len(f) != 9 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 9 (%s)", name, line, len(f), costsHeader)
		}
		row := CostRow{Arch: f[0], Entry: f[1], Row: f[2]}
		known := row.Row == RowDispatch
		for _, fam := range costFamilies {
			known = known || row.Row == fam
		}
		if !known {
			return nil, fmt.Errorf("%s:%d: row %q: want %s or a family (%s)", name, line, row.Row, RowDispatch, strings.Join(costFamilies, ", "))
		}
		for i, p := range []*int{&row.Loops, &row.Insts, &row.LoadBytes, &row.StoreBytes, &row.Loads, &row.Stores} {
			v, err := strconv.Atoi(f[3+i])
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%s:%d: field %s: %q, want a count ≥ 0", name, line, strings.Split(costsHeader, "\t")[3+i], f[3+i])
			}
			*p = v
		}
		if row.Insts == 0 {
			return nil, fmt.Errorf("%s:%d: %s %s: 0 instructions", name, line, row.Entry, row.Row)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if !header {
		return nil, fmt.Errorf("%s: no header line (%s)", name, costsHeader)
	}
	return rows, nil
}

// opLoop returns the index of f's op loop: the outermost loop with the
// most loops nested in it (-1 if f has no loop).
func opLoop(loops []Loop) int {
	best := -1
	for i, l := range loops {
		if l.Depth == 1 && (best < 0 || l.Inner > loops[best].Inner) {
			best = i
		}
	}
	return best
}

// DispatchPath returns the fewest instructions on a path from loop l's
// header back to it within l (its blocks, inner loops' included): for
// the op loop, what every op costs before and after its own work (the
// shortest such path is the no-op's). It returns 0 if no path returns.
func DispatchPath(f Function, l Loop) int {
	blocks := graph(f)
	in := map[int]bool{}
	start := -1
	for b := range blocks {
		a := f.Insts[blocks[b].first].Addr
		i := sort.Search(len(l.Blocks), func(i int) bool { return l.Blocks[i] >= a })
		if i < len(l.Blocks) && l.Blocks[i] == a {
			in[b] = true
		}
		if a == l.Header {
			start = b
		}
	}
	if start < 0 {
		return 0
	}
	size := func(b int) int { return blocks[b].last - blocks[b].first + 1 }
	// Dijkstra: dist[b] = instructions from the header's first to the
	// end of b.
	dist := map[int]int{start: size(start)}
	pq := &pathHeap{{start, size(start)}}
	best := 0
	for pq.Len() > 0 {
		x := heap.Pop(pq).(pathItem)
		if x.d > dist[x.b] {
			continue
		}
		for _, s := range blocks[x.b].succ {
			if !in[s] {
				continue
			}
			if s == start {
				if best == 0 || x.d < best {
					best = x.d
				}
				continue
			}
			nd := x.d + size(s)
			if d, ok := dist[s]; !ok || nd < d {
				dist[s] = nd
				heap.Push(pq, pathItem{s, nd})
			}
		}
	}
	return best
}

type pathItem struct{ b, d int }

type pathHeap []pathItem

func (h pathHeap) Len() int           { return len(h) }
func (h pathHeap) Less(i, j int) bool { return h[i].d < h[j].d }
func (h pathHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pathHeap) Push(x any)        { *h = append(*h, x.(pathItem)) }
func (h *pathHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
