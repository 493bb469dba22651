package sass

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The loop families, by instruction mix (SASS keeps no trace of the
// source function a loop was inlined from; see Classify).
const (
	FamCopy    = "copy"    // weak data loads and stores of equal bytes: copy, put, get, gstore
	FamReduce  = "reduce"  // more bytes loaded than stored: the reductions, glres, fused forms
	FamFanout  = "fanout"  // more bytes stored than loaded: a reduction's result to several destinations
	FamPacket  = "packet"  // strong 64/128-bit accesses: LL packet put, unpack, reduce-packets, switch packets
	FamWait    = "wait"    // a spin (NANOSLEEP): wait, flush, semaphore acquire, packet and FIFO waits
	FamSync    = "sync"    // atomics: signal, semaphore release, the FIFO push, barriers
	FamStage   = "stage"   // global to shared memory: the prologue's copy of the block's ops
	FamSetup   = "setup"   // narrow loads, stores to the stack only: an op's operand pointers into its arrays
	FamControl = "control" // no data access
)

// Simple reports the families of the Simple protocol's data loops.
func Simple(fam string) bool { return fam == FamCopy || fam == FamReduce || fam == FamFanout }

// The rules exempt the kernel's element-, word- and byte-wise loops for
// operands that are not 16-byte aligned: loops whose own instructions
// hold fallbackInst (prim.h's fallback_mark, pmevent in PTX: every loop
// of those paths has one; a mark is not inherited, since the compiler
// may place one of an inner loop's in the loop around it, as far out as
// the loop over the ops) and the loops of called functions whose names
// hold fallbackMark.
const (
	fallbackInst = "PMTRIG"
	fallbackMark = "fallback"
)

// LoopReport is one loop's counts.
type LoopReport struct {
	Arch, Func string // Func: the entry, or the called function the loop lies in
	Entry      string // the entry point whose code holds the loop
	Loop       Loop
	Family     string
	Fallback   bool           // in a function the rules exempt (fallbackMark)
	Leaf       bool           // no data loop (copy, reduce, fanout, packet) is nested in it
	Kinds      map[string]int // data accesses (global, generic) by Access.Kind
	Loads      int            // data loads
	Stores     int            // data stores
	LoadBytes  int
	StoreBytes int
	Local      int // local-memory accesses (spills, stack arrays)
	Insts      int // own instructions
}

// Moved is the bytes one iteration moves: the larger of its loads' and
// its stores' bytes.
func (r LoopReport) Moved() int {
	if r.LoadBytes > r.StoreBytes {
		return r.LoadBytes
	}
	return r.StoreBytes
}

// Per16 scales a count of one iteration to 16 bytes moved.
func (r LoopReport) Per16(n int) float64 {
	if r.Moved() == 0 {
		return 0
	}
	return float64(n) * 16 / float64(r.Moved())
}

// Finding is one broken rule.
type Finding struct {
	Arch, Func string
	Loop       uint64 // header address, 0 for a function's spills
	Family     string
	Inst       Inst
	Rule       string
}

func (f Finding) String() string {
	if f.Loop == 0 && f.Family == "" {
		return fmt.Sprintf("%s %s: %s", f.Arch, f.Func, f.Rule)
	}
	return fmt.Sprintf("%s %s: loop at 0x%04x (%s): %s: %s", f.Arch, f.Func, f.Loop, f.Family, f.Inst, f.Rule)
}

// Report is the audit of a set of functions.
type Report struct {
	Loops     []LoopReport
	Resources map[Key]Resources
	Funcs     []Key // in the order of the SASS
	Findings  []Finding
	// Dispatch is, per entry with loops, the fewest instructions of a
	// path around its op loop (DispatchPath of opLoop).
	Dispatch map[Key]int
}

// Classify names the family of a loop from its own instructions: a spin
// is a wait, atomics make it sync, strong 64- or 128-bit accesses (the
// LL packets' volatile ones) a packet loop, stores to shared memory only
// the prologue's stage; loads without 128-bit ones whose stores all go
// to the stack are an op's setup; weak data loops are copies,
// reductions or fan-outs by their bytes loaded against stored, and a
// loop with strong 32-bit accesses only (progress records) is control.
func Classify(own []Inst) string {
	var ld, st, shared, local, weak int
	strong, wide := false, false
	for _, in := range own {
		switch {
		case in.Base() == "NANOSLEEP":
			return FamWait
		case isAtomic(in):
			return FamSync
		}
	}
	for _, in := range own {
		a, ok := Decode(in)
		if !ok {
			continue
		}
		switch a.Space {
		case Shared:
			if a.Store {
				shared++
			}
			continue
		case Local:
			if a.Store {
				local++
			}
			continue
		}
		if a.Scope != "weak" && a.Scope != "constant" && a.Width >= 64 {
			strong = true
		}
		if a.Scope == "weak" || a.Scope == "constant" {
			weak++
		}
		if a.Width == 128 {
			wide = true
		}
		if a.Store {
			st += a.Bytes()
		} else {
			ld += a.Bytes()
		}
	}
	switch {
	case strong:
		return FamPacket
	case st == 0 && shared > 0:
		return FamStage
	case st == 0 && local > 0 && !wide:
		return FamSetup
	case ld == 0 && st == 0, weak == 0:
		return FamControl
	case ld == st:
		return FamCopy
	case ld > st:
		return FamReduce
	}
	return FamFanout
}

// Audit counts every loop of funcs and checks the rules: no function
// spills (res, from ptxas); in the Simple protocol's innermost data
// loops (Leaf: no data loop nested in them; a spin may be) every access
// is 128 bits wide, global, and every store weak; innermost packet
// loops address global memory. (An outer loop holds
// what runs once per many rounds, such as the heartbeat between chunks
// of rounds, and whatever of its inner loop's first round the compiler
// placed ahead of it.) Loops in called functions (syms) named with
// "fallback" (the unaligned paths) are counted but exempt.
func Audit(funcs []Function, syms []Sym, res map[Key]Resources) Report {
	rep := Report{Resources: res, Dispatch: map[Key]int{}}
	spills := func(k Key) {
		if r, ok := res[k]; ok && (r.SpillStores > 0 || r.SpillLoads > 0) {
			rep.Findings = append(rep.Findings, Finding{Arch: k.Arch, Func: k.Name,
				Rule: fmt.Sprintf("spills %d B of stores and %d B of loads (ptxas)", r.SpillStores, r.SpillLoads)})
		}
	}
	for _, f := range funcs {
		k := Key{f.Arch, f.Name}
		rep.Funcs = append(rep.Funcs, k)
		spills(k)
		for _, s := range syms {
			if _, ok := res[Key{f.Arch, s.Name}]; ok && s.Arch == f.Arch && s.Entry == f.Name {
				rep.Funcs = append(rep.Funcs, Key{f.Arch, s.Name})
				spills(Key{f.Arch, s.Name})
			}
		}
		loops := Loops(f)
		if i := opLoop(loops); i >= 0 {
			rep.Dispatch[k] = DispatchPath(f, loops[i])
		}
		fams := make([]string, len(loops))
		leaf := make([]bool, len(loops))
		marked := make([]bool, len(loops)) // a fallback loop: it holds the mark itself
		for i, l := range loops {
			fams[i], leaf[i] = Classify(l.Own), true
			for _, in := range l.Own {
				if in.Base() == fallbackInst {
					marked[i] = true
				}
			}
		}
		for i := len(loops) - 1; i >= 0; i-- { // children after parents
			if p := loops[i].Parent; p >= 0 && (!leaf[i] || Simple(fams[i]) || fams[i] == FamPacket) {
				leaf[p] = false
			}
		}
		for i, l := range loops {
			name, fallback := owner(syms, f.Arch, f.Name, l.Header)
			fallback = fallback || marked[i]
			lr := LoopReport{Arch: f.Arch, Func: name, Entry: f.Name, Loop: l, Family: fams[i], Fallback: fallback, Leaf: leaf[i],
				Kinds: map[string]int{}, Insts: len(l.Own)}
			for _, in := range l.Own {
				a, ok := Decode(in)
				if !ok {
					continue
				}
				switch a.Space {
				case Local:
					lr.Local++
					continue
				case Shared:
					continue
				}
				lr.Kinds[a.Kind()]++
				if a.Store {
					lr.Stores++
					lr.StoreBytes += a.Bytes()
				} else {
					lr.Loads++
					lr.LoadBytes += a.Bytes()
				}
				if fallback || !lr.Leaf {
					continue // the rules are for the innermost data loops
				}
				fail := func(rule string) {
					rep.Findings = append(rep.Findings, Finding{Arch: f.Arch, Func: name, Loop: l.Header,
						Family: lr.Family, Inst: in, Rule: rule})
				}
				if (Simple(lr.Family) || lr.Family == FamPacket) && a.Space == Generic {
					fail("generic access in a data loop (want LDG/STG)")
				}
				if Simple(lr.Family) && a.Width < 128 {
					fail(fmt.Sprintf("%d-bit access in a Simple-protocol data loop (want 128)", a.Width))
				}
				if Simple(lr.Family) && a.Store && a.Scope != "weak" {
					fail(a.Scope + " store in a Simple-protocol data loop (want a weak store, the fence at the signal)")
				}
			}
			rep.Loops = append(rep.Loops, lr)
		}
	}
	return rep
}

// Row is one line of the summary: the data loops of one family in one
// function.
type Row struct {
	Arch, Func, Family string
	Fallback           bool
	Loops              int
	LdMin, LdMax       float64 // data loads per 16 B
	StMin, StMax       float64 // data stores per 16 B
	InMin, InMax       float64 // instructions per 16 B
	Kinds              []string
	Local              int
}

// Summary folds the innermost loops that move data into one row per
// function and family, in the order of the SASS; with merge false, one
// row per architecture and family over every function (Func then counts
// the functions).
func (rep Report) Summary(merge bool) []Row {
	order := map[Key]int{}
	for i, k := range rep.Funcs {
		order[k] = i
	}
	type rk struct {
		k   Key
		fam string
	}
	rows := map[rk]*Row{}
	kinds := map[rk]map[string]bool{}
	funcsOf := map[rk]map[string]bool{}
	var keys []rk
	for _, l := range rep.Loops {
		if l.Moved() == 0 || !l.Leaf {
			continue
		}
		key := rk{Key{l.Arch, l.Func}, l.Family}
		if merge {
			key.k.Name = ""
		}
		if l.Fallback {
			key.fam += " (fallback)"
		}
		r := rows[key]
		if r == nil {
			r = &Row{Arch: l.Arch, Func: l.Func, Family: l.Family, Fallback: l.Fallback,
				LdMin: 1e18, StMin: 1e18, InMin: 1e18}
			rows[key] = r
			kinds[key] = map[string]bool{}
			keys = append(keys, key)
			funcsOf[key] = map[string]bool{}
		}
		funcsOf[key][l.Func] = true
		r.Loops++
		ld, st, in := l.Per16(l.Loads), l.Per16(l.Stores), l.Per16(l.Insts)
		r.LdMin, r.LdMax = minf(r.LdMin, ld), maxf(r.LdMax, ld)
		r.StMin, r.StMax = minf(r.StMin, st), maxf(r.StMax, st)
		r.InMin, r.InMax = minf(r.InMin, in), maxf(r.InMax, in)
		r.Local += l.Local
		for k := range l.Kinds {
			kinds[key][k] = true
		}
	}
	famOrder := map[string]int{FamSetup: 0, FamCopy: 1, FamReduce: 2, FamFanout: 3, FamPacket: 4, FamStage: 5, FamWait: 6, FamSync: 7}
	rank := func(k rk) int {
		f, fb := strings.CutSuffix(k.fam, " (fallback)")
		if fb {
			return 10 + famOrder[f]
		}
		return famOrder[f]
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if merge {
			if keys[i].k.Arch != keys[j].k.Arch {
				return keys[i].k.Arch < keys[j].k.Arch
			}
		} else if order[keys[i].k] != order[keys[j].k] {
			return order[keys[i].k] < order[keys[j].k]
		}
		return rank(keys[i]) < rank(keys[j])
	})
	out := make([]Row, 0, len(keys))
	for _, k := range keys {
		r := rows[k]
		for kind := range kinds[k] {
			r.Kinds = append(r.Kinds, kind)
		}
		sort.Strings(r.Kinds)
		if merge {
			r.Func = itoa(len(funcsOf[k])) + " functions"
		}
		out = append(out, *r)
	}
	return out
}

func minf(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func span(lo, hi float64) string {
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// WriteTable writes the summary as a markdown table (merge: one row
// per architecture and family, see Summary), then the resources of every
// function and the count of findings by rule.
func (rep Report) WriteTable(w io.Writer, merge bool) error {
	var b strings.Builder
	b.WriteString("| arch | function | family | loops | ld / 16 B | st / 16 B | instructions / 16 B | accesses | local |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Summary(merge) {
		fam := r.Family
		if r.Fallback {
			fam += " (fallback, exempt)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %d |\n", r.Arch, r.Func, fam, r.Loops,
			span(r.LdMin, r.LdMax), span(r.StMin, r.StMax), span(r.InMin, r.InMax), strings.Join(r.Kinds, " "), r.Local)
	}
	b.WriteString("\n| arch | function | registers | stack (B) | spill stores (B) | spill loads (B) |\n|---|---|---|---|---|---|\n")
	for _, k := range rep.Funcs {
		r, ok := rep.Resources[k]
		if !ok {
			fmt.Fprintf(&b, "| %s | %s | ? | ? | ? | ? |\n", k.Arch, k.Name)
			continue
		}
		regs := "-" // ptxas reports registers for entries only
		if r.Registers > 0 {
			regs = itoa(r.Registers)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d |\n", k.Arch, k.Name, regs, r.Stack, r.SpillStores, r.SpillLoads)
	}
	byRule := map[string]int{}
	for _, f := range rep.Findings {
		rule := f.Rule
		if f.Family == "" {
			rule = "spills"
		}
		byRule[rule]++
	}
	rules := make([]string, 0, len(byRule))
	for r := range byRule {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	fmt.Fprintf(&b, "\nfindings: %d\n", len(rep.Findings))
	for _, r := range rules {
		fmt.Fprintf(&b, "- %d × %s\n", byRule[r], r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReplaceBlock rewrites the lines between "<!-- gpu-sass:begin -->" and
// "<!-- gpu-sass:end -->" of the markdown file path with note and table.
func ReplaceBlock(path, note, table string) error {
	const begin, end = "<!-- gpu-sass:begin -->", "<!-- gpu-sass:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q block", path, begin, end)
	}
	body := "\n"
	if note != "" {
		body += note + "\n\n"
	}
	body += table
	return os.WriteFile(path, []byte(s[:i+len(begin)]+body+s[j:]), 0o644)
}
