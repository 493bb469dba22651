package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/diagnose"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// maxExplained bounds the (rank, chunk) groups of wrong elements whose
// first element explainWrong traces; the others are counted only.
const maxExplained = 256

// maxPatterns bounds the patterns explainWrong shows.
const maxPatterns = 8

// maxPathShown bounds the steps shown of one arrival.
const maxPathShown = 4

// wrongGroup is the wrong elements of one chunk of one rank's output.
type wrongGroup struct {
	rank  int
	chunk uint64
	first harness.WrongElement
	n     uint64
}

// pattern is the wrong elements whose explanations name the same ops.
type pattern struct {
	key    string
	x      *cpu.Explanation
	first  harness.WrongElement
	n      uint64
	groups []wrongGroup
}

// explainWrong re-runs the size of inst on the CPU backend with the
// movement log on (cpu.Provenance), then groups the wrong elements by
// the ops their explanations name and prints one summary line per
// pattern, with the explanation of its first element: the contributions
// that arrived, the missing ones with the op that should have brought
// each, the extra ones with the ops they came through. It returns false
// when it cannot explain (a collective whose elements have no defined
// contributions, or a re-run without wrong data), and the caller falls
// back to the last writers.
func explainWrong(ctx context.Context, w io.Writer, inst *executor.Instance, l *harness.Layout, checker *harness.Checker, opts executor.Options) bool {
	if l.Contributions(0, 0) == nil {
		return false
	}
	opts.Race = false
	bufs := l.Alloc()
	if err := checker.FillInputs(l, bufs, 0); err != nil {
		return false
	}
	prov, err := cpu.Provenance(ctx, inst, opts, bufs)
	if err != nil {
		fmt.Fprintf(w, "  (the re-run with provenance tracking failed: %v)\n", err)
		return false
	}
	wrong, err := checker.Check(l, bufs, 0)
	if err != nil {
		return false
	}
	var groups []wrongGroup
	var total uint64
	for r, n := range wrong {
		if n == 0 {
			continue
		}
		total += n
		for _, e := range l.Wrong(bufs, 0, r, int(n)) {
			chunk := uint64(0)
			if inst.ChunkBytes > 0 {
				chunk = e.Offset / inst.ChunkBytes
			}
			if k := len(groups); k > 0 && groups[k-1].rank == r && groups[k-1].chunk == chunk {
				groups[k-1].n++
				continue
			}
			groups = append(groups, wrongGroup{rank: r, chunk: chunk, first: e, n: 1})
		}
	}
	if total == 0 {
		fmt.Fprintf(w, "  (a re-run on the CPU backend with provenance tracking found no wrong data: the failure depends on earlier launches or on the backend)\n")
		return false
	}
	var pats []*pattern
	var unexplained uint64
	for i, g := range groups {
		if i >= maxExplained {
			unexplained += g.n
			continue
		}
		x := prov.Explain(g.rank, g.first.Offset, l.Contributions(g.rank, g.first.Offset))
		key := explanationKey(x)
		j := slices.IndexFunc(pats, func(p *pattern) bool { return p.key == key })
		if j < 0 {
			pats = append(pats, &pattern{key: key, x: x, first: g.first})
			j = len(pats) - 1
		}
		pats[j].n += g.n
		pats[j].groups = append(pats[j].groups, g)
	}
	printCauses(w, rankCauses(inst, pats, prov.Readers), total, "wrong elements")
	fmt.Fprintf(w, "  %d wrong element(s) in %d pattern(s) (a re-run of this size on the CPU backend, tracking which inputs reach each element):\n", total, len(pats))
	for i, p := range pats {
		if i == maxPatterns {
			var n uint64
			for _, q := range pats[i:] {
				n += q.n
			}
			fmt.Fprintf(w, "  and %d more pattern(s) of %d element(s)\n", len(pats)-i, n)
			break
		}
		fmt.Fprintf(w, "  pattern %d: %d element(s) in %s\n", i+1, p.n, groupList(p.groups, inst.ChunkBytes))
	}
	if unexplained > 0 {
		fmt.Fprintf(w, "  and %d element(s) in further chunks, not examined\n", unexplained)
	}
	for i, p := range pats[:min(len(pats), maxPatterns)] {
		fmt.Fprintf(w, "  pattern %d, first element: rank %d output[%d]%s: want %g, got %g\n", i+1, p.first.Rank, p.first.Offset, chunkOf(inst, p.first.Offset), p.first.Want, p.first.Got)
		printExplanation(w, inst, l.BufferLayout, p.x)
	}
	return true
}

// explanationKey identifies the ops an explanation names: elements with
// the same key went wrong the same way.
func explanationKey(x *cpu.Explanation) string {
	var parts []string
	for _, m := range x.Missing {
		k := "miss " + m.How
		if m.Step != nil {
			k += " " + stepKey(*m.Step)
		}
		parts = append(parts, k)
	}
	for _, a := range x.Extra {
		k := "extra"
		if len(a.Path) > 0 {
			k += " " + stepKey(a.Path[0])
		}
		parts = append(parts, k)
	}
	if len(parts) == 0 && len(x.Holes) > 0 {
		parts = append(parts, "holes")
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// stepKey is the op of a step as the author wrote it: its type and .star
// lines when the plan has them (the same line on every rank is one
// mistake), else its rank, thread block and place in the plan.
func stepKey(s cpu.Step) string {
	switch {
	case s.Op == nil:
		return fmt.Sprintf("%d/%d", s.Rank, s.TB)
	case len(s.Op.Source) > 0:
		return s.Op.Type.String() + " " + strings.Join(s.Op.Source, ",")
	}
	return fmt.Sprintf("%d/%d/%s", s.Rank, s.TB, s.Op.Describe())
}

// groupList is "rank 0 chunks 1, 3; rank 2 chunk 1", at most 8 ranks.
func groupList(gs []wrongGroup, chunkBytes uint64) string {
	var parts []string
	for i := 0; i < len(gs); {
		j := i
		var chunks []string
		for ; j < len(gs) && gs[j].rank == gs[i].rank; j++ {
			chunks = append(chunks, fmt.Sprint(gs[j].chunk))
		}
		if chunkBytes == 0 {
			parts = append(parts, fmt.Sprintf("rank %d", gs[i].rank))
		} else if len(chunks) == 1 {
			parts = append(parts, fmt.Sprintf("rank %d chunk %s", gs[i].rank, chunks[0]))
		} else {
			parts = append(parts, fmt.Sprintf("rank %d chunks %s", gs[i].rank, strings.Join(chunks, ", ")))
		}
		i = j
	}
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("and %d more ranks", len(parts)-8))
	}
	return strings.Join(parts, "; ")
}

// chunkOf is " (chunk K)" for a byte offset, or "" when the
// plan's chunks have no size.
func chunkOf(inst *executor.Instance, off uint64) string {
	if inst.ChunkBytes == 0 {
		return ""
	}
	return fmt.Sprintf(" (chunk %d)", off/inst.ChunkBytes)
}

func placeText(inst *executor.Instance, p cpu.Place) string {
	return p.String() + chunkOf(inst, p.Offset)
}

func contribText(inst *executor.Instance, c cpu.Contribution) string {
	return placeText(inst, cpu.Place{Rank: c.Rank, Buffer: plan.Input, Offset: c.Offset})
}

func stepText(s cpu.Step) string {
	t := fmt.Sprintf("rank %d tb %d ", s.Rank, s.TB)
	if s.Op != nil {
		t += s.Op.Describe()
	} else {
		t += "an op"
	}
	if s.Iter >= 0 {
		t += fmt.Sprintf(" iteration %d", s.Iter)
	}
	if s.Proxy {
		t += " (its proxy's transfer)"
	}
	return t
}

// instead names an extra element of the same rank that arrived where a
// missing one that no op moved was expected (a wrong chunk index), and
// the op that read it: "; rank 1 input[1024] (chunk 1) arrived in its
// place, read by ...".
func instead(inst *executor.Instance, x *cpu.Explanation, m cpu.Miss) string {
	for _, a := range x.Extra {
		if a.From.Rank == m.Want.Rank && len(a.Path) > 0 {
			return fmt.Sprintf("; %s arrived in its place, read by %s", contribText(inst, a.From), stepText(a.Path[0]))
		}
	}
	return ""
}

// printExplanation prints what reached an element, what is missing and
// why, and what is extra.
func printExplanation(w io.Writer, inst *executor.Instance, l *executor.BufferLayout, x *cpu.Explanation) {
	want := l.Contributions(x.Element.Rank, x.Element.Offset)
	var got []string
	for _, a := range x.Arrivals {
		got = append(got, contribText(inst, a.From))
	}
	if len(got) == 0 {
		got = []string{"none"}
	}
	fmt.Fprintf(w, "    arrived (%d of the %d expected input elements): %s\n", len(x.Arrivals)-len(x.Extra), len(want), strings.Join(got, ", "))
	if len(x.Arrivals) > 0 && len(x.Arrivals[0].Path) > 0 {
		p := x.Arrivals[0].Path
		fmt.Fprintf(w, "    written by %s\n", stepText(p[len(p)-1]))
	}
	for _, h := range x.Holes {
		fmt.Fprintf(w, "    read %s, which no op wrote\n", placeText(inst, h))
	}
	for _, m := range x.Missing {
		what := contribText(inst, m.Want)
		switch m.How {
		case "unread":
			fmt.Fprintf(w, "    missing %s: no op reads it%s\n", what, instead(inst, x, m))
		case "overwritten":
			fmt.Fprintf(w, "    missing %s: %s wrote over it before any op read it%s\n", what, stepText(*m.Step), instead(inst, x, m))
		case "hole":
			fmt.Fprintf(w, "    missing %s: %s wrote it to %s; the result read %s instead, which no op wrote\n",
				what, stepText(*m.Step), placeText(inst, m.Step.Wrote), placeText(inst, m.Near))
		case "elsewhere":
			fmt.Fprintf(w, "    missing %s: %s read it with %s, which the result is built from, but wrote %s\n",
				what, stepText(*m.Step), placeText(inst, m.Near), placeText(inst, m.Step.Wrote))
		default:
			fmt.Fprintf(w, "    missing %s: it was last moved by %s, to %s, and no op brought it further\n",
				what, stepText(*m.Step), placeText(inst, m.Step.Wrote))
		}
	}
	for _, a := range x.Extra {
		what := "extra"
		if slices.ContainsFunc(want, func(c cpu.Contribution) bool { return c == a.From }) {
			what = "duplicate"
		}
		var via []string
		for i, s := range a.Path {
			if i == maxPathShown {
				via = append(via, fmt.Sprintf("%d more", len(a.Path)-maxPathShown))
				break
			}
			via = append(via, stepText(s))
		}
		fmt.Fprintf(w, "    %s %s, via %s\n", what, contribText(inst, a.From), strings.Join(via, " -> "))
	}
	if x.Truncated {
		fmt.Fprintf(w, "    (the walk back stopped after too many steps)\n")
	}
}

// maxReportLines bounds a wrong-data or deadlock report unless --explain
// is given: the most likely cause comes first, the detail after it.
const maxReportLines = 25

// maxOtherCauses bounds the candidates printed after the most likely one.
const maxOtherCauses = 2

// cause is one candidate cause of wrong data: an op (by its type and
// .star lines) and the reason, with how many wrong elements it explains.
type cause struct {
	key  string
	text string
	// rank orders the kinds of evidence: 0 an op that read what no op
	// wrote or brought an unexpected input, 1 an op that wrote where the
	// result did not read, 2 the last op that moved a missing input.
	rank int
	n    uint64
	seen int // the pattern that last counted it
}

// opAt is "the put at x.star:9:28" for an op with .star lines, else
// "the put of rank R tb T op K".
func opAt(s cpu.Step) string {
	if s.Op == nil {
		return fmt.Sprintf("an op of rank %d tb %d", s.Rank, s.TB)
	}
	return opName(s.Op, s.Rank, s.TB, false)
}

// opName is "the put at x.star:9:28", or "the put of rank R tb T op K"
// without .star lines. A fused op has the lines of the calls it was
// fused from, the reading part (a reduce) first and the sending part (a
// put) last; sending names the sending part first.
func opName(op *executor.OpInstance, rank, tb int, sending bool) string {
	if len(op.Source) == 0 {
		return fmt.Sprintf("the %s of rank %d tb %d %s", op.Type, rank, tb, op.Path)
	}
	src := op.Source
	if sending && len(src) > 1 {
		src = slices.Clone(src)
		slices.Reverse(src)
	}
	return fmt.Sprintf("the %s at %s", op.Type, strings.Join(src, ", "))
}

// where is "rank 1 tb 0 op 3" of a step, for the cause line.
func where(s cpu.Step) string {
	if s.Op == nil {
		return fmt.Sprintf("rank %d tb %d", s.Rank, s.TB)
	}
	t := fmt.Sprintf("rank %d tb %d %s", s.Rank, s.TB, s.Op.Path)
	if s.Iter >= 0 {
		t += fmt.Sprintf(" iteration %d", s.Iter)
	}
	return t
}

// chunkText is "output chunk 2 of rank 1" (or "rank 1 output[4096]"
// when the plan's chunks have no size or the place is an LL plan's
// scratch, where packets take twice their data).
func chunkText(inst *executor.Instance, p cpu.Place) string {
	if inst.ChunkBytes == 0 || p.Buffer == plan.Scratch && (inst.Plan == nil || inst.Plan.Protocol == "LL") {
		return p.String()
	}
	return fmt.Sprintf("%s chunk %d of rank %d", p.Buffer.Name(), p.Offset/inst.ChunkBytes, p.Rank)
}

// causesOf lists the candidate causes one explanation names; readers
// counts the ops that read a place in the re-run.
func causesOf(inst *executor.Instance, x *cpu.Explanation, readers func(cpu.Place) int) []cause {
	var cs []cause
	// A missing input left in scratch, which no op read after, and an op
	// on the result's way that read another place of the same scratch:
	// that op read the wrong slot, or the write went to the wrong one.
	for _, m := range x.Missing {
		if m.How != "last" || m.Step == nil || m.Step.Wrote.Buffer != plan.Scratch {
			continue
		}
		w := m.Step.Wrote
		var near *cpu.Step
		var nearDist uint64
		for _, a := range x.Arrivals {
			for i := range a.Path {
				st := &a.Path[i]
				if st.Op == nil || st.Read.Rank != w.Rank || st.Read.Buffer != w.Buffer || st.Read.Offset == w.Offset {
					continue
				}
				d := max(st.Read.Offset, w.Offset) - min(st.Read.Offset, w.Offset)
				if near == nil || d < nearDist {
					near, nearDist = st, d
				}
			}
		}
		if near == nil {
			continue
		}
		misread := cause{key: "misread " + stepKey(*near), rank: 0,
			text: fmt.Sprintf("%s reads %s, where %s wrote %s, which no op reads (%s)",
				opAt(*near), chunkText(inst, near.Read), opName(m.Step.Op, m.Step.Rank, m.Step.TB, true), chunkText(inst, w), where(*near))}
		astray := cause{key: "astray " + stepKey(*m.Step), rank: 0,
			text: fmt.Sprintf("%s wrote %s, which no op reads, where %s reads %s (%s)",
				opName(m.Step.Op, m.Step.Rank, m.Step.TB, true), chunkText(inst, w), opAt(*near), chunkText(inst, near.Read), where(*m.Step))}
		// A place another op reads too was not this read's to take: the
		// read is wrong. Else the write went astray (or, as likely from
		// the places alone, the read did).
		if readers(near.Read) > 1 {
			astray.rank = 1
			cs = append(cs, misread, astray)
		} else {
			misread.rank = 1
			cs = append(cs, astray, misread)
		}
	}
	for i, h := range x.Holes {
		if i >= len(x.HoleReaders) || x.HoleReaders[i].Op == nil {
			continue
		}
		s := x.HoleReaders[i]
		late := ""
		// A read before its guarding wait (the wait moved after the op
		// it guards): name the wait.
		if g, ok := diagnose.GuardingWait(inst, s.Rank, s.TB, s.Op, executor.Region{Rank: s.Rank, Buffer: h.Buffer, Offset: h.Offset, Size: 1}); ok && !s.Proxy {
			late = fmt.Sprintf(", before its guarding wait: %s, which comes after it, orders it after rank %d's write there", g.Other.Name(), g.Peer)
		}
		cs = append(cs, cause{key: "read " + stepKey(s) + " " + h.Buffer.Name(), rank: 0,
			text: fmt.Sprintf("%s reads %s, which no op wrote before it (%s)%s", opAt(s), chunkText(inst, h), where(s), late)})
	}
	for _, a := range x.Extra {
		if len(a.Path) == 0 {
			continue
		}
		s := a.Path[0]
		from := cpu.Place{Rank: a.From.Rank, Buffer: plan.Input, Offset: a.From.Offset}
		text := fmt.Sprintf("%s reads %s, which %s should not contain (%s)", opAt(s), chunkText(inst, from), chunkText(inst, x.Element), where(s))
		for _, m := range x.Missing {
			if m.Want.Rank == a.From.Rank && m.Want != a.From {
				want := cpu.Place{Rank: m.Want.Rank, Buffer: plan.Input, Offset: m.Want.Offset}
				text = fmt.Sprintf("%s reads %s where %s is needed (%s)", opAt(s), chunkText(inst, from), chunkText(inst, want), where(s))
				break
			}
		}
		// An op that accumulates into the element it read (a local
		// reduce in place) did not choose that element: the data it
		// summed in did; weaker evidence than an op that fetched it.
		r := 0
		if s.Read == s.Wrote {
			r = 1
		}
		cs = append(cs, cause{key: "extra " + stepKey(s), rank: r, text: text})
	}
	for _, m := range x.Missing {
		if m.Step == nil {
			continue
		}
		s := *m.Step
		switch m.How {
		case "hole":
			cs = append(cs, cause{key: "hole " + stepKey(s), rank: 1,
				text: fmt.Sprintf("%s wrote %s, where the result reads %s, which no op wrote (%s)", opAt(s), chunkText(inst, s.Wrote), chunkText(inst, m.Near), where(s))})
		case "elsewhere":
			cs = append(cs, cause{key: "elsewhere " + stepKey(s), rank: 1,
				text: fmt.Sprintf("%s read %s, which the result is built from, but wrote %s (%s)", opAt(s), chunkText(inst, m.Near), chunkText(inst, s.Wrote), where(s))})
		case "overwritten":
			cs = append(cs, cause{key: "over " + stepKey(s), rank: 2,
				text: fmt.Sprintf("%s wrote over %s before any op read it (%s)", opAt(s), chunkText(inst, cpu.Place{Rank: m.Want.Rank, Buffer: plan.Input, Offset: m.Want.Offset}), where(s))})
		default:
			cs = append(cs, cause{key: "last " + stepKey(s), rank: 2,
				text: fmt.Sprintf("%s moved %s last, to %s, and no op brought it further (%s)", opAt(s), chunkText(inst, cpu.Place{Rank: m.Want.Rank, Buffer: plan.Input, Offset: m.Want.Offset}), chunkText(inst, s.Wrote), where(s))})
		}
	}
	return cs
}

// rankCauses orders the candidate causes of the patterns by how many
// wrong elements they explain (each pattern counts once per cause), then
// by the kind of evidence.
func rankCauses(inst *executor.Instance, pats []*pattern, readers func(cpu.Place) int) []*cause {
	byKey := map[string]*cause{}
	var out []*cause
	for i, p := range pats {
		for _, c := range causesOf(inst, p.x, readers) {
			k := byKey[c.key]
			if k == nil {
				c := c
				c.seen = -1
				k = &c
				byKey[c.key] = k
				out = append(out, k)
			}
			if k.seen != i {
				k.n += p.n
				k.seen = i
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *cause) int {
		switch wa, wb := a.weight(), b.weight(); {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return a.rank - b.rank
	})
	return out
}

// weight is how strongly c is the cause: the wrong elements it explains,
// halved for each step of weaker evidence (an op that wrote elsewhere
// counts half, the last mover of a missing input a quarter: it is often
// a correct op the data never reached).
func (c *cause) weight() float64 {
	return float64(c.n) / float64(uint64(1)<<c.rank)
}

// printCauses prints the most likely cause and up to maxOtherCauses
// others, each with the share of the wrong elements it explains.
func printCauses(w io.Writer, cs []*cause, total uint64, what string) {
	for i, c := range cs {
		switch {
		case i == 0:
			fmt.Fprintf(w, "  most likely cause: %s; it explains %d of the %d %s\n", c.text, c.n, total, what)
		case i <= maxOtherCauses:
			fmt.Fprintf(w, "  or: %s; %d of the %d\n", c.text, c.n, total)
		}
	}
}

// limitLines copies text to w, cut to limit lines (limit <= 0: all of it)
// with a last line saying how many more --explain prints.
func limitLines(w io.Writer, text string, limit int) {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if limit <= 0 || len(lines) <= limit {
		io.WriteString(w, text)
		return
	}
	io.WriteString(w, strings.Join(lines[:limit-1], ""))
	fmt.Fprintf(w, "  ... %d more line(s) of detail (run with --explain for the whole report)\n", len(lines)-limit+1)
}
