package passes

import (
	"math/big"
	"strings"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
	"go.starlark.net/syntax"
)

// This file is a small Go model of the recording builtins (docs/language.md §9–§13)
// for pass tests: it records into an ir.Program exactly what the Python DSL
// would record for the reference examples of the passes, so that the examples
// port line by line. Method names and argument orders follow the DSL
// (dst before src, MemoryChannel(dst, src)).

// tprog is a program under construction: the example harness with 2 ranks
// and input/output buffers of 4 chunks.
type tprog struct {
	p    *ir.Program
	line int32
	file *string
	loop *[]loopEntry // open LoopIterationContext, or nil
}

type loopEntry struct {
	rank, tb int
	op       *ir.Op
}

type option func(*ir.Program)

func instances(n int) option   { return func(p *ir.Program) { p.Instances = n } }
func noFusion(p *ir.Program)   { p.InstrFusion = false }
func noAutoSync(p *ir.Program) { p.AutoSync = false }
func policyNone(p *ir.Program) { p.Policy = ir.NoReplication }

func newProg(opts ...option) *tprog {
	p := ir.NewProgram(2, 4, 4)
	p.Name, p.Collective, p.Protocol = "t", "test", "Simple"
	p.InstrFusion, p.AutoSync = true, true
	for _, o := range opts {
		o(p)
	}
	file := "t.star"
	return &tprog{p: p, file: &file}
}

// pos returns a fresh call-site position, one line per recorded call.
func (t *tprog) pos() syntax.Position {
	t.line++
	return syntax.MakePosition(t.file, t.line, 1)
}

// ck is a chunk value: buf[a:b] of a rank.
type ck struct {
	rank int
	buf  ir.BufferType
	idx  int
	size int
}

// I, O and S slice rank r's input, output and scratch space: I(r, a, b) is
// the DSL's Rank(r).get_input_buffer()[a:b]; S indices are absolute.
func I(r, a, b int) ck { return ck{r, ir.Input, a, b - a} }
func O(r, a, b int) ck { return ck{r, ir.Output, a, b - a} }
func S(r, a, b int) ck { return ck{r, ir.Scratch, a, b - a} }

func (c ck) local() ir.Ref { return ir.Ref{Buffer: c.buf, Index: c.idx, Size: c.size} }

// chunk returns a new user Chunk object for switch ops.
func (c ck) chunk() *ir.Chunk {
	return &ir.Chunk{Rank: c.rank, Buffer: c.buf, Index: c.idx, Size: c.size}
}

// buffer is Buffer(rank, size): it bumps the rank's scratch allocation and
// returns the offset.
func (t *tprog) buffer(rank, size int) int {
	g := t.p.GPUs[rank]
	off := g.ScratchChunks
	g.ScratchChunks += size
	return off
}

// at is the tb / tb_group placement of an op.
type at struct {
	tb    int
	hasTB bool
	group []int
}

func tb(n int) at                  { return at{tb: n, hasTB: true} }
func grp(tbs ...int) at            { return at{group: tbs} }
func tbInGrp(n int, tbs ...int) at { return at{tb: n, hasTB: true, group: tbs} }

type placement struct {
	tb  int
	tbg *ir.TBGInfo
}

func (a at) places() []placement {
	pos := func(tb int) *ir.TBGInfo {
		if a.group == nil {
			return nil
		}
		for i, x := range a.group {
			if x == tb {
				return &ir.TBGInfo{TBID: i, TBGSize: len(a.group)}
			}
		}
		panic("tb not in group")
	}
	if a.hasTB {
		return []placement{{a.tb, pos(a.tb)}}
	}
	var out []placement
	for _, x := range a.group {
		out = append(out, placement{x, pos(x)})
	}
	return out
}

// record appends op to (rank, tb), or to the open loop context.
func (t *tprog) record(rank, tbID int, op *ir.Op) {
	if t.loop != nil {
		*t.loop = append(*t.loop, loopEntry{rank, tbID, op})
		return
	}
	g := t.p.GPUs[rank].TB(tbID)
	g.Ops = append(g.Ops, op)
}

// loopCtx is LoopIterationContext(unit, num_chunks) around body.
func (t *tprog) loopCtx(unit, n int64, body func()) {
	if t.loop != nil {
		panic("nested pipelines")
	}
	var entries []loopEntry
	t.loop = &entries
	body()
	t.loop = nil
	type key struct{ rank, tb int }
	var order []key
	groups := map[key][]*ir.Op{}
	for _, e := range entries {
		k := key{e.rank, e.tb}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e.op)
	}
	for _, k := range order {
		t.record(k.rank, k.tb, &ir.Op{Kind: plan.OpPipeline, UnitSize: unit, NumChunks: n, Body: groups[k]})
	}
}

// Rank methods.

func (t *tprog) copyKind(kind plan.OpType, rank int, dst, src ck, a at) {
	pos := t.pos()
	for _, pl := range a.places() {
		t.record(rank, pl.tb, &ir.Op{Kind: kind, Pos: pos, Src: []ir.Ref{src.local()}, Dst: []ir.Ref{dst.local()}, TBG: pl.tbg})
	}
}

func (t *tprog) copy(rank int, dst, src ck, a at) { t.copyKind(plan.OpCopy, rank, dst, src, a) }
func (t *tprog) copyPackets(rank int, dst, src ck, a at) {
	t.copyKind(plan.OpCopyPacket, rank, dst, src, a)
}
func (t *tprog) unpackPackets(rank int, dst, src ck, a at) {
	t.copyKind(plan.OpUnpackPacket, rank, dst, src, a)
}

// reduce is Rank(rank).reduce(src, others, tb, dst_chunk=dst,
// reduce_op=op, packet=packet).
func (t *tprog) reduce(rank int, src ck, others []ck, a at, dst ck, op ir.ReduceOp, packet bool) {
	pos := t.pos()
	kind := plan.OpReduce
	if packet {
		kind = plan.OpReducePacket
	}
	for _, pl := range a.places() {
		refs := []ir.Ref{src.local()}
		for _, o := range others {
			refs = append(refs, o.local())
		}
		t.record(rank, pl.tb, &ir.Op{Kind: kind, Pos: pos, LocalSrc: refs, LocalDst: []ir.Ref{dst.local()},
			ReduceOp: op, Packet: packet, TBG: pl.tbg})
	}
}

// barrier is Rank(rank).barrier(tbs).
func (t *tprog) barrier(rank int, tbs ...int) {
	pos := t.pos()
	if len(tbs) == 1 {
		t.record(rank, tbs[0], &ir.Op{Kind: plan.OpNop, Pos: pos})
		return
	}
	g := t.p.GPUs[rank]
	op := &ir.Op{Kind: plan.OpBarrier, Pos: pos, Barrier: &ir.BarrierInfo{ID: g.BarrierID(tbs), TBList: tbs}}
	for _, x := range tbs {
		t.record(rank, x, op)
	}
}

// Semaphores.

type tsem struct {
	t        *tprog
	rank, id int
}

func (t *tprog) sem(rank int, init int64) *tsem {
	return &tsem{t, rank, t.p.GPUs[rank].AddSemaphore(big.NewInt(init))}
}

func (s *tsem) acquire(tbID int, ds ir.SyncType) {
	s.t.record(s.rank, tbID, &ir.Op{Kind: plan.OpSemAcquire, Pos: s.t.pos(), SemaphoreIDs: []int{s.id}, DataSync: ds})
}

func (s *tsem) release(tbID int, ds ir.SyncType) {
	s.t.record(s.rank, tbID, &ir.Op{Kind: plan.OpSemRelease, Pos: s.t.pos(), SemaphoreIDs: []int{s.id}, DataSync: ds})
}

// Memory and port channels.

type tch struct {
	t        *tprog
	kind     ir.ChannelType
	dst, src int
	id       int
}

// mem is MemoryChannel(dst, src); port is PortChannel(dst, src).
func (t *tprog) mem(dst, src int) *tch  { return t.channel(ir.Memory, dst, src) }
func (t *tprog) port(dst, src int) *tch { return t.channel(ir.Port, dst, src) }

func (t *tprog) channel(kind ir.ChannelType, dst, src int) *tch {
	return &tch{t, kind, dst, src, t.p.GPUs[src].AddChannel(kind, dst)}
}

func (c *tch) key() ir.PairKey { return ir.PairKey{Src: c.src, Dst: c.dst, Kind: c.kind} }

func (c *tch) syncOp(kind plan.OpType, tbID int, ds ir.SyncType) *ir.Op {
	idx := c.t.p.GPUs[c.src].RegisterChannel(tbID, c.kind, c.id)
	op := &ir.Op{Kind: kind, Pos: c.t.pos(), IDSet: ir.NewSet(idx), ChannelType: c.kind, DataSync: ds}
	c.t.record(c.src, tbID, op)
	return op
}

func (c *tch) signal(tbID int, ds ir.SyncType) {
	op := c.syncOp(plan.OpSignal, tbID, ds)
	ir.Count(c.t.p.Signals, c.key(), op.Pos)
}

func (c *tch) rlxSignal(tbID int, ds ir.SyncType) {
	op := c.syncOp(plan.OpRelaxedSignal, tbID, ds)
	ir.Count(c.t.p.Signals, c.key(), op.Pos)
}

func (c *tch) wait(tbID int, ds ir.SyncType) {
	op := c.syncOp(plan.OpWait, tbID, ds)
	ir.Count(c.t.p.Waits, c.key(), op.Pos)
}

func (c *tch) rlxWait(tbID int, ds ir.SyncType) {
	op := c.syncOp(plan.OpRelaxedWait, tbID, ds)
	ir.Count(c.t.p.Waits, c.key(), op.Pos)
}

func (c *tch) flush(tbID int, ds ir.SyncType) { c.syncOp(plan.OpFlush, tbID, ds) }

// dataOp records a put-family op (remote dst) or a get (remote src).
func (c *tch) dataOp(kind plan.OpType, dst, src ck, a at) {
	pos := c.t.pos()
	g := c.t.p.GPUs[c.src]
	for _, pl := range a.places() {
		rem := dst
		if kind == plan.OpGet {
			rem = src
		}
		rb := g.RegisterRemoteBuffer(pl.tb, rem.rank, rem.buf, c.kind)
		idx := g.RegisterChannel(pl.tb, c.kind, c.id)
		r := ir.Ref{Remote: true, BufferID: rb, Index: rem.idx, Size: rem.size}
		op := &ir.Op{Kind: kind, Pos: pos, ChannelIDs: []int{idx}, ChannelType: c.kind, TBG: pl.tbg}
		if kind == plan.OpGet {
			op.Src, op.Dst = []ir.Ref{r}, []ir.Ref{dst.local()}
		} else {
			op.Src, op.Dst = []ir.Ref{src.local()}, []ir.Ref{r}
		}
		c.t.record(c.src, pl.tb, op)
		if kind == plan.OpPutWithSignal || kind == plan.OpPutWithSignalAndFlush {
			ir.Count(c.t.p.Signals, c.key(), pos)
		}
	}
}

func (c *tch) put(dst, src ck, a at)            { c.dataOp(plan.OpPut, dst, src, a) }
func (c *tch) putPackets(dst, src ck, a at)     { c.dataOp(plan.OpPutPacket, dst, src, a) }
func (c *tch) readPutPackets(dst, src ck, a at) { c.dataOp(plan.OpReadPutPacket, dst, src, a) }
func (c *tch) pws(dst, src ck, tbID int)        { c.dataOp(plan.OpPutWithSignal, dst, src, tb(tbID)) }
func (c *tch) pwsf(dst, src ck, tbID int)       { c.dataOp(plan.OpPutWithSignalAndFlush, dst, src, tb(tbID)) }
func (c *tch) get(dst, src ck, a at)            { c.dataOp(plan.OpGet, dst, src, a) }

// reduce is MemoryChannel.reduce(local_src, remote_srcs, tb,
// local_dst_chunk=dst, reduce_op=op).
func (c *tch) reduce(src ck, remotes []ck, a at, dst ck, op ir.ReduceOp) {
	pos := c.t.pos()
	g := c.t.p.GPUs[c.src]
	for _, pl := range a.places() {
		var refs []ir.Ref
		for _, r := range remotes {
			rb := g.RegisterRemoteBuffer(pl.tb, r.rank, r.buf, c.kind)
			refs = append(refs, ir.Ref{Remote: true, BufferID: rb, Index: r.idx, Size: r.size})
		}
		idx := g.RegisterChannel(pl.tb, c.kind, c.id)
		kind := plan.OpReadReduce
		if len(refs) == 0 {
			kind = plan.OpReduce
		}
		c.t.record(c.src, pl.tb, &ir.Op{Kind: kind, Pos: pos, LocalSrc: []ir.Ref{src.local()}, LocalDst: []ir.Ref{dst.local()},
			RemoteSrc: refs, ChannelIDs: []int{idx}, ChannelType: ir.Memory, ReduceOp: op, TBG: pl.tbg})
	}
}

// Switch channels.

type tsw struct {
	t   *tprog
	buf ir.BufferType
	ids map[int]int
}

// sw is SwitchChannel(ranks, buf).
func (t *tprog) sw(ranks []int, buf ir.BufferType) *tsw {
	s := &tsw{t, buf, map[int]int{}}
	for _, r := range ranks {
		s.ids[r] = t.p.GPUs[r].AddSwitch(buf, ranks)
	}
	return s
}

// reduce is sw.at_rank(rank).reduce(off, size, dst, tb, reduce_op=op).
func (s *tsw) reduce(rank, off, size int, dst *ir.Chunk, tbID int, op ir.ReduceOp) {
	idx := s.t.p.GPUs[rank].RegisterChannel(tbID, ir.Switch, s.ids[rank])
	s.t.record(rank, tbID, &ir.Op{Kind: plan.OpGroupLoadReduce, Pos: s.t.pos(), SwitchBuffer: s.buf, BufferOffset: off,
		Size: size, SwitchChunk: dst, ChannelIDs: []int{idx}, ChannelType: ir.Switch, ReduceOp: op})
}

// broadcast is sw.at_rank(rank).broadcast(src, off, size, tb).
func (s *tsw) broadcast(rank int, src *ir.Chunk, off, size, tbID int) {
	s.store(plan.OpMultiStore, rank, src, off, size, tbID)
}

func (s *tsw) broadcastPackets(rank int, src *ir.Chunk, off, size, tbID int) {
	s.store(plan.OpMultiStorePacket, rank, src, off, size, tbID)
}

func (s *tsw) store(kind plan.OpType, rank int, src *ir.Chunk, off, size, tbID int) {
	idx := s.t.p.GPUs[rank].RegisterChannel(tbID, ir.Switch, s.ids[rank])
	s.t.record(rank, tbID, &ir.Op{Kind: kind, Pos: s.t.pos(), SwitchBuffer: s.buf, BufferOffset: off,
		Size: size, SwitchChunk: src, ChannelIDs: []int{idx}, ChannelType: ir.Switch})
}

// Text helpers.

// dedent removes the leading newline of a raw string and the indentation
// common to its non-empty lines.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first || strings.HasPrefix(prefix, ind) {
			prefix = ind
		}
		for !strings.HasPrefix(ind, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
		first = false
	}
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		b.WriteString(strings.TrimPrefix(l, prefix))
		b.WriteByte('\n')
	}
	return b.String()
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
