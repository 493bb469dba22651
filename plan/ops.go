package plan

import (
	"fmt"
	"slices"
)

// This file is the one owner of the ops: their numbering, their plan
// names and, in the table Ops, every fact about them that a stage needs
// (family, operand roles, packets, channels, proxy, fusion). The
// compiler's IR, the validation, the executor, the cost model and the
// drivers ask the table; none keeps a list of op types of its own.

// OpType is an op that an executor runs: one of the names MSCCL++'s
// loader accepts (docs/plan-format.md §6), or the compiler's
// OpGroupLoadReduce.
type OpType uint8

// The op types, in the order the GPU kernel's layout numbers them
// (csrc/mscclgo/layout.h; TestKernelLayoutNumbering checks it).
const (
	OpNop OpType = iota
	OpBarrier
	OpSignal
	OpRelaxedSignal
	OpWait
	OpRelaxedWait
	OpFlush
	OpSemAcquire
	OpSemRelease
	OpCopy
	OpCopyPacket
	OpUnpackPacket
	OpGet
	OpPut
	OpPutWithSignal
	OpPutWithSignalAndFlush
	OpPutPacket
	OpReadPutPacket
	OpReduce
	OpReduceSend
	OpReadReduce
	OpReadReduceSend
	OpReducePacket
	OpReduceSendPacket
	OpReduceCopyPacket
	OpReduceCopySendPacket
	OpMultiLoadReduceStore
	OpMultiStore
	OpMultiStorePacket
	OpPipeline

	// NumOpTypes is the number of op types a plan may hold.
	NumOpTypes
)

// OpGroupLoadReduce is the DSL's switch load-reduce ("glre") that found
// no store to fuse with. The compiler records and may write it, but
// MSCCL++'s loader rejects it (only the fusion, OpMultiLoadReduceStore,
// runs): it comes after NumOpTypes, ParseOpType does not return it and
// no plan that Load accepts holds it.
const OpGroupLoadReduce = NumOpTypes

// GroupLoadReduceName is OpGroupLoadReduce's spelling.
const GroupLoadReduceName = "glre"

// Family groups the op types that share a field layout and an executor
// path.
type Family uint8

// The op families.
const (
	FamSync     Family = iota // nop, barrier
	FamDataSync               // signal, wait, flush, semaphores: carry data_sync
	FamCopy                   // copy, cpkt, upkt: local source and destination
	FamGet                    // get: remote sources
	FamPut                    // put family: remote destinations
	FamReduce                 // reduce family
	FamSwitch                 // glre, glres, gstore, gstorepkt: switch operands
	FamPipeline               // pipeline: a body of ops
)

// roleKind is what an operand position must hold.
type roleKind uint8

const (
	rNone    roleKind = iota // no operand allowed here
	rLocal                   // local operand of any buffer type
	rScratch                 // local operand of the scratch buffer
	rRemote                  // remote operand (buffer_id)
	rSwitch                  // switch operand (switch_channel_id)
)

// role is an operand position: its kind, and whether the op addresses it
// as LL packets (twice the data size, at twice the data offset).
type role struct {
	kind   roleKind
	packet bool
}

// operandKind is how an operand of role r addresses memory.
func (r role) operandKind() OperandKind {
	switch r.kind {
	case rRemote:
		return RemoteOperand
	case rSwitch:
		return SwitchOperand
	}
	return LocalOperand
}

// side describes src_buff or dst_buff of an op: leading fixed roles, the
// role of every further operand, and the minimum count.
type side struct {
	fixed []role
	rest  role
	min   int
}

func (s side) at(i int) role {
	if i < len(s.fixed) {
		return s.fixed[i]
	}
	return s.rest
}

func (s side) max() int {
	if s.rest.kind == rNone {
		return len(s.fixed)
	}
	return MaxOperandsPerSide
}

// has reports whether some position of s satisfies f.
func (s side) has(f func(role) bool) bool {
	return slices.ContainsFunc(s.fixed, f) || (s.rest.kind != rNone && f(s.rest))
}

// OpInfo is what one op type is and needs. Its fields beyond Name and
// Family are the validation's; the rest of the tree asks the methods of
// OpType.
type OpInfo struct {
	Name   string // the plan's "name"
	Family Family

	data     bool // takes src_buff and dst_buff
	src, dst side
	// channel lists the channel types the op works on; nil means the op
	// needs no channel_type.
	channel []ChannelType
	// needIDs: channel_ids must list at least one channel.
	needIDs bool
	// remoteVia lists the channel types through which its remote
	// operands may be reached.
	remoteVia []ChannelType
	// reduces: the op combines its sources with the reduce operation.
	reduces bool
	// pairwise: one source per destination.
	pairwise bool
	// portIDsPerDst: over port channels, channel_ids has one entry per
	// destination (thread i triggers on channel i).
	portIDsPerDst bool
	semaphores    bool
	// merges: two adjacent ops of this type on one channel type fuse
	// into one op with the operands (or channels) of both
	// (docs/passes.md §4.2, F1-F3 and F10-F14).
	merges bool
	// signals: the op signals its channels (each signal adds one to the
	// paired end's count); waits: it waits on them.
	signals, waits bool
}

var (
	roleL  = role{kind: rLocal}
	roleLP = role{kind: rLocal, packet: true}
	roleSP = role{kind: rScratch, packet: true}
	roleR  = role{kind: rRemote}
	roleRP = role{kind: rRemote, packet: true}
	roleS  = role{kind: rSwitch}
	roleSw = role{kind: rSwitch, packet: true}

	memPort = []ChannelType{Memory, Port}
	memOnly = []ChannelType{Memory}
)

func sideOne(r role) side             { return side{fixed: []role{r}, min: 1} }
func sideMany(r role) side            { return side{rest: r, min: 1} }
func sideThen(r role, rest role) side { return side{fixed: []role{r}, rest: rest, min: 1} }

// Ops is the op table, indexed by OpType (OpGroupLoadReduce included).
// It is read-only.
var Ops = [NumOpTypes + 1]OpInfo{
	OpNop:           {Name: "nop", Family: FamSync},
	OpBarrier:       {Name: "barrier", Family: FamSync},
	OpSignal:        {Name: "signal", Family: FamDataSync, channel: memPort, needIDs: true, merges: true, signals: true},
	OpRelaxedSignal: {Name: "rlxsignal", Family: FamDataSync, channel: memPort, needIDs: true, merges: true, signals: true},
	OpWait:          {Name: "wait", Family: FamDataSync, channel: memPort, needIDs: true, merges: true, waits: true},
	OpRelaxedWait:   {Name: "rlxwait", Family: FamDataSync, channel: memPort, needIDs: true, merges: true, waits: true},
	OpFlush:         {Name: "flush", Family: FamDataSync, channel: []ChannelType{Port}, needIDs: true, merges: true},
	OpSemAcquire:    {Name: "sem_acquire", Family: FamDataSync, semaphores: true, merges: true},
	OpSemRelease:    {Name: "sem_release", Family: FamDataSync, semaphores: true, merges: true},

	OpCopy:         {Name: "copy", Family: FamCopy, data: true, src: sideOne(roleL), dst: sideOne(roleL)},
	OpCopyPacket:   {Name: "cpkt", Family: FamCopy, data: true, src: sideOne(roleL), dst: sideOne(roleLP)},
	OpUnpackPacket: {Name: "upkt", Family: FamCopy, data: true, src: sideOne(roleSP), dst: sideOne(roleL)},

	OpGet:                   {Name: "get", Family: FamGet, data: true, src: sideMany(roleR), dst: sideMany(roleL), remoteVia: memOnly, pairwise: true, merges: true},
	OpPut:                   {Name: "put", Family: FamPut, data: true, src: sideMany(roleL), dst: sideMany(roleR), remoteVia: memPort, pairwise: true, portIDsPerDst: true, merges: true},
	OpPutWithSignal:         {Name: "pws", Family: FamPut, data: true, src: sideMany(roleL), dst: sideMany(roleR), remoteVia: memPort, pairwise: true, portIDsPerDst: true, merges: true, signals: true},
	OpPutWithSignalAndFlush: {Name: "pwsf", Family: FamPut, data: true, src: sideMany(roleL), dst: sideMany(roleR), remoteVia: memPort, pairwise: true, portIDsPerDst: true, merges: true, signals: true},
	OpPutPacket:             {Name: "ppkt", Family: FamPut, data: true, src: sideMany(roleL), dst: sideMany(roleRP), remoteVia: memPort, pairwise: true, portIDsPerDst: true, merges: true},
	OpReadPutPacket:         {Name: "rppkt", Family: FamPut, data: true, src: sideOne(roleSP), dst: sideMany(roleRP), remoteVia: memPort, portIDsPerDst: true, merges: true},

	OpReduce:               {Name: "re", Family: FamReduce, data: true, reduces: true, src: sideMany(roleL), dst: sideOne(roleL)},
	OpReduceSend:           {Name: "res", Family: FamReduce, data: true, reduces: true, src: sideMany(roleL), dst: sideThen(roleL, roleR), remoteVia: memOnly},
	OpReadReduce:           {Name: "rre", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleR), dst: sideOne(roleL), remoteVia: memOnly},
	OpReadReduceSend:       {Name: "rres", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleR), dst: sideThen(roleL, roleR), remoteVia: memOnly},
	OpReducePacket:         {Name: "repkt", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleSP), dst: sideOne(roleL)},
	OpReduceSendPacket:     {Name: "respkt", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleSP), dst: sideThen(roleL, roleRP), remoteVia: memOnly},
	OpReduceCopyPacket:     {Name: "recpkt", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleSP), dst: side{fixed: []role{roleL, roleLP}, min: 2}},
	OpReduceCopySendPacket: {Name: "recspkt", Family: FamReduce, data: true, reduces: true, src: sideThen(roleL, roleSP), dst: side{fixed: []role{roleL, roleLP}, rest: roleRP, min: 2}, remoteVia: memOnly},

	OpMultiLoadReduceStore: {Name: "glres", Family: FamSwitch, data: true, reduces: true, src: sideOne(roleS), dst: sideOne(roleS)},
	OpMultiStore:           {Name: "gstore", Family: FamSwitch, data: true, src: sideOne(roleL), dst: sideOne(roleS)},
	OpMultiStorePacket:     {Name: "gstorepkt", Family: FamSwitch, data: true, src: sideOne(roleLP), dst: sideOne(roleSw)},
	OpPipeline:             {Name: "pipeline", Family: FamPipeline},

	OpGroupLoadReduce: {Name: GroupLoadReduceName, Family: FamSwitch, data: true, reduces: true, src: sideOne(roleS), dst: sideOne(roleL)},
}

// valid reports whether o has an entry in Ops.
func (o OpType) valid() bool { return o <= OpGroupLoadReduce }

// String returns the plan name.
func (o OpType) String() string {
	if o.valid() {
		return Ops[o].Name
	}
	return fmt.Sprintf("OpType(%d)", uint8(o))
}

// ParseOpType returns the op type of a plan name; it is false for
// GroupLoadReduceName as for any other name MSCCL++ does not load.
func ParseOpType(name string) (OpType, bool) {
	for i := range NumOpTypes {
		if Ops[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// Family returns the op's family.
func (o OpType) Family() Family { return Ops[o].Family }

// IsSync reports whether o is a nop or barrier (a thread-block sync point).
func (o OpType) IsSync() bool { return Ops[o].Family == FamSync }

// IsDataSync reports whether ops of type o carry a data_sync set.
func (o OpType) IsDataSync() bool { return Ops[o].Family == FamDataSync }

// SignalsChannels reports whether o signals, waits on or flushes the
// channels it lists (channel_ids as a set).
func (o OpType) SignalsChannels() bool { return Ops[o].Family == FamDataSync && !Ops[o].semaphores }

// IsData reports whether o moves buffer data: it takes src_buff and
// dst_buff (pipelines hold data ops but move none themselves).
func (o OpType) IsData() bool { return Ops[o].data }

// Reduces reports whether o combines its sources with the reduce
// operation.
func (o OpType) Reduces() bool { return Ops[o].reduces }

// ReducesElements reports whether o reduces elements of the data type
// straight from its sources, so that a byte count that is not a whole
// number of elements is an error (packet reductions reduce payloads).
func (o OpType) ReducesElements() bool { return o.Reduces() && !o.Packet() }

// Packet reports whether o addresses some operand as LL packets (and so
// ignores pipeline offsets, docs/semantics.md §2.4).
func (o OpType) Packet() bool { return o.ReadsPackets() || o.WritesPackets() }

// ReadsPackets reports whether some source of o holds LL packets, which
// the op waits for (docs/semantics.md §3.5).
func (o OpType) ReadsPackets() bool { return derived[o].readsPackets }

// WritesPackets reports whether some destination of o receives LL
// packets.
func (o OpType) WritesPackets() bool { return derived[o].writesPackets }

// SrcPacket reports whether source operand i of o is addressed as LL
// packets (twice the data size, at twice the data offset;
// docs/semantics.md §2.11).
func (o OpType) SrcPacket(i int) bool { return Ops[o].src.at(i).packet }

// DstPacket reports whether destination operand i of o is addressed as
// LL packets.
func (o OpType) DstPacket(i int) bool { return Ops[o].dst.at(i).packet }

// SrcKind returns how source operand i of o is addressed on the device
// (the positional roles of docs/semantics.md §2.11): remote for get and
// the remote sources of rre/rres, switch for glres, local otherwise.
func (o OpType) SrcKind(i int) OperandKind { return Ops[o].src.at(i).operandKind() }

// DstKind returns how destination operand i of o is addressed on the
// device (docs/semantics.md §2.11).
func (o OpType) DstKind(i int) OperandKind { return Ops[o].dst.at(i).operandKind() }

// HasRemote reports whether some operand of o is a remote buffer of a
// peer, reached through a memory or port channel.
func (o OpType) HasRemote() bool { return derived[o].remoteSrc || derived[o].remoteDst }

// OperandCounts says how many sources and destinations o takes: at
// least minSrc/minDst, at most maxSrc/maxDst (-1: any number, up to
// MaxOperandsPerSide). Ops that move no data take none.
func (o OpType) OperandCounts() (minSrc, maxSrc, minDst, maxDst int) {
	if !o.IsData() {
		return 0, -1, 0, -1
	}
	bound := func(s side) int {
		if s.rest.kind != rNone {
			return -1
		}
		return len(s.fixed)
	}
	in := &Ops[o]
	return in.src.min, bound(in.src), in.dst.min, bound(in.dst)
}

// Pairwise reports whether o takes one source per destination.
func (o OpType) Pairwise() bool { return Ops[o].pairwise }

// UsesPort reports whether an op of type o on channels of type ct hands
// its data to the port proxy (a put of any kind over port channels).
func (o OpType) UsesPort(ct ChannelType) bool {
	return ct == Port && slices.Contains(Ops[o].remoteVia, Port)
}

// Signals reports whether o signals its channels (signal, rlxsignal,
// pws, pwsf): each signal adds one to the paired end's count.
func (o OpType) Signals() bool { return Ops[o].signals }

// Waits reports whether o waits on its channels (wait, rlxwait).
func (o OpType) Waits() bool { return Ops[o].waits }

// Merges reports whether two adjacent ops of type o on one channel type
// may fuse into one op holding the operands or channels of both
// (docs/passes.md §2.2).
func (o OpType) Merges() bool { return Ops[o].merges }

// ReduceType returns the reduce-family op type that has the given shape
// (docs/passes.md §2.2, "Name derivation"): whether it reads packets,
// reads remote sources, writes remote destinations and copies its result
// as packets to a local destination. ok is false for a shape no op has
// (packets from remote sources).
func ReduceType(packets, remoteSrc, remoteDst, copyPackets bool) (t OpType, ok bool) {
	r := reduceTypes[reduceShape(packets, remoteSrc, remoteDst, copyPackets)]
	return r.t, r.ok
}

// reduceShape numbers the 16 shapes ReduceType tells apart.
func reduceShape(packets, remoteSrc, remoteDst, copyPackets bool) int {
	n := 0
	for i, b := range [...]bool{packets, remoteSrc, remoteDst, copyPackets} {
		if b {
			n |= 1 << i
		}
	}
	return n
}

// opFacts are the facts of one op type that its operand roles imply,
// worked out once (deriveFacts) so that the predicates asked in the
// compiler's inner loops are a load, not a scan of the roles.
type opFacts struct {
	readsPackets, writesPackets bool
	remoteSrc, remoteDst        bool
	copiesPackets               bool // a reduction whose second destination holds packets
}

// derived and reduceTypes are computed from Ops when the package is
// initialised and never written after; they are caches of the table,
// not state.
var (
	derived     = deriveFacts()
	reduceTypes = deriveReduceTypes()
)

func deriveFacts() (out [NumOpTypes + 1]opFacts) {
	isPacket := func(r role) bool { return r.packet }
	for t := range out {
		in := &Ops[t]
		out[t] = opFacts{
			readsPackets:  in.src.has(isPacket),
			writesPackets: in.dst.has(isPacket),
			remoteSrc:     in.src.has(isRemote),
			remoteDst:     in.dst.has(isRemote),
			copiesPackets: len(in.dst.fixed) > 1 && in.dst.fixed[1].packet,
		}
	}
	return out
}

// deriveReduceTypes returns, for each shape of reduceShape, the first
// reduce-family op type of that shape.
func deriveReduceTypes() (out [16]struct {
	t  OpType
	ok bool
}) {
	for t := range NumOpTypes {
		f := derived[t]
		if Ops[t].Family != FamReduce {
			continue
		}
		if i := reduceShape(f.readsPackets, f.remoteSrc, f.remoteDst, f.copiesPackets); !out[i].ok {
			out[i].t, out[i].ok = t, true
		}
	}
	return out
}

func isRemote(r role) bool { return r.kind == rRemote }

// SrcKind returns t.SrcKind(i).
func SrcKind(t OpType, i int) OperandKind { return t.SrcKind(i) }

// DstKind returns t.DstKind(i).
func DstKind(t OpType, i int) OperandKind { return t.DstKind(i) }

// SrcPacket returns t.SrcPacket(i).
func SrcPacket(t OpType, i int) bool { return t.SrcPacket(i) }

// DstPacket returns t.DstPacket(i).
func DstPacket(t OpType, i int) bool { return t.DstPacket(i) }
