package executor

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/mscclgo/mscclgo/plan"
)

// This file resolves a loaded Plan for one message size
// (docs/semantics.md §1.7–§1.13, §4.1).
//
// Offsets model: every Region offset is relative to the base of its own
// buffer (input, output or scratch) on its rank. MSCCL++ adds, for remote
// and switch operands, the distance of the caller's buffer from the start
// of its allocation (constOffset, docs/semantics.md §1.8); mscclgo backends allocate each
// buffer at its own base, so that distance is 0 and no backend adds it.
// Offsets and sizes are data bytes: ops that address LL packets (cpkt
// destinations, upkt sources, ...) use twice the offset and twice the
// size, and the double-buffer half of scratch is added by the backend at
// launch (docs/semantics.md §1.12).

// ReuseScratchBytes is the scratch size a plan with reuse_resources needs
// per rank (docs/semantics.md §1.13: MSCCL++'s "predefined" 64 MiB); with
// use_double_scratch_buffer each half is 32 MiB.
const ReuseScratchBytes = 64 << 20

// rankLayout is the chunk arithmetic of one rank.
type rankLayout struct {
	S, C    uint64 // the reference size pair (docs/semantics.md §1.7)
	chunk   uint64 // bytes per chunk: S / C
	slot    uint64 // reuse_resources scratch slot (docs/semantics.md §1.13); 0 without reuse
	useSlot bool   // scratch chunk j starts at j*slot
	scratch uint64 // scratch bytes this rank needs
}

func sizeErr(path, format string, args ...any) error {
	return &plan.PlanError{Path: path, Err: plan.ErrSize, Msg: fmt.Sprintf(format, args...)}
}

// sizeErrNaming is sizeErr for a message that names the sizes named
// (plan.PlanError.Sizes).
func sizeErrNaming(named []uint64, path, format string, args ...any) error {
	return &plan.PlanError{Path: path, Err: plan.ErrSize, Msg: fmt.Sprintf(format, args...), Sizes: named}
}

func limitErr(path, format string, args ...any) error {
	return &plan.PlanError{Path: path, Err: plan.ErrLimit, Msg: fmt.Sprintf(format, args...)}
}

func mulU64(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func alignUp(x, a uint64) (uint64, bool) {
	if x%a == 0 {
		return x, true
	}
	y := x + a - x%a
	return y, y > x
}

func ceilDiv(a, b uint64) uint64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// split is the offset of part i when total bytes are cut into n parts in
// units of a, the remainder going to the lowest parts (docs/semantics.md §1.8).
func split(total, i, n, a uint64) (uint64, bool) {
	u := total / a
	q, r := u/n, u%n
	v, ok := mulU64(i, q)
	if !ok {
		return 0, false
	}
	w := v + min(i, r)
	if w < v {
		return 0, false
	}
	return mulU64(w, a)
}

// layoutOf checks the sizes against rank r's chunk counts and computes its
// chunk arithmetic (docs/semantics.md §1.7, §1.11, §1.13).
func layoutOf(p *plan.Plan, r int, sizes Sizes) (rankLayout, error) {
	g := &p.GPUs[r]
	path := plan.IndexPath("gpus", r)
	a := p.BufferAlignment
	inC, outC, scC := uint64(g.InputChunks), uint64(g.OutputChunks), uint64(g.ScratchChunks)
	// Q11: a zero chunk count skips its divisibility check.
	if inC > 0 && (sizes.Input/a)%inC != 0 {
		return rankLayout{}, sizeErrNaming([]uint64{sizes.Input}, path, "input size %d: not a multiple of buffer_alignment %d × input_chunks %d", sizes.Input, a, inC)
	}
	if outC > 0 && (sizes.Output/a)%outC != 0 {
		return rankLayout{}, sizeErrNaming([]uint64{sizes.Output}, path, "output size %d: not a multiple of buffer_alignment %d × output_chunks %d", sizes.Output, a, outC)
	}
	var lay rankLayout
	switch {
	case inC > 0 && outC > 0:
		if sizes.Input/inC != sizes.Output/outC {
			return rankLayout{}, sizeErrNaming([]uint64{sizes.Input, sizes.Output}, path, "input size %d / input_chunks %d = %d but output size %d / output_chunks %d = %d: all chunks have one size",
				sizes.Input, inC, sizes.Input/inC, sizes.Output, outC, sizes.Output/outC)
		}
		lay.S, lay.C = sizes.Input, inC
	case inC > 0:
		lay.S, lay.C = sizes.Input, inC
	case outC > 0:
		lay.S, lay.C = sizes.Output, outC
	default:
		// MSCCL++ divides by zero here. mscclgo gives such plans (the
		// synchronisation-only unit tests) zero-byte chunks, so that
		// their signals, waits, semaphores and barriers still run.
		lay.S, lay.C = 0, 1
	}
	lay.chunk = ceilDiv(lay.S, lay.C)
	if scC == 0 {
		return lay, nil
	}
	if p.ReuseResources {
		half := uint64(ReuseScratchBytes)
		if p.UseDoubleScratch {
			half /= 2
		}
		lay.slot, _ = alignUp(ceilDiv(half, scC), a)
		lay.useSlot = lay.slot < lay.chunk
		need := max(half, scC*lay.slot)
		if p.UseDoubleScratch {
			need *= 2
		}
		lay.scratch, _ = alignUp(need, a)
		return lay, nil
	}
	size, ok := mulU64(lay.chunk, scC)
	if p.Protocol == "LL" {
		size, ok = size*2, ok && size <= math.MaxUint64/2
	}
	if p.UseDoubleScratch {
		size, ok = size*2, ok && size <= math.MaxUint64/2
	}
	if ok {
		size, ok = alignUp(size, a)
	}
	if !ok {
		return rankLayout{}, sizeErrNaming([]uint64{lay.S}, path, "message size %d: scratch of %d chunks of %d bytes overflows 64 bits", lay.S, scC, lay.chunk)
	}
	lay.scratch = size
	return lay, nil
}

// ScratchSlot returns the scratch slot size of rank (scratchChunkSize,
// docs/semantics.md §1.13) for a plan with reuse_resources, 0
// otherwise. Inside pipelines, every scratch access of such a plan is
// offset by (iteration × unit_size) mod slot rather than by
// iteration × unit_size, which turns each slot into a ring.
func (inst *Instance) ScratchSlot(rank int) uint64 {
	if rank < 0 || rank >= len(inst.Plan.GPUs) {
		return 0
	}
	lay, err := layoutOf(inst.Plan, rank, inst.Sizes)
	if err != nil {
		return 0
	}
	return lay.slot
}

// Instantiate resolves p, a plan returned by Load, for one execution with
// the given per-rank buffer sizes: it validates the sizes (docs/semantics.md §1.7), sizes
// scratch (docs/semantics.md §1.11, §1.13), resolves every operand to a byte region (§1.8,
// docs/semantics.md §1.9), every channel to its paired end (§4.1) and every pipeline to an
// iteration count (docs/semantics.md §1.10). Errors are *PlanErrors naming the size and the
// rule, with ErrSize (or ErrLimit for offsets beyond 32 bits).
func Instantiate(p *plan.Plan, sizes Sizes) (*Instance, error) {
	a := p.BufferAlignment
	if a == 0 {
		return nil, sizeErr("", "buffer_alignment is 0")
	}
	if p.AllToAllV != nil {
		return nil, &plan.PlanError{Err: ErrVariableSizes, Msg: "an alltoallv plan has no single message size: its block sizes come from each call's counts and displacements (NewVarPlan, Bind; mscclgo run --counts)"}
	}
	if len(p.GPUs) == 0 {
		return nil, sizeErr("", "the plan has no ranks")
	}
	if sizes.Input%a != 0 {
		return nil, sizeErrNaming([]uint64{sizes.Input}, "", "input size %d: not a multiple of buffer_alignment %d", sizes.Input, a)
	}
	if sizes.Output%a != 0 {
		return nil, sizeErrNaming([]uint64{sizes.Output}, "", "output size %d: not a multiple of buffer_alignment %d", sizes.Output, a)
	}
	sz, which := sizes.Input, "input"
	if p.Collective == plan.AllGatherCollective {
		sz, which = sizes.Output, "output"
	}
	if sz < p.MinMessageSize {
		return nil, sizeErrNaming([]uint64{sz}, "", "message size %d (the %s size): below min_message_size %d", sz, which, p.MinMessageSize)
	}
	if sz > p.MaxMessageSize {
		return nil, sizeErrNaming([]uint64{sz}, "", "message size %d (the %s size): above max_message_size %d", sz, which, p.MaxMessageSize)
	}
	lays := make([]rankLayout, len(p.GPUs))
	inst := &Instance{Plan: p, Sizes: sizes, Ranks: make([]RankInstance, len(p.GPUs))}
	for r := range p.GPUs {
		lay, err := layoutOf(p, r, sizes)
		if err != nil {
			return nil, err
		}
		lays[r] = lay
		inst.ScratchBytes = max(inst.ScratchBytes, lay.scratch)
	}
	inst.ChunkBytes = lays[0].chunk
	res := &resolver{p: p, inst: inst, lays: lays}
	for r := range p.GPUs {
		ri, err := res.rank(r)
		if err != nil {
			return nil, err
		}
		inst.Ranks[r] = ri
	}
	return inst, nil
}

// resolver builds the RankInstances.
type resolver struct {
	p    *plan.Plan
	inst *Instance
	lays []rankLayout
	// back[ct][peer][r] lists the positions, in peer's flattened channels
	// of type ct, of those connected to r (built on first use).
	back map[plan.ChannelType][]map[int][]int
}

// backIndex returns, for every rank, where in its flattened channels of
// type ct each peer's channels are.
func (z *resolver) backIndex(ct plan.ChannelType) []map[int][]int {
	if b, ok := z.back[ct]; ok {
		return b
	}
	if z.back == nil {
		z.back = map[plan.ChannelType][]map[int][]int{}
	}
	b := make([]map[int][]int, len(z.p.GPUs))
	for q := range z.p.GPUs {
		b[q] = map[int][]int{}
		for pi, to := range flatPeers(&z.p.GPUs[q], ct) {
			b[q][to] = append(b[q][to], pi)
		}
	}
	z.back[ct] = b
	return b
}

// flatPeers returns rank r's flattened connected_to list of type ct.
func flatPeers(g *plan.GPU, ct plan.ChannelType) []int {
	var out []int
	for _, d := range g.Channels {
		if d.Type == ct {
			out = append(out, d.ConnectedTo...)
		}
	}
	return out
}

// channelEnds pairs rank r's channels of type ct (docs/semantics.md §4.1): the k-th channel
// from r to peer pairs with peer's k-th channel of that type to r.
func (z *resolver) channelEnds(r int, ct plan.ChannelType) []ChannelEnd {
	mine := flatPeers(&z.p.GPUs[r], ct)
	ends := make([]ChannelEnd, len(mine))
	seen := map[int]int{}
	for gi, peer := range mine {
		k := seen[peer]
		seen[peer]++
		ends[gi] = ChannelEnd{Peer: peer, PeerIndex: -1}
		if peer < 0 || peer >= len(z.p.GPUs) {
			continue
		}
		if back := z.backIndex(ct)[peer][r]; k < len(back) {
			ends[gi].PeerIndex = back[k]
		}
	}
	return ends
}

func (z *resolver) rank(r int) (RankInstance, error) {
	g := &z.p.GPUs[r]
	ri := RankInstance{
		Rank:           r,
		MemoryChannels: z.channelEnds(r, plan.Memory),
		PortChannels:   z.channelEnds(r, plan.Port),
		Semaphores:     append([]int64{}, g.Semaphores...),
		TBs:            make([]TBInstance, len(g.ThreadBlocks)),
	}
	for _, sw := range g.SwitchGroups() {
		ri.Switches = append(ri.Switches, plan.SwitchGroup{Buffer: sw.Buffer, Ranks: append([]int{}, sw.Ranks...)})
	}
	if ri.Switches == nil {
		ri.Switches = []plan.SwitchGroup{}
	}
	for t := range g.ThreadBlocks {
		tb := &g.ThreadBlocks[t]
		ti := TBInstance{ID: t, Ops: make([]OpInstance, 0, len(tb.Ops))}
		tbPath := plan.IndexPath(plan.IndexPath("gpus", r)+".threadblocks", t)
		for k := range tb.Ops {
			oi, err := z.op(r, tb, &tb.Ops[k], k, fmt.Sprintf("op %d", k), plan.IndexPath(tbPath+".ops", k), false)
			if err != nil {
				return RankInstance{}, err
			}
			ti.Ops = append(ti.Ops, oi)
		}
		ri.TBs[t] = ti
	}
	return ri, nil
}

func (z *resolver) op(r int, tb *plan.ThreadBlock, op *plan.Op, k int, name, path string, inPipeline bool) (OpInstance, error) {
	oi := OpInstance{
		Type:            op.Type,
		ChannelType:     op.ChannelType,
		Index:           k,
		Path:            name,
		BarrierID:       op.BarrierID,
		NumThreadBlocks: op.NumThreadBlocks,
		Source:          op.Source,
	}
	if len(op.SemaphoreIDs) > 0 {
		oi.Semaphores = append([]int{}, op.SemaphoreIDs...)
	}
	if len(op.ChannelIDs) > 0 {
		table := tb.Channels[op.ChannelType]
		oi.Channels = make([]int, len(op.ChannelIDs))
		for i, id := range op.ChannelIDs {
			if id < 0 || id >= len(table) {
				return oi, &plan.PlanError{Path: path, Err: plan.ErrOutOfRange, Msg: fmt.Sprintf("channel_ids[%d] = %d out of range: the thread block has %d %s channels", i, id, len(table), op.ChannelType)}
			}
			oi.Channels[i] = table[id]
		}
	}
	if op.Type == plan.OpPipeline {
		if inPipeline {
			return oi, &plan.PlanError{Path: path, Err: plan.ErrStructure, Msg: "pipeline inside a pipeline"}
		}
		lay := z.lays[r]
		if op.UnitSize == 0 {
			return oi, &plan.PlanError{Path: path, Err: plan.ErrOutOfRange, Msg: "unit_size = 0"}
		}
		// docs/semantics.md §1.10: ceil(num_chunks × chunk bytes / unit_size), kept in 32
		// bits (Q10: MSCCL++ truncates it to 16 on the device).
		hi, lo := bits.Mul64(op.NumChunks, lay.chunk)
		var iters uint64
		if hi >= op.UnitSize {
			iters = math.MaxUint64
		} else {
			q, rem := bits.Div64(hi, lo, op.UnitSize)
			iters = q
			if rem != 0 {
				iters++
			}
		}
		if iters > math.MaxUint32 {
			return oi, limitErr(path, "pipeline of %d chunks of %d bytes in units of %d bytes: more than %d iterations", op.NumChunks, lay.chunk, op.UnitSize, uint64(math.MaxUint32))
		}
		oi.UnitSize = op.UnitSize
		oi.Iterations = int(iters)
		oi.Body = make([]OpInstance, 0, len(op.Ops))
		for j := range op.Ops {
			b, err := z.op(r, tb, &op.Ops[j], j, fmt.Sprintf("%s.%d", name, j), plan.IndexPath(path+".ops", j), true)
			if err != nil {
				return oi, err
			}
			oi.Body = append(oi.Body, b)
		}
		return oi, nil
	}
	var err error
	if oi.Src, err = z.regions(r, tb, op, op.Src, plan.SrcPacket, plan.KeySrcBuff, path, inPipeline); err != nil {
		return oi, err
	}
	if oi.Dst, err = z.regions(r, tb, op, op.Dst, plan.DstPacket, plan.KeyDstBuff, path, inPipeline); err != nil {
		return oi, err
	}
	return oi, nil
}

func (z *resolver) regions(r int, tb *plan.ThreadBlock, op *plan.Op, opds []plan.Operand, packetAt func(plan.OpType, int) bool, key, path string, inPipeline bool) ([]Region, error) {
	if len(opds) == 0 {
		return nil, nil
	}
	out := make([]Region, len(opds))
	for i, opd := range opds {
		where := fmt.Sprintf("%s[%d]", key, i)
		reg, err := z.region(r, tb, op, opd, path, where)
		if err != nil {
			return nil, err
		}
		packet := packetAt(op.Type, i) || (op.Type == plan.OpPutPacket && op.ChannelType == plan.Port && key == plan.KeySrcBuff)
		if err := z.checkRegion(reg, packet, inPipeline, path, where); err != nil {
			return nil, err
		}
		out[i] = reg
	}
	return out, nil
}

// region resolves one operand of rank r (docs/semantics.md §1.8, §1.9).
func (z *resolver) region(r int, tb *plan.ThreadBlock, op *plan.Op, opd plan.Operand, path, where string) (Region, error) {
	g := &z.p.GPUs[r]
	lay := z.lays[r]
	reg := Region{Rank: r, Switch: -1}
	bad := func(format string, args ...any) (Region, error) {
		return Region{}, &plan.PlanError{Path: path, Err: plan.ErrOutOfRange, Msg: where + ": " + fmt.Sprintf(format, args...)}
	}
	switch opd.Kind {
	case plan.LocalOperand:
		reg.Buffer = opd.Type
	case plan.RemoteOperand:
		refs := tb.RemoteRefs[op.ChannelType]
		if opd.BufferID < 0 || opd.BufferID >= len(refs) {
			return bad("buffer_id = %d out of range: the thread block has %d remote buffers accessed through %s channels", opd.BufferID, len(refs), op.ChannelType)
		}
		gid := refs[opd.BufferID]
		if gid < 0 || gid >= len(g.RemoteBuffers) {
			return bad("remote buffer %d out of range: the rank has %d", gid, len(g.RemoteBuffers))
		}
		rb := g.RemoteBuffers[gid]
		reg.Rank, reg.Buffer = rb.Rank, rb.Type
	case plan.SwitchOperand:
		table := tb.Channels[plan.Switch]
		if opd.SwitchID < 0 || opd.SwitchID >= len(table) {
			return bad("switch_channel_id = %d out of range: the thread block has %d switch channels", opd.SwitchID, len(table))
		}
		gi := table[opd.SwitchID]
		groups := g.SwitchGroups()
		if gi < 0 || gi >= len(groups) {
			return bad("switch channel %d out of range: the rank has %d", gi, len(groups))
		}
		reg.Rank, reg.Switch, reg.Buffer = -1, gi, groups[gi].Buffer
	}
	a := z.p.BufferAlignment
	overflow := func() (Region, error) {
		return Region{}, limitErr(path, "%s: chunks %d..%d of %d bytes overflow 64-bit offsets", where, opd.Index, opd.Index+opd.Size, lay.chunk)
	}
	start, ok1 := split(lay.S, opd.Index, lay.C, a)
	end, ok2 := split(lay.S, opd.Index+opd.Size, lay.C, a)
	if !ok1 || !ok2 {
		return overflow()
	}
	off, size := start, end-start
	if reg.Buffer == plan.Scratch && lay.useSlot {
		var ok bool
		if off, ok = mulU64(opd.Index, lay.slot); !ok {
			return overflow()
		}
	}
	if op.TBG != nil && op.TBG.TBGSize > 0 {
		id, n := uint64(op.TBG.TBID), uint64(op.TBG.TBGSize)
		part, _ := split(size, id, n, a)
		next, _ := split(size, id+1, n, a)
		off += part
		size = next - part
	}
	if off > math.MaxUint32 || size > math.MaxUint32 {
		return Region{}, limitErr(path, "%s: byte offset %d, size %d: the executor stores offsets and sizes in 32 bits", where, off, size)
	}
	reg.Offset, reg.Size = off, size
	return reg, nil
}

// checkRegion checks that a region lies inside its buffer: the message
// sizes for input and output, the scratch of one launch (half of it with
// use_double_scratch_buffer) for scratch. Packet regions take twice their
// data range. Scratch regions inside pipelines of reuse_resources plans
// are not checked: the device wraps them in their slot.
func (z *resolver) checkRegion(reg Region, packet, inPipeline bool, path, where string) error {
	var have uint64
	switch reg.Buffer {
	case plan.Input:
		have = z.inst.Sizes.Input
	case plan.Output:
		have = z.inst.Sizes.Output
	case plan.Scratch:
		if inPipeline && z.p.ReuseResources {
			return nil
		}
		have = z.inst.ScratchBytes
		if z.p.UseDoubleScratch {
			have /= 2
		}
	}
	end := reg.Offset + reg.Size
	kind := ""
	if packet {
		end *= 2
		kind = " (as LL packets: twice the data range)"
	}
	if end <= have {
		return nil
	}
	owner := fmt.Sprintf("rank %d's", reg.Rank)
	if reg.Switch >= 0 {
		owner = fmt.Sprintf("switch channel %d's", reg.Switch)
	}
	start := reg.Offset
	if packet {
		start *= 2
	}
	return sizeErr(path, "%s: bytes [%d, %d)%s beyond %s %s buffer of %d bytes", where, start, end, kind, owner, reg.Buffer.Name(), have)
}
