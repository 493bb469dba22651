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
	var cs []diagnose.Cause
	for _, p := range pats {
		cs = append(cs, prov.Causes(inst, p.x, p.n)...)
	}
	printCauses(w, causeLines(diagnose.RankInPlanOrder(cs)), total, "wrong elements")
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
			k += " " + m.Step.Key()
		}
		parts = append(parts, k)
	}
	for _, a := range x.Extra {
		k := "extra"
		if len(a.Path) > 0 {
			k += " " + a.Path[0].Key()
		}
		parts = append(parts, k)
	}
	if len(parts) == 0 && len(x.Holes) > 0 {
		parts = append(parts, "holes")
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
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

// cause is one candidate cause as printCauses prints it: the reason,
// with how many wrong elements (blocked thread blocks, racing pairs) it
// explains. Deadlock and wrong-data causes are built as typed values
// (executor/diagnose, executor/cpu's Prov.Causes) and only printed here
// (causeLines), race causes too (diagnose.Races).
type cause struct {
	key  string
	text string
	// rank orders the kinds of evidence: 0 an op that read what no op
	// wrote or brought an unexpected input, 1 an op that wrote where the
	// result did not read, 2 the last op that moved a missing input.
	rank int
	n    uint64
}

// weight is how strongly c is the cause: the wrong elements it explains,
// halved for each step of weaker evidence (an op that wrote elsewhere
// counts half, the last mover of a missing input a quarter: it is often
// a correct op the data never reached).
func (c *cause) weight() float64 {
	return float64(c.n) / float64(uint64(1)<<c.rank)
}

// causeLines are the typed causes of a diagnosis (executor/diagnose,
// likelier first) as printCauses prints them.
func causeLines(cs []diagnose.Cause) []*cause {
	out := make([]*cause, len(cs))
	for i, c := range cs {
		out[i] = &cause{key: c.Key, text: c.Text, rank: c.Evidence, n: c.Count}
	}
	return out
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
