package executor

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/plan"
)

const (
	miB = uint64(1) << 20
	giB = uint64(1) << 30
)

func mustLoad(t *testing.T, data string) *plan.Plan {
	t.Helper()
	p, err := plan.Load([]byte(data))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

// onePlan is a one-rank plan with one thread block holding ops.
func onePlan(in, out, sc int, ops ...plan.Op) *plan.Plan {
	return &plan.Plan{Name: "one", Collective: "allreduce", Protocol: "Simple", NumThreadsPerBlock: 1024,
		BufferAlignment: 16, MaxMessageSize: ^uint64(0),
		GPUs: []plan.GPU{{ID: 0, InputChunks: in, OutputChunks: out, ScratchChunks: sc,
			ThreadBlocks: []plan.ThreadBlock{{ID: 0, Ops: ops, Channels: map[plan.ChannelType][]int{}, RemoteRefs: map[plan.ChannelType][]int{}}},
			Semaphores:   []int64{}}}}
}

func localOpd(bt plan.BufferType, index, size uint64) plan.Operand {
	return plan.Operand{Kind: plan.LocalOperand, Type: bt, Index: index, Size: size}
}

func copyOpOf(src, dst plan.Operand) plan.Op {
	return plan.Op{Type: plan.OpCopy, Src: []plan.Operand{src}, Dst: []plan.Operand{dst}}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		total, i, n, a uint64
		want           uint64
	}{
		{name: "even", total: 64, i: 1, n: 4, a: 16, want: 16},
		{name: "end", total: 64, i: 4, n: 4, a: 16, want: 64},
		{name: "beyond n (scratch chunks)", total: 64, i: 6, n: 4, a: 16, want: 96},
		{name: "remainder to low parts", total: 5 * 16, i: 1, n: 3, a: 16, want: 32},
		{name: "remainder 2", total: 5 * 16, i: 2, n: 3, a: 16, want: 64},
		{name: "partial unit dropped", total: 40, i: 1, n: 1, a: 16, want: 32},
		{name: "tbg 0", total: 32 * miB, i: 0, n: 3, a: 16, want: 0},
		{name: "tbg 1", total: 32 * miB, i: 1, n: 3, a: 16, want: 699051 * 16},
		{name: "tbg 2", total: 32 * miB, i: 2, n: 3, a: 16, want: 2 * 699051 * 16},
		{name: "tbg 3", total: 32 * miB, i: 3, n: 3, a: 16, want: 32 * miB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := split(tt.total, tt.i, tt.n, tt.a)
			if !ok || got != tt.want {
				t.Errorf("split(%d, %d, %d, %d) = %d, %v; want %d", tt.total, tt.i, tt.n, tt.a, got, ok, tt.want)
			}
		})
	}
	if _, ok := split(^uint64(0), 1<<40, 1, 1); ok {
		t.Error("split overflow not detected")
	}
}

// TestTBGExample is the thread-block-group example of
// docs/semantics.md §1.8: an operand of 2 chunks of 16 MiB, A = 16, tbg_size 3.
func TestTBGExample(t *testing.T) {
	t.Parallel()
	var ops []plan.Op
	for id := 0; id < 3; id++ {
		op := copyOpOf(localOpd(plan.Input, 0, 2), localOpd(plan.Output, 0, 2))
		op.TBG = &plan.TBGInfo{TBID: id, TBGSize: 3}
		ops = append(ops, op)
	}
	p := onePlan(2, 2, 0, ops...)
	inst, err := Instantiate(p, Sizes{Input: 32 * miB, Output: 32 * miB})
	if err != nil {
		t.Fatal(err)
	}
	want := []Region{
		{Rank: 0, Buffer: plan.Input, Offset: 0, Size: 699051 * 16, Switch: -1},
		{Rank: 0, Buffer: plan.Input, Offset: 699051 * 16, Size: 699051 * 16, Switch: -1},
		{Rank: 0, Buffer: plan.Input, Offset: 2 * 699051 * 16, Size: 699050 * 16, Switch: -1},
	}
	var got []Region
	for _, oi := range inst.Ranks[0].TBs[0].Ops {
		got = append(got, oi.Src[0])
		if oi.Dst[0].Offset != oi.Src[0].Offset || oi.Dst[0].Size != oi.Src[0].Size || oi.Dst[0].Buffer != plan.Output {
			t.Errorf("dst %+v does not match src %+v", oi.Dst[0], oi.Src[0])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// reducePack is a two-rank LL double-scratch plan shaped like MSCCL++'s
// reduce_pack.json (docs/semantics.md §1.8 worked example): rank 0 TB
// 0 puts i[1] as packets into rank 1's s[1].
const reducePack = `{
  "name": "reduce_pack", "collective": "allreduce", "protocol": "LL", "inplace": true,
  "use_double_scratch_buffer": true,
  "gpus": [
    {"id": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 3,
     "threadblocks": [{"id": 0,
       "ops": [{"name": "ppkt", "src_buff": [{"type": "i", "index": 1, "size": 1}], "dst_buff": [{"buffer_id": 0, "index": 1, "size": 1}], "channel_type": "memory"}],
       "channels": [], "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}]}],
     "channels": [{"channel_type": "memory", "connected_to": [1]}],
     "remote_buffers": [{"rank": 1, "type": "s", "access_channel_types": ["memory"]}]},
    {"id": 1, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 3,
     "threadblocks": [{"id": 0,
       "ops": [{"name": "upkt", "src_buff": [{"type": "s", "index": 1, "size": 1}], "dst_buff": [{"type": "o", "index": 1, "size": 1}]}],
       "channels": []}],
     "channels": [{"channel_type": "memory", "connected_to": [0]}],
     "remote_buffers": []}
  ]
}`

func TestReducePackExample(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, reducePack)
	inst, err := Instantiate(p, Sizes{Input: 32 * miB, Output: 32 * miB})
	if err != nil {
		t.Fatal(err)
	}
	if inst.ChunkBytes != 16*miB {
		t.Errorf("ChunkBytes = %d, want 16 MiB", inst.ChunkBytes)
	}
	if inst.ScratchBytes != 192*miB {
		t.Errorf("ScratchBytes = %d, want 192 MiB (16 MiB × 3 × LL 2 × double 2)", inst.ScratchBytes)
	}
	op := inst.Ranks[0].TBs[0].Ops[0]
	want := OpInstance{Type: plan.OpPutPacket, ChannelType: plan.Memory, Path: "op 0",
		Src: []Region{{Rank: 0, Buffer: plan.Input, Offset: 16 * miB, Size: 16 * miB, Switch: -1}},
		Dst: []Region{{Rank: 1, Buffer: plan.Scratch, Offset: 16 * miB, Size: 16 * miB, Switch: -1}},
	}
	if diff := cmp.Diff(want, op); diff != "" {
		t.Errorf("rank 0 op 0 (-want +got):\n%s", diff)
	}
	want1 := []ChannelEnd{{Peer: 0, PeerIndex: 0}}
	if diff := cmp.Diff(want1, inst.Ranks[1].MemoryChannels); diff != "" {
		t.Errorf("rank 1 memory channels (-want +got):\n%s", diff)
	}
}

func TestSizeErrors(t *testing.T) {
	t.Parallel()
	base := func(in, out int, mut func(p *plan.Plan)) *plan.Plan {
		p := onePlan(in, out, 0)
		if mut != nil {
			mut(p)
		}
		return p
	}
	tests := []struct {
		name  string
		plan  *plan.Plan
		sizes Sizes
		msg   string // empty: valid
		chunk uint64
	}{
		{name: "valid", plan: base(2, 2, nil), sizes: Sizes{64, 64}, chunk: 32},
		{name: "alignment", plan: base(1, 1, nil), sizes: Sizes{1000, 1008}, msg: "input size 1000: not a multiple of buffer_alignment 16"},
		{name: "output alignment", plan: base(1, 1, nil), sizes: Sizes{1008, 1000}, msg: "output size 1000: not a multiple of buffer_alignment 16"},
		{name: "input chunks", plan: base(3, 1, nil), sizes: Sizes{64, 64}, msg: "gpus[0]: input size 64: not a multiple of buffer_alignment 16 × input_chunks 3"},
		{name: "output chunks", plan: base(1, 3, nil), sizes: Sizes{48, 64}, msg: "output size 64: not a multiple of buffer_alignment 16 × output_chunks 3"},
		{name: "chunk sizes differ", plan: base(2, 1, nil), sizes: Sizes{64, 64}, msg: "input size 64 / input_chunks 2 = 32 but output size 64 / output_chunks 1 = 64: all chunks have one size"},
		{name: "zero input chunks", plan: base(0, 2, nil), sizes: Sizes{16, 64}, chunk: 32},
		{name: "zero output chunks", plan: base(2, 0, nil), sizes: Sizes{64, 16}, chunk: 32},
		{name: "both zero gives zero-byte chunks", plan: base(0, 0, nil), sizes: Sizes{64, 64}, chunk: 0},
		{name: "min inclusive", plan: base(1, 1, func(p *plan.Plan) { p.MinMessageSize = 64 }), sizes: Sizes{64, 64}, chunk: 64},
		{name: "below min", plan: base(1, 1, func(p *plan.Plan) { p.MinMessageSize = 64 }), sizes: Sizes{48, 48}, msg: "message size 48 (the input size): below min_message_size 64"},
		{name: "max inclusive", plan: base(1, 1, func(p *plan.Plan) { p.MaxMessageSize = 64 }), sizes: Sizes{64, 64}, chunk: 64},
		{name: "above max", plan: base(1, 1, func(p *plan.Plan) { p.MaxMessageSize = 64 }), sizes: Sizes{80, 80}, msg: "message size 80 (the input size): above max_message_size 64"},
		{name: "allgather uses output", plan: base(1, 2, func(p *plan.Plan) { p.Collective = "allgather"; p.MinMessageSize = 64 }), sizes: Sizes{32, 64}, chunk: 32},
		{name: "allgather below min", plan: base(1, 2, func(p *plan.Plan) { p.Collective = "allgather"; p.MinMessageSize = 128 }), sizes: Sizes{32, 64},
			msg: "message size 64 (the output size): below min_message_size 128"},
		{name: "zero size", plan: base(1, 1, nil), sizes: Sizes{0, 0}, chunk: 0},
		{name: "offsets beyond 32 bits", plan: onePlan(2, 2, 0, copyOpOf(localOpd(plan.Input, 1, 1), localOpd(plan.Output, 1, 1))), sizes: Sizes{8 * giB, 8 * giB},
			msg: "src_buff[0]: byte offset 4294967296, size 4294967296: the executor stores offsets and sizes in 32 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, err := Instantiate(tt.plan, tt.sizes)
			if tt.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if inst.ChunkBytes != tt.chunk {
					t.Errorf("ChunkBytes = %d, want %d", inst.ChunkBytes, tt.chunk)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Instantiate = %v, want an error containing %q", err, tt.msg)
			}
			if !errors.Is(err, plan.ErrSize) && !errors.Is(err, plan.ErrLimit) {
				t.Errorf("%v is neither ErrSize nor ErrLimit", err)
			}
		})
	}
}

func TestPipelineIterations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		numChunks uint64
		unit      uint64
		size      uint64 // one chunk of input
		want      int
		limit     bool
	}{
		{name: "one unit", numChunks: 1, unit: miB, size: miB, want: 1},
		{name: "exact", numChunks: 1, unit: miB, size: 4 * miB, want: 4},
		{name: "rounded up", numChunks: 1, unit: miB, size: 4*miB + 16, want: 5},
		{name: "several chunks", numChunks: 3, unit: miB, size: 2 * miB, want: 6},
		{name: "smaller than a unit", numChunks: 1, unit: miB, size: 16, want: 1},
		{name: "zero chunks", numChunks: 0, unit: miB, size: miB, want: 0},
		{name: "beyond 16 bits kept", numChunks: 1, unit: 16, size: 16 * 70000, want: 70000},
		{name: "beyond 32 bits", numChunks: 1 << 31, unit: 1, size: 4 * giB, limit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := copyOpOf(localOpd(plan.Input, 0, 1), localOpd(plan.Output, 0, 1))
			p := onePlan(1, 1, 0, plan.Op{Type: plan.OpPipeline, UnitSize: tt.unit, NumChunks: tt.numChunks, Ops: []plan.Op{{Type: plan.OpNop}, body}})
			inst, err := Instantiate(p, Sizes{Input: tt.size, Output: tt.size})
			if tt.limit {
				if !errors.Is(err, plan.ErrLimit) {
					t.Fatalf("Instantiate = %v, want ErrLimit", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pipe := inst.Ranks[0].TBs[0].Ops[0]
			if pipe.Iterations != tt.want || pipe.UnitSize != tt.unit {
				t.Errorf("iterations %d unit %d, want %d, %d", pipe.Iterations, pipe.UnitSize, tt.want, tt.unit)
			}
			// Nested ops are resolved at full length.
			wantBody := []OpInstance{
				{Type: plan.OpNop, Index: 0, Path: "op 0.0"},
				{Type: plan.OpCopy, Index: 1, Path: "op 0.1",
					Src: []Region{{Rank: 0, Buffer: plan.Input, Size: tt.size, Switch: -1}},
					Dst: []Region{{Rank: 0, Buffer: plan.Output, Size: tt.size, Switch: -1}}},
			}
			if diff := cmp.Diff(wantBody, pipe.Body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// pairingPlan has three ranks: rank 0 has memory channels to 1, 2, 1;
// rank 1 two to 0; rank 2 none; and port channels 0 <-> 2.
const pairingPlan = `{
  "name": "pairing", "collective": "test", "protocol": "Simple", "inplace": false,
  "gpus": [
    {"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
     "threadblocks": [{"id": 0, "ops": [{"name": "signal", "channel_ids": [1, 0], "channel_type": "memory"}, {"name": "wait", "channel_ids": [0], "channel_type": "port"}],
       "channels": [{"channel_type": "memory", "channel_ids": [0, 2]}, {"channel_type": "port", "channel_ids": [0]}]}],
     "channels": [{"channel_type": "memory", "connected_to": [1, 2]}, {"channel_type": "port", "connected_to": [2]}, {"channel_type": "memory", "connected_to": [1]}],
     "remote_buffers": []},
    {"id": 1, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
     "threadblocks": [{"id": 0, "ops": [{"name": "wait", "channel_ids": [0, 1], "channel_type": "memory"}],
       "channels": [{"channel_type": "memory", "channel_ids": [1, 0]}]}],
     "channels": [{"channel_type": "memory", "connected_to": [0, 0]}],
     "remote_buffers": []},
    {"id": 2, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
     "threadblocks": [{"id": 0, "ops": [{"name": "signal", "channel_ids": [0], "channel_type": "port"}],
       "channels": [{"channel_type": "port", "channel_ids": [0]}]}],
     "channels": [{"channel_type": "port", "connected_to": [0]}],
     "remote_buffers": []}
  ]
}`

func TestChannelPairing(t *testing.T) {
	t.Parallel()
	errs := plan.Check([]byte(pairingPlan))
	if len(errs) != 1 || !errors.Is(errs[0], plan.ErrUnpairedUnused) {
		t.Fatalf("Check = %v, want one unused-unpaired warning (rank 0's channel to rank 2)", errs)
	}
	p := mustLoad(t, pairingPlan)
	inst, err := Instantiate(p, Sizes{Input: 16, Output: 16})
	if err != nil {
		t.Fatal(err)
	}
	type ends struct{ Memory, Port []ChannelEnd }
	var got []ends
	for _, r := range inst.Ranks {
		got = append(got, ends{r.MemoryChannels, r.PortChannels})
	}
	want := []ends{
		{Memory: []ChannelEnd{{Peer: 1, PeerIndex: 0}, {Peer: 2, PeerIndex: -1}, {Peer: 1, PeerIndex: 1}}, Port: []ChannelEnd{{Peer: 2, PeerIndex: 0}}},
		{Memory: []ChannelEnd{{Peer: 0, PeerIndex: 0}, {Peer: 0, PeerIndex: 2}}, Port: []ChannelEnd{}},
		{Memory: []ChannelEnd{}, Port: []ChannelEnd{{Peer: 0, PeerIndex: 0}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("channel ends (-want +got):\n%s", diff)
	}
	// Op channels are global indices of the op's type.
	if got := inst.Ranks[0].TBs[0].Ops[0].Channels; !cmp.Equal(got, []int{2, 0}) {
		t.Errorf("rank 0 signal channels = %v, want [2 0]", got)
	}
	if got := inst.Ranks[1].TBs[0].Ops[0].Channels; !cmp.Equal(got, []int{1, 0}) {
		t.Errorf("rank 1 wait channels = %v, want [1 0]", got)
	}
}

func TestScratchSizing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		scratch  []int // scratch_chunks per rank (chunks in/out: 2)
		protocol string
		double   bool
		reuse    bool
		size     uint64
		want     uint64
		slot     uint64
	}{
		{name: "none", scratch: []int{0}, size: 64, want: 0},
		{name: "simple", scratch: []int{3}, size: 64, want: 96},
		{name: "LL", scratch: []int{3}, protocol: "LL", size: 64, want: 192},
		{name: "LL double", scratch: []int{3}, protocol: "LL", double: true, size: 64, want: 384},
		{name: "largest rank", scratch: []int{1, 4}, size: 64, want: 128},
		{name: "reuse", scratch: []int{2}, reuse: true, size: 64, want: 64 * miB, slot: 32 * miB},
		{name: "reuse double", scratch: []int{2}, reuse: true, double: true, size: 64, want: 64 * miB, slot: 16 * miB},
		{name: "reuse rounded slots", scratch: []int{3}, reuse: true, size: 96, want: 3 * 22369632, slot: 22369632},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := onePlan(2, 2, tt.scratch[0])
			for r := 1; r < len(tt.scratch); r++ {
				g := p.GPUs[0]
				g.ID, g.ScratchChunks = r, tt.scratch[r]
				p.GPUs = append(p.GPUs, g)
			}
			p.Protocol = "Simple"
			if tt.protocol != "" {
				p.Protocol = tt.protocol
			}
			p.UseDoubleScratch, p.ReuseResources = tt.double, tt.reuse
			inst, err := Instantiate(p, Sizes{Input: tt.size, Output: tt.size})
			if err != nil {
				t.Fatal(err)
			}
			if inst.ScratchBytes != tt.want {
				t.Errorf("ScratchBytes = %d, want %d", inst.ScratchBytes, tt.want)
			}
			if got := inst.ScratchSlot(0); got != tt.slot {
				t.Errorf("ScratchSlot = %d, want %d", got, tt.slot)
			}
		})
	}
}

// TestReuseSlots: with reuse_resources and chunks larger than the slot,
// scratch chunk j starts at j × slot; lengths stay full chunk lengths.
func TestReuseSlots(t *testing.T) {
	t.Parallel()
	body := copyOpOf(localOpd(plan.Input, 1, 1), localOpd(plan.Scratch, 1, 1))
	p := onePlan(2, 2, 2, plan.Op{Type: plan.OpPipeline, UnitSize: miB, NumChunks: 1, Ops: []plan.Op{body}})
	p.ReuseResources = true
	inst, err := Instantiate(p, Sizes{Input: 96 * miB, Output: 96 * miB})
	if err != nil {
		t.Fatal(err)
	}
	got := inst.Ranks[0].TBs[0].Ops[0].Body[0].Dst[0]
	want := Region{Rank: 0, Buffer: plan.Scratch, Offset: 32 * miB, Size: 48 * miB, Switch: -1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Outside a pipeline the same access overruns the 64 MiB scratch.
	p.GPUs[0].ThreadBlocks[0].Ops = []plan.Op{body}
	if _, err := Instantiate(p, Sizes{Input: 96 * miB, Output: 96 * miB}); !errors.Is(err, plan.ErrSize) || !strings.Contains(err.Error(), "beyond rank 0's scratch buffer of 67108864 bytes") {
		t.Errorf("Instantiate = %v, want the scratch overrun", err)
	}
}

const switchPlan = `{
  "name": "switch", "collective": "allreduce", "protocol": "Simple", "inplace": true,
  "gpus": [` + switchGPU0 + `,` + switchGPU1 + `]
}`

const switchGPU0 = `{"id": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 0,
     "threadblocks": [{"id": 0, "ops": [
        {"name": "glres", "src_buff": [{"switch_channel_id": 0, "index": 0, "size": 1}], "dst_buff": [{"switch_channel_id": 0, "index": 0, "size": 1}], "channel_type": "switch"},
        {"name": "gstore", "src_buff": [{"rank": 0, "type": "o", "index": 1, "size": 1}], "dst_buff": [{"switch_channel_id": 1, "index": 1, "size": 1}], "channel_type": "switch"}],
       "channels": [{"channel_type": "switch", "channel_ids": [1, 0]}]}],
     "channels": [{"channel_type": "switch", "buffer_type": "o", "rank_groups": [{"size": 2, "ranks": [0, 1]}]},
                  {"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 2, "ranks": [1, 0]}]}],
     "remote_buffers": []}`

const switchGPU1 = `{"id": 1, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 0,
     "threadblocks": [],
     "channels": [{"channel_type": "switch", "buffer_type": "o", "rank_groups": [{"size": 2, "ranks": [0, 1]}]},
                  {"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 2, "ranks": [0, 1]}]}],
     "remote_buffers": []}`

func TestSwitchRegions(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, switchPlan)
	inst, err := Instantiate(p, Sizes{Input: 64, Output: 64})
	if err != nil {
		t.Fatal(err)
	}
	ops := inst.Ranks[0].TBs[0].Ops
	want := []OpInstance{
		{Type: plan.OpMultiLoadReduceStore, ChannelType: plan.Switch, Index: 0, Path: "op 0",
			Src: []Region{{Rank: -1, Buffer: plan.Input, Offset: 0, Size: 32, Switch: 1}},
			Dst: []Region{{Rank: -1, Buffer: plan.Input, Offset: 0, Size: 32, Switch: 1}}},
		{Type: plan.OpMultiStore, ChannelType: plan.Switch, Index: 1, Path: "op 1",
			Src: []Region{{Rank: 0, Buffer: plan.Output, Offset: 32, Size: 32, Switch: -1}},
			Dst: []Region{{Rank: -1, Buffer: plan.Output, Offset: 32, Size: 32, Switch: 0}}},
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	wantGroups := []plan.SwitchGroup{{Buffer: plan.Output, Ranks: []int{0, 1}}, {Buffer: plan.Input, Ranks: []int{1, 0}}}
	if diff := cmp.Diff(wantGroups, inst.Ranks[0].Switches); diff != "" {
		t.Errorf("switches (-want +got):\n%s", diff)
	}
}

// TestRemoteRegions checks that remote operands land on the owner, in the
// remote buffer's type, found through the op's channel type table.
func TestRemoteRegions(t *testing.T) {
	t.Parallel()
	p := mustLoad(t, basePlan)
	inst, err := Instantiate(p, Sizes{Input: 64, Output: 64})
	if err != nil {
		t.Fatal(err)
	}
	if inst.ScratchBytes != 64 {
		t.Errorf("ScratchBytes = %d, want 64", inst.ScratchBytes)
	}
	put := inst.Ranks[1].TBs[0].Ops[0]
	want := []Region{{Rank: 0, Buffer: plan.Scratch, Offset: 32, Size: 32, Switch: -1}}
	if diff := cmp.Diff(want, put.Dst); diff != "" {
		t.Errorf("put dst (-want +got):\n%s", diff)
	}
	if sem := inst.Ranks[0].Semaphores; !cmp.Equal(sem, []int64{0}) {
		t.Errorf("semaphores = %v", sem)
	}
	bar := inst.Ranks[0].TBs[1].Ops[1]
	if bar.Type != plan.OpBarrier || bar.BarrierID != 0 || bar.NumThreadBlocks != 2 {
		t.Errorf("barrier = %+v", bar)
	}
	if s := inst.Ranks[0].TBs[1].Ops[0].Semaphores; !cmp.Equal(s, []int{0}) {
		t.Errorf("sem_release semaphores = %v", s)
	}
}

// TestPacketBounds: an LL packet region takes twice its data range.
func TestPacketBounds(t *testing.T) {
	t.Parallel()
	p := onePlan(1, 1, 1, plan.Op{Type: plan.OpCopyPacket, Src: []plan.Operand{localOpd(plan.Input, 0, 1)}, Dst: []plan.Operand{localOpd(plan.Scratch, 0, 1)}})
	if _, err := Instantiate(p, Sizes{Input: 64, Output: 64}); !errors.Is(err, plan.ErrSize) || !strings.Contains(err.Error(), "bytes [0, 128) (as LL packets: twice the data range) beyond rank 0's scratch buffer of 64 bytes") {
		t.Errorf("Simple protocol: Instantiate = %v, want a packet overrun", err)
	}
	p.Protocol = "LL"
	if _, err := Instantiate(p, Sizes{Input: 64, Output: 64}); err != nil {
		t.Errorf("LL protocol: %v", err)
	}
}
