package emit

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// indented lays out compact JSON the way json.dumps(indent=2) does, using
// encoding/json's textual indenter (key order is kept), so that expected
// values can be written on one line.
func indented(t *testing.T, compact string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(compact), "", "  "); err != nil {
		t.Fatalf("bad expected JSON %s: %v", compact, err)
	}
	return b.String()
}

func loc(b ir.BufferType, index, size int) ir.Ref {
	return ir.Ref{Buffer: b, Index: index, Size: size}
}

func rem(id, index, size int) ir.Ref {
	return ir.Ref{Remote: true, BufferID: id, Index: index, Size: size}
}

// fusedSet returns the set of the ids fused in order and then rebuilt by
// replication, as the passes leave a fused signal.
func fusedSet(ids ...int) *ir.Set {
	s := ir.NewSet(ids[0])
	for _, id := range ids[1:] {
		s = s.Union(ir.NewSet(id))
	}
	return s.Rebuilt()
}

func TestOp(t *testing.T) {
	t.Parallel()
	tbg := &ir.TBGInfo{TBID: 1, TBGSize: 4}
	const (
		lI0   = `{"type":"i","index":0,"size":1}`
		lO2   = `{"type":"o","index":2,"size":1}`
		lS3   = `{"type":"s","index":3,"size":2}`
		r0    = `{"buffer_id":0,"index":4,"size":1}`
		r1    = `{"buffer_id":1,"index":5,"size":1}`
		tbgJS = `"tbg_info":{"tb_id":1,"tbg_size":4}`
	)
	tests := []struct {
		name string
		op   *ir.Op
		want string // compact JSON
	}{
		{"nop", &ir.Op{Kind: plan.OpNop}, `{"name":"nop"}`},
		{"barrier", &ir.Op{Kind: plan.OpBarrier, Barrier: &ir.BarrierInfo{ID: 3, TBList: []int{0, 2, 5}}},
			`{"name":"barrier","barrier_id":3,"num_threadblocks":3}`},
		{"signal memory", &ir.Op{Kind: plan.OpSignal, IDSet: ir.NewSet(0, 1), ChannelType: ir.Memory, DataSync: ir.SyncBoth},
			`{"name":"signal","channel_ids":[0,1],"channel_type":"memory"}`},
		{"signal port", &ir.Op{Kind: plan.OpSignal, IDSet: ir.NewSet(2), ChannelType: ir.Port},
			`{"name":"signal","channel_ids":[2],"channel_type":"port"}`},
		{"rlxsignal", &ir.Op{Kind: plan.OpRelaxedSignal, IDSet: ir.NewSet(0), ChannelType: ir.Memory},
			`{"name":"rlxsignal","channel_ids":[0],"channel_type":"memory"}`},
		{"wait", &ir.Op{Kind: plan.OpWait, IDSet: ir.NewSet(1, 0), ChannelType: ir.Memory},
			`{"name":"wait","channel_ids":[0,1],"channel_type":"memory"}`},
		{"rlxwait", &ir.Op{Kind: plan.OpRelaxedWait, IDSet: ir.NewSet(0), ChannelType: ir.Memory},
			`{"name":"rlxwait","channel_ids":[0],"channel_type":"memory"}`},
		{"flush", &ir.Op{Kind: plan.OpFlush, IDSet: ir.NewSet(0, 1), ChannelType: ir.Port},
			`{"name":"flush","channel_ids":[0,1],"channel_type":"port"}`},
		{"signal set order", &ir.Op{Kind: plan.OpSignal, IDSet: fusedSet(3, 11, 19), ChannelType: ir.Memory},
			`{"name":"signal","channel_ids":[19,3,11],"channel_type":"memory"}`},
		{"signal list fallback", &ir.Op{Kind: plan.OpWait, ChannelIDs: []int{8, 0}, ChannelType: ir.Memory},
			`{"name":"wait","channel_ids":[8,0],"channel_type":"memory"}`},
		{"sem_acquire", &ir.Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0, 2}},
			`{"name":"sem_acquire","semaphore_ids":[0,2]}`},
		{"sem_release", &ir.Op{Kind: plan.OpSemRelease, SemaphoreIDs: []int{1}},
			`{"name":"sem_release","semaphore_ids":[1]}`},
		{"copy", &ir.Op{Kind: plan.OpCopy, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{loc(ir.Output, 2, 1)}},
			`{"name":"copy","src_buff":[` + lI0 + `],"dst_buff":[` + lO2 + `]}`},
		{"copy tbg", &ir.Op{Kind: plan.OpCopy, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{loc(ir.Output, 2, 1)}, TBG: tbg},
			`{"name":"copy","src_buff":[` + lI0 + `],"dst_buff":[` + lO2 + `],` + tbgJS + `}`},
		{"cpkt", &ir.Op{Kind: plan.OpCopyPacket, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{loc(ir.Scratch, 3, 2)}},
			`{"name":"cpkt","src_buff":[` + lI0 + `],"dst_buff":[` + lS3 + `]}`},
		{"upkt tbg", &ir.Op{Kind: plan.OpUnpackPacket, Src: []ir.Ref{loc(ir.Scratch, 3, 2)}, Dst: []ir.Ref{loc(ir.Output, 2, 1)}, TBG: tbg},
			`{"name":"upkt","src_buff":[` + lS3 + `],"dst_buff":[` + lO2 + `],` + tbgJS + `}`},
		{"get fused", &ir.Op{Kind: plan.OpGet, Src: []ir.Ref{rem(0, 4, 1), rem(1, 5, 1)}, Dst: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Output, 2, 1)},
			ChannelIDs: []int{0, 0}, ChannelType: ir.Memory},
			`{"name":"get","src_buff":[` + r0 + `,` + r1 + `],"dst_buff":[` + lI0 + `,` + lO2 + `],"channel_ids":[0,0],"channel_type":"memory"}`},
		{"get tbg", &ir.Op{Kind: plan.OpGet, Src: []ir.Ref{rem(0, 4, 1)}, Dst: []ir.Ref{loc(ir.Input, 0, 1)}, ChannelIDs: []int{1}, ChannelType: ir.Memory, TBG: tbg},
			`{"name":"get","src_buff":[` + r0 + `],"dst_buff":[` + lI0 + `],"channel_ids":[1],"channel_type":"memory",` + tbgJS + `}`},
		{"put memory omits channel_ids", &ir.Op{Kind: plan.OpPut, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{rem(0, 4, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory},
			`{"name":"put","src_buff":[` + lI0 + `],"dst_buff":[` + r0 + `],"channel_type":"memory"}`},
		{"put port", &ir.Op{Kind: plan.OpPut, Src: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Output, 2, 1)}, Dst: []ir.Ref{rem(0, 4, 1), rem(1, 5, 1)}, ChannelIDs: []int{0, 0}, ChannelType: ir.Port},
			`{"name":"put","src_buff":[` + lI0 + `,` + lO2 + `],"dst_buff":[` + r0 + `,` + r1 + `],"channel_ids":[0,0],"channel_type":"port"}`},
		{"put memory tbg", &ir.Op{Kind: plan.OpPut, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{rem(0, 4, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory, TBG: tbg},
			`{"name":"put","src_buff":[` + lI0 + `],"dst_buff":[` + r0 + `],"channel_type":"memory",` + tbgJS + `}`},
		{"pws", &ir.Op{Kind: plan.OpPutWithSignal, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{rem(0, 4, 1)}, ChannelIDs: []int{2}, ChannelType: ir.Port},
			`{"name":"pws","src_buff":[` + lI0 + `],"dst_buff":[` + r0 + `],"channel_ids":[2],"channel_type":"port"}`},
		{"pwsf", &ir.Op{Kind: plan.OpPutWithSignalAndFlush, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{rem(0, 4, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Port},
			`{"name":"pwsf","src_buff":[` + lI0 + `],"dst_buff":[` + r0 + `],"channel_ids":[0],"channel_type":"port"}`},
		{"ppkt memory", &ir.Op{Kind: plan.OpPutPacket, Src: []ir.Ref{loc(ir.Input, 0, 1)}, Dst: []ir.Ref{rem(0, 4, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory},
			`{"name":"ppkt","src_buff":[` + lI0 + `],"dst_buff":[` + r0 + `],"channel_type":"memory"}`},
		{"rppkt port tbg one src two dsts", &ir.Op{Kind: plan.OpReadPutPacket, Src: []ir.Ref{loc(ir.Scratch, 3, 2)}, Dst: []ir.Ref{rem(0, 4, 1), rem(1, 5, 1)}, ChannelIDs: []int{0, 1}, ChannelType: ir.Port, TBG: tbg},
			`{"name":"rppkt","src_buff":[` + lS3 + `],"dst_buff":[` + r0 + `,` + r1 + `],"channel_ids":[0,1],"channel_type":"port",` + tbgJS + `}`},
		{"re local", &ir.Op{Kind: plan.OpReduce, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Scratch, 3, 2)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}},
			`{"name":"re","src_buff":[` + lI0 + `,` + lS3 + `],"dst_buff":[` + lO2 + `],"reduce_op":"sum"}`},
		{"re from memory channel", &ir.Op{Kind: plan.OpReduce, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory, ReduceOp: ir.Max},
			`{"name":"re","src_buff":[` + lI0 + `],"dst_buff":[` + lO2 + `],"channel_type":"memory","reduce_op":"max"}`},
		{"repkt tbg", &ir.Op{Kind: plan.OpReducePacket, Packet: true, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Scratch, 3, 2)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, ReduceOp: ir.Min, TBG: tbg},
			`{"name":"repkt","src_buff":[` + lI0 + `,` + lS3 + `],"dst_buff":[` + lO2 + `],"reduce_op":"min",` + tbgJS + `}`},
		{"rre", &ir.Op{Kind: plan.OpReadReduce, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1)}, RemoteSrc: []ir.Ref{rem(0, 4, 1), rem(1, 5, 1)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, ChannelIDs: []int{0, 1}, ChannelType: ir.Memory},
			`{"name":"rre","src_buff":[` + lI0 + `,` + r0 + `,` + r1 + `],"dst_buff":[` + lO2 + `],"channel_type":"memory","reduce_op":"sum"}`},
		{"res", &ir.Op{Kind: plan.OpReduceSend, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Scratch, 3, 2)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, RemoteDst: []ir.Ref{rem(0, 4, 1)}, PutChannelIDs: []int{0}, ChannelType: ir.Memory},
			`{"name":"res","src_buff":[` + lI0 + `,` + lS3 + `],"dst_buff":[` + lO2 + `,` + r0 + `],"channel_type":"memory","reduce_op":"sum"}`},
		{"rres tbg", &ir.Op{Kind: plan.OpReadReduceSend, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1)}, RemoteSrc: []ir.Ref{rem(0, 4, 1)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, RemoteDst: []ir.Ref{rem(1, 5, 1)}, ChannelIDs: []int{0}, PutChannelIDs: []int{1}, ChannelType: ir.Memory, TBG: tbg},
			`{"name":"rres","src_buff":[` + lI0 + `,` + r0 + `],"dst_buff":[` + lO2 + `,` + r1 + `],"channel_type":"memory","reduce_op":"sum",` + tbgJS + `}`},
		{"respkt", &ir.Op{Kind: plan.OpReduceSendPacket, Packet: true, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Scratch, 3, 2)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, RemoteDst: []ir.Ref{rem(0, 4, 1), rem(1, 5, 1)}, ChannelType: ir.Memory},
			`{"name":"respkt","src_buff":[` + lI0 + `,` + lS3 + `],"dst_buff":[` + lO2 + `,` + r0 + `,` + r1 + `],"channel_type":"memory","reduce_op":"sum"}`},
		{"recpkt", &ir.Op{Kind: plan.OpReduceCopyPacket, Packet: true, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1), loc(ir.Scratch, 3, 2)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, LocalPktDst: []ir.Ref{loc(ir.Scratch, 3, 2)}},
			`{"name":"recpkt","src_buff":[` + lI0 + `,` + lS3 + `],"dst_buff":[` + lO2 + `,` + lS3 + `],"reduce_op":"sum"}`},
		{"recspkt", &ir.Op{Kind: plan.OpReduceCopySendPacket, Packet: true, LocalSrc: []ir.Ref{loc(ir.Input, 0, 1)}, LocalDst: []ir.Ref{loc(ir.Output, 2, 1)}, LocalPktDst: []ir.Ref{loc(ir.Scratch, 3, 2)}, RemoteDst: []ir.Ref{rem(0, 4, 1)}, ChannelType: ir.Memory, TBG: tbg},
			`{"name":"recspkt","src_buff":[` + lI0 + `],"dst_buff":[` + lO2 + `,` + lS3 + `,` + r0 + `],"channel_type":"memory","reduce_op":"sum",` + tbgJS + `}`},
		{"glre", &ir.Op{Kind: plan.OpGroupLoadReduce, SwitchBuffer: ir.Input, BufferOffset: 2, Size: 1, SwitchChunk: &ir.Chunk{Rank: 1, Buffer: ir.Scratch, Index: 6, Size: 1}, ChannelIDs: []int{0}, ChannelType: ir.Switch},
			`{"name":"glre","buffer_type":"i","buffer_offset":2,"size":1,"dst_chunk":{"rank":1,"type":"s","index":6,"size":1},"channel_ids":[0],"channel_type":"switch","reduce_op":"sum"}`},
		{"gstore", &ir.Op{Kind: plan.OpMultiStore, BufferOffset: 3, Size: 2, SwitchChunk: &ir.Chunk{Rank: 0, Buffer: ir.Input, Index: 6, Size: 2}, ChannelIDs: []int{1}, ChannelType: ir.Switch},
			`{"name":"gstore","src_buff":[{"rank":0,"type":"i","index":6,"size":2}],"dst_buff":[{"switch_channel_id":1,"index":3,"size":2}],"channel_type":"switch"}`},
		{"gstorepkt", &ir.Op{Kind: plan.OpMultiStorePacket, BufferOffset: 0, Size: 1, SwitchChunk: &ir.Chunk{Rank: 2, Buffer: ir.Scratch, Index: 1, Size: 1}, ChannelIDs: []int{0}, ChannelType: ir.Switch},
			`{"name":"gstorepkt","src_buff":[{"rank":2,"type":"s","index":1,"size":1}],"dst_buff":[{"switch_channel_id":0,"index":0,"size":1}],"channel_type":"switch"}`},
		{"glres dst prints src offset (Q1)", &ir.Op{Kind: plan.OpMultiLoadReduceStore, Size: 1, SrcIndex: []int{2}, DstIndex: []int{5}, ChannelIDs: []int{0}, ChannelType: ir.Switch, ReduceOp: ir.Sum},
			`{"name":"glres","src_buff":[{"switch_channel_id":0,"index":2,"size":1}],"dst_buff":[{"switch_channel_id":0,"index":2,"size":1}],"channel_type":"switch","reduce_op":"sum"}`},
		{"glres two channels", &ir.Op{Kind: plan.OpMultiLoadReduceStore, Size: 4, SrcIndex: []int{0, 8}, DstIndex: []int{0, 8}, ChannelIDs: []int{0, 1}, ChannelType: ir.Switch},
			`{"name":"glres","src_buff":[{"switch_channel_id":0,"index":0,"size":4},{"switch_channel_id":1,"index":8,"size":4}],"dst_buff":[{"switch_channel_id":0,"index":0,"size":4},{"switch_channel_id":1,"index":8,"size":4}],"channel_type":"switch","reduce_op":"sum"}`},
		{"pipeline", &ir.Op{Kind: plan.OpPipeline, UnitSize: 1 << 20, NumChunks: 3, Body: []*ir.Op{
			{Kind: plan.OpNop},
			{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}},
		}},
			`{"name":"pipeline","iter_context":{"unit_size":1048576,"num_chunks":3},"ops":[{"name":"nop"},{"name":"sem_release","semaphore_ids":[0]}]}`},
		{"pipeline empty body", &ir.Op{Kind: plan.OpPipeline, UnitSize: 4096, NumChunks: 1},
			`{"name":"pipeline","iter_context":{"unit_size":4096,"num_chunks":1},"ops":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := checkOps([]*ir.Op{tt.op}, 0, 0, ""); err != nil {
				t.Fatal(err)
			}
			var l lowerer
			var op plan.Op
			l.op(&op, tt.op)
			e := plan.NewWriter(nil)
			e.Op(&op)
			if diff := cmp.Diff(indented(t, tt.want), string(e.Bytes())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// bigInt parses a decimal integer for test programs.
func bigInt(s string) *big.Int {
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return x
}

func TestProgram(t *testing.T) {
	t.Parallel()
	header := func(name string, gpus string) string {
		return `{"name":` + name + `,"collective":"test","protocol":"Simple","inplace":false,"reuse_resources":false,"gpus":` + gpus +
			`,"num_threads_per_block":1024,"use_double_scratch_buffer":false,"buffer_alignment":16,"min_message_size":0,"max_message_size":18446744073709551615}`
	}
	base := func(gpus ...*ir.GPU) *ir.Program {
		return &ir.Program{Name: "t", Collective: "test", Protocol: "Simple", GPUs: gpus,
			NumThreadsPerBlock: big.NewInt(1024), BufferAlignment: big.NewInt(16),
			MinMessageSize: big.NewInt(0), MaxMessageSize: bigInt("18446744073709551615")}
	}
	tests := []struct {
		name string
		p    *ir.Program
		want string
	}{
		{"no gpus, nil header numbers take the defaults",
			&ir.Program{Name: "empty", Collective: "test", Protocol: "Simple"},
			header(`"empty"`, `[]`)},
		{"name escaping",
			func() *ir.Program { p := base(); p.Name = "a\"b\\c\n</x>&\u00e9\U0001F600"; return p }(),
			header(`"a\"b\\c\n</x>&\u00e9\ud83d\ude00"`, `[]`)},
		{"big header values",
			&ir.Program{Name: "big", Collective: "allreduce", Protocol: "LL", Inplace: true, ReuseResources: true, UseDoubleScratchBuffer: true,
				NumThreadsPerBlock: big.NewInt(512), BufferAlignment: big.NewInt(32),
				MinMessageSize: big.NewInt(0), MaxMessageSize: bigInt("18446744073709551615")},
			`{"name":"big","collective":"allreduce","protocol":"LL","inplace":true,"reuse_resources":true,"gpus":[],` +
				`"num_threads_per_block":512,"use_double_scratch_buffer":true,"buffer_alignment":32,"min_message_size":0,"max_message_size":18446744073709551615}`},
		{"empty gpu",
			base(&ir.GPU{ID: 0}),
			header(`"t"`, `[{"id":0,"input_chunks":0,"output_chunks":0,"scratch_chunks":0,"threadblocks":[],"channels":[],"remote_buffers":[],"semaphores":[]}]`)},
		{"empty thread blocks keep all four keys",
			base(&ir.GPU{ID: 0, InputChunks: 1, OutputChunks: 2, ScratchChunks: 3, ThreadBlocks: []*ir.ThreadBlock{{ID: 0}, {ID: 1, Ops: []*ir.Op{{Kind: plan.OpNop}}}}}),
			header(`"t"`, `[{"id":0,"input_chunks":1,"output_chunks":2,"scratch_chunks":3,"threadblocks":[`+
				`{"id":0,"ops":[],"channels":[],"remote_buffer_refs":[]},`+
				`{"id":1,"ops":[{"name":"nop"}],"channels":[],"remote_buffer_refs":[]}`+
				`],"channels":[],"remote_buffers":[],"semaphores":[]}]`)},
		{"gpu tables",
			base(&ir.GPU{ID: 1,
				Channels: []ir.ChannelTable{{Type: ir.Port, ConnectedTo: []int{0, 2}}, {Type: ir.Memory, ConnectedTo: []int{2}}},
				Switches: []ir.SwitchEntry{{Buffer: ir.Output, Ranks: []int{0, 1, 2}}, {Buffer: ir.Scratch, Ranks: []int{1, 2}}},
				RemoteBuffers: []ir.RemoteBuffer{
					{Rank: 0, Buffer: ir.Scratch, Port: true},
					{Rank: 2, Buffer: ir.Output, Memory: true, Port: true},
					{Rank: 2, Buffer: ir.Input, Memory: true},
				},
				Semaphores: []*big.Int{big.NewInt(0), big.NewInt(5), bigInt("9223372036854775807")},
			}),
			header(`"t"`, `[{"id":1,"input_chunks":0,"output_chunks":0,"scratch_chunks":0,"threadblocks":[],"channels":[`+
				`{"channel_type":"port","connected_to":[0,2]},{"channel_type":"memory","connected_to":[2]},`+
				`{"channel_type":"switch","buffer_type":"o","rank_groups":[{"size":3,"ranks":[0,1,2]}]},`+
				`{"channel_type":"switch","buffer_type":"s","rank_groups":[{"size":2,"ranks":[1,2]}]}],`+
				`"remote_buffers":[{"rank":0,"type":"s","access_channel_types":["port"]},`+
				`{"rank":2,"type":"o","access_channel_types":["memory","port"]},`+
				`{"rank":2,"type":"i","access_channel_types":["memory"]}],`+
				`"semaphores":[{"init_value":0},{"init_value":5},{"init_value":9223372036854775807}]}]`)},
		// instances=2 as the replication pass leaves it: dense TB ids,
		// GPU-level ids c*n+i in TB tables, repeated connected_to and
		// semaphores, TB-local op channel ids unchanged.
		{"replicated ids",
			base(&ir.GPU{ID: 0, InputChunks: 2, OutputChunks: 2,
				Channels:      []ir.ChannelTable{{Type: ir.Memory, ConnectedTo: []int{1, 1}}},
				Semaphores:    []*big.Int{big.NewInt(0), big.NewInt(0)},
				RemoteBuffers: []ir.RemoteBuffer{{Rank: 1, Buffer: ir.Output, Memory: true}},
				ThreadBlocks: []*ir.ThreadBlock{
					{ID: 0, Ops: []*ir.Op{
						{Kind: plan.OpPut, Src: []ir.Ref{loc(ir.Output, 0, 1)}, Dst: []ir.Ref{rem(0, 0, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory},
						{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}},
					}, Channels: []ir.IDTable{{Type: ir.Memory, IDs: []int{0}}}, RemoteRefs: []ir.IDTable{{Type: ir.Memory, IDs: []int{0}}}},
					{ID: 1, Ops: []*ir.Op{
						{Kind: plan.OpPut, Src: []ir.Ref{loc(ir.Output, 1, 1)}, Dst: []ir.Ref{rem(0, 1, 1)}, ChannelIDs: []int{0}, ChannelType: ir.Memory},
						{Kind: plan.OpSemRelease, SemaphoreIDs: []int{1}},
					}, Channels: []ir.IDTable{{Type: ir.Memory, IDs: []int{1}}}, RemoteRefs: []ir.IDTable{{Type: ir.Memory, IDs: []int{0}}}},
				}}),
			header(`"t"`, `[{"id":0,"input_chunks":2,"output_chunks":2,"scratch_chunks":0,"threadblocks":[`+
				`{"id":0,"ops":[{"name":"put","src_buff":[{"type":"o","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_type":"memory"},{"name":"sem_release","semaphore_ids":[0]}],`+
				`"channels":[{"channel_type":"memory","channel_ids":[0]}],"remote_buffer_refs":[{"access_channel_type":"memory","remote_buffer_ids":[0]}]},`+
				`{"id":1,"ops":[{"name":"put","src_buff":[{"type":"o","index":1,"size":1}],"dst_buff":[{"buffer_id":0,"index":1,"size":1}],"channel_type":"memory"},{"name":"sem_release","semaphore_ids":[1]}],`+
				`"channels":[{"channel_type":"memory","channel_ids":[1]}],"remote_buffer_refs":[{"access_channel_type":"memory","remote_buffer_ids":[0]}]}`+
				`],"channels":[{"channel_type":"memory","connected_to":[1,1]}],"remote_buffers":[{"rank":1,"type":"o","access_channel_types":["memory"]}],`+
				`"semaphores":[{"init_value":0},{"init_value":0}]}]`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := indented(t, tt.want)
			got, err := MarshalNoNewline(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("MarshalNoNewline (-want +got):\n%s", diff)
			}
			got, err = Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want+"\n", string(got)); diff != "" {
				t.Errorf("Marshal (-want +got):\n%s", diff)
			}
		})
	}
}

// ex3Program builds by hand the IR that docs/plan-format.md §12.3's program leaves
// after the passes (NVLS allreduce in a pipeline, semaphore, barrier).
func ex3Program() *ir.Program {
	p := &ir.Program{Name: "ex3_nvls_pipeline", Collective: "allreduce", Protocol: "Simple", Inplace: true}
	for r := 0; r < 2; r++ {
		barrier := &ir.Op{Kind: plan.OpBarrier, Barrier: &ir.BarrierInfo{ID: 0, TBList: []int{0, 1}}}
		p.GPUs = append(p.GPUs, &ir.GPU{
			ID: r, InputChunks: 2, OutputChunks: 2,
			Switches:   []ir.SwitchEntry{{Buffer: ir.Input, Ranks: []int{0, 1}}},
			Semaphores: []*big.Int{big.NewInt(0)},
			ThreadBlocks: []*ir.ThreadBlock{
				{ID: 0, Ops: []*ir.Op{
					{Kind: plan.OpPipeline, UnitSize: 1 << 20, NumChunks: 1, Body: []*ir.Op{
						{Kind: plan.OpMultiLoadReduceStore, Size: 1, SrcIndex: []int{r}, DstIndex: []int{r}, ChannelIDs: []int{0}, ChannelType: ir.Switch},
						{Kind: plan.OpNop},
						{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}},
					}},
					barrier,
				}, Channels: []ir.IDTable{{Type: ir.Switch, IDs: []int{0}}}},
				{ID: 1, Ops: []*ir.Op{
					{Kind: plan.OpPipeline, UnitSize: 1 << 20, NumChunks: 1, Body: []*ir.Op{
						{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0}},
						{Kind: plan.OpNop},
					}},
					barrier,
				}},
			},
		})
	}
	return p
}

func TestWorkedExample3(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("testdata/ex3_nvls_pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, ex3Program()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	withOp := func(op *ir.Op) *ir.Program {
		p := ex3Program()
		p.GPUs[1].ThreadBlocks[1].Ops = append(p.GPUs[1].ThreadBlocks[1].Ops, op)
		return p
	}
	tests := []struct {
		name string
		p    *ir.Program
		want string // substring of the error
	}{
		{"nil program", nil, "nil program"},
		{"nil gpu", &ir.Program{GPUs: []*ir.GPU{nil}}, "gpus[0]: invalid program: nil GPU"},
		{"nil thread block", &ir.Program{GPUs: []*ir.GPU{{ID: 3, ThreadBlocks: []*ir.ThreadBlock{nil}}}}, "rank 3: threadblocks[0]"},
		{"nil semaphore", &ir.Program{GPUs: []*ir.GPU{{Semaphores: []*big.Int{nil}}}}, "semaphore 0"},
		{"semaphore over 64 bits", &ir.Program{GPUs: []*ir.GPU{{ID: 2, Semaphores: []*big.Int{big.NewInt(1), bigInt("36893488147419103232")}}}}, "rank 2: semaphore 1: init_value 36893488147419103232 does not fit 64 bits"},
		{"negative message size", &ir.Program{MinMessageSize: bigInt("-1")}, "min_message_size = -1: the plan holds a number in [0, 18446744073709551615]"},
		{"message size over 64 bits", &ir.Program{MaxMessageSize: bigInt("340282366920938463463374607431768211456")}, "max_message_size = 340282366920938463463374607431768211456"},
		{"nil op", withOp(nil), "rank 1: tb 1: op 2: invalid program: nil op"},
		{"unknown kind", withOp(&ir.Op{Kind: plan.OpGroupLoadReduce + 1}), "unknown op kind"},
		{"barrier without info", withOp(&ir.Op{Kind: plan.OpBarrier}), "op 2 (barrier)"},
		{"glre without chunk", withOp(&ir.Op{Kind: plan.OpGroupLoadReduce, ChannelIDs: []int{0}}), "no destination chunk"},
		{"gstore without chunk", withOp(&ir.Op{Kind: plan.OpMultiStore, ChannelIDs: []int{0}}), "no source chunk"},
		{"gstorepkt without channel", withOp(&ir.Op{Kind: plan.OpMultiStorePacket, SwitchChunk: &ir.Chunk{}}), "no switch channel index"},
		{"glres short channel list", withOp(&ir.Op{Kind: plan.OpMultiLoadReduceStore, SrcIndex: []int{0, 1}, ChannelIDs: []int{0}}), "2 source offsets"},
		{"negative index", withOp(&ir.Op{Kind: plan.OpCopy, Src: []ir.Ref{{Buffer: ir.Input, Index: -1, Size: 1}}, Dst: []ir.Ref{{Buffer: ir.Output, Size: 1}}}),
			"op 2 (copy): invalid program: src[0]: index -1, size 1: want at least 0"},
		{"negative switch offset", withOp(&ir.Op{Kind: plan.OpMultiStore, BufferOffset: -2, Size: 1, SwitchChunk: &ir.Chunk{}, ChannelIDs: []int{0}}),
			"buffer_offset -2, size 1: want at least 0"},
		{"negative pipeline", withOp(&ir.Op{Kind: plan.OpPipeline, UnitSize: -1, NumChunks: 1}), "unit_size -1, num_chunks 1: want at least 0"},
		{"nested in pipeline", withOp(&ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{{Kind: plan.OpNop}, {Kind: plan.OpBarrier}}}), "op 2: body op 1 (barrier)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			err := Write(&buf, tt.p)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write error = %v, want ErrInvalid containing %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes for an invalid program", buf.Len())
			}
			if _, err := Marshal(tt.p); !errors.Is(err, ErrInvalid) {
				t.Errorf("Marshal error = %v, want ErrInvalid", err)
			}
		})
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failWriter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		n := w.n
		w.n = 0
		return n, errDiskFull
	}
	w.n -= len(b)
	return len(b), nil
}

// flushAt is the buffered size at which plan.Writer hands its bytes on.
const flushAt = 64 << 10

func TestWriteStreams(t *testing.T) {
	t.Parallel()
	p := synthetic(8, 8, 40)
	want, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 4*flushAt {
		t.Fatalf("synthetic plan too small to stream: %d bytes", len(want))
	}
	var sizes []int
	var buf bytes.Buffer
	if err := Write(writerFunc(func(b []byte) (int, error) {
		sizes = append(sizes, len(b))
		return buf.Write(b)
	}), p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("Write and Marshal differ (-Marshal +Write):\n%s", cmp.Diff(string(want), buf.String()))
	}
	if len(sizes) < 4 {
		t.Errorf("Write made %d writes for %d bytes; want it to stream", len(sizes), len(want))
	}
	for _, n := range []int{0, 100, flushAt + 1} {
		if err := Write(&failWriter{n: n}, p); !errors.Is(err, errDiskFull) {
			t.Errorf("Write after %d bytes: error = %v, want %v", n, err, errDiskFull)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
