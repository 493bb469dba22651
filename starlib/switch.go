package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// SwitchChannel is an NVLS multicast channel over the same-type buffer of a
// group of ranks: SwitchChannel(rank_list, buffer_type).
type SwitchChannel struct {
	prog  *Program
	ranks []int
	btype ir.BufferType
	ids   map[int]int // rank -> per-rank switch channel id
}

var _ starlark.HasAttrs = (*SwitchChannel)(nil)

var switchMethods = methodTable("SwitchChannel", map[string]builtinFn{
	"at_rank":           switchAtRank,
	"reduce":            switchReduce(false),
	"broadcast":         switchBroadcast(plan.OpMultiStore, false),
	"broadcast_packets": switchBroadcast(plan.OpMultiStorePacket, false),
})

// String returns <SwitchChannel [ranks] type>.
func (s *SwitchChannel) String() string {
	return fmt.Sprintf("<SwitchChannel %s %s>", fmtInts(s.ranks), s.btype.Name())
}

// Type returns "SwitchChannel".
func (s *SwitchChannel) Type() string { return "SwitchChannel" }

// Freeze does nothing.
func (s *SwitchChannel) Freeze() {}

// Truth is true.
func (s *SwitchChannel) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (s *SwitchChannel) Hash() (uint32, error) { return noHash("SwitchChannel") }

// Attr returns an attribute or method.
func (s *SwitchChannel) Attr(name string) (starlark.Value, error) {
	switch name {
	case "channel_ids":
		d := starlark.NewDict(len(s.ranks))
		for _, r := range s.ranks {
			_ = d.SetKey(starlark.MakeInt(r), starlark.MakeInt(s.ids[r]))
		}
		return d, nil
	case "channel_type":
		return channelTypeEnum.members[ir.Switch], nil
	case "buffer_type":
		return bufferTypeEnum.members[s.btype], nil
	case "rank_group":
		return starlarkstruct.FromStringDict(starlark.String("RankGroup"), starlark.StringDict{
			"size":  starlark.MakeInt(len(s.ranks)),
			"ranks": intList(s.ranks),
		}), nil
	}
	return methodAttr(switchMethods, name, s), nil
}

// AttrNames lists the attributes and methods.
func (s *SwitchChannel) AttrNames() []string {
	return names([]string{"buffer_type", "channel_ids", "channel_type", "rank_group"}, switchMethods)
}

func switchBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var listV, typeV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rank_list", &listV, "buffer_type", &typeV); err != nil {
		return nil, err
	}
	p, err := currentProgram(thread, b.Name())
	if err != nil {
		return nil, err
	}
	ranks, err := toIntList(b.Name(), "rank_list", listV)
	if err != nil {
		return nil, err
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("%s: rank_list is empty", b.Name())
	}
	for i, r := range ranks {
		if _, err := p.rankArg(b.Name(), fmt.Sprintf("rank_list[%d]", i), starlark.MakeInt(r)); err != nil {
			return nil, err
		}
		for _, q := range ranks[:i] {
			if q == r {
				return nil, fmt.Errorf("%s: rank %d listed twice in %s", b.Name(), r, fmtInts(ranks))
			}
		}
	}
	bt, err := asEnum(b.Name(), "buffer_type", typeV, bufferTypeEnum)
	if err != nil {
		return nil, err
	}
	s := &SwitchChannel{prog: p, ranks: ranks, btype: ir.BufferType(bt), ids: map[int]int{}}
	for _, r := range ranks {
		s.ids[r] = p.IR.GPUs[r].AddSwitch(s.btype, ranks)
	}
	return s, nil
}

func (s *SwitchChannel) member(r int) bool {
	_, ok := s.ids[r]
	return ok
}

// receiverSwitch returns the method's channel and its bound rank (-1 when
// called on the channel itself).
func receiverSwitch(thread *starlark.Thread, b *starlark.Builtin) (*SwitchChannel, int, *Program, error) {
	var s *SwitchChannel
	rank := -1
	switch r := b.Receiver().(type) {
	case *SwitchChannel:
		s = r
	case *SwitchChannelView:
		s, rank = r.ch, r.rank
	}
	p, err := ownerProgram(thread, fnName(b), s.prog, s)
	if err != nil {
		return nil, 0, nil, err
	}
	return s, rank, p, nil
}

// checkCapacity checks that [offset, offset+size) fits the channel's buffer
// on every member rank.
func (s *SwitchChannel) checkCapacity(fn string, offset, size int) error {
	for _, r := range s.ranks {
		g := s.prog.IR.GPUs[r]
		capacity := g.ScratchChunks
		switch s.btype {
		case ir.Input:
			capacity = g.InputChunks
		case ir.Output:
			capacity = g.OutputChunks
		}
		if capacity < offset+size {
			return fmt.Errorf("%s: buffer_offset %d + size %d exceeds the %d chunks of the %s buffer of rank %d", fn, offset, size, capacity, s.btype.Name(), r)
		}
	}
	return nil
}

// switchReduce implements reduce([rank,] buffer_offset, size, dst_chunk, tb,
// reduce_op=ReduceOperationType.sum); bound is true for the at_rank view.
func switchReduce(bound bool) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fn := fnName(b)
		var rankV, offV, sizeV, dstV, tbV starlark.Value
		var opV starlark.Value = reduceOpEnum.members[ir.Sum]
		var err error
		if bound {
			err = starlark.UnpackArgs(fn, args, kwargs, "buffer_offset", &offV, "size", &sizeV, "dst_chunk", &dstV, "tb", &tbV, "reduce_op?", &opV)
		} else {
			err = starlark.UnpackArgs(fn, args, kwargs, "rank", &rankV, "buffer_offset", &offV, "size", &sizeV, "dst_chunk", &dstV, "tb", &tbV, "reduce_op?", &opV)
		}
		if err != nil {
			return nil, err
		}
		s, rank, p, err := receiverSwitch(thread, b)
		if err != nil {
			return nil, err
		}
		if rank, err = s.opRank(fn, p, rank, rankV); err != nil {
			return nil, err
		}
		offset, err := toNonNeg(fn, "buffer_offset", offV)
		if err != nil {
			return nil, err
		}
		size, err := toNonNeg(fn, "size", sizeV)
		if err != nil {
			return nil, err
		}
		dst, err := toChunk(fn, "dst_chunk", dstV, p)
		if err != nil {
			return nil, err
		}
		if !s.member(dst.c.Rank) {
			return nil, fmt.Errorf("%s: dst_chunk is on rank %d, which is not in the switch group %s", fn, dst.c.Rank, fmtInts(s.ranks))
		}
		if dst.c.Size != size {
			return nil, fmt.Errorf("%s: dst_chunk size %d differs from size %d", fn, dst.c.Size, size)
		}
		if err := s.checkCapacity(fn, offset, size); err != nil {
			return nil, err
		}
		tb, err := tbArg(fn, tbV)
		if err != nil {
			return nil, err
		}
		op, err := asEnum(fn, "reduce_op", opV, reduceOpEnum)
		if err != nil {
			return nil, err
		}
		idx := p.IR.GPUs[rank].RegisterChannel(tb, ir.Switch, s.ids[rank])
		p.record(rank, tb, &ir.Op{Kind: plan.OpGroupLoadReduce, Pos: callerPos(thread), SwitchBuffer: s.btype, BufferOffset: offset,
			Size: size, SwitchChunk: dst.c, ChannelIDs: []int{idx}, ChannelType: ir.Switch, ReduceOp: ir.ReduceOp(op)})
		return starlark.None, nil
	}
}

// switchBroadcast implements broadcast and broadcast_packets:
// ([rank,] src_chunk, buffer_offset, size, tb).
func switchBroadcast(kind plan.OpType, bound bool) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fn := fnName(b)
		var rankV, srcV, offV, sizeV, tbV starlark.Value
		var err error
		if bound {
			err = starlark.UnpackArgs(fn, args, kwargs, "src_chunk", &srcV, "buffer_offset", &offV, "size", &sizeV, "tb", &tbV)
		} else {
			err = starlark.UnpackArgs(fn, args, kwargs, "rank", &rankV, "src_chunk", &srcV, "buffer_offset", &offV, "size", &sizeV, "tb", &tbV)
		}
		if err != nil {
			return nil, err
		}
		s, rank, p, err := receiverSwitch(thread, b)
		if err != nil {
			return nil, err
		}
		if rank, err = s.opRank(fn, p, rank, rankV); err != nil {
			return nil, err
		}
		src, err := toChunk(fn, "src_chunk", srcV, p)
		if err != nil {
			return nil, err
		}
		offset, err := toNonNeg(fn, "buffer_offset", offV)
		if err != nil {
			return nil, err
		}
		size, err := toNonNeg(fn, "size", sizeV)
		if err != nil {
			return nil, err
		}
		if !s.member(src.c.Rank) {
			return nil, fmt.Errorf("%s: src_chunk is on rank %d, which is not in the switch group %s", fn, src.c.Rank, fmtInts(s.ranks))
		}
		if kind == plan.OpMultiStorePacket {
			if src.c.Buffer != ir.Scratch {
				return nil, fmt.Errorf("%s: src_chunk must be in the scratch buffer, got %s", fn, src.c.Buffer.Name())
			}
			if s.btype != ir.Scratch {
				return nil, fmt.Errorf("%s: the switch channel must be over the scratch buffer, got %s", fn, s.btype.Name())
			}
		}
		if src.c.Size != size {
			return nil, fmt.Errorf("%s: src_chunk size %d differs from size %d", fn, src.c.Size, size)
		}
		if err := s.checkCapacity(fn, offset, size); err != nil {
			return nil, err
		}
		tb, err := tbArg(fn, tbV)
		if err != nil {
			return nil, err
		}
		idx := p.IR.GPUs[rank].RegisterChannel(tb, ir.Switch, s.ids[rank])
		p.record(rank, tb, &ir.Op{Kind: kind, Pos: callerPos(thread), SwitchBuffer: s.btype, BufferOffset: offset,
			Size: size, SwitchChunk: src.c, ChannelIDs: []int{idx}, ChannelType: ir.Switch})
		return starlark.None, nil
	}
}

// opRank resolves the rank an op is recorded on: the view's bound rank or
// the explicit rank argument, which must be a member.
func (s *SwitchChannel) opRank(fn string, p *Program, bound int, v starlark.Value) (int, error) {
	if bound >= 0 {
		return bound, nil
	}
	r, err := p.rankArg(fn, "rank", v)
	if err != nil {
		return 0, err
	}
	if !s.member(r) {
		return 0, fmt.Errorf("%s: rank %d is not in the switch group %s", fn, r, fmtInts(s.ranks))
	}
	return r, nil
}

func switchAtRank(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var r int
	if err := starlark.UnpackArgs(fnName(b), args, kwargs, "rank", &r); err != nil {
		return nil, err
	}
	s := b.Receiver().(*SwitchChannel)
	if !s.member(r) {
		return nil, fmt.Errorf("%s: rank %d is not in the switch group %s", fnName(b), r, fmtInts(s.ranks))
	}
	return &SwitchChannelView{ch: s, rank: r}, nil
}

// SwitchChannelView is a SwitchChannel bound to one member rank, returned
// by at_rank(rank).
type SwitchChannelView struct {
	ch   *SwitchChannel
	rank int
}

var _ starlark.HasAttrs = (*SwitchChannelView)(nil)

var switchViewMethods = methodTable("SwitchChannel", map[string]builtinFn{
	"reduce":            switchReduce(true),
	"broadcast":         switchBroadcast(plan.OpMultiStore, true),
	"broadcast_packets": switchBroadcast(plan.OpMultiStorePacket, true),
})

// String returns <SwitchChannel [ranks] type at rank r>.
func (v *SwitchChannelView) String() string {
	return fmt.Sprintf("<SwitchChannel %s %s at rank %d>", fmtInts(v.ch.ranks), v.ch.btype.Name(), v.rank)
}

// Type returns "SwitchChannel".
func (v *SwitchChannelView) Type() string { return "SwitchChannel" }

// Freeze does nothing.
func (v *SwitchChannelView) Freeze() {}

// Truth is true.
func (v *SwitchChannelView) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (v *SwitchChannelView) Hash() (uint32, error) { return noHash("SwitchChannel") }

// Attr returns rank, the channel's attributes, or a method.
func (v *SwitchChannelView) Attr(name string) (starlark.Value, error) {
	if name == "rank" {
		return starlark.MakeInt(v.rank), nil
	}
	if m := methodAttr(switchViewMethods, name, v); m != nil {
		return m, nil
	}
	if name == "at_rank" {
		return nil, nil
	}
	return v.ch.Attr(name)
}

// AttrNames lists the attributes and methods.
func (v *SwitchChannelView) AttrNames() []string {
	return names([]string{"buffer_type", "channel_ids", "channel_type", "rank", "rank_group"}, switchViewMethods)
}
