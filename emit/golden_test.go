package emit

import (
	"bytes"
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
// and checks that Marshal, MarshalNoNewline, Write and plan.Encode of
// Lower reproduce the file
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
			pl, err := plan.ReadCompiled(want)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fromPlan(pl)
			if err != nil {
				t.Fatal(err)
			}
			untouched, _ := fromPlan(pl)

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
			// Write lowers one rank at a time into reused memory; Lower
			// holds the whole plan. Both give the same bytes.
			whole, err := Lower(p)
			if err != nil {
				t.Fatal(err)
			}
			buf.Reset()
			if err := plan.Encode(&buf, whole); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, buf.Bytes()) {
				t.Errorf("Encode(Lower) (-want +got):\n%s", cmp.Diff(string(want), buf.String()))
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

// goldenDir holds the plans MSCCL++'s DSL printed for its test scripts.
const goldenDir = "../../shared/golden"

// planFiles lists the examples of testdata/ and the golden plans.
func planFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(golden) == 0 {
		t.Skipf("no reference plans in %s", goldenDir)
	}
	return append(files, golden...)
}

// fromPlan rebuilds an ir.Program (as the passes leave it) from a plan
// read by package plan: the inverse of Lower.
func fromPlan(pl *plan.Plan) (*ir.Program, error) {
	p := &ir.Program{
		Name:                   pl.Name,
		Collective:             pl.Collective,
		Protocol:               pl.Protocol,
		Inplace:                pl.Inplace,
		ReuseResources:         pl.ReuseResources,
		NumRanks:               len(pl.GPUs),
		Instances:              1,
		UseDoubleScratchBuffer: pl.UseDoubleScratch,
		NumThreadsPerBlock:     big.NewInt(int64(pl.NumThreadsPerBlock)),
		BufferAlignment:        new(big.Int).SetUint64(pl.BufferAlignment),
		MinMessageSize:         new(big.Int).SetUint64(pl.MinMessageSize),
		MaxMessageSize:         new(big.Int).SetUint64(pl.MaxMessageSize),
	}
	for _, pg := range pl.GPUs {
		g := &ir.GPU{ID: pg.ID, InputChunks: pg.InputChunks, OutputChunks: pg.OutputChunks, ScratchChunks: pg.ScratchChunks}
		p.GPUs = append(p.GPUs, g)
		for _, c := range pg.Channels {
			if c.Type == ir.Switch {
				if len(c.RankGroups) != 1 {
					return nil, fmt.Errorf("rank %d: unexpected rank groups %v", g.ID, c.RankGroups)
				}
				g.Switches = append(g.Switches, ir.SwitchEntry{Buffer: c.Buffer, Ranks: c.RankGroups[0]})
				continue
			}
			if len(g.Switches) > 0 {
				return nil, fmt.Errorf("rank %d: %s channels after switch channels", g.ID, c.Type)
			}
			g.Channels = append(g.Channels, ir.ChannelTable{Type: c.Type, ConnectedTo: c.ConnectedTo})
		}
		for _, rb := range pg.RemoteBuffers {
			g.RemoteBuffers = append(g.RemoteBuffers, ir.RemoteBuffer{Rank: rb.Rank, Buffer: rb.Type,
				Memory: slices.Contains(rb.Access, ir.Memory), Port: slices.Contains(rb.Access, ir.Port)})
		}
		for _, v := range pg.Semaphores {
			g.Semaphores = append(g.Semaphores, big.NewInt(v))
		}
		for _, ptb := range pg.ThreadBlocks {
			tb := &ir.ThreadBlock{ID: ptb.ID}
			for _, ct := range ptb.ChannelOrder {
				tb.Channels = append(tb.Channels, ir.IDTable{Type: ct, IDs: ptb.Channels[ct]})
			}
			for _, ct := range ptb.RemoteRefOrder {
				tb.RemoteRefs = append(tb.RemoteRefs, ir.IDTable{Type: ct, IDs: ptb.RemoteRefs[ct]})
			}
			tb.Ops = opsFromPlan(ptb.Ops)
			g.ThreadBlocks = append(g.ThreadBlocks, tb)
		}
	}
	return p, nil
}

func opsFromPlan(pops []plan.Op) []*ir.Op {
	var out []*ir.Op
	for i := range pops {
		out = append(out, opFromPlan(&pops[i]))
	}
	return out
}

func opFromPlan(po *plan.Op) *ir.Op {
	k := po.Type
	op := &ir.Op{Kind: k, ChannelType: po.ChannelType, ReduceOp: reduceOp(po.ReduceOp)}
	if po.TBG != nil {
		op.TBG = &ir.TBGInfo{TBID: po.TBG.TBID, TBGSize: po.TBG.TBGSize}
	}
	switch k.Family() {
	case plan.FamSync:
		if k == plan.OpBarrier {
			op.Barrier = &ir.BarrierInfo{ID: po.BarrierID, TBList: make([]int, po.NumThreadBlocks)}
		}
	case plan.FamDataSync:
		if !k.SignalsChannels() {
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
		op.Src = refs(po.Src)
		op.Dst = refs(po.Dst)
		op.ChannelIDs = po.ChannelIDs
	case plan.FamReduce:
		for _, r := range refs(po.Src) {
			if r.Remote {
				op.RemoteSrc = append(op.RemoteSrc, r)
			} else {
				op.LocalSrc = append(op.LocalSrc, r)
			}
		}
		for _, r := range refs(po.Dst) {
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
			op.SwitchBuffer = po.Src[0].Type
			op.BufferOffset = int(po.Src[0].Index)
			op.Size = int(po.Src[0].Size)
			op.SwitchChunk = chunk(&po.Dst[0])
			op.ChannelIDs = po.ChannelIDs
		case plan.OpMultiStore, plan.OpMultiStorePacket:
			op.SwitchChunk = chunk(&po.Src[0])
			d := po.Dst[0]
			op.ChannelIDs = []int{d.SwitchID}
			op.BufferOffset = int(d.Index)
			op.Size = int(d.Size)
		case plan.OpMultiLoadReduceStore:
			for i, s := range po.Src {
				op.ChannelIDs = append(op.ChannelIDs, s.SwitchID)
				op.SrcIndex = append(op.SrcIndex, int(s.Index))
				op.DstIndex = append(op.DstIndex, int(po.Dst[i].Index))
				op.Size = int(s.Size)
			}
		}
	case plan.FamPipeline:
		op.UnitSize = int64(po.UnitSize)
		op.NumChunks = int64(po.NumChunks)
		op.Body = opsFromPlan(po.Ops)
	}
	return op
}

func refs(ps []plan.Operand) []ir.Ref {
	var out []ir.Ref
	for _, o := range ps {
		r := ir.Ref{Index: int(o.Index), Size: int(o.Size)}
		if o.Kind == plan.RemoteOperand {
			r.Remote = true
			r.BufferID = o.BufferID
		} else {
			r.Buffer = o.Type
		}
		out = append(out, r)
	}
	return out
}

func chunk(o *plan.Operand) *ir.Chunk {
	return &ir.Chunk{Rank: o.Rank, Buffer: o.Type, Index: int(o.Index), Size: int(o.Size)}
}

func reduceOp(s string) ir.ReduceOp {
	switch s {
	case "min":
		return ir.Min
	case "max":
		return ir.Max
	}
	return ir.Sum
}
