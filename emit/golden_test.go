package emit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// TestGoldenThroughIR rebuilds the IR of every reference plan (fromPlan)
// and checks that Marshal, MarshalNoNewline and Write reproduce the file
// byte for byte, and that writing leaves the program unchanged.
func TestGoldenThroughIR(t *testing.T) {
	t.Parallel()
	for _, file := range planFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fromPlan(plan)
			if err != nil {
				t.Fatal(err)
			}
			untouched, _ := fromPlan(plan)

			got, err := Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, got) {
				t.Fatalf("Marshal (-want +got):\n%s", cmp.Diff(string(want), string(got)))
			}
			noNL, err := MarshalNoNewline(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want[:len(want)-1]), string(noNL)); diff != "" {
				t.Errorf("MarshalNoNewline (-want +got):\n%s", diff)
			}
			var buf bytes.Buffer
			if err := Write(&buf, p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, buf.Bytes()) {
				t.Errorf("Write (-want +got):\n%s", cmp.Diff(string(want), buf.String()))
			}
			opts := cmp.Options{
				cmp.AllowUnexported(ir.GPU{}, ir.ThreadBlock{}, ir.Set{}, syntax.Position{}),
				cmp.Comparer(func(a, b *big.Int) bool { return (a == nil) == (b == nil) && (a == nil || a.Cmp(b) == 0) }),
			}
			if diff := cmp.Diff(untouched, p, opts); diff != "" {
				t.Errorf("writing modified the program (-before +after):\n%s", diff)
			}
		})
	}
}

// fromPlan rebuilds an ir.Program (as the passes leave it) from a decoded
// plan, the inverse of the writer.
func fromPlan(pl *Plan) (*ir.Program, error) {
	p := &ir.Program{
		Name:                   string(pl.Name),
		Collective:             string(pl.Collective),
		Protocol:               string(pl.Protocol),
		Inplace:                pl.Inplace,
		ReuseResources:         pl.ReuseResources,
		NumRanks:               len(pl.GPUs),
		Instances:              1,
		UseDoubleScratchBuffer: pl.UseDoubleScratchBuffer,
	}
	var err error
	num := func(n json.Number) *big.Int {
		x, ok := new(big.Int).SetString(string(n), 10)
		if !ok && err == nil {
			err = fmt.Errorf("bad number %q", n)
		}
		return x
	}
	p.NumThreadsPerBlock = num(pl.NumThreadsPerBlock)
	p.BufferAlignment = num(pl.BufferAlignment)
	p.MinMessageSize = num(pl.MinMessageSize)
	p.MaxMessageSize = num(pl.MaxMessageSize)
	for _, pg := range pl.GPUs {
		g := &ir.GPU{ID: pg.ID, InputChunks: pg.InputChunks, OutputChunks: pg.OutputChunks, ScratchChunks: pg.ScratchChunks}
		p.GPUs = append(p.GPUs, g)
		for _, c := range pg.Channels {
			ct := channelType(c.ChannelType)
			if ct == ir.Switch {
				if len(c.RankGroups) != 1 || c.RankGroups[0].Size != len(c.RankGroups[0].Ranks) {
					return nil, fmt.Errorf("rank %d: unexpected rank groups %v", g.ID, c.RankGroups)
				}
				g.Switches = append(g.Switches, ir.SwitchEntry{Buffer: bufferType(c.BufferType), Ranks: c.RankGroups[0].Ranks})
				continue
			}
			if len(g.Switches) > 0 {
				return nil, fmt.Errorf("rank %d: %s channels after switch channels", g.ID, c.ChannelType)
			}
			g.Channels = append(g.Channels, ir.ChannelTable{Type: ct, ConnectedTo: c.ConnectedTo})
		}
		for _, rb := range pg.RemoteBuffers {
			b := ir.RemoteBuffer{Rank: rb.Rank, Buffer: bufferType(rb.Type)}
			for _, a := range rb.AccessChannelTypes {
				switch channelType(a) {
				case ir.Memory:
					b.Memory = true
				case ir.Port:
					b.Port = true
				}
			}
			g.RemoteBuffers = append(g.RemoteBuffers, b)
		}
		for _, s := range pg.Semaphores {
			g.Semaphores = append(g.Semaphores, num(s.InitValue))
		}
		for _, ptb := range pg.ThreadBlocks {
			tb := &ir.ThreadBlock{ID: ptb.ID}
			for _, c := range ptb.Channels {
				tb.Channels = append(tb.Channels, ir.IDTable{Type: channelType(c.ChannelType), IDs: c.ChannelIDs})
			}
			for _, r := range ptb.RemoteBufferRefs {
				tb.RemoteRefs = append(tb.RemoteRefs, ir.IDTable{Type: channelType(r.AccessChannelType), IDs: r.RemoteBufferIDs})
			}
			ops, oerr := opsFromPlan(ptb.Ops)
			if oerr != nil {
				return nil, fmt.Errorf("rank %d tb %d: %w", g.ID, tb.ID, oerr)
			}
			tb.Ops = ops
			g.ThreadBlocks = append(g.ThreadBlocks, tb)
		}
	}
	return p, err
}

func opsFromPlan(pops []PlanOp) ([]*ir.Op, error) {
	var out []*ir.Op
	for i := range pops {
		op, err := opFromPlan(&pops[i])
		if err != nil {
			return nil, fmt.Errorf("op %d (%s): %w", i, pops[i].Name, err)
		}
		out = append(out, op)
	}
	return out, nil
}

func kindOf(name PyString) (plan.OpType, bool) {
	for k := plan.OpNop; k <= plan.OpGroupLoadReduce; k++ {
		if k.String() == string(name) {
			return k, true
		}
	}
	return 0, false
}

func opFromPlan(po *PlanOp) (*ir.Op, error) {
	k, ok := kindOf(po.Name)
	if !ok {
		return nil, fmt.Errorf("unknown op name")
	}
	op := &ir.Op{Kind: k, ChannelType: channelType(po.ChannelType), ReduceOp: reduceOp(po.ReduceOp)}
	if po.TBGInfo != nil {
		op.TBG = &ir.TBGInfo{TBID: po.TBGInfo.TBID, TBGSize: po.TBGInfo.TBGSize}
	}
	switch k.Family() {
	case plan.FamSync:
		if k == plan.OpBarrier {
			op.Barrier = &ir.BarrierInfo{ID: *po.BarrierID, TBList: make([]int, *po.NumThreadblocks)}
		}
	case plan.FamDataSync:
		if k == plan.OpSemAcquire || k == plan.OpSemRelease {
			op.SemaphoreIDs = po.SemaphoreIDs
			break
		}
		// Use a Set when one iterates in the printed order, as the
		// passes leave it; otherwise fall back to the plain list.
		if s := ir.NewSet(po.ChannelIDs...); slices.Equal(s.Keys(), po.ChannelIDs) {
			op.IDSet = s
		} else {
			op.ChannelIDs = po.ChannelIDs
		}
	case plan.FamCopy, plan.FamGet, plan.FamPut:
		op.Src = refs(po.SrcBuff)
		op.Dst = refs(po.DstBuff)
		op.ChannelIDs = po.ChannelIDs
	case plan.FamReduce:
		for _, r := range refs(po.SrcBuff) {
			if r.Remote {
				op.RemoteSrc = append(op.RemoteSrc, r)
			} else {
				op.LocalSrc = append(op.LocalSrc, r)
			}
		}
		for _, r := range refs(po.DstBuff) {
			switch {
			case r.Remote:
				op.RemoteDst = append(op.RemoteDst, r)
			case len(op.LocalDst) == 0:
				op.LocalDst = append(op.LocalDst, r)
			default:
				op.LocalPktDst = append(op.LocalPktDst, r)
			}
		}
	case plan.FamSwitch:
		op.ChannelType = ir.Switch
		switch k {
		case plan.OpGroupLoadReduce:
			op.SwitchBuffer = bufferType(po.BufferType)
			op.BufferOffset = *po.BufferOffset
			op.Size = *po.Size
			op.SwitchChunk = chunk(po.DstChunk)
			op.ChannelIDs = po.ChannelIDs
		case plan.OpMultiStore, plan.OpMultiStorePacket:
			op.SwitchChunk = chunk(&po.SrcBuff[0])
			d := po.DstBuff[0]
			op.ChannelIDs = []int{*d.SwitchChannelID}
			op.BufferOffset = d.Index
			op.Size = d.Size
		case plan.OpMultiLoadReduceStore:
			for i, s := range po.SrcBuff {
				op.ChannelIDs = append(op.ChannelIDs, *s.SwitchChannelID)
				op.SrcIndex = append(op.SrcIndex, s.Index)
				op.DstIndex = append(op.DstIndex, po.DstBuff[i].Index)
				op.Size = s.Size
			}
		}
	case plan.FamPipeline:
		op.UnitSize = po.IterContext.UnitSize
		op.NumChunks = po.IterContext.NumChunks
		body, err := opsFromPlan(po.Ops)
		if err != nil {
			return nil, err
		}
		op.Body = body
	}
	return op, nil
}

func refs(ps []PlanOperand) []ir.Ref {
	var out []ir.Ref
	for _, o := range ps {
		r := ir.Ref{Index: o.Index, Size: o.Size}
		if o.BufferID != nil {
			r.Remote = true
			r.BufferID = *o.BufferID
		} else {
			r.Buffer = bufferType(o.Type)
		}
		out = append(out, r)
	}
	return out
}

func chunk(o *PlanOperand) *ir.Chunk {
	return &ir.Chunk{Rank: *o.Rank, Buffer: bufferType(o.Type), Index: o.Index, Size: o.Size}
}

func bufferType(s PyString) ir.BufferType {
	switch s {
	case "o":
		return ir.Output
	case "s":
		return ir.Scratch
	}
	return ir.Input
}

func channelType(s PyString) ir.ChannelType {
	switch s {
	case "memory":
		return ir.Memory
	case "port":
		return ir.Port
	case "switch":
		return ir.Switch
	}
	return ir.NoChannel
}

func reduceOp(s PyString) ir.ReduceOp {
	switch s {
	case "min":
		return ir.Min
	case "max":
		return ir.Max
	}
	return ir.Sum
}
