package plan

import (
	"slices"
	"testing"
)

// TestOpFacts pins the table's answers for every op type: the lists are
// the ones the executor, the cost model, the drivers and the CLI used to
// keep for themselves, so a change to the table that changes what they
// see fails here.
func TestOpFacts(t *testing.T) {
	set := func(ts ...OpType) func(OpType) bool {
		return func(o OpType) bool { return slices.Contains(ts, o) }
	}
	packet := set(OpCopyPacket, OpUnpackPacket, OpPutPacket, OpReadPutPacket, OpReducePacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket, OpMultiStorePacket)
	reads := set(OpUnpackPacket, OpReadPutPacket, OpReducePacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket, OpMultiStorePacket)
	writes := set(OpPutPacket, OpReadPutPacket, OpCopyPacket, OpReduceSendPacket, OpReduceCopyPacket, OpReduceCopySendPacket, OpMultiStorePacket)
	port := set(OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPacket, OpReadPutPacket)
	elems := set(OpReduce, OpReduceSend, OpReadReduce, OpReadReduceSend, OpMultiLoadReduceStore)
	noData := set(OpNop, OpBarrier, OpSignal, OpRelaxedSignal, OpWait, OpRelaxedWait, OpFlush, OpSemAcquire, OpSemRelease, OpPipeline)
	remote := set(OpGet, OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPacket, OpReadPutPacket, OpReduceSend, OpReadReduce, OpReadReduceSend, OpReduceSendPacket, OpReduceCopySendPacket)
	for o := range NumOpTypes {
		for _, c := range []struct {
			what      string
			got, want bool
		}{
			{"Packet", o.Packet(), packet(o)},
			{"ReadsPackets", o.ReadsPackets(), reads(o)},
			{"WritesPackets", o.WritesPackets(), writes(o)},
			{"UsesPort(Port)", o.UsesPort(Port), port(o)},
			{"UsesPort(Memory)", o.UsesPort(Memory), false},
			{"ReducesElements", o.ReducesElements(), elems(o)},
			{"IsData", o.IsData(), !noData(o)},
			{"HasRemote", o.HasRemote(), remote(o)},
		} {
			if c.got != c.want {
				t.Errorf("%v.%s() = %v, want %v", o, c.what, c.got, c.want)
			}
		}
	}
}

func TestOperandCounts(t *testing.T) {
	tests := []struct {
		o                      OpType
		minS, maxS, minD, maxD int
	}{
		{OpCopy, 1, 1, 1, 1},
		{OpMultiStorePacket, 1, 1, 1, 1},
		{OpPut, 1, -1, 1, -1},
		{OpReadPutPacket, 1, 1, 1, -1},
		{OpGet, 1, -1, 1, -1},
		{OpReducePacket, 1, -1, 1, 1},
		{OpReadReduceSend, 1, -1, 1, -1},
		{OpReduceCopyPacket, 1, -1, 2, 2},
		{OpReduceCopySendPacket, 1, -1, 2, -1},
		{OpSignal, 0, -1, 0, -1},
	}
	for _, tt := range tests {
		a, b, c, d := tt.o.OperandCounts()
		if a != tt.minS || b != tt.maxS || c != tt.minD || d != tt.maxD {
			t.Errorf("%v.OperandCounts() = %d %d %d %d, want %d %d %d %d", tt.o, a, b, c, d, tt.minS, tt.maxS, tt.minD, tt.maxD)
		}
	}
}

// TestReduceType checks that the shape of every reduce-family op names
// it back, and that packets from remote sources name none.
func TestReduceType(t *testing.T) {
	tests := []struct {
		packets, rsrc, rdst, copies bool
		want                        OpType
		ok                          bool
	}{
		{false, false, false, false, OpReduce, true},
		{false, false, true, false, OpReduceSend, true},
		{false, true, false, false, OpReadReduce, true},
		{false, true, true, false, OpReadReduceSend, true},
		{true, false, false, false, OpReducePacket, true},
		{true, false, true, false, OpReduceSendPacket, true},
		{true, false, false, true, OpReduceCopyPacket, true},
		{true, false, true, true, OpReduceCopySendPacket, true},
		{true, true, false, false, 0, false},
		{true, true, true, true, 0, false},
	}
	for _, tt := range tests {
		got, ok := ReduceType(tt.packets, tt.rsrc, tt.rdst, tt.copies)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ReduceType(%v, %v, %v, %v) = %v, %v; want %v, %v", tt.packets, tt.rsrc, tt.rdst, tt.copies, got, ok, tt.want, tt.ok)
		}
	}
}

func TestGroupLoadReduce(t *testing.T) {
	if got := OpGroupLoadReduce.String(); got != GroupLoadReduceName {
		t.Errorf("OpGroupLoadReduce.String() = %q", got)
	}
	if _, ok := ParseOpType(GroupLoadReduceName); ok {
		t.Error("ParseOpType(glre) is true: MSCCL++ does not load it")
	}
	if f := OpGroupLoadReduce.Family(); f != FamSwitch {
		t.Errorf("glre family %d", f)
	}
	if got := (OpGroupLoadReduce + 1).String(); got != "OpType(31)" {
		t.Errorf("String past the table = %q", got)
	}
}

// TestDerivedFacts checks the cached facts against the roles of the
// table, and ReduceType's lookup against a scan of the table for all 16
// shapes.
func TestDerivedFacts(t *testing.T) {
	isPacket := func(r role) bool { return r.packet }
	for o := range NumOpTypes {
		in := &Ops[o]
		if got, want := o.ReadsPackets(), in.src.has(isPacket); got != want {
			t.Errorf("%v.ReadsPackets() = %v, the roles say %v", o, got, want)
		}
		if got, want := o.WritesPackets(), in.dst.has(isPacket); got != want {
			t.Errorf("%v.WritesPackets() = %v, the roles say %v", o, got, want)
		}
		if got, want := o.HasRemote(), in.src.has(isRemote) || in.dst.has(isRemote); got != want {
			t.Errorf("%v.HasRemote() = %v, the roles say %v", o, got, want)
		}
	}
	for shape := range 16 {
		packets, rsrc, rdst, copies := shape&1 != 0, shape&2 != 0, shape&4 != 0, shape&8 != 0
		var want OpType
		wantOK := false
		for o := range NumOpTypes {
			in := &Ops[o]
			if in.Family == FamReduce && in.src.has(isPacket) == packets && in.src.has(isRemote) == rsrc &&
				in.dst.has(isRemote) == rdst && (len(in.dst.fixed) > 1 && in.dst.fixed[1].packet) == copies {
				want, wantOK = o, true
				break
			}
		}
		if got, ok := ReduceType(packets, rsrc, rdst, copies); got != want || ok != wantOK {
			t.Errorf("ReduceType(%v, %v, %v, %v) = %v, %v; the scan says %v, %v", packets, rsrc, rdst, copies, got, ok, want, wantOK)
		}
	}
}
