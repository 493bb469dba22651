package ir

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/plan"
)

// checkProgram returns a small valid program: rank 0 has a memory channel
// to rank 1, a remote buffer and a semaphore, registered on tb 0.
func checkProgram() *Program {
	p := NewProgram(2, 4, 4)
	g := p.GPUs[0]
	ch := g.AddChannel(Memory, 1)
	g.AddSemaphore(big.NewInt(0))
	rb := g.RegisterRemoteBuffer(0, 1, Output, Memory)
	idx := g.RegisterChannel(0, Memory, ch)
	g.TB(0).Ops = []*Op{
		{Kind: plan.OpPut, Src: []Ref{{Index: 0, Size: 1}}, Dst: []Ref{{Remote: true, BufferID: rb, Size: 1}},
			ChannelIDs: []int{idx}, ChannelType: Memory},
		{Kind: plan.OpSignal, IDSet: NewSet(idx), ChannelType: Memory, DataSync: SyncBoth},
		{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}, DataSync: SyncAfter},
	}
	return p
}

func TestCheckValid(t *testing.T) {
	t.Parallel()
	if err := Check(checkProgram()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckViolations(t *testing.T) {
	t.Parallel()
	file := "x.star"
	pos := syntax.MakePosition(&file, 4, 2)
	cases := []struct {
		name   string
		mutate func(p *Program)
		want   string
	}{
		{"tb ids not dense", func(p *Program) { p.GPUs[0].ThreadBlocks[0].ID = 3 }, "rank 0 tb 0: thread block at position 0 has id 3"},
		{"gpu count", func(p *Program) { p.GPUs = p.GPUs[:1] }, "check: 1 GPU records for 2 ranks"},
		{"data_sync on copy", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, &Op{Kind: plan.OpCopy, Pos: pos, Src: []Ref{{Size: 1}}, Dst: []Ref{{Size: 1}}, DataSync: SyncBefore})
		}, "x.star:4:2: check: rank 0 tb 0 op 3 (copy): data_sync before on an op that is not a data-sync op"},
		{"channel index out of range", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[0].ChannelIDs = []int{1} },
			"op 0 (put): memory channel index 1 out of range [0:1]"},
		{"remote buffer out of range", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[0].Dst[0].BufferID = 2 },
			"op 0 (put): dst[0] remote buffer index 2 out of range [0:1] of the memory table"},
		{"local dst on put", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[0].Dst[0].Remote = false },
			"op 0 (put): dst[0] is local, want remote"},
		{"signal on an unregistered port channel", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[1].ChannelType = Port },
			"op 1 (signal): port channel index 0 out of range [0:0]"},
		{"semaphore out of range", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[2].SemaphoreIDs = []int{1} },
			"op 2 (sem_release): semaphore id 1 out of range [0:1]"},
		{"id set on a semaphore op", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[2].IDSet = NewSet(0) },
			"channel id set on an op that is not signal, wait or flush"},
		{"reduce name", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, &Op{Kind: plan.OpReduceSend, LocalSrc: []Ref{{Size: 1}}, LocalDst: []Ref{{Size: 1}}})
		}, "op 3 (res): reduce fields do not match the name res"},
		{"nested pipeline", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, &Op{Kind: plan.OpPipeline, Body: []*Op{{Kind: plan.OpPipeline, Body: []*Op{{Kind: plan.OpNop}}}}})
		}, "op 3.0 (pipeline): nested pipeline"},
		{"empty pipeline", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, &Op{Kind: plan.OpPipeline})
		}, "op 3 (pipeline): empty pipeline"},
		{"shared op", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, tb.Ops[2])
		}, "op 3 (sem_release): op appears twice in the program"},
		{"barrier of one block", func(p *Program) {
			tb := p.GPUs[0].ThreadBlocks[0]
			tb.Ops = append(tb.Ops, &Op{Kind: plan.OpBarrier, Barrier: &BarrierInfo{TBList: []int{0}}})
		}, "op 3 (barrier): barrier lists 1 thread blocks, want at least 2"},
		{"tbg outside group", func(p *Program) { p.GPUs[0].ThreadBlocks[0].Ops[0].TBG = &TBGInfo{TBID: 2, TBGSize: 2} },
			"op 0 (put): tbg_info tb_id 2 outside group of 2"},
		{"glre without chunk", func(p *Program) {
			g := p.GPUs[0]
			sw := g.AddSwitch(Input, []int{0, 1})
			idx := g.RegisterChannel(0, Switch, sw)
			g.TB(0).Ops = append(g.TB(0).Ops, &Op{Kind: plan.OpGroupLoadReduce, ChannelIDs: []int{idx}, ChannelType: Switch, Size: 1})
		}, "op 3 (glre): no chunk"},
		{"tb channel table names a missing channel", func(p *Program) {
			p.GPUs[0].ThreadBlocks[0].Channels[0].IDs = []int{5}
		}, "rank 0 tb 0: memory channel id 5 out of range [0:1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := checkProgram()
			c.mutate(p)
			err := Check(p)
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("Check = %v, want a *CheckError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got  %s\nwant it to contain %s", err, c.want)
			}
		})
	}
}

func TestCheckSharedBarrier(t *testing.T) {
	t.Parallel()
	p := checkProgram()
	g := p.GPUs[0]
	b := &Op{Kind: plan.OpBarrier, Barrier: &BarrierInfo{ID: 0, TBList: []int{0, 0}}}
	g.TB(0).Ops = append(g.TB(0).Ops, b, b)
	if err := Check(p); err != nil {
		t.Fatalf("a barrier listed twice must be accepted: %v", err)
	}
}

func TestReduceKindOf(t *testing.T) {
	t.Parallel()
	r := []Ref{{Remote: true, Size: 1}}
	l := []Ref{{Size: 1}}
	cases := []struct {
		op   Op
		want plan.OpType
		ok   bool
	}{
		{Op{}, plan.OpReduce, true},
		{Op{Packet: true}, plan.OpReducePacket, true},
		{Op{Packet: true, LocalPktDst: l}, plan.OpReduceCopyPacket, true},
		{Op{RemoteDst: r}, plan.OpReduceSend, true},
		{Op{Packet: true, RemoteDst: r}, plan.OpReduceSendPacket, true},
		{Op{Packet: true, RemoteDst: r, LocalPktDst: l}, plan.OpReduceCopySendPacket, true},
		{Op{RemoteSrc: r}, plan.OpReadReduce, true},
		{Op{RemoteSrc: r, RemoteDst: r}, plan.OpReadReduceSend, true},
		{Op{Packet: true, RemoteSrc: r}, 0, false},
	}
	for i, c := range cases {
		if k, ok := ReduceKindOf(&c.op); k != c.want || ok != c.ok {
			t.Errorf("case %d: got %s %v, want %s %v", i, k, ok, c.want, c.ok)
		}
	}
}
