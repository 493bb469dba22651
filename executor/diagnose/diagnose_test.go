package diagnose

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

const chunk = 1024

// op is an op of a hand-built instance at position i of its thread
// block, recorded at line of t.star.
func op(i int, t plan.OpType, line int, chans []int, src, dst []executor.Region) executor.OpInstance {
	o := executor.OpInstance{Type: t, ChannelType: plan.Memory, Index: i, Path: fmt.Sprintf("op %d", i), Channels: chans, Src: src, Dst: dst}
	if line > 0 {
		o.Source = []string{fmt.Sprintf("t.star:%d:5", line)}
	}
	return o
}

func scratch(rank int, slot uint64) executor.Region {
	return executor.Region{Rank: rank, Buffer: plan.Scratch, Offset: slot * chunk, Size: chunk, Switch: -1}
}

func input(rank int, slot uint64) executor.Region {
	return executor.Region{Rank: rank, Buffer: plan.Input, Offset: slot * chunk, Size: chunk, Switch: -1}
}

// pair is two ranks with one memory channel each way (peerIndex -1: rank
// 1 declares no channel to rank 0) and the given thread block 0 of each.
func pair(peerIndex int, ops0, ops1 []executor.OpInstance) *executor.Instance {
	return &executor.Instance{
		Plan:         &plan.Plan{Protocol: "LL"},
		ChunkBytes:   chunk,
		ScratchBytes: 8 * chunk,
		Ranks: []executor.RankInstance{
			{Rank: 0, TBs: []executor.TBInstance{{ID: 0, Ops: ops0}}, MemoryChannels: []executor.ChannelEnd{{Peer: 1, PeerIndex: peerIndex}}},
			{Rank: 1, TBs: []executor.TBInstance{{ID: 0, Ops: ops1}}, MemoryChannels: []executor.ChannelEnd{{Peer: 0, PeerIndex: 0}}},
		},
	}
}

// blockedIn is rank 0 tb 0 blocked in its op i.
func blockedIn(inst *executor.Instance, i int, pkt *executor.PacketWait) executor.BlockedTB {
	return executor.BlockedTB{Rank: 0, TB: 0, Op: inst.Ranks[0].TBs[0].Ops[i].Describe(), Waiting: "backend words", Packet: pkt}
}

// TestDeadlockCauses builds small instances that deadlock in each way and
// checks the most likely cause: its kind, the .star line of the op it
// blames and of the op on the other side, and words of its text.
func TestDeadlockCauses(t *testing.T) {
	unpack := func(slot uint64) executor.OpInstance {
		return op(1, plan.OpUnpackPacket, 16, nil, []executor.Region{scratch(0, slot)}, []executor.Region{input(0, 2)})
	}
	putPkt := func(slot uint64) executor.OpInstance {
		return op(0, plan.OpPutPacket, 10, []int{0}, []executor.Region{input(1, 1)}, []executor.Region{scratch(0, slot)})
	}
	pkt := func(slot uint64) *executor.PacketWait {
		return &executor.PacketWait{Buffer: plan.Scratch, Offset: 2 * slot * chunk, Got: 0, Want: 1}
	}
	wait := op(1, plan.OpWait, 5, []int{0}, nil, nil)
	signal := op(0, plan.OpSignal, 9, []int{0}, nil, nil)
	for _, tt := range []struct {
		name        string
		inst        *executor.Instance
		blocked     executor.BlockedTB
		packet      uint64 // the stale packet's offset (0: the slot's start)
		kind        Kind
		line, other string // .star lines of Op and Other ("" none)
		text        []string
	}{
		{
			name: "wrong slot written",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), unpack(1)}, []executor.OpInstance{putPkt(0)}),
			kind: WrongSlotWrite, line: "t.star:10:5", other: "t.star:16:5",
			text: []string{"the ppkt at t.star:10:5 wrote slot 0 of rank 0's scratch (rank 1 tb 0 op 0)", "reads slot 1 (rank 0 tb 0 op 1); no op writes slot 1"},
		},
		{
			name: "wrong slot read",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpUnpackPacket, 15, nil, []executor.Region{scratch(0, 0)}, []executor.Region{input(0, 3)}), unpack(1)}, []executor.OpInstance{putPkt(0)}),
			kind: WrongSlotRead, line: "t.star:16:5", other: "t.star:10:5",
			text: []string{"reads slot 1 of rank 0's scratch", "which no op writes", "which the upkt at t.star:15:5 reads"},
		},
		{
			name: "slot written in part",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), unpack(1)},
				[]executor.OpInstance{op(0, plan.OpPutPacket, 10, []int{0}, []executor.Region{input(1, 1)},
					[]executor.Region{{Rank: 0, Buffer: plan.Scratch, Offset: chunk, Size: chunk / 2, Switch: -1}})}),
			packet: 2*chunk + chunk + 16,
			kind:   PartialWrite, line: "t.star:10:5", other: "t.star:16:5",
			text: []string{"the ppkt at t.star:10:5 wrote the packets at scratch[2048:3072] of rank 0 (rank 1 tb 0 op 0), part of scratch[2048:4096], which the upkt at t.star:16:5 reads (rank 0 tb 0 op 1); no op writes scratch[3072:4096]"},
		},
		{
			name: "no packet writer",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), unpack(1)}, nil),
			kind: NoPacketWriter, line: "t.star:16:5",
			text: []string{"no op writes packets into rank 0's scratch, where the upkt at t.star:16:5 reads slot 1"},
		},
		{
			name: "missing signal",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpWait, 4, []int{0}, nil, nil), wait}, []executor.OpInstance{signal}),
			kind: MissingSignal, line: "t.star:5:5", other: "t.star:9:5",
			text: []string{"the wait at t.star:5:5 waits on memory channel 0 from rank 1 (rank 0 tb 0 op 1), which rank 1 signals 1 time(s) per launch, last by the signal at t.star:9:5 (rank 1 tb 0 op 0), where rank 0 waits on it 2 time(s)"},
		},
		{
			name: "signals on another channel",
			inst: func() *executor.Instance {
				inst := pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), wait}, []executor.OpInstance{op(0, plan.OpSignal, 9, []int{1}, nil, nil)})
				for r := range inst.Ranks {
					inst.Ranks[r].MemoryChannels = append(inst.Ranks[r].MemoryChannels, executor.ChannelEnd{Peer: 1 - r, PeerIndex: 1})
				}
				return inst
			}(),
			kind: MissingSignal, line: "t.star:5:5",
			text: []string{"which rank 1 never signals", "; rank 1's signals arrive on rank 0's memory channel(s) 1, which it waits on less often (a wait on the wrong channel)"},
		},
		{
			name: "unpaired channel",
			inst: pair(-1, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), wait}, []executor.OpInstance{signal}),
			kind: UnpairedChannel, line: "t.star:5:5",
			text: []string{"the wait at t.star:5:5 waits on memory channel 0 from rank 1 (rank 0 tb 0 op 1), which declares no channel paired with it, so no signal arrives"},
		},
		{
			name: "counts match",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), wait}, []executor.OpInstance{signal}),
		},
		{
			name: "the slot read is written",
			inst: pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), unpack(1)}, []executor.OpInstance{putPkt(1)}),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p *executor.PacketWait
			if tt.inst.Ranks[0].TBs[0].Ops[1].Type == plan.OpUnpackPacket {
				p = pkt(1)
				if tt.packet > 0 {
					p.Offset = tt.packet
				}
			}
			r := Deadlock(tt.inst, []executor.BlockedTB{blockedIn(tt.inst, 1, p)})
			if tt.kind == 0 {
				if len(r.Causes) != 0 {
					t.Fatalf("causes %+v, want none", r.Causes)
				}
				return
			}
			if len(r.Causes) == 0 {
				t.Fatalf("no cause, want %v", tt.kind)
			}
			c := r.Causes[0]
			if c.Kind != tt.kind || c.Op.Line() != tt.line || c.Other.Line() != tt.other || c.Count != 1 {
				t.Errorf("cause %v %q (other %q) count %d, want %v %q (other %q) count 1: %s", c.Kind, c.Op.Line(), c.Other.Line(), c.Count, tt.kind, tt.line, tt.other, c.Text)
			}
			for _, w := range tt.text {
				if !strings.Contains(c.Text, w) {
					t.Errorf("cause text does not say %q:\n%s", w, c.Text)
				}
			}
		})
	}
}

// TestMissingSignalInPipeline: a wait in a pipeline body counts once per
// iteration, against the peer's signals in and out of pipelines.
func TestMissingSignalInPipeline(t *testing.T) {
	wait := op(0, plan.OpWait, 5, []int{0}, nil, nil)
	wait.Path = "op 0.0"
	signal := op(0, plan.OpSignal, 9, []int{0}, nil, nil)
	signal.Path = "op 0.0"
	for _, tt := range []struct {
		iters, peerIters int
		cause            string // in the text, "" none
	}{
		{3, 2, "which rank 1 signals 2 time(s) per launch, last by the signal at t.star:9:5 (rank 1 tb 0 op 0.0), where rank 0 waits on it 3 time(s)"},
		{2, 0, "which rank 1 never signals (rank 0 waits on it 2 time(s) per launch)"},
		{3, 3, ""},
		{2, 3, ""},
	} {
		inst := pair(0, []executor.OpInstance{{Type: plan.OpPipeline, Path: "op 0", Iterations: tt.iters, Body: []executor.OpInstance{wait}}},
			[]executor.OpInstance{{Type: plan.OpPipeline, Path: "op 0", Iterations: tt.peerIters, Body: []executor.OpInstance{signal}}})
		b := executor.BlockedTB{Rank: 0, TB: 0, Op: wait.Describe(), Waiting: "memory channel 0 from rank 1 expects signal 3, has 2"}
		r := Deadlock(inst, []executor.BlockedTB{b})
		switch {
		case tt.cause == "" && len(r.Causes) > 0:
			t.Errorf("%d waits, %d signals: cause %s, want none", tt.iters, tt.peerIters, r.Causes[0].Text)
		case tt.cause != "" && (len(r.Causes) == 0 || r.Causes[0].Kind != MissingSignal || !strings.Contains(r.Causes[0].Text, tt.cause)):
			t.Errorf("%d waits, %d signals: causes %+v, want one saying %q", tt.iters, tt.peerIters, r.Causes, tt.cause)
		}
	}
}

// TestBlockedLineSameOnEveryBackend: a packet wait reported at the start
// of the slot (the CPU backend) and inside it (a GPU thread's packet)
// prints the same line, naming the slot's packets by their offset within
// the scratch; a later pipeline iteration keeps its note; a wait outside
// the op's slots keeps the backend's words.
func TestBlockedLineSameOnEveryBackend(t *testing.T) {
	inst := pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil),
		op(1, plan.OpUnpackPacket, 16, nil, []executor.Region{scratch(0, 1)}, []executor.Region{input(0, 2)})}, nil)
	want := "rank 0 tb 0 op 1 upkt (t.star:16:5): packets at scratch[2048:4096] (slot 1) have flag 0, want 1"
	for _, tt := range []struct {
		off     uint64
		waiting string
		want    string
	}{
		{2048, "", want},
		{2048 + 96, "", want},
		{4000, " (pipeline iteration 2)", want + " (pipeline iteration 2)"},
		{8192, "", "rank 0 tb 0 op 1 upkt (t.star:16:5): packet at scratch[8192] has flag 0, want 1"},
	} {
		p := executor.PacketWait{Buffer: plan.Scratch, Offset: tt.off, Got: 0, Want: 1}
		b := blockedIn(inst, 1, &p)
		b.Waiting = p.String() + tt.waiting
		r := Deadlock(inst, []executor.BlockedTB{b})
		if got := r.Blocked[0].Line; got != tt.want {
			t.Errorf("packet at %d:\n got %s\nwant %s", tt.off, got, tt.want)
		}
	}
	// A double-buffered scratch: an even launch's flag waits in the
	// second half.
	inst.Plan.UseDoubleScratch = true
	p := executor.PacketWait{Buffer: plan.Scratch, Offset: 4096 + 2048 + 96, Got: 0, Want: 2}
	b := blockedIn(inst, 1, &p)
	b.Waiting = p.String()
	want = "rank 0 tb 0 op 1 upkt (t.star:16:5): packets at scratch[6144:8192] (slot 1) have flag 0, want 2"
	if got := Deadlock(inst, []executor.BlockedTB{b}).Blocked[0].Line; got != want {
		t.Errorf("double scratch:\n got %s\nwant %s", got, want)
	}
}

// TestOpFoundWithoutLines: a blocked thread block described without the
// op's .star lines (the cost model's "op 1 wait") is found all the same.
func TestOpFoundWithoutLines(t *testing.T) {
	wait := op(1, plan.OpWait, 5, []int{0}, nil, nil)
	inst := pair(0, []executor.OpInstance{op(0, plan.OpNop, 0, nil, nil, nil), wait}, nil)
	for _, desc := range []string{wait.Describe(), "op 1 wait"} {
		r := Deadlock(inst, []executor.BlockedTB{{Rank: 0, TB: 0, Op: desc, Waiting: "memory channel 0 from rank 1 expects signal 1, has 0"}})
		if r.Blocked[0].Op.Op != &inst.Ranks[0].TBs[0].Ops[1] || len(r.Causes) != 1 || r.Causes[0].Kind != MissingSignal {
			t.Errorf("%q: op %v, causes %+v", desc, r.Blocked[0].Op.Op, r.Causes)
		}
	}
	if r := Deadlock(inst, []executor.BlockedTB{{Rank: 0, TB: 0, Op: "op 1 signal"}}); r.Blocked[0].Op.Op != nil {
		t.Errorf("op 1 signal found %v", r.Blocked[0].Op.Op)
	}
}

// TestRankMergesCauses: two blocked thread blocks naming the same cause
// count it twice, and it comes before a cause of one.
func TestRankMergesCauses(t *testing.T) {
	cs := Rank([]Cause{
		{Key: "a", Count: 1, Text: "a"},
		{Key: "b", Count: 1, Text: "b"},
		{Key: "b", Count: 1, Evidence: 1, Text: "b"},
		{Key: "c", Count: 2, Evidence: 1, Text: "c"},
	})
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s%d%d", c.Text, c.Count, c.Evidence))
	}
	if want := "b20 a10 c21"; strings.Join(got, " ") != want {
		t.Errorf("ranked %v, want %s", got, want)
	}
}

// TestRankSpeaksByPlanOrder: with RankInPlanOrder, of the causes merged
// under one Key, the one whose ops come first in the plan speaks for
// them, whatever order a run found them in; with Rank, the first found
// (the counts add up either way).
func TestRankSpeaksByPlanOrder(t *testing.T) {
	mk := func(r, tb, or int) Cause {
		return Cause{Key: "line 10", Count: 1, Op: OpRef{Rank: r, TB: tb}, Other: OpRef{Rank: or}, Text: fmt.Sprintf("r%d tb%d o%d", r, tb, or)}
	}
	for _, order := range [][]Cause{
		{mk(2, 0, 1), mk(1, 1, 0), mk(1, 0, 3), mk(1, 0, 2)},
		{mk(1, 0, 2), mk(1, 0, 3), mk(1, 1, 0), mk(2, 0, 1)},
		{mk(1, 1, 0), mk(2, 0, 1), mk(1, 0, 2), mk(1, 0, 3)},
	} {
		cs := RankInPlanOrder(order)
		if len(cs) != 1 || cs[0].Text != "r1 tb0 o2" || cs[0].Count != 4 {
			t.Errorf("RankInPlanOrder(%v) = %+v, want one cause r1 tb0 o2 of count 4", order, cs)
		}
		if cs := Rank(order); len(cs) != 1 || cs[0].Text != order[0].Text || cs[0].Count != 4 {
			t.Errorf("Rank(%v) = %+v, want the first, %s, of count 4", order, cs, order[0].Text)
		}
	}
}

// TestGuardingWait: a reduce that reads a slot a peer puts into, with the
// wait on that peer's channel after it, names the wait; not when the
// thread block signals between the two (the wait guards the next step),
// nor when no peer writes the slot.
func TestGuardingWait(t *testing.T) {
	reduce := op(0, plan.OpReduce, 15, nil, []executor.Region{scratch(0, 2), input(0, 2)}, []executor.Region{input(0, 2)})
	wait := op(2, plan.OpWait, 16, []int{0}, nil, nil)
	put := op(0, plan.OpPut, 11, []int{0}, []executor.Region{input(1, 1)}, []executor.Region{scratch(0, 2)})
	for _, tt := range []struct {
		name   string
		middle plan.OpType
		peer   []executor.OpInstance
		want   string
	}{
		{"late wait", plan.OpNop, []executor.OpInstance{put}, "t.star:16:5"},
		{"signal between", plan.OpSignal, []executor.OpInstance{put}, ""},
		{"no writer", plan.OpNop, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inst := pair(0, []executor.OpInstance{reduce, op(1, tt.middle, 0, []int{0}, nil, nil), wait}, tt.peer)
			o := &inst.Ranks[0].TBs[0].Ops[0]
			c, ok := GuardingWait(inst, 0, 0, o, executor.Region{Rank: 0, Buffer: plan.Scratch, Offset: 2*chunk + 8, Size: 1})
			if got := c.Other.Line(); ok != (tt.want != "") || got != tt.want {
				t.Fatalf("GuardingWait = %q, %v; want %q", got, ok, tt.want)
			}
			if ok && (c.Kind != ReadBeforeWait || c.Peer != 1 || !strings.Contains(c.Text, "the re at t.star:15:5 reads scratch[2056:2057] of rank 0 before its guarding wait: the wait at t.star:16:5")) {
				t.Errorf("cause %v peer %d: %s", c.Kind, c.Peer, c.Text)
			}
		})
	}
}

// TestCircularWait: two ranks that each wait before they signal name one
// circular wait, with both waits and the signals they need; with one
// rank signalling first there is no cycle (and no deadlock to name).
func TestCircularWait(t *testing.T) {
	w0, s0 := op(0, plan.OpWait, 5, []int{0}, nil, nil), op(1, plan.OpSignal, 6, []int{0}, nil, nil)
	w1, s1 := op(0, plan.OpWait, 8, []int{0}, nil, nil), op(1, plan.OpSignal, 9, []int{0}, nil, nil)
	inst := pair(0, []executor.OpInstance{w0, s0}, []executor.OpInstance{w1, s1})
	blocked := []executor.BlockedTB{
		{Rank: 0, TB: 0, Op: w0.Describe(), Waiting: "memory channel 0 from rank 1 expects signal 1, has 0"},
		{Rank: 1, TB: 0, Op: w1.Describe(), Waiting: "memory channel 0 from rank 0 expects signal 1, has 0"},
	}
	r := Deadlock(inst, blocked)
	if len(r.Causes) != 1 {
		t.Fatalf("causes %+v, want one circular wait", r.Causes)
	}
	c := r.Causes[0]
	want := "a circular wait: the wait at t.star:5:5 (rank 0 tb 0 op 0), which needs the signal at t.star:9:5 (rank 1 tb 0 op 1), which comes after the wait at t.star:8:5 (rank 1 tb 0 op 0), which needs the signal at t.star:6:5 (rank 0 tb 0 op 1), which comes after the first wait (each thread block waits before it signals)"
	if c.Kind != CircularWait || c.Count != 2 || c.Text != want {
		t.Errorf("cause %v count %d:\n%s\nwant:\n%s", c.Kind, c.Count, c.Text, want)
	}
	// Rank 1 signals before it waits: rank 0's wait is held up by
	// nothing the blocked state names.
	inst = pair(0, []executor.OpInstance{w0, s0}, []executor.OpInstance{s1, w1})
	if r := Deadlock(inst, blocked[:1]); len(r.Causes) != 0 {
		t.Errorf("no cycle: causes %+v", r.Causes)
	}
}
