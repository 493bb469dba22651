package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// Rank is a rank of the current program: Rank(r).
type Rank struct {
	prog *Program
	rank int
}

var (
	_ starlark.HasAttrs   = (*Rank)(nil)
	_ starlark.Comparable = (*Rank)(nil)
)

var rankMethods = methodTable("Rank", map[string]builtinFn{
	"get_input_buffer":  rankGetInputBuffer,
	"get_output_buffer": rankGetOutputBuffer,
	"copy":              rankCopyFamily(plan.OpCopy),
	"copy_packets":      rankCopyFamily(plan.OpCopyPacket),
	"unpack_packets":    rankCopyFamily(plan.OpUnpackPacket),
	"reduce":            rankReduce,
	"barrier":           rankBarrier,
})

// String returns <Rank r>.
func (r *Rank) String() string { return fmt.Sprintf("<Rank %d>", r.rank) }

// Type returns "Rank".
func (r *Rank) Type() string { return "Rank" }

// Freeze does nothing.
func (r *Rank) Freeze() {}

// Truth is true.
func (r *Rank) Truth() starlark.Bool { return starlark.True }

// Hash hashes the rank number.
func (r *Rank) Hash() (uint32, error) { return uint32(r.rank), nil }

// CompareSameType compares ranks by number.
func (r *Rank) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return threeway(op, r.rank-y.(*Rank).rank), nil
}

func threeway(op syntax.Token, c int) bool {
	switch op {
	case syntax.EQL:
		return c == 0
	case syntax.NEQ:
		return c != 0
	case syntax.LT:
		return c < 0
	case syntax.LE:
		return c <= 0
	case syntax.GT:
		return c > 0
	}
	return c >= 0
}

// Attr returns rank or a method.
func (r *Rank) Attr(name string) (starlark.Value, error) {
	if name == "rank" {
		return starlark.MakeInt(r.rank), nil
	}
	return methodAttr(rankMethods, name, r), nil
}

// AttrNames lists the attributes and methods.
func (r *Rank) AttrNames() []string { return names([]string{"rank"}, rankMethods) }

var rankParams = []string{"rank"}

func rankBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var vs [1]starlark.Value
	if err := unpack(b.Name(), args, kwargs, rankParams, 1, vs[:]); err != nil {
		return nil, err
	}
	v := vs[0]
	p, err := currentProgram(thread, b.Name())
	if err != nil {
		return nil, err
	}
	r, err := p.rankArg(b.Name(), "rank", v)
	if err != nil {
		return nil, err
	}
	if p.ranks == nil {
		p.ranks = make([]*Rank, p.IR.NumRanks)
	}
	if p.ranks[r] == nil {
		p.ranks[r] = &Rank{prog: p, rank: r}
	}
	return p.ranks[r], nil
}

// receiverRank returns the method's Rank after checking its program.
func receiverRank(thread *starlark.Thread, b *starlark.Builtin) (*Rank, error) {
	r := b.Receiver().(*Rank)
	if _, err := ownerProgram(thread, fnName(b), r.prog, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (p *Program) ioBuffer(rank int, t ir.BufferType) *Buffer {
	if p.buffers == nil {
		p.buffers = map[int][2]*Buffer{}
	}
	bs := p.buffers[rank]
	if bs[t] == nil {
		g := p.IR.GPUs[rank]
		size := g.InputChunks
		if t == ir.Output {
			size = g.OutputChunks
		}
		bs[t] = &Buffer{prog: p, rank: rank, btype: t, size: size}
		p.buffers[rank] = bs
	}
	return bs[t]
}

func rankGetInputBuffer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return rankGetBuffer(thread, b, args, kwargs, ir.Input)
}

func rankGetOutputBuffer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return rankGetBuffer(thread, b, args, kwargs, ir.Output)
}

func rankGetBuffer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, t ir.BufferType) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(fnName(b), args, kwargs, 0); err != nil {
		return nil, err
	}
	r, err := receiverRank(thread, b)
	if err != nil {
		return nil, err
	}
	return r.prog.ioBuffer(r.rank, t), nil
}

// rankCopyFamily implements copy, copy_packets and unpack_packets:
// (dst_chunk, src_chunk, tb=None, tb_group=None).
func rankCopyFamily(kind plan.OpType) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fn := fnName(b)
		v := [4]starlark.Value{nil, nil, starlark.None, starlark.None}
		if err := unpack(fn, args, kwargs, transferParams, 2, v[:]); err != nil {
			return nil, err
		}
		dstV, srcV, tbV, groupV := v[0], v[1], v[2], v[3]
		r, err := receiverRank(thread, b)
		if err != nil {
			return nil, err
		}
		p := r.prog
		dst, src, err := twoChunks(fn, p, dstV, srcV)
		if err != nil {
			return nil, err
		}
		if dst.c.Rank != r.rank || src.c.Rank != r.rank {
			return nil, fmt.Errorf("%s: chunks must be on rank %d, got dst on rank %d and src on rank %d", fn, r.rank, dst.c.Rank, src.c.Rank)
		}
		if dst.c.Size != src.c.Size {
			return nil, fmt.Errorf("%s: dst_chunk size %d differs from src_chunk size %d", fn, dst.c.Size, src.c.Size)
		}
		if kind == plan.OpUnpackPacket && src.c.Buffer != ir.Scratch {
			return nil, fmt.Errorf("%s: src_chunk must be in the scratch buffer, got %s", fn, src.c.Buffer.Name())
		}
		if kind == plan.OpCopyPacket && dst.c.Buffer != ir.Scratch {
			return nil, fmt.Errorf("%s: dst_chunk must be in the scratch buffer, got %s", fn, dst.c.Buffer.Name())
		}
		var one [1]tbTarget
		targets, err := resolveTBs(fn, tbV, groupV, p, one[:0])
		if err != nil {
			return nil, err
		}
		pos := callerPos(thread)
		for _, t := range targets {
			op := p.buf.Transfer(kind, src.local(), dst.local(), ir.NoChannel, 0)
			op.Pos, op.TBG = pos, t.tbg
			p.recordBuf(r.rank, t.tb, op)
		}
		return starlark.None, nil
	}
}

var rankReduceParams = []string{"src_chunk", "other_chunks", "tb", "tb_group", "dst_chunk", "reduce_op", "packet"}

// rankReduce implements reduce(src_chunk, other_chunks, tb=None,
// tb_group=None, dst_chunk=None, reduce_op=ReduceOperationType.sum,
// packet=False).
func rankReduce(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	fn := fnName(b)
	v := [7]starlark.Value{nil, nil, starlark.None, starlark.None, starlark.None, reduceOpEnum.members[ir.Sum], starlark.False}
	if err := unpack(fn, args, kwargs, rankReduceParams, 2, v[:]); err != nil {
		return nil, err
	}
	srcV, othersV, tbV, groupV, dstV, opV := v[0], v[1], v[2], v[3], v[4], v[5]
	packet, err := toBool(fn, "packet", v[6])
	if err != nil {
		return nil, err
	}
	r, err := receiverRank(thread, b)
	if err != nil {
		return nil, err
	}
	p := r.prog
	src, err := toChunk(fn, "src_chunk", srcV, p)
	if err != nil {
		return nil, err
	}
	dst := src
	if dstV != starlark.None {
		if dst, err = toChunk(fn, "dst_chunk", dstV, p); err != nil {
			return nil, err
		}
	}
	if dst.c.Rank != r.rank || src.c.Rank != r.rank {
		return nil, fmt.Errorf("%s: chunks must be on rank %d, got dst on rank %d and src on rank %d", fn, r.rank, dst.c.Rank, src.c.Rank)
	}
	if dst.c.Size != src.c.Size {
		return nil, fmt.Errorf("%s: dst_chunk size %d differs from src_chunk size %d", fn, dst.c.Size, src.c.Size)
	}
	var small [4]*Chunk
	others, err := chunkList(fn, "other_chunks", othersV, p, small[:0])
	if err != nil {
		return nil, err
	}
	if len(others) == 0 {
		return nil, fmt.Errorf("%s: other_chunks is empty", fn)
	}
	refs := []ir.Ref{src.local()}
	for i, o := range others {
		if o.c.Rank != r.rank {
			return nil, fmt.Errorf("%s: other_chunks[%d] is on rank %d, want rank %d", fn, i, o.c.Rank, r.rank)
		}
		if o.c.Size != src.c.Size {
			return nil, fmt.Errorf("%s: other_chunks[%d] size %d differs from src_chunk size %d", fn, i, o.c.Size, src.c.Size)
		}
		if packet && o.c.Buffer != ir.Scratch {
			return nil, fmt.Errorf("%s: with packet=True, other_chunks[%d] must be in the scratch buffer, got %s", fn, i, o.c.Buffer.Name())
		}
		refs = append(refs, o.local())
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
	kind := plan.OpReduce
	if packet {
		kind = plan.OpReducePacket
	}
	pos := callerPos(thread)
	for _, t := range targets {
		// refs is only read: recordBuf copies the op's lists where it keeps them.
		local := p.buf.Refs(1)
		local[0] = dst.local()
		o := p.buf.Op(kind)
		o.Pos, o.LocalSrc, o.LocalDst = pos, refs[:len(refs):len(refs)], local
		o.ReduceOp, o.Packet, o.TBG, o.ChannelType = ir.ReduceOp(op), packet, t.tbg, ir.NoChannel
		p.recordBuf(r.rank, t.tb, o)
	}
	return starlark.None, nil
}

// chunkList converts a list or tuple of chunks, appending them to buf[:0]
// (a caller's small array saves the common short list an allocation).
func chunkList(fn, param string, v starlark.Value, p *Program, buf []*Chunk) ([]*Chunk, error) {
	var seq starlark.Indexable
	switch x := v.(type) {
	case *starlark.List:
		seq = x
	case starlark.Tuple:
		seq = x
	default:
		return nil, fmt.Errorf("%s: for parameter %s: got %s, want list of Chunk", fn, param, v.Type())
	}
	if seq.Len() > maxOperands {
		return nil, fmt.Errorf("%s: for parameter %s: %d chunks: an op takes at most %d (the MSCCL++ executor reads %d per side)", fn, param, seq.Len(), maxOperands, plan.MaxOperandsPerSide)
	}
	out := buf[:0]
	for i := range seq.Len() {
		c, err := toChunk(fn, param, seq.Index(i), p)
		if err != nil {
			return nil, fmt.Errorf("%w (element %d)", err, i)
		}
		out = append(out, c)
	}
	return out, nil
}

// rankBarrier implements barrier(tb_list).
func rankBarrier(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	fn := fnName(b)
	var listV starlark.Value
	if err := starlark.UnpackArgs(fn, args, kwargs, "tb_list", &listV); err != nil {
		return nil, err
	}
	r, err := receiverRank(thread, b)
	if err != nil {
		return nil, err
	}
	tbs, err := toIntList(fn, "tb_list", listV)
	if err != nil {
		return nil, err
	}
	if len(tbs) == 0 {
		return nil, fmt.Errorf("%s: tb_list must name at least one thread block", fn)
	}
	seen := map[int]bool{}
	for _, tb := range tbs {
		if _, err := tbArg(fn, starlark.MakeInt(tb)); err != nil {
			return nil, err
		}
		if seen[tb] {
			return nil, fmt.Errorf("%s: thread block %d listed twice in %s", fn, tb, fmtInts(tbs))
		}
		seen[tb] = true
	}
	p := r.prog
	pos := callerPos(thread)
	if len(tbs) == 1 {
		p.record(r.rank, tbs[0], &ir.Op{Kind: plan.OpNop, Pos: pos})
		return starlark.None, nil
	}
	g := p.IR.GPUs[r.rank]
	op := &ir.Op{Kind: plan.OpBarrier, Pos: pos, Barrier: &ir.BarrierInfo{ID: g.BarrierID(tbs), TBList: tbs}}
	for _, tb := range tbs {
		p.record(r.rank, tb, op)
	}
	return starlark.None, nil
}

// tbTarget is one thread block an op is recorded on.
type tbTarget struct {
	tb  int
	tbg *ir.TBGInfo
}

// resolveTBs applies the tb / tb_group rule (docs/language.md §9.3). A single
// target is returned in buf's storage, which saves the common call an
// allocation.
func resolveTBs(fn string, tbV, groupV starlark.Value, p *Program, buf []tbTarget) ([]tbTarget, error) {
	var group *ThreadBlockGroup
	if groupV != starlark.None {
		g, ok := groupV.(*ThreadBlockGroup)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter tb_group: got %s, want ThreadBlockGroup", fn, groupV.Type())
		}
		group = g
	}
	if tbV != starlark.None {
		tb, err := tbArg(fn, tbV)
		if err != nil {
			return nil, err
		}
		t := tbTarget{tb: tb}
		if group != nil {
			i := group.indexOf(tb)
			if i < 0 {
				return nil, fmt.Errorf("%s: thread block %d is not in tb_group %s", fn, tb, fmtInts(group.tbs))
			}
			t.tbg = &ir.TBGInfo{TBID: i, TBGSize: len(group.tbs)}
		}
		return append(buf[:0], t), nil
	}
	if group == nil {
		return nil, fmt.Errorf("%s: either tb (a thread block id) or tb_group (a ThreadBlockGroup) must be given", fn)
	}
	out := make([]tbTarget, len(group.tbs))
	for i, tb := range group.tbs {
		out[i] = tbTarget{tb: tb, tbg: &ir.TBGInfo{TBID: i, TBGSize: len(group.tbs)}}
	}
	return out, nil
}

// tbArg converts a thread block id argument.
func tbArg(fn string, v starlark.Value) (int, error) {
	if v == starlark.None {
		return 0, fmt.Errorf("%s: tb is required", fn)
	}
	tb, err := toInt(fn, "tb", v)
	if err != nil {
		return 0, err
	}
	if tb < 0 {
		return 0, fmt.Errorf("%s: for parameter tb: got %d, want a non-negative thread block id", fn, tb)
	}
	if tb >= plan.MaxThreadBlocks {
		return 0, fmt.Errorf("%s: for parameter tb: %d is not below the executor's limit of %d thread blocks per rank (more cannot all be resident on a GPU)", fn, tb, plan.MaxThreadBlocks)
	}
	return tb, nil
}

// maxOperands bounds the chunks one op takes (other_chunks of reduce),
// far above what the MSCCL++ executor reads (plan.MaxOperandsPerSide
// per side, a warning beyond), so that a list of millions is refused
// before anything is built for it.
const maxOperands = 1 << 10

// ThreadBlockGroup is an ordered list of thread blocks that share ops.
type ThreadBlockGroup struct {
	tbs []int
}

var _ starlark.HasAttrs = (*ThreadBlockGroup)(nil)

var tbgMethods = methodTable("ThreadBlockGroup", map[string]builtinFn{
	"numtb":           tbgNumTB,
	"get_internal_id": tbgInternalID,
})

// String returns <ThreadBlockGroup [..]>.
func (g *ThreadBlockGroup) String() string {
	return fmt.Sprintf("<ThreadBlockGroup %s>", fmtInts(g.tbs))
}

// Type returns "ThreadBlockGroup".
func (g *ThreadBlockGroup) Type() string { return "ThreadBlockGroup" }

// Freeze does nothing.
func (g *ThreadBlockGroup) Freeze() {}

// Truth is true.
func (g *ThreadBlockGroup) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (g *ThreadBlockGroup) Hash() (uint32, error) { return noHash("ThreadBlockGroup") }

// Attr returns tb_list or a method.
func (g *ThreadBlockGroup) Attr(name string) (starlark.Value, error) {
	if name == "tb_list" {
		return intList(g.tbs), nil
	}
	return methodAttr(tbgMethods, name, g), nil
}

// AttrNames lists the attributes.
func (g *ThreadBlockGroup) AttrNames() []string { return names([]string{"tb_list"}, tbgMethods) }

func (g *ThreadBlockGroup) indexOf(tb int) int {
	for i, t := range g.tbs {
		if t == tb {
			return i
		}
	}
	return -1
}

func tbgBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var listV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "tb_list", &listV); err != nil {
		return nil, err
	}
	tbs, err := toIntList(b.Name(), "tb_list", listV)
	if err != nil {
		return nil, err
	}
	for i, tb := range tbs {
		if _, err := tbArg(b.Name(), starlark.MakeInt(tb)); err != nil {
			return nil, err
		}
		for j := 0; j < i; j++ {
			if tbs[j] == tb {
				return nil, fmt.Errorf("%s: duplicate thread block %d at index %d", b.Name(), tb, i)
			}
		}
	}
	return &ThreadBlockGroup{tbs: tbs}, nil
}

func tbgNumTB(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(fnName(b), args, kwargs, 0); err != nil {
		return nil, err
	}
	return starlark.MakeInt(len(b.Receiver().(*ThreadBlockGroup).tbs)), nil
}

func tbgInternalID(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var tb int
	if err := starlark.UnpackArgs(fnName(b), args, kwargs, "tb", &tb); err != nil {
		return nil, err
	}
	g := b.Receiver().(*ThreadBlockGroup)
	i := g.indexOf(tb)
	if i < 0 {
		return nil, fmt.Errorf("%s: thread block %d not found in %s", fnName(b), tb, fmtInts(g.tbs))
	}
	return starlark.MakeInt(i), nil
}
