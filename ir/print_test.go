package ir

import (
	"math/big"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/plan"
)

func TestFormatOp(t *testing.T) {
	t.Parallel()
	loc := func(b BufferType, i, n int) Ref { return Ref{Buffer: b, Index: i, Size: n} }
	rem := func(id, i, n int) Ref { return Ref{Remote: true, BufferID: id, Index: i, Size: n} }
	cases := []struct {
		op   *Op
		want string
	}{
		{&Op{Kind: plan.OpNop}, "nop"},
		{&Op{Kind: plan.OpBarrier, Barrier: &BarrierInfo{ID: 3, TBList: []int{0, 2}}}, "barrier #3 tbs=[0,2]"},
		{&Op{Kind: plan.OpSignal, IDSet: NewSet(2, 9), ChannelType: Memory, DataSync: SyncBoth}, "signal memory ch={9,2} sync=both"},
		{&Op{Kind: plan.OpRelaxedWait, IDSet: NewSet(0), ChannelType: Memory, DataSync: SyncAfter}, "rlxwait memory ch={0} sync=after"},
		{&Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0, 1, 0}, DataSync: SyncBefore}, "sem_acquire sem=[0,1,0] sync=before"},
		{&Op{Kind: plan.OpCopy, Src: []Ref{loc(Input, 0, 1)}, Dst: []Ref{loc(Output, 2, 1)}, TBG: &TBGInfo{TBID: 1, TBGSize: 2}},
			"copy i[0:1] -> o[2:3] tbg=1/2"},
		{&Op{Kind: plan.OpGet, Src: []Ref{rem(0, 1, 1)}, Dst: []Ref{loc(Scratch, 0, 1)}, ChannelIDs: []int{0}, ChannelType: Memory},
			"get memory ch=[0] rb0[1:2] -> s[0:1]"},
		{&Op{Kind: plan.OpPut, Src: []Ref{loc(Input, 0, 1), loc(Input, 2, 1)}, Dst: []Ref{rem(0, 3, 1), rem(1, 0, 1)},
			ChannelIDs: []int{0, 1}, ChannelType: Port}, "put port ch=[0,1] i[0:1],i[2:3] -> rb0[3:4],rb1[0:1]"},
		{&Op{Kind: plan.OpReduce, LocalSrc: []Ref{loc(Input, 0, 1), loc(Input, 1, 1)}, LocalDst: []Ref{loc(Output, 0, 1)}, ReduceOp: Max},
			"re none max src=i[0:1],i[1:2] dst=o[0:1]"},
		{&Op{Kind: plan.OpReduceCopySendPacket, LocalSrc: []Ref{loc(Input, 0, 1), loc(Scratch, 0, 1)}, LocalDst: []Ref{loc(Output, 0, 1)},
			LocalPktDst: []Ref{loc(Scratch, 2, 1)}, RemoteDst: []Ref{rem(0, 1, 1)}, PutChannelIDs: []int{0},
			ChannelType: Memory, Packet: true},
			"recspkt memory sum putch=[0] src=i[0:1],s[0:1] dst=o[0:1] pktdst=s[2:3] rdst=rb0[1:2] packet"},
		{&Op{Kind: plan.OpGroupLoadReduce, SwitchBuffer: Input, BufferOffset: 1, Size: 1, SwitchChunk: &Chunk{Rank: 0, Buffer: Output, Index: 4, Size: 1},
			ChannelIDs: []int{0}, ChannelType: Switch}, "glre switch sum ch=[0] buf=i off=1 size=1 chunk=r0:o[4:5]"},
		{&Op{Kind: plan.OpMultiStore, SwitchBuffer: Input, BufferOffset: 3, Size: 1, SwitchChunk: &Chunk{Rank: 1, Buffer: Output, Index: 4, Size: 1},
			ChannelIDs: []int{0}, ChannelType: Switch}, "gstore switch ch=[0] buf=i off=3 size=1 chunk=r1:o[4:5]"},
		{&Op{Kind: plan.OpMultiLoadReduceStore, SwitchBuffer: Scratch, Size: 2, SrcIndex: []int{0}, DstIndex: []int{2},
			ChannelIDs: []int{0}, ChannelType: Switch}, "glres switch sum ch=[0] buf=s size=2 srcidx=[0] dstidx=[2]"},
		{&Op{Kind: plan.OpPipeline, UnitSize: 4096, NumChunks: 2}, "pipeline unit=4096 chunks=2 {"},
		{nil, "<nil>"},
	}
	for _, c := range cases {
		if got := FormatOp(c.op); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestSprint(t *testing.T) {
	t.Parallel()
	p := NewProgram(2, 4, 4)
	p.Name = "t"
	g := p.GPUs[0]
	g.ScratchChunks = 2
	ch := g.AddChannel(Memory, 1)
	g.AddSemaphore(big.NewInt(1))
	g.AddSwitch(Input, []int{0, 1})
	rb := g.RegisterRemoteBuffer(1, 1, Output, Memory)
	idx := g.RegisterChannel(1, Memory, ch)
	g.TB(1).Ops = []*Op{
		{Kind: plan.OpPipeline, UnitSize: 8, NumChunks: 1, Body: []*Op{
			{Kind: plan.OpPut, Src: []Ref{{Index: 0, Size: 1}}, Dst: []Ref{{Remote: true, BufferID: rb, Index: 1, Size: 1}},
				ChannelIDs: []int{idx}, ChannelType: Memory},
			{Kind: plan.OpNop},
		}},
		{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}},
	}
	want := strings.TrimPrefix(`
program "t" ranks=2 instances=1 fusion=false autosync=false policy=interleaved
gpu 0 in=4 out=4 scratch=2
  channels memory -> [1]
  switch i [0,1]
  remote 0 r1:o (memory)
  semaphores [1]
  tb 0
  tb 1 ch.memory=[0] rb.memory=[0]
    pipeline unit=8 chunks=1 {
      put memory ch=[0] i[0:1] -> rb0[1:2]
      nop
    }
    sem_release sem=[0] sync=none
gpu 1 in=4 out=4 scratch=0
`, "\n")
	if got := Sprint(p); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := Check(p); err != nil {
		t.Errorf("Check: %v", err)
	}
}
