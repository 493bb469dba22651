package ir

import (
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/plan"
)

// Ref is one buffer operand of an op, in chunk units.
//
// A local ref names a buffer of the executing rank (Buffer). A remote ref
// names a remote buffer through BufferID, the thread-block-local index in the
// remote-buffer table of the op's channel type.
type Ref struct {
	Remote   bool
	Buffer   BufferType // local refs
	BufferID int        // remote refs
	Index    int
	Size     int
}

// Equal reports whether two refs name the same operand.
func (r Ref) Equal(o Ref) bool { return r == o }

// Chunk is a user chunk value: (rank, buffer type, index, size). Switch ops
// keep a pointer to the very chunk the user passed, because the reference
// shifts such a shared chunk once per op during replication.
type Chunk struct {
	Rank   int
	Buffer BufferType
	Index  int
	Size   int
}

// TBGInfo is the thread-block-group position of an op recorded through a
// ThreadBlockGroup.
type TBGInfo struct {
	TBID    int
	TBGSize int
}

// BarrierInfo is the state of one multi-block barrier op; all thread blocks
// listed share one BarrierInfo (and one *Op), as the reference does.
type BarrierInfo struct {
	ID     int
	TBList []int
}

// Op is one recorded operation of one thread block. Its identity (the
// pointer) is the op's owner for dependency tracking: every recorded op and
// every fused op is a distinct *Op. A multi-block barrier is one *Op shared
// by every block it lists. Which fields are
// meaningful depends on the family of its type (plan.Ops):
//
//   - FamSync: Barrier (for barrier).
//   - FamDataSync: IDSet (signal/wait/flush),
//     SemaphoreIDs (semaphores), ChannelType, DataSync.
//   - FamCopy, FamGet, FamPut: Src, Dst, ChannelIDs, ChannelType, TBG.
//   - FamReduce: LocalSrc, LocalDst, LocalPktDst, RemoteSrc, RemoteDst,
//     ChannelIDs, PutChannelIDs, ChannelType, ReduceOp, TBG, Packet.
//   - FamSwitch: SwitchBuffer, BufferOffset, Size, SwitchChunk (glre dst,
//     gstore src), SrcIndex/DstIndex (glres), ChannelIDs, ReduceOp.
//   - FamPipeline: UnitSize, NumChunks, Body.
type Op struct {
	// Kind is the op's type; package plan's table says what it is.
	Kind plan.OpType
	// Pos is the user's call site that recorded the op (zero for ops
	// inserted by passes).
	Pos syntax.Position
	// Stack are the frames that called the function that recorded the op
	// at Pos, innermost first (nil at the top level); shared, read-only.
	Stack []syntax.Position
	// Fused are the call sites of the ops fused into this one after the
	// first (Pos), in recording order; nil for an op that fused nothing.
	Fused    []syntax.Position
	Src, Dst []Ref

	LocalSrc, LocalDst, LocalPktDst []Ref
	RemoteSrc, RemoteDst            []Ref
	PutChannelIDs                   []int
	Packet                          bool
	ReduceOp                        ReduceOp

	// ChannelIDs are thread-block-local channel indices of put, get,
	// reduce and switch ops (a list: fusion concatenates, duplicates kept).
	ChannelIDs []int
	// IDSet holds the channel indices of signal, wait and flush ops: a set
	// printed in CPython iteration order (see Set).
	IDSet       *Set
	ChannelType ChannelType
	DataSync    SyncType
	TBG         *TBGInfo

	SemaphoreIDs []int

	Barrier *BarrierInfo

	SwitchBuffer BufferType
	BufferOffset int
	Size         int
	SwitchChunk  *Chunk
	SrcIndex     []int
	DstIndex     []int

	UnitSize  int64
	NumChunks int64
	Body      []*Op
}

// OpBuf is reusable storage for building one op at a time. The builtins
// build every op they record in their program's OpBuf; most recorded ops
// fuse into their predecessor at once, and only an op the recorder keeps is
// copied to the heap (Op.Clone). An op built in an OpBuf is valid until the
// next build.
type OpBuf struct {
	op   Op
	refs []Ref
	ids  [1]int
	set  Set
}

// Op returns the buffer's op, cleared, with kind set.
func (b *OpBuf) Op(kind plan.OpType) *Op {
	b.op = Op{Kind: kind}
	return &b.op
}

// Refs returns n refs of scratch storage, valid until the next build.
func (b *OpBuf) Refs(n int) []Ref {
	if cap(b.refs) < n {
		b.refs = make([]Ref, n, 2*n)
	}
	return b.refs[:n:n]
}

// IDs returns a one-element channel id list of scratch storage.
func (b *OpBuf) IDs(ch int) []int {
	b.ids[0] = ch
	return b.ids[:]
}

// Sync builds a signal, wait or flush op on the one channel index ch.
func (b *OpBuf) Sync(kind plan.OpType, ch int, ct ChannelType, ds SyncType) *Op {
	b.set.table = b.set.small[:]
	for i := range b.set.table {
		b.set.table[i] = emptySlot
	}
	b.set.fill = 0
	b.set.Add(ch)
	op := b.Op(kind)
	op.IDSet, op.ChannelType, op.DataSync = &b.set, ct, ds
	return op
}

// Transfer builds a copy, get or put op with one source, one destination
// and (for channel ops) one channel index.
func (b *OpBuf) Transfer(kind plan.OpType, src, dst Ref, ct ChannelType, ch int) *Op {
	refs := b.Refs(2)
	refs[0], refs[1] = src, dst
	op := b.Op(kind)
	op.Src, op.Dst, op.ChannelType = refs[0:1:1], refs[1:2:2], ct
	if ct != NoChannel {
		op.ChannelIDs = b.IDs(ch)
	}
	return op
}

// Clone returns a deep copy of o: new lists (in one block of refs and one
// of ints) and a new id set with the same layout, so the storage o was
// built in may be reused. Pointers to shared, unmodified data (thread-block
// group, barrier, switch chunk) and the pipeline body's ops are not copied.
func (o *Op) Clone() *Op {
	c := new(Op)
	*c = *o
	refs := make([]Ref, 0, len(o.Src)+len(o.Dst)+len(o.LocalSrc)+len(o.LocalDst)+
		len(o.LocalPktDst)+len(o.RemoteSrc)+len(o.RemoteDst))
	for _, f := range [...]*[]Ref{&c.Src, &c.Dst, &c.LocalSrc, &c.LocalDst, &c.LocalPktDst, &c.RemoteSrc, &c.RemoteDst} {
		*f = carve(&refs, *f)
	}
	ints := make([]int, 0, len(o.ChannelIDs)+len(o.PutChannelIDs)+len(o.SemaphoreIDs)+len(o.SrcIndex)+len(o.DstIndex))
	for _, f := range [...]*[]int{&c.ChannelIDs, &c.PutChannelIDs, &c.SemaphoreIDs, &c.SrcIndex, &c.DstIndex} {
		*f = carve(&ints, *f)
	}
	if o.Body != nil {
		c.Body = append([]*Op(nil), o.Body...)
	}
	if o.IDSet != nil {
		c.IDSet = o.IDSet.Clone()
	}
	return c
}

// carve appends s to the block *buf and returns the copy, capped so that
// appending to it never writes into its neighbours; nil stays nil.
func carve[T any](buf *[]T, s []T) []T {
	if s == nil {
		return nil
	}
	i := len(*buf)
	*buf = append(*buf, s...)
	return (*buf)[i:len(*buf):len(*buf)]
}
