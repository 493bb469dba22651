package cpu

import (
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/diagnose"
	"github.com/mscclgo/mscclgo/plan"
)

// Key is the op of a step as the author wrote it: its type and .star
// lines when the plan has them (the same line on every rank is one
// mistake), else its rank, thread block and place in the plan.
func (s Step) Key() string {
	switch {
	case s.Op == nil:
		return fmt.Sprintf("%d/%d", s.Rank, s.TB)
	case len(s.Op.Source) > 0:
		return s.Op.Type.String() + " " + strings.Join(s.Op.Source, ",")
	}
	return fmt.Sprintf("%d/%d/%s", s.Rank, s.TB, s.Op.Describe())
}

// ref is the step's op.
func (s Step) ref() diagnose.OpRef { return diagnose.OpRef{Rank: s.Rank, TB: s.TB, Op: s.Op} }

// where is "rank 1 tb 0 op 3 iteration 2" of a step, for a cause line.
func (s Step) where() string {
	t := s.ref().Where()
	if s.Op != nil && s.Iter >= 0 {
		t += fmt.Sprintf(" iteration %d", s.Iter)
	}
	return t
}

// region is p as a one-byte region.
func (p Place) region() executor.Region {
	return executor.Region{Rank: p.Rank, Buffer: p.Buffer, Offset: p.Offset, Size: 1, Switch: -1}
}

// chunkText is "output chunk 2 of rank 1" (or "rank 1 output[4096]"
// when the plan's chunks have no size or the place is an LL plan's
// scratch, where packets take twice their data).
func chunkText(inst *executor.Instance, p Place) string {
	if inst.ChunkBytes == 0 || p.Buffer == plan.Scratch && (inst.Plan == nil || inst.Plan.Protocol == "LL") {
		return p.String()
	}
	return fmt.Sprintf("%s chunk %d of rank %d", p.Buffer.Name(), p.Offset/inst.ChunkBytes, p.Rank)
}

// inputPlace is the input element of a contribution.
func inputPlace(c Contribution) Place {
	return Place{Rank: c.Rank, Buffer: plan.Input, Offset: c.Offset}
}

// Causes lists the candidate causes of the wrong element x explains, as
// typed values (executor/diagnose), each counting n wrong elements (the
// wrong elements that went wrong as x's did) and named at most once;
// diagnose.Rank merges the causes of several explanations and orders
// them. The kinds, the strongest evidence first: an op on the result's
// way that read another slot of the scratch where a missing input was
// left unread (WrongSlotRead, when another op reads that place too, else
// the write gone astray, WrongSlotWrite); a read of what no op wrote
// (ReadBeforeWait when a later wait of its thread block would have
// ordered the peer's write first, else ReadUnwritten); an unexpected
// input read (WrongInput); then a write beside the place read
// (WroteElsewhere), a read of the result's place with a write elsewhere
// (ReadButWroteElsewhere), and, weakest, an input overwritten or the
// last move of a missing input.
func (p *Prov) Causes(inst *executor.Instance, x *Explanation, n uint64) []diagnose.Cause {
	var cs []diagnose.Cause
	seen := map[string]bool{}
	add := func(c diagnose.Cause) {
		if seen[c.Key] {
			return
		}
		seen[c.Key] = true
		c.Count = n
		if c.Peer == 0 && c.Kind != diagnose.ReadBeforeWait {
			c.Peer = -1
		}
		cs = append(cs, c)
	}
	for _, c := range p.slotCauses(inst, x) {
		add(c)
	}
	for i, h := range x.Holes {
		if i >= len(x.HoleReaders) || x.HoleReaders[i].Op == nil {
			continue
		}
		s := x.HoleReaders[i]
		c := diagnose.Cause{Kind: diagnose.ReadUnwritten, Op: s.ref(), Place: h.region(), Key: "read " + s.Key() + " " + h.Buffer.Name(),
			Text: fmt.Sprintf("%s reads %s, which no op wrote before it (%s)", s.ref().Name(), chunkText(inst, h), s.where())}
		// A read before its guarding wait (the wait moved after the op
		// it guards): name the wait.
		if g, ok := diagnose.GuardingWait(inst, s.Rank, s.TB, s.Op, Place{Rank: s.Rank, Buffer: h.Buffer, Offset: h.Offset}.region()); ok && !s.Proxy {
			c.Kind, c.Other, c.Peer = diagnose.ReadBeforeWait, g.Other, g.Peer
			c.Text += fmt.Sprintf(", before its guarding wait: %s, which comes after it, orders it after rank %d's write there", g.Other.Name(), g.Peer)
		}
		add(c)
	}
	for _, a := range x.Extra {
		if len(a.Path) == 0 {
			continue
		}
		s := a.Path[0]
		from := inputPlace(a.From)
		text := fmt.Sprintf("%s reads %s, which %s should not contain (%s)", s.ref().Name(), chunkText(inst, from), chunkText(inst, x.Element), s.where())
		for _, m := range x.Missing {
			if m.Want.Rank == a.From.Rank && m.Want != a.From {
				text = fmt.Sprintf("%s reads %s where %s is needed (%s)", s.ref().Name(), chunkText(inst, from), chunkText(inst, inputPlace(m.Want)), s.where())
				break
			}
		}
		// An op that accumulates into the element it read (a local
		// reduce in place) did not choose that element: the data it
		// summed in did; weaker evidence than an op that fetched it.
		ev := 0
		if s.Read == s.Wrote {
			ev = 1
		}
		add(diagnose.Cause{Kind: diagnose.WrongInput, Op: s.ref(), Place: from.region(), Evidence: ev, Key: "extra " + s.Key(), Text: text})
	}
	for _, m := range x.Missing {
		if m.Step == nil {
			continue
		}
		s := *m.Step
		switch m.How {
		case "hole":
			add(diagnose.Cause{Kind: diagnose.WroteElsewhere, Op: s.ref(), Place: m.Near.region(), Wrote: s.Wrote.region(), Evidence: 1, Key: "hole " + s.Key(),
				Text: fmt.Sprintf("%s wrote %s, where the result reads %s, which no op wrote (%s)", s.ref().Name(), chunkText(inst, s.Wrote), chunkText(inst, m.Near), s.where())})
		case "elsewhere":
			add(diagnose.Cause{Kind: diagnose.ReadButWroteElsewhere, Op: s.ref(), Place: m.Near.region(), Wrote: s.Wrote.region(), Evidence: 1, Key: "elsewhere " + s.Key(),
				Text: fmt.Sprintf("%s read %s, which the result is built from, but wrote %s (%s)", s.ref().Name(), chunkText(inst, m.Near), chunkText(inst, s.Wrote), s.where())})
		case "overwritten":
			add(diagnose.Cause{Kind: diagnose.Overwritten, Op: s.ref(), Place: inputPlace(m.Want).region(), Evidence: 2, Key: "over " + s.Key(),
				Text: fmt.Sprintf("%s wrote over %s before any op read it (%s)", s.ref().Name(), chunkText(inst, inputPlace(m.Want)), s.where())})
		default:
			add(diagnose.Cause{Kind: diagnose.LastMover, Op: s.ref(), Place: inputPlace(m.Want).region(), Wrote: s.Wrote.region(), Evidence: 2, Key: "last " + s.Key(),
				Text: fmt.Sprintf("%s moved %s last, to %s, and no op brought it further (%s)", s.ref().Name(), chunkText(inst, inputPlace(m.Want)), chunkText(inst, s.Wrote), s.where())})
		}
	}
	return cs
}

// slotCauses names, for each missing input left in scratch that no op
// read after, the op on the result's way that read another place of the
// same scratch nearest to it: that op read the wrong slot, or the write
// went to the wrong one. A place another op reads too was not this
// read's to take: the read is the likelier mistake; else the write went
// astray (or, as likely from the places alone, the read did).
func (p *Prov) slotCauses(inst *executor.Instance, x *Explanation) []diagnose.Cause {
	var cs []diagnose.Cause
	for _, m := range x.Missing {
		if m.How != "last" || m.Step == nil || m.Step.Wrote.Buffer != plan.Scratch {
			continue
		}
		w := m.Step.Wrote
		var near *Step
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
		writer := m.Step.ref()
		misread := diagnose.Cause{Kind: diagnose.WrongSlotRead, Op: near.ref(), Other: writer, Place: near.Read.region(), Wrote: w.region(), Key: "misread " + near.Key(),
			Text: fmt.Sprintf("%s reads %s, where %s wrote %s, which no op reads (%s)",
				near.ref().Name(), chunkText(inst, near.Read), writer.SendingName(), chunkText(inst, w), near.where())}
		astray := diagnose.Cause{Kind: diagnose.WrongSlotWrite, Op: writer, Other: near.ref(), Place: near.Read.region(), Wrote: w.region(), Key: "astray " + m.Step.Key(),
			Text: fmt.Sprintf("%s wrote %s, which no op reads, where %s reads %s (%s)",
				writer.SendingName(), chunkText(inst, w), near.ref().Name(), chunkText(inst, near.Read), m.Step.where())}
		if p.Readers(near.Read) > 1 {
			astray.Evidence = 1
			cs = append(cs, misread, astray)
		} else {
			misread.Evidence = 1
			cs = append(cs, astray, misread)
		}
	}
	return cs
}
