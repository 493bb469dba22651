package ir

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/plan"
)

// This file is the one text form of the IR, used for pass dumps and for the
// before/after tables of pass tests. It prints every field a pass reads or
// writes, including the ones the plan JSON leaves out (memory-channel ids of
// puts, put channel ids of reductions, data_sync bits, glres offsets), one
// op per line:
//
//	nop
//	barrier #0 tbs=[0,1]
//	signal memory ch={9,2} sync=both
//	sem_acquire sem=[0,1] sync=before
//	copy i[0:1] -> o[0:1] tbg=0/2
//	put memory ch=[0,1] i[0:1],i[2:3] -> rb0[3:4],rb1[0:1]
//	get memory ch=[0] rb0[1:2] -> i[0:1]
//	res memory sum ch=[0] putch=[0] src=i[0:1],i[1:2] dst=o[0:1] rdst=rb0[0:1]
//	glre switch sum ch=[0] buf=i off=0 size=1 chunk=r0:o[0:1]
//	gstore switch ch=[0] buf=i off=2 size=1 chunk=r0:o[0:1]
//	glres switch sum ch=[0] buf=i size=1 srcidx=[0] dstidx=[2]
//	pipeline unit=4096 chunks=2 {
//	  copy i[0:1] -> o[0:1]
//	}
//
// Chunk ranges are written as DSL slices, [index:index+size]; remote refs
// name the thread-block-local remote buffer index (rbN). Sets of channel ids
// are in braces, in iteration order; lists are in brackets.

// FormatOp returns the one-line form of o. For a pipeline it is the header
// line without the body; see SprintOps for the full form.
func FormatOp(o *Op) string {
	var b strings.Builder
	formatOp(&b, o)
	return b.String()
}

// SprintOps returns ops one per line, pipeline bodies indented by two
// spaces and closed by a "}" line. Every line ends in a newline.
func SprintOps(ops []*Op) string {
	var b strings.Builder
	writeOps(&b, ops, "")
	return b.String()
}

// SprintThreadBlock returns the text form of one thread block: a header
// line with its id and tables, then its ops indented by two spaces.
func SprintThreadBlock(tb *ThreadBlock) string {
	var b strings.Builder
	writeTB(&b, tb, "")
	return b.String()
}

// Sprint returns the text form of a whole program.
func Sprint(p *Program) string {
	var b strings.Builder
	writeProgram(&b, p)
	return b.String()
}

// Fprint writes the text form of p to w.
func Fprint(w io.Writer, p *Program) error {
	_, err := io.WriteString(w, Sprint(p))
	return err
}

func writeProgram(b *strings.Builder, p *Program) {
	fmt.Fprintf(b, "program %q ranks=%d instances=%d fusion=%t autosync=%t policy=%s\n",
		p.Name, p.NumRanks, p.Instances, p.InstrFusion, p.AutoSync, p.Policy)
	for _, g := range p.GPUs {
		fmt.Fprintf(b, "gpu %d in=%d out=%d scratch=%d\n", g.ID, g.InputChunks, g.OutputChunks, g.ScratchChunks)
		for _, c := range g.Channels {
			fmt.Fprintf(b, "  channels %s -> %s\n", c.Type, intList(c.ConnectedTo))
		}
		for _, s := range g.Switches {
			fmt.Fprintf(b, "  switch %s %s\n", s.Buffer, intList(s.Ranks))
		}
		for i, r := range g.RemoteBuffers {
			var kinds []string
			for _, t := range r.AccessTypes() {
				kinds = append(kinds, t.String())
			}
			fmt.Fprintf(b, "  remote %d r%d:%s (%s)\n", i, r.Rank, r.Buffer, strings.Join(kinds, ","))
		}
		if len(g.Semaphores) > 0 {
			b.WriteString("  semaphores [")
			for i, s := range g.Semaphores {
				if i > 0 {
					b.WriteByte(',')
				}
				if s == nil {
					b.WriteString("nil")
				} else {
					b.WriteString(s.String())
				}
			}
			b.WriteString("]\n")
		}
		for _, tb := range g.ThreadBlocks {
			writeTB(b, tb, "  ")
		}
	}
}

func writeTB(b *strings.Builder, tb *ThreadBlock, indent string) {
	fmt.Fprintf(b, "%stb %d", indent, tb.ID)
	for _, t := range tb.Channels {
		fmt.Fprintf(b, " ch.%s=%s", t.Type, intList(t.IDs))
	}
	for _, t := range tb.RemoteRefs {
		fmt.Fprintf(b, " rb.%s=%s", t.Type, intList(t.IDs))
	}
	b.WriteByte('\n')
	writeOps(b, tb.Ops, indent+"  ")
}

func writeOps(b *strings.Builder, ops []*Op, indent string) {
	for _, o := range ops {
		b.WriteString(indent)
		formatOp(b, o)
		b.WriteByte('\n')
		if o != nil && o.Kind == plan.OpPipeline {
			writeOps(b, o.Body, indent+"  ")
			b.WriteString(indent)
			b.WriteString("}\n")
		}
	}
}

func formatOp(b *strings.Builder, o *Op) {
	if o == nil {
		b.WriteString("<nil>")
		return
	}
	b.WriteString(o.Kind.String())
	if o.Kind > plan.OpGroupLoadReduce {
		fmt.Fprintf(b, "(%d)", uint8(o.Kind))
		return
	}
	switch o.Kind.Family() {
	case plan.FamSync:
		if o.Barrier != nil {
			fmt.Fprintf(b, " #%d tbs=%s", o.Barrier.ID, intList(o.Barrier.TBList))
		}
	case plan.FamDataSync:
		if o.IDSet != nil {
			b.WriteByte(' ')
			b.WriteString(o.ChannelType.String())
			b.WriteString(" ch={")
			writeInts(b, o.IDSet.Keys())
			b.WriteByte('}')
		}
		if o.SemaphoreIDs != nil {
			b.WriteString(" sem=")
			b.WriteString(intList(o.SemaphoreIDs))
		}
		b.WriteString(" sync=")
		b.WriteString(o.DataSync.String())
	case plan.FamCopy, plan.FamGet, plan.FamPut:
		if o.Kind.Family() != plan.FamCopy || o.ChannelType != NoChannel {
			writeChannels(b, o)
		}
		b.WriteByte(' ')
		writeRefs(b, o.Src)
		b.WriteString(" -> ")
		writeRefs(b, o.Dst)
	case plan.FamReduce:
		writeChannels(b, o)
		writeNamedRefs(b, "src", o.LocalSrc)
		writeNamedRefs(b, "rsrc", o.RemoteSrc)
		writeNamedRefs(b, "dst", o.LocalDst)
		writeNamedRefs(b, "pktdst", o.LocalPktDst)
		writeNamedRefs(b, "rdst", o.RemoteDst)
		if o.Packet {
			b.WriteString(" packet")
		}
	case plan.FamSwitch:
		writeChannels(b, o)
		fmt.Fprintf(b, " buf=%s", o.SwitchBuffer)
		if o.Kind == plan.OpMultiLoadReduceStore {
			fmt.Fprintf(b, " size=%d srcidx=%s dstidx=%s", o.Size, intList(o.SrcIndex), intList(o.DstIndex))
		} else {
			fmt.Fprintf(b, " off=%d size=%d", o.BufferOffset, o.Size)
		}
		if c := o.SwitchChunk; c != nil {
			fmt.Fprintf(b, " chunk=r%d:%s[%d:%d]", c.Rank, c.Buffer, c.Index, c.Index+c.Size)
		}
	case plan.FamPipeline:
		fmt.Fprintf(b, " unit=%d chunks=%d {", o.UnitSize, o.NumChunks)
	}
	if o.TBG != nil {
		fmt.Fprintf(b, " tbg=%d/%d", o.TBG.TBID, o.TBG.TBGSize)
	}
}

// writeChannels writes the channel type, the reduce operator of reductions
// and switch reductions, and the channel id lists.
func writeChannels(b *strings.Builder, o *Op) {
	b.WriteByte(' ')
	b.WriteString(o.ChannelType.String())
	if o.Kind.Family() == plan.FamReduce || o.Kind == plan.OpGroupLoadReduce || o.Kind == plan.OpMultiLoadReduceStore {
		b.WriteByte(' ')
		b.WriteString(o.ReduceOp.String())
	}
	if o.ChannelIDs != nil {
		b.WriteString(" ch=")
		b.WriteString(intList(o.ChannelIDs))
	}
	if o.PutChannelIDs != nil {
		b.WriteString(" putch=")
		b.WriteString(intList(o.PutChannelIDs))
	}
}

func writeNamedRefs(b *strings.Builder, name string, refs []Ref) {
	if len(refs) == 0 {
		return
	}
	b.WriteByte(' ')
	b.WriteString(name)
	b.WriteByte('=')
	writeRefs(b, refs)
}

func writeRefs(b *strings.Builder, refs []Ref) {
	if len(refs) == 0 {
		b.WriteString("-")
		return
	}
	for i, r := range refs {
		if i > 0 {
			b.WriteByte(',')
		}
		if r.Remote {
			b.WriteString("rb")
			b.WriteString(strconv.Itoa(r.BufferID))
		} else {
			b.WriteString(r.Buffer.String())
		}
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(r.Index))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(r.Index + r.Size))
		b.WriteByte(']')
	}
}

func intList(xs []int) string {
	var b strings.Builder
	b.WriteByte('[')
	writeInts(&b, xs)
	b.WriteByte(']')
	return b.String()
}

func writeInts(b *strings.Builder, xs []int) {
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
}
