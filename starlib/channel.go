package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Channel is a MemoryChannel or PortChannel from src_rank to dst_rank. Its
// ops are recorded on src_rank.
type Channel struct {
	prog *Program
	kind ir.ChannelType // Memory or Port
	id   int            // per-rank, per-kind id on src
	src  int
	dst  int
	// signals and waits are the program's counts for the channel's
	// (src, dst, kind) pair, looked up on first use.
	signals, waits *ir.PairCount
}

var _ starlark.HasAttrs = (*Channel)(nil)

var memoryChannelMethods = methodTable("MemoryChannel", map[string]builtinFn{
	"signal":           channelSignal,
	"wait":             channelWait,
	"get":              channelGet,
	"put":              channelPut(plan.OpPut),
	"put_packets":      channelPut(plan.OpPutPacket),
	"read_put_packets": channelPut(plan.OpReadPutPacket),
	"reduce":           channelReduce,
})

var portChannelMethods = methodTable("PortChannel", map[string]builtinFn{
	"signal":                    channelSignal,
	"wait":                      channelWait,
	"flush":                     channelFlush,
	"put":                       channelPut(plan.OpPut),
	"put_with_signal":           channelPut(plan.OpPutWithSignal),
	"put_with_signal_and_flush": channelPut(plan.OpPutWithSignalAndFlush),
	"put_packets":               channelPut(plan.OpPutPacket),
	"read_put_packets":          channelPut(plan.OpReadPutPacket),
})

func (c *Channel) methods() methods {
	if c.kind == ir.Memory {
		return memoryChannelMethods
	}
	return portChannelMethods
}

// String returns e.g. <MemoryChannel 0->1 id=0>.
func (c *Channel) String() string {
	return fmt.Sprintf("<%s %d->%d id=%d>", c.Type(), c.src, c.dst, c.id)
}

// Type returns "MemoryChannel" or "PortChannel".
func (c *Channel) Type() string {
	if c.kind == ir.Memory {
		return "MemoryChannel"
	}
	return "PortChannel"
}

// Freeze does nothing.
func (c *Channel) Freeze() {}

// Truth is true.
func (c *Channel) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (c *Channel) Hash() (uint32, error) { return noHash(c.Type()) }

// Attr returns an attribute or method.
func (c *Channel) Attr(name string) (starlark.Value, error) {
	switch name {
	case "channel_id":
		return starlark.MakeInt(c.id), nil
	case "src_rank":
		return starlark.MakeInt(c.src), nil
	case "dst_rank":
		return starlark.MakeInt(c.dst), nil
	case "channel_type":
		return channelTypeEnum.members[c.kind], nil
	}
	return methodAttr(c.methods(), name, c), nil
}

// AttrNames lists the attributes and methods.
func (c *Channel) AttrNames() []string {
	return names([]string{"channel_id", "channel_type", "dst_rank", "src_rank"}, c.methods())
}

var channelParams = []string{"dst_rank", "src_rank"}

// channelBuiltin returns the MemoryChannel or PortChannel constructor:
// (dst_rank, src_rank).
func channelBuiltin(kind ir.ChannelType) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var vs [2]starlark.Value
		if err := unpack(b.Name(), args, kwargs, channelParams, 2, vs[:]); err != nil {
			return nil, err
		}
		dstV, srcV := vs[0], vs[1]
		p, err := currentProgram(thread, b.Name())
		if err != nil {
			return nil, err
		}
		dst, err := p.rankArg(b.Name(), "dst_rank", dstV)
		if err != nil {
			return nil, err
		}
		src, err := p.rankArg(b.Name(), "src_rank", srcV)
		if err != nil {
			return nil, err
		}
		id := p.IR.GPUs[src].AddChannel(kind, dst)
		return &Channel{prog: p, kind: kind, id: id, src: src, dst: dst}, nil
	}
}

// countSignal and countWait count one call at pos on the channel's pair
// for the pairing check.
func (c *Channel) countSignal(pos syntax.Position) { c.count(&c.signals, c.prog.IR.Signals, pos) }
func (c *Channel) countWait(pos syntax.Position)   { c.count(&c.waits, c.prog.IR.Waits, pos) }

// count adds a call at pos to *cached, the pair's count in m, looking it
// up on first use.
func (c *Channel) count(cached **ir.PairCount, m map[ir.PairKey]*ir.PairCount, pos syntax.Position) {
	if *cached == nil {
		*cached = ir.Count(m, ir.PairKey{Src: c.src, Dst: c.dst, Kind: c.kind}, pos)
		return
	}
	(*cached).Add(pos)
}

// receiverChannel returns the method's channel after checking its program.
func receiverChannel(thread *starlark.Thread, b *starlark.Builtin) (*Channel, *Program, error) {
	c := b.Receiver().(*Channel)
	p, err := ownerProgram(thread, fnName(b), c.prog, c)
	if err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

// regCh registers the channel on (src, tb) and returns its TB-local index.
func (c *Channel) regCh(tb int) int {
	return c.prog.IR.GPUs[c.src].RegisterChannel(tb, c.kind, c.id)
}

// remote registers ch's buffer as a remote buffer of (src, tb) and returns
// the remote operand.
func (c *Channel) remote(tb int, ch *Chunk) ir.Ref {
	id := c.prog.IR.GPUs[c.src].RegisterRemoteBuffer(tb, ch.c.Rank, ch.c.Buffer, c.kind)
	return ir.Ref{Remote: true, BufferID: id, Index: ch.c.Index, Size: ch.c.Size}
}

var (
	syncParams        = []string{"tb", "data_sync"}
	relaxedSyncParams = []string{"tb", "data_sync", "relaxed"}
)

// syncArgs unpacks (tb, data_sync=SyncType.both[, relaxed=False]).
func syncArgs(fn string, args starlark.Tuple, kwargs []starlark.Tuple, withRelaxed bool) (tb int, ds ir.SyncType, relaxed bool, err error) {
	v := [3]starlark.Value{nil, syncMembers[ir.SyncBoth], starlark.False}
	params := syncParams
	if withRelaxed {
		params = relaxedSyncParams
	}
	if err = unpack(fn, args, kwargs, params, 1, v[:len(params)]); err != nil {
		return
	}
	if tb, err = tbArg(fn, v[0]); err != nil {
		return
	}
	if relaxed, err = toBool(fn, "relaxed", v[2]); err != nil {
		return
	}
	code, err := asEnum(fn, "data_sync", v[1], syncTypeEnum)
	return tb, ir.SyncType(code), relaxed, err
}

func channelSignal(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return channelSyncOp(thread, b, args, kwargs, plan.OpSignal)
}

func channelWait(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return channelSyncOp(thread, b, args, kwargs, plan.OpWait)
}

func channelFlush(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return channelSyncOp(thread, b, args, kwargs, plan.OpFlush)
}

// channelSyncOp records signal, wait or flush.
func channelSyncOp(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, kind plan.OpType) (starlark.Value, error) {
	fn := fnName(b)
	c := b.Receiver().(*Channel)
	tb, ds, relaxed, err := syncArgs(fn, args, kwargs, c.kind == ir.Memory)
	if err != nil {
		return nil, err
	}
	c, p, err := receiverChannel(thread, b)
	if err != nil {
		return nil, err
	}
	pos := callerPos(thread)
	switch kind {
	case plan.OpSignal:
		c.countSignal(pos)
		if relaxed {
			kind = plan.OpRelaxedSignal
		}
	case plan.OpWait:
		c.countWait(pos)
		if relaxed {
			kind = plan.OpRelaxedWait
		}
	}
	idx := c.regCh(tb)
	if p.extendSync(c.src, tb, kind, idx, c.kind, ds, pos) {
		return starlark.None, nil
	}
	op := p.buf.Sync(kind, idx, c.kind, ds)
	op.Pos = pos
	p.recordBuf(c.src, tb, op)
	return starlark.None, nil
}

// transferParams are the parameters of the copy, get and put families.
var transferParams = []string{"dst_chunk", "src_chunk", "tb", "tb_group"}

var channelReduceParams = []string{"local_src_chunk", "remote_src_chunks", "tb", "tb_group", "local_dst_chunk", "reduce_op"}

// transfer holds the arguments of a channel's get or put-family call.
type transfer struct {
	c         *Channel
	p         *Program
	dst, src  *Chunk
	tb, group starlark.Value
}

// channelTransfer unpacks (dst_chunk, src_chunk, tb=None, tb_group=None),
// or (dst_chunk, src_chunk, tb) when withGroup is false, and checks the
// receiver and the chunks belong to the current program.
func channelTransfer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, withGroup bool) (t transfer, err error) {
	fn := fnName(b)
	v := [4]starlark.Value{nil, nil, starlark.None, starlark.None}
	if withGroup {
		err = unpack(fn, args, kwargs, transferParams, 2, v[:])
	} else {
		err = unpack(fn, args, kwargs, transferParams[:3], 3, v[:3])
	}
	if err != nil {
		return t, err
	}
	t.tb, t.group = v[2], v[3]
	if t.c, t.p, err = receiverChannel(thread, b); err != nil {
		return t, err
	}
	t.dst, t.src, err = twoChunks(fn, t.p, v[0], v[1])
	return t, err
}

// channelGet implements MemoryChannel.get(dst_chunk, src_chunk, tb=None,
// tb_group=None): copy the peer's src_chunk into the local dst_chunk.
func channelGet(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	fn := fnName(b)
	t, err := channelTransfer(thread, b, args, kwargs, true)
	if err != nil {
		return nil, err
	}
	c, p, dst, src, tbV, groupV := t.c, t.p, t.dst, t.src, t.tb, t.group
	if dst.c.Rank != c.src {
		return nil, fmt.Errorf("%s: dst_chunk is on rank %d, want the channel's source rank %d", fn, dst.c.Rank, c.src)
	}
	if src.c.Rank != c.dst {
		return nil, fmt.Errorf("%s: src_chunk is on rank %d, want the channel's destination rank %d", fn, src.c.Rank, c.dst)
	}
	var one [1]tbTarget
	targets, err := resolveTBs(fn, tbV, groupV, p, one[:0])
	if err != nil {
		return nil, err
	}
	pos := callerPos(thread)
	for _, t := range targets {
		rem := c.remote(t.tb, src)
		idx := c.regCh(t.tb)
		op := p.buf.Transfer(plan.OpGet, rem, dst.local(), c.kind, idx)
		op.Pos, op.TBG = pos, t.tbg
		p.recordBuf(c.src, t.tb, op)
	}
	return starlark.None, nil
}

// channelPut implements the put family: put, put_packets,
// read_put_packets, put_with_signal, put_with_signal_and_flush.
func channelPut(kind plan.OpType) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fn := fnName(b)
		c := b.Receiver().(*Channel)
		// Memory put-family methods and both read_put_packets accept a
		// thread-block group; the other port methods take tb only.
		withGroup := c.kind == ir.Memory || kind == plan.OpReadPutPacket
		t, err := channelTransfer(thread, b, args, kwargs, withGroup)
		if err != nil {
			return nil, err
		}
		c, p, dst, src, tbV, groupV := t.c, t.p, t.dst, t.src, t.tb, t.group
		if src.c.Rank != c.src {
			return nil, fmt.Errorf("%s: src_chunk is on rank %d, want the channel's source rank %d", fn, src.c.Rank, c.src)
		}
		if kind == plan.OpReadPutPacket && src.c.Buffer != ir.Scratch {
			return nil, fmt.Errorf("%s: src_chunk must be in the scratch buffer, got %s", fn, src.c.Buffer.Name())
		}
		if dst.c.Rank != c.dst {
			return nil, fmt.Errorf("%s: dst_chunk is on rank %d, want the channel's destination rank %d", fn, dst.c.Rank, c.dst)
		}
		if (kind == plan.OpPutPacket || kind == plan.OpReadPutPacket) && dst.c.Buffer != ir.Scratch {
			return nil, fmt.Errorf("%s: dst_chunk must be in the scratch buffer, got %s", fn, dst.c.Buffer.Name())
		}
		if dst.c.Size != src.c.Size {
			return nil, fmt.Errorf("%s: dst_chunk size %d differs from src_chunk size %d", fn, dst.c.Size, src.c.Size)
		}
		var one [1]tbTarget
		targets, err := resolveTBs(fn, tbV, groupV, p, one[:0])
		if err != nil {
			return nil, err
		}
		pos := callerPos(thread)
		if kind.Signals() {
			c.countSignal(pos)
		}
		for _, t := range targets {
			rem := c.remote(t.tb, dst)
			idx := c.regCh(t.tb)
			op := p.buf.Transfer(kind, src.local(), rem, c.kind, idx)
			op.Pos, op.TBG = pos, t.tbg
			p.recordBuf(c.src, t.tb, op)
		}
		return starlark.None, nil
	}
}

// channelReduce implements MemoryChannel.reduce(local_src_chunk,
// remote_src_chunks, tb=None, tb_group=None, local_dst_chunk=None,
// reduce_op=ReduceOperationType.sum).
func channelReduce(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	fn := fnName(b)
	v := [6]starlark.Value{nil, nil, starlark.None, starlark.None, starlark.None, reduceOpEnum.members[ir.Sum]}
	if err := unpack(fn, args, kwargs, channelReduceParams, 2, v[:]); err != nil {
		return nil, err
	}
	srcV, remotesV, tbV, groupV, dstV, opV := v[0], v[1], v[2], v[3], v[4], v[5]
	c, p, err := receiverChannel(thread, b)
	if err != nil {
		return nil, err
	}
	src, err := toChunk(fn, "local_src_chunk", srcV, p)
	if err != nil {
		return nil, err
	}
	dst := src
	if dstV != starlark.None {
		if dst, err = toChunk(fn, "local_dst_chunk", dstV, p); err != nil {
			return nil, err
		}
	}
	if src.c.Rank != c.src {
		return nil, fmt.Errorf("%s: local_src_chunk is on rank %d, want the channel's source rank %d", fn, src.c.Rank, c.src)
	}
	if dst.c.Size != src.c.Size {
		return nil, fmt.Errorf("%s: local_dst_chunk size %d differs from local_src_chunk size %d", fn, dst.c.Size, src.c.Size)
	}
	var small [4]*Chunk
	remotes, err := chunkList(fn, "remote_src_chunks", remotesV, p, small[:0])
	if err != nil {
		return nil, err
	}
	for i, r := range remotes {
		if r.c.Rank != c.dst {
			return nil, fmt.Errorf("%s: remote_src_chunks[%d] is on rank %d, want the channel's destination rank %d", fn, i, r.c.Rank, c.dst)
		}
		if r.c.Size != src.c.Size {
			return nil, fmt.Errorf("%s: remote_src_chunks[%d] size %d differs from local_src_chunk size %d", fn, i, r.c.Size, src.c.Size)
		}
	}
	op, err := asEnum(fn, "reduce_op", opV, reduceOpEnum)
	if err != nil {
		return nil, err
	}
	var one [1]tbTarget
	targets, err := resolveTBs(fn, tbV, groupV, p, one[:0])
	if err != nil {
		return nil, err
	}
	kind := plan.OpReadReduce
	if len(remotes) == 0 {
		kind = plan.OpReduce
	}
	pos := callerPos(thread)
	for _, t := range targets {
		refs := p.buf.Refs(len(remotes) + 2) // local src, local dst, remotes
		refs[0], refs[1] = src.local(), dst.local()
		for i, r := range remotes {
			refs[i+2] = c.remote(t.tb, r)
		}
		idx := c.regCh(t.tb)
		o := p.buf.Op(kind)
		o.Pos, o.LocalSrc, o.LocalDst, o.RemoteSrc = pos, refs[0:1:1], refs[1:2:2], refs[2:]
		o.ChannelIDs, o.ChannelType, o.ReduceOp, o.TBG = p.buf.IDs(idx), ir.Memory, ir.ReduceOp(op), t.tbg
		p.recordBuf(c.src, t.tb, o)
	}
	return starlark.None, nil
}

// Semaphore is an intra-rank counting semaphore: Semaphore(rank,
// initial_value).
type Semaphore struct {
	prog *Program
	rank int
	id   int
	init starlark.Int
}

var _ starlark.HasAttrs = (*Semaphore)(nil)

var semaphoreMethods = methodTable("Semaphore", map[string]builtinFn{
	"acquire": semaphoreOp(plan.OpSemAcquire),
	"release": semaphoreOp(plan.OpSemRelease),
})

// String returns <Semaphore rank=r id=i>.
func (s *Semaphore) String() string { return fmt.Sprintf("<Semaphore rank=%d id=%d>", s.rank, s.id) }

// Type returns "Semaphore".
func (s *Semaphore) Type() string { return "Semaphore" }

// Freeze does nothing.
func (s *Semaphore) Freeze() {}

// Truth is true.
func (s *Semaphore) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (s *Semaphore) Hash() (uint32, error) { return noHash("Semaphore") }

// Attr returns an attribute or method.
func (s *Semaphore) Attr(name string) (starlark.Value, error) {
	switch name {
	case "id":
		return starlark.MakeInt(s.id), nil
	case "rank":
		return starlark.MakeInt(s.rank), nil
	case "initial_value":
		return s.init, nil
	}
	return methodAttr(semaphoreMethods, name, s), nil
}

// AttrNames lists the attributes and methods.
func (s *Semaphore) AttrNames() []string {
	return names([]string{"id", "initial_value", "rank"}, semaphoreMethods)
}

func semaphoreBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rankV starlark.Value
	var init starlark.Int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rank", &rankV, "initial_value", &init); err != nil {
		return nil, err
	}
	p, err := currentProgram(thread, b.Name())
	if err != nil {
		return nil, err
	}
	rank, err := p.rankArg(b.Name(), "rank", rankV)
	if err != nil {
		return nil, err
	}
	id := p.IR.GPUs[rank].AddSemaphore(init.BigInt())
	return &Semaphore{prog: p, rank: rank, id: id, init: init}, nil
}

func semaphoreOp(kind plan.OpType) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fn := fnName(b)
		tb, ds, _, err := syncArgs(fn, args, kwargs, false)
		if err != nil {
			return nil, err
		}
		s := b.Receiver().(*Semaphore)
		p, err := currentProgram(thread, fn)
		if err != nil {
			return nil, err
		}
		if err := sameProgram(fn, p, s.prog, s); err != nil {
			return nil, err
		}
		p.record(s.rank, tb, &ir.Op{Kind: kind, Pos: callerPos(thread), SemaphoreIDs: []int{s.id}, DataSync: ds})
		return starlark.None, nil
	}
}
