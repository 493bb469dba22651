package plan

// loadparse.go holds the loader's parsers, one per level of the plan:
// the top-level object, each rank's tables, its thread blocks and their
// ops, each building its part of the Plan and recording every problem.

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// ---------------------------------------------------------------------------
// The plan.

func (l *loader) parsePlan(top node) {
	p := &Plan{
		NumThreadsPerBlock: MaxThreadsPerBlock,
		BufferAlignment:    16,
		MaxMessageSize:     math.MaxUint64,
	}
	l.plan = p
	p.Name, _ = top.str(KeyName, true)
	if c, ok := top.str(KeyCollective, true); ok {
		if !knownCollective(c) {
			l.errf("", ErrValue, "collective = %s: want one of %s (the collectives MSCCL++'s DSL writes)", describe(c), strings.Join(Collectives(), ", "))
		}
		p.Collective = c
	}
	if proto, ok := top.str(KeyProtocol, true); ok {
		if proto != "Simple" && proto != "LL" {
			l.errf("", ErrValue, "protocol = %s: want \"Simple\" or \"LL\" (MSCCL++ treats any other value as Simple)", describe(proto))
		}
		p.Protocol = proto
	}
	p.Inplace = top.boolean(KeyInplace, true, false)
	p.ReuseResources = top.boolean(KeyReuseResources, false, false)
	p.UseDoubleScratch = top.boolean(KeyUseDoubleScratchBuffer, false, false)
	if n, ok := top.uint(KeyNumThreadsPerBlock, false, math.MaxUint32); ok {
		switch {
		case n == 0:
			l.errf("", ErrOutOfRange, "num_threads_per_block = 0: want at least 1")
		case n > MaxThreadsPerBlock:
			l.errf("", ErrLimit, "num_threads_per_block = %d: a thread block has at most %d threads", n, MaxThreadsPerBlock)
		default:
			p.NumThreadsPerBlock = int(n)
		}
	}
	if a, ok := top.uint(KeyBufferAlignment, false, math.MaxUint32); ok {
		if a == 0 {
			l.errf("", ErrOutOfRange, "buffer_alignment = 0: want at least 1")
		} else {
			p.BufferAlignment = a
		}
	}
	minOK, maxOK := true, true
	if v, ok := top.uint(KeyMinMessageSize, false, math.MaxUint64); ok {
		p.MinMessageSize = v
	} else {
		minOK = !top.has(KeyMinMessageSize)
	}
	if v, ok := top.uint(KeyMaxMessageSize, false, math.MaxUint64); ok {
		p.MaxMessageSize = v
	} else {
		maxOK = !top.has(KeyMaxMessageSize)
	}
	variable := l.parseAllToAllV(top)
	if minOK && maxOK && p.MinMessageSize > p.MaxMessageSize && !variable {
		l.errf("", ErrOutOfRange, "min_message_size %d > max_message_size %d: no message size is valid", p.MinMessageSize, p.MaxMessageSize)
	}

	gpus, ok := top.array(KeyGPUs, true)
	if !ok {
		return
	}
	if len(gpus) == 0 {
		l.errf("", ErrStructure, "gpus: empty: a plan has at least one rank")
		return
	}
	if len(gpus) > MaxRanks {
		l.errf("", ErrLimit, "gpus: %d ranks: a plan has at most %d", len(gpus), MaxRanks)
		return
	}
	p.GPUs = make([]GPU, len(gpus))
	l.gpus = make([]*gpuState, len(gpus))
	for r, v := range gpus {
		l.gpus[r] = l.parseGPUTables(r, v)
	}
	for r := range gpus {
		l.parseThreadBlocks(r)
	}
	l.checkBarriers()
	l.checkPairing()
	l.checkSwitchGroups()
	l.checkAllToAllVChunks()
}

// parseGPUTables reads everything of gpus[r] but its thread blocks.
func (l *loader) parseGPUTables(r int, v any) *gpuState {
	g := &gpuState{
		path:     IndexPath(KeyGPUs, r),
		peers:    map[ChannelType][]int{Memory: nil, Port: nil},
		used:     map[ChannelType]map[int]string{Memory: {}, Port: {}, Switch: {}},
		barriers: map[int]*barrierUse{},
	}
	gpu := &l.plan.GPUs[r]
	gpu.ID = r
	o, ok := l.object(v, g.path)
	if !ok {
		return g
	}
	g.obj, g.objOK = o, true
	if id, ok := o.int(KeyID, true); ok && id != r {
		l.errf(g.path, ErrStructure, "id = %d: gpus must be listed in rank order (gpus[r].id == r)", id)
	}
	g.chunksOK = true
	for _, c := range []struct {
		key string
		dst *int
	}{{KeyInputChunks, &gpu.InputChunks}, {KeyOutputChunks, &gpu.OutputChunks}, {KeyScratchChunks, &gpu.ScratchChunks}} {
		u, ok := o.uint(c.key, true, math.MaxUint32)
		if !ok {
			g.chunksOK = false
			continue
		}
		*c.dst = int(u)
	}
	o.array(KeyThreadBlocks, true) // reported here, walked by parseThreadBlocks
	g.channelsOK = l.parseChannelDecls(g, gpu, o)
	g.remoteOK = l.parseRemoteBuffers(g, gpu, o)
	g.semOK = l.parseSemaphores(g, gpu, o)
	return g
}

func (l *loader) parseChannelDecls(g *gpuState, gpu *GPU, o node) bool {
	arr, ok := o.array(KeyChannels, true)
	if !ok {
		return false
	}
	nRanks := len(l.plan.GPUs)
	r := gpu.ID
	allOK := true
	gpu.Channels = make([]ChannelDecl, 0, len(arr))
	for i, v := range arr {
		path := IndexPath(joinPath(g.path, KeyChannels), i)
		e, ok := l.object(v, path)
		if !ok {
			allOK = false
			continue
		}
		ct, ok := e.channelType(KeyChannelType, true)
		if !ok {
			allOK = false
			continue
		}
		d := ChannelDecl{Type: ct}
		switch ct {
		case Memory, Port:
			peers, ok := e.ints(KeyConnectedTo, true)
			if !ok {
				allOK = false
				if peers == nil {
					continue
				}
			}
			for k, p := range peers {
				if p >= nRanks {
					l.errf(path, ErrOutOfRange, "connected_to[%d] = %d out of range: the plan has %d ranks", k, p, nRanks)
					allOK = false
				}
			}
			d.ConnectedTo = peers
			g.peers[ct] = append(g.peers[ct], peers...)
		case Switch:
			bt, ok := e.bufferType(KeyBufferType, true)
			if !ok {
				allOK = false
			}
			d.Buffer = bt
			groups, ok := e.array(KeyRankGroups, true)
			if !ok {
				allOK = false
				continue
			}
			for k, gv := range groups {
				gpath := IndexPath(joinPath(path, KeyRankGroups), k)
				gobj, ok := l.object(gv, gpath)
				if !ok {
					allOK = false
					d.RankGroups = append(d.RankGroups, nil)
					continue
				}
				size, sizeOK := gobj.int(KeySize, true)
				ranks, ranksOK := gobj.ints(KeyRanks, true)
				if !ranksOK {
					allOK = false
				}
				if sizeOK && ranksOK && size != len(ranks) {
					l.errf(gpath, ErrStructure, "size = %d but ranks lists %d ranks", size, len(ranks))
				}
				seen := map[int]bool{}
				self := false
				for j, m := range ranks {
					switch {
					case m < 0:
					case m >= nRanks:
						l.errf(gpath, ErrOutOfRange, "ranks[%d] = %d out of range: the plan has %d ranks", j, m, nRanks)
						allOK = false
					case seen[m]:
						l.errf(gpath, ErrStructure, "ranks[%d] = %d: rank listed twice", j, m)
						allOK = false
					}
					seen[m] = true
					self = self || m == r
				}
				if ranksOK && !self {
					l.errf(gpath, ErrStructure, "ranks %v do not include rank %d, which declares the switch channel", ranks, r)
					allOK = false
				}
				d.RankGroups = append(d.RankGroups, ranks)
			}
			g.nSwitch += len(d.RankGroups)
		}
		gpu.Channels = append(gpu.Channels, d)
	}
	return allOK
}

func (l *loader) parseRemoteBuffers(g *gpuState, gpu *GPU, o node) bool {
	arr, ok := o.array(KeyRemoteBuffers, true)
	if !ok {
		return false
	}
	nRanks := len(l.plan.GPUs)
	allOK := true
	gpu.RemoteBuffers = make([]RemoteBuffer, len(arr))
	for i, v := range arr {
		path := IndexPath(joinPath(g.path, KeyRemoteBuffers), i)
		e, ok := l.object(v, path)
		if !ok {
			allOK = false
			continue
		}
		rb := &gpu.RemoteBuffers[i]
		if rank, ok := e.int(KeyRank, true); ok {
			if rank >= nRanks {
				l.errf(path, ErrOutOfRange, "rank = %d out of range: the plan has %d ranks", rank, nRanks)
				allOK = false
			}
			rb.Rank = rank
		} else {
			allOK = false
		}
		bt, ok := e.bufferType(KeyType, true)
		allOK = allOK && ok
		rb.Type = bt
		access, ok := e.array(KeyAccessChannelTypes, true)
		if !ok {
			allOK = false
			continue
		}
		rb.Access = make([]ChannelType, 0, len(access))
		for k, av := range access {
			s, isStr := av.(string)
			ct, known := ParseChannelType(s)
			if !isStr || !known || (ct != Memory && ct != Port) {
				l.errf(path, ErrValue, "access_channel_types[%d] = %s: want \"memory\" or \"port\"", k, describe(av))
				allOK = false
				continue
			}
			rb.Access = append(rb.Access, ct)
		}
	}
	return allOK
}

func (l *loader) parseSemaphores(g *gpuState, gpu *GPU, o node) bool {
	if !o.has(KeySemaphores) {
		gpu.Semaphores = []int64{}
		return true
	}
	arr, ok := o.array(KeySemaphores, false)
	if !ok {
		return false
	}
	allOK := true
	gpu.Semaphores = make([]int64, len(arr))
	for i, v := range arr {
		path := IndexPath(joinPath(g.path, KeySemaphores), i)
		e, ok := l.object(v, path)
		if !ok {
			allOK = false
			continue
		}
		iv, ok := e.get(KeyInitValue, true)
		if !ok {
			allOK = false
			continue
		}
		num, isNum := iv.(json.Number)
		n, err := strconv.ParseInt(num.String(), 10, 64)
		if !isNum || err != nil && !errors.Is(err, strconv.ErrRange) {
			l.errf(path, ErrType, "init_value: got %s, want an integer", describe(iv))
			allOK = false
			continue
		}
		if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
			l.errf(path, ErrLimit, "init_value = %s: a device semaphore holds a 32-bit int", num)
			allOK = false
			continue
		}
		gpu.Semaphores[i] = n
	}
	return allOK
}

// ---------------------------------------------------------------------------
// Thread blocks and ops.

// tbState is what the op checks need to know about their thread block.
type tbState struct {
	g      *gpuState
	gpu    *GPU
	tb     *ThreadBlock
	path   string
	chOK   map[ChannelType]bool // the TB channel table of the type is reliable
	refsOK map[ChannelType]bool
}

// maxRemoteBuffersPerTB is the size of each remote-buffer table of the
// MSCCL++ thread block record.
const maxRemoteBuffersPerTB = 16

func (l *loader) parseThreadBlocks(r int) {
	g := l.gpus[r]
	if !g.objOK {
		return
	}
	arr, ok := g.obj.m[KeyThreadBlocks].([]any)
	if !ok {
		return
	}
	if len(arr) > MaxThreadBlocks {
		l.errf(joinPath(g.path, KeyThreadBlocks), ErrLimit, "%d thread blocks: a rank has at most %d (more cannot all be resident on a GPU)", len(arr), MaxThreadBlocks)
		return
	}
	gpu := &l.plan.GPUs[r]
	gpu.ThreadBlocks = make([]ThreadBlock, len(arr))
	for i, v := range arr {
		l.parseThreadBlock(g, gpu, i, v)
	}
}

func (l *loader) parseThreadBlock(g *gpuState, gpu *GPU, i int, v any) {
	tb := &gpu.ThreadBlocks[i]
	tb.ID = i
	tb.Channels = map[ChannelType][]int{}
	tb.RemoteRefs = map[ChannelType][]int{}
	path := IndexPath(joinPath(g.path, KeyThreadBlocks), i)
	o, ok := l.object(v, path)
	if !ok {
		return
	}
	if id, ok := o.int(KeyID, true); ok && id != i {
		l.errf(path, ErrStructure, "id = %d: thread block ids must be 0..n-1 in array order (this is position %d)", id, i)
	}
	t := &tbState{g: g, gpu: gpu, tb: tb, path: path,
		chOK:   map[ChannelType]bool{Memory: g.channelsOK, Port: g.channelsOK, Switch: g.channelsOK},
		refsOK: map[ChannelType]bool{Memory: g.remoteOK, Port: g.remoteOK},
	}
	l.parseTBChannels(t, o)
	l.parseTBRemoteRefs(t, o)

	ops, ok := o.array(KeyOps, true)
	if !ok {
		return
	}
	flat := 0
	tb.Ops = make([]Op, 0, len(ops))
	for k, ov := range ops {
		op, n := l.parseOp(t, ov, IndexPath(joinPath(path, KeyOps), k), false)
		tb.Ops = append(tb.Ops, op)
		flat += n
	}
	if flat > MaxOpsPerTB {
		l.errf(path, ErrLimit, "ops: %d ops, counting pipeline bodies: a thread block holds at most %d", flat, MaxOpsPerTB)
	}
}

func (l *loader) parseTBChannels(t *tbState, o node) {
	arr, ok := o.array(KeyChannels, true)
	if !ok {
		t.chOK = map[ChannelType]bool{}
		return
	}
	for k, v := range arr {
		path := IndexPath(joinPath(t.path, KeyChannels), k)
		e, ok := l.object(v, path)
		if !ok {
			t.chOK = map[ChannelType]bool{}
			continue
		}
		ct, ctOK := e.channelType(KeyChannelType, true)
		ids, idsOK := e.ints(KeyChannelIDs, true)
		if !ctOK {
			t.chOK = map[ChannelType]bool{}
			continue
		}
		if ct == NoChannel {
			continue
		}
		if !idsOK {
			t.chOK[ct] = false
		}
		have := t.g.nSwitch
		if ct != Switch {
			have = len(t.g.peers[ct])
		}
		for j, id := range ids {
			if t.g.channelsOK && id >= have {
				l.errf(path, ErrOutOfRange, "channel_ids[%d] = %d out of range: the rank has %d %s channels", j, id, have, ct)
				t.chOK[ct] = false
			}
		}
		if _, seen := t.tb.Channels[ct]; !seen {
			t.tb.ChannelOrder = append(t.tb.ChannelOrder, ct)
		}
		t.tb.Channels[ct] = append(t.tb.Channels[ct], ids...)
	}
	for _, ct := range []ChannelType{Memory, Port, Switch} {
		if n := len(t.tb.Channels[ct]); n > MaxChannelsPerTB {
			l.errf(t.path, ErrLimit, "channels: %d %s channels: a thread block holds at most %d of each type", n, ct, MaxChannelsPerTB)
		}
	}
}

func (l *loader) parseTBRemoteRefs(t *tbState, o node) {
	if !o.has(KeyRemoteBufferRefs) {
		return
	}
	arr, ok := o.array(KeyRemoteBufferRefs, false)
	if !ok {
		t.refsOK = map[ChannelType]bool{}
		return
	}
	for k, v := range arr {
		path := IndexPath(joinPath(t.path, KeyRemoteBufferRefs), k)
		e, ok := l.object(v, path)
		if !ok {
			t.refsOK = map[ChannelType]bool{}
			continue
		}
		ct, ctOK := e.channelType(KeyAccessChannelType, true)
		ids, idsOK := e.ints(KeyRemoteBufferIDs, true)
		if !ctOK {
			t.refsOK = map[ChannelType]bool{}
			continue
		}
		if ct != Memory && ct != Port {
			continue // ignored by MSCCL++
		}
		if !idsOK {
			t.refsOK[ct] = false
		}
		rbs := t.gpu.RemoteBuffers
		for j, id := range ids {
			if !t.g.remoteOK || id < 0 {
				continue
			}
			if id >= len(rbs) {
				l.errf(path, ErrOutOfRange, "remote_buffer_ids[%d] = %d out of range: the rank has %d remote buffers", j, id, len(rbs))
				t.refsOK[ct] = false
				continue
			}
			if !hasAccess(rbs[id], ct) {
				l.errf(path, ErrOutOfRange, "remote_buffer_ids[%d] = %d: remote buffer %d is not accessible through %s channels (its access_channel_types are %v)", j, id, id, ct, rbs[id].Access)
				t.refsOK[ct] = false
			}
		}
		if _, seen := t.tb.RemoteRefs[ct]; !seen {
			t.tb.RemoteRefOrder = append(t.tb.RemoteRefOrder, ct)
		}
		t.tb.RemoteRefs[ct] = append(t.tb.RemoteRefs[ct], ids...)
	}
	for _, ct := range []ChannelType{Memory, Port} {
		if n := len(t.tb.RemoteRefs[ct]); n > maxRemoteBuffersPerTB {
			l.errf(t.path, ErrLimit, "remote_buffer_refs: %d buffers accessed through %s channels: a thread block holds at most %d of each type", n, ct, maxRemoteBuffersPerTB)
		}
	}
}

func hasAccess(rb RemoteBuffer, ct ChannelType) bool {
	for _, a := range rb.Access {
		if a == ct {
			return true
		}
	}
	return false
}

// parseOp reads one op (and a pipeline's body) and returns it with the
// number of records it takes in the thread block (1 + body length).
func (l *loader) parseOp(t *tbState, v any, path string, nested bool) (Op, int) {
	o, ok := l.object(v, path)
	if !ok {
		return Op{}, 1
	}
	name, ok := o.str(KeyName, true)
	if !ok {
		return Op{}, 1
	}
	typ, ok := ParseOpType(name)
	if !ok && l.compiled && name == GroupLoadReduceName {
		return l.parseGroupLoadReduce(o), 1
	}
	if !ok {
		hint := ""
		switch name {
		case GroupLoadReduceName:
			hint = " (glre is DSL-internal: MSCCL++ loads only its fusion with gstore, glres)"
		case "start":
			hint = " (start is never emitted: MSCCL++ rejects it)"
		}
		l.errf(path, ErrUnknownOp, "name = %s: invalid operation type%s", describe(name), hint)
		return Op{}, 1
	}
	op := Op{Type: typ}
	if typ == OpPipeline {
		if nested {
			l.errf(path, ErrStructure, "pipeline inside a pipeline: MSCCL++ does not support nested pipelines")
			return op, 1
		}
		return l.parsePipeline(t, o, op)
	}
	l.parseOpFields(t, o, &op)
	return op, 1
}

func (l *loader) parsePipeline(t *tbState, o node, op Op) (Op, int) {
	if ic, ok := o.child(KeyIterContext, true); ok {
		if u, ok := ic.uint(KeyUnitSize, true, math.MaxUint32); ok {
			if u == 0 {
				l.errf(ic.path, ErrOutOfRange, "unit_size = 0: want at least 1 byte")
			}
			op.UnitSize = u
		}
		if n, ok := ic.uint(KeyNumChunks, true, math.MaxUint32); ok {
			op.NumChunks = n
		}
	}
	for _, key := range []string{KeySrcBuff, KeyDstBuff, KeyChannelIDs, KeySemaphoreIDs} {
		if a, ok := o.m[key].([]any); ok && len(a) > 0 {
			l.errf(o.path, ErrOperand, "%s: a pipeline op takes no %s (its body's ops do)", key, key)
		}
	}
	body, ok := o.array(KeyOps, true)
	if !ok {
		return op, 1
	}
	op.Ops = make([]Op, 0, len(body))
	for k, bv := range body {
		b, _ := l.parseOp(t, bv, IndexPath(joinPath(o.path, KeyOps), k), true)
		op.Ops = append(op.Ops, b)
	}
	return op, 1 + len(body)
}

// parseOpFields reads the optional fields of a non-pipeline op, then
// checks the op against its spec (validate.go).
func (l *loader) parseOpFields(t *tbState, o node, op *Op) {
	ctGiven := false
	if o.has(KeyChannelType) {
		if ct, ok := o.channelType(KeyChannelType, false); ok {
			op.ChannelType = ct
			ctGiven = true
		}
	}
	chIDsOK := true
	if o.has(KeyChannelIDs) {
		op.ChannelIDs, chIDsOK = o.ints(KeyChannelIDs, false)
		if op.ChannelIDs == nil {
			op.ChannelIDs = []int{}
		}
	}
	if tc, ok := o.child(KeyTBGInfo, false); ok {
		id, idOK := tc.int(KeyTBID, true)
		size, sizeOK := tc.int(KeyTBGSize, true)
		if idOK && sizeOK {
			switch {
			case size == 0:
				l.errf(tc.path, ErrOutOfRange, "tbg_size = 0: want at least 1")
			case id >= size:
				l.errf(tc.path, ErrOutOfRange, "tb_id = %d out of range: the group has %d thread blocks", id, size)
			default:
				op.TBG = &TBGInfo{TBID: id, TBGSize: size}
			}
		}
	}
	if o.has(KeyBarrierID) {
		op.BarrierID, _ = o.int(KeyBarrierID, false)
	}
	if o.has(KeyNumThreadBlocks) {
		op.NumThreadBlocks, _ = o.int(KeyNumThreadBlocks, false)
	}
	semOK := true
	if o.has(KeySemaphoreIDs) {
		op.SemaphoreIDs, semOK = o.ints(KeySemaphoreIDs, false)
	}
	if o.has(KeyReduceOp) {
		op.ReduceOp, _ = o.str(KeyReduceOp, false)
	}
	srcOK, dstOK := true, true
	if o.has(KeySrcBuff) {
		op.Src, srcOK = l.parseOperands(o, KeySrcBuff)
	}
	if o.has(KeyDstBuff) {
		op.Dst, dstOK = l.parseOperands(o, KeyDstBuff)
	}
	l.checkOp(t, o, op, opFieldState{
		ctGiven: ctGiven, chIDsOK: chIDsOK, semOK: semOK, srcOK: srcOK, dstOK: dstOK,
	})
}

// parseOperands reads src_buff or dst_buff; ok is false when any operand
// is invalid (such operands are left out).
func (l *loader) parseOperands(o node, key string) ([]Operand, bool) {
	arr, ok := o.array(key, false)
	if !ok {
		return nil, false
	}
	out := make([]Operand, 0, len(arr))
	allOK := true
	for i, v := range arr {
		path := IndexPath(joinPath(o.path, key), i)
		e, ok := l.object(v, path)
		if !ok {
			allOK = false
			continue
		}
		var opd Operand
		kinds := 0
		valid := true
		if e.has(KeyType) {
			kinds++
			opd.Kind = LocalOperand
			bt, ok := e.bufferType(KeyType, false)
			opd.Type = bt
			valid = valid && ok
		}
		if e.has(KeyBufferID) {
			kinds++
			opd.Kind = RemoteOperand
			id, ok := e.int(KeyBufferID, false)
			opd.BufferID = id
			valid = valid && ok
		}
		if e.has(KeySwitchChannelID) {
			kinds++
			opd.Kind = SwitchOperand
			id, ok := e.int(KeySwitchChannelID, false)
			opd.SwitchID = id
			valid = valid && ok
		}
		switch kinds {
		case 0:
			l.errf(path, ErrOperand, "operand has none of type, buffer_id and switch_channel_id")
			valid = false
		case 1:
		default:
			l.errf(path, ErrOperand, "operand has more than one of type, buffer_id and switch_channel_id")
			valid = false
		}
		if e.has(KeyRank) {
			opd.Rank, opd.HasRank = e.int(KeyRank, false)
			valid = valid && opd.HasRank
		}
		idx, ok1 := e.uint(KeyIndex, true, math.MaxUint32)
		size, ok2 := e.uint(KeySize, true, math.MaxUint32)
		opd.Index, opd.Size = idx, size
		if !valid || !ok1 || !ok2 {
			allOK = false
			continue
		}
		out = append(out, opd)
	}
	return out, allOK
}

// parseGroupLoadReduce reads a glre op for ReadCompiled, unchecked: its
// switch source (buffer_type, buffer_offset, size) becomes Src[0] and its
// dst_chunk Dst[0].
func (l *loader) parseGroupLoadReduce(o node) Op {
	op := Op{Type: OpGroupLoadReduce, ChannelType: Switch}
	src := Operand{Kind: SwitchOperand}
	src.Type, _ = o.bufferType(KeyBufferType, true)
	src.Index, _ = o.uint(KeyBufferOffset, true, math.MaxUint32)
	src.Size, _ = o.uint(KeySize, true, math.MaxUint32)
	op.Src = []Operand{src}
	if c, ok := o.child(KeyDstChunk, true); ok {
		dst := Operand{Kind: LocalOperand}
		dst.Rank, dst.HasRank = c.int(KeyRank, true)
		dst.Type, _ = c.bufferType(KeyType, true)
		dst.Index, _ = c.uint(KeyIndex, true, math.MaxUint32)
		dst.Size, _ = c.uint(KeySize, true, math.MaxUint32)
		op.Dst = []Operand{dst}
	}
	op.ChannelIDs, _ = o.ints(KeyChannelIDs, true)
	if ct, ok := o.channelType(KeyChannelType, true); ok {
		op.ChannelType = ct
	}
	op.ReduceOp, _ = o.str(KeyReduceOp, true)
	return op
}
