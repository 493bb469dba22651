package plan

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds the semantic checks of Load: what each op needs
// (the Ops table of ops.go, after docs/semantics.md §2.5 and the operand roles of
// docs/semantics.md §2.11), and the checks across thread blocks and ranks (barriers,
// channel pairing docs/semantics.md §4.1, switch groups §1.5).

// opFieldState says which optional fields of an op parsed cleanly.
type opFieldState struct {
	ctGiven, chIDsOK, semOK, srcOK, dstOK bool
}

func typeList(ts []ChannelType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, " or ")
}

// checkOp checks a parsed non-pipeline op against its spec.
func (l *loader) checkOp(t *tbState, o node, op *Op, fs opFieldState) {
	path := o.path
	spec := &Ops[op.Type]
	name := op.Type.String()

	// Channel type and channel ids.
	if spec.channel != nil {
		switch {
		case !o.has(KeyChannelType):
			l.errf(path, ErrMissing, "missing required key \"channel_type\" (%s works on %s channels)", name, typeList(spec.channel))
		case fs.ctGiven && !slices.Contains(spec.channel, op.ChannelType):
			l.errf(path, ErrOperand, "channel_type = %q: %s works on %s channels", op.ChannelType, name, typeList(spec.channel))
		}
	}
	if spec.Family == FamSwitch && fs.ctGiven && op.ChannelType != Switch {
		l.errf(path, ErrOperand, "channel_type = %q: %s works on switch channels", op.ChannelType, name)
	}
	ctKnown := !o.has(KeyChannelType) || fs.ctGiven
	if o.has(KeyChannelIDs) {
		if ctKnown {
			l.checkChannelIDs(t, path, op)
		}
	} else if spec.needIDs {
		l.errf(path, ErrMissing, "missing required key \"channel_ids\" (%s needs the channels to act on)", name)
	}
	if spec.needIDs && o.has(KeyChannelIDs) && fs.chIDsOK && len(op.ChannelIDs) == 0 {
		l.errf(path, ErrOperand, "channel_ids: empty: %s needs at least one channel", name)
	}

	// Semaphores.
	if spec.semaphores && !o.has(KeySemaphoreIDs) {
		l.errf(path, ErrMissing, "missing required key \"semaphore_ids\"")
	}
	if o.has(KeySemaphoreIDs) && fs.semOK {
		if spec.semaphores && len(op.SemaphoreIDs) == 0 {
			l.errf(path, ErrOperand, "semaphore_ids: empty: %s needs at least one semaphore", name)
		}
		if n := len(op.SemaphoreIDs); n > MaxSemaphoreIDsPerOp {
			l.errf(path, ErrLimit, "semaphore_ids: %d ids: an op holds at most %d", n, MaxSemaphoreIDsPerOp)
		}
		if t.g.semOK {
			for i, id := range op.SemaphoreIDs {
				if id >= len(t.gpu.Semaphores) {
					l.errf(path, ErrOutOfRange, "semaphore_ids[%d] = %d out of range: the rank has %d semaphores", i, id, len(t.gpu.Semaphores))
				}
			}
		}
	}

	// Barrier.
	if op.Type == OpBarrier {
		l.checkBarrier(t, o, op)
	}

	// Operands.
	if !spec.data {
		for _, key := range []string{KeySrcBuff, KeyDstBuff} {
			if a, ok := o.m[key].([]any); ok && len(a) > 0 {
				l.errf(path, ErrOperand, "%s: %s takes no operands", key, name)
			}
		}
		return
	}
	l.checkOperands(t, o, op, spec, fs)
}

func (l *loader) checkChannelIDs(t *tbState, path string, op *Op) {
	if n := len(op.ChannelIDs); n > MaxChannelIDsPerOp {
		l.errf(path, ErrLimit, "channel_ids: %d ids: an op holds at most %d", n, MaxChannelIDsPerOp)
	}
	ct := op.ChannelType
	if ct == NoChannel {
		l.errf(path, ErrOperand, "channel_ids given without a memory, port or switch channel_type")
		return
	}
	if !t.chOK[ct] {
		return
	}
	table := t.tb.Channels[ct]
	for i, id := range op.ChannelIDs {
		if id < 0 {
			continue
		}
		if id >= len(table) {
			l.errf(path, ErrOutOfRange, "channel_ids[%d] = %d out of range: the thread block has %d %s channels", i, id, len(table), ct)
			continue
		}
		if used := t.g.used[ct]; used != nil && synchronizes(op) {
			if _, seen := used[table[id]]; !seen {
				used[table[id]] = path
			}
		}
	}
}

// synchronizes reports whether op signals or waits through its channels,
// and so relies on their pairing. Data transfers and flushes use the
// connection, which MSCCL++ creates on both sides even for an unpaired
// channel (docs/semantics.md §4.1 filler connections).
func synchronizes(op *Op) bool {
	switch op.Type {
	case OpSignal, OpRelaxedSignal, OpWait, OpRelaxedWait:
		return true
	case OpPutWithSignal, OpPutWithSignalAndFlush:
		return op.ChannelType == Port
	}
	return false
}

func (l *loader) checkBarrier(t *tbState, o node, op *Op) {
	path := o.path
	idOK := o.has(KeyBarrierID)
	nOK := o.has(KeyNumThreadBlocks)
	if !idOK {
		l.errf(path, ErrMissing, "missing required key \"barrier_id\"")
	}
	if !nOK {
		l.errf(path, ErrMissing, "missing required key \"num_threadblocks\"")
	}
	if !idOK || !nOK {
		return
	}
	bad := false
	if op.BarrierID > MaxBarrierID {
		l.errf(path, ErrLimit, "barrier_id = %d: the executor has barriers 0..%d", op.BarrierID, MaxBarrierID)
		bad = true
	}
	nTB := len(t.gpu.ThreadBlocks)
	switch {
	case op.NumThreadBlocks == 0:
		l.errf(path, ErrOutOfRange, "num_threadblocks = 0: want at least 1")
		bad = true
	case op.NumThreadBlocks > nTB:
		l.errf(path, ErrOutOfRange, "num_threadblocks = %d out of range: the rank has %d thread blocks", op.NumThreadBlocks, nTB)
		bad = true
	}
	if bad {
		return
	}
	u := t.g.barriers[op.BarrierID]
	if u == nil {
		u = &barrierUse{counts: map[int]string{}, first: path}
		t.g.barriers[op.BarrierID] = u
	}
	if !slices.Contains(u.tbs, t.tb.ID) {
		u.tbs = append(u.tbs, t.tb.ID)
	}
	if _, ok := u.counts[op.NumThreadBlocks]; !ok {
		u.counts[op.NumThreadBlocks] = path
	}
}

// checkBarriers checks that every barrier id is used by exactly as many
// thread blocks as its num_threadblocks says.
func (l *loader) checkBarriers() {
	for _, g := range l.gpus {
		ids := make([]int, 0, len(g.barriers))
		for id := range g.barriers {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			u := g.barriers[id]
			if len(u.counts) > 1 {
				ns := make([]int, 0, len(u.counts))
				for n := range u.counts {
					ns = append(ns, n)
				}
				slices.Sort(ns)
				l.errf(g.path, ErrStructure, "barrier_id %d: thread blocks disagree on num_threadblocks (%v)", id, ns)
				continue
			}
			for n := range u.counts {
				if n != len(u.tbs) {
					l.errf(g.path, ErrStructure, "barrier_id %d: num_threadblocks = %d but %d thread block(s) %v use it", id, n, len(u.tbs), u.tbs)
				}
			}
		}
	}
}

// operandBuffer is the buffer an operand lands in, for bounds checks.
type operandBuffer struct {
	ranks []int // owners (switch: every member)
	typ   BufferType
	ok    bool
}

func (l *loader) checkOperands(t *tbState, o node, op *Op, spec *OpInfo, fs opFieldState) {
	path := o.path
	name := op.Type.String()
	// An invalid channel_type was reported already.
	remoteReported := o.has(KeyChannelType) && !fs.ctGiven
	var sizeRef uint64
	var sizeRefDesc string // empty until the first operand
	for _, s := range []struct {
		key  string
		opds []Operand
		side side
		ok   bool
	}{{KeySrcBuff, op.Src, spec.src, fs.srcOK}, {KeyDstBuff, op.Dst, spec.dst, fs.dstOK}} {
		if !o.has(s.key) {
			if s.side.min > 0 {
				l.errf(path, ErrMissing, "missing required key %q", s.key)
			}
			continue
		}
		if !s.ok {
			continue
		}
		n := len(s.opds)
		if n > MaxOperandsPerSide {
			l.errf(path, ErrLimit, "%s: %d operands: an op holds at most %d per side", s.key, n, MaxOperandsPerSide)
		}
		switch {
		case n < s.side.min:
			l.errf(path, ErrOperand, "%s: %d operand(s): %s takes at least %d", s.key, n, name, s.side.min)
		case n > s.side.max() && s.side.max() < MaxOperandsPerSide:
			l.errf(path, ErrOperand, "%s: %d operands: %s takes %d", s.key, n, name, s.side.max())
		}
		for i, opd := range s.opds {
			r := s.side.at(i)
			where := fmt.Sprintf("%s[%d]", s.key, i)
			if r.kind == rNone {
				break
			}
			if !l.checkRole(t, path, where, name, op, opd, r, spec, &remoteReported) {
				continue
			}
			switch {
			case sizeRefDesc == "":
				sizeRef, sizeRefDesc = opd.Size, where
			case opd.Size != sizeRef:
				l.errf(path, ErrOperand, "%s has size %d but %s has size %d: an op's operands all have the same size", where, opd.Size, sizeRefDesc, sizeRef)
			}
		}
	}
	if spec.pairwise && fs.srcOK && fs.dstOK && len(op.Src) != len(op.Dst) && len(op.Src) > 0 && len(op.Dst) > 0 {
		l.errf(path, ErrOperand, "%d src_buff and %d dst_buff operands: %s takes one source per destination", len(op.Src), len(op.Dst), name)
	}
	if spec.portIDsPerDst && op.ChannelType == Port && fs.dstOK && fs.chIDsOK && len(op.ChannelIDs) != len(op.Dst) {
		l.errf(path, ErrOperand, "channel_ids: %d ids for %d destinations: %s over port channels takes one channel per destination", len(op.ChannelIDs), len(op.Dst), name)
	}
	// Quirk Q2: MSCCL++'s get swaps the two offsets.
	if op.Type == OpGet && fs.srcOK && fs.dstOK && len(op.Src) == len(op.Dst) {
		for i := range op.Src {
			if op.Src[i].Index != op.Dst[i].Index {
				l.errf(path, ErrQuirk, "src_buff[%d].index %d != dst_buff[%d].index %d: MSCCL++ reads the remote side at the destination offset and writes the local side at the source offset (quirk Q2); mscclgo does what the plan says", i, op.Src[i].Index, i, op.Dst[i].Index)
				break
			}
		}
	}
}

// checkRole checks that opd fits role r and lies inside its buffer; it
// returns false when the operand is so wrong that further checks are
// pointless.
func (l *loader) checkRole(t *tbState, path, where, name string, op *Op, opd Operand, r role, spec *OpInfo, remoteReported *bool) bool {
	want := map[roleKind]string{
		rLocal:   "a local operand (type)",
		rScratch: "a local scratch operand (type \"s\")",
		rRemote:  "a remote operand (buffer_id)",
		rSwitch:  "a switch operand (switch_channel_id)",
	}[r.kind]
	got := [...]string{"a local operand", "a remote operand", "a switch operand"}[opd.Kind]
	var buf operandBuffer
	switch r.kind {
	case rLocal, rScratch:
		if opd.Kind != LocalOperand {
			l.errf(path, ErrOperand, "%s: %s takes %s here, got %s", where, name, want, got)
			return false
		}
		if r.kind == rScratch && opd.Type != Scratch {
			l.errf(path, ErrOperand, "%s: type %q: %s reads LL packets from local scratch here, want type \"s\"", where, opd.Type, name)
			return false
		}
		buf = operandBuffer{ranks: []int{t.gpu.ID}, typ: opd.Type, ok: t.g.chunksOK}
	case rRemote:
		if opd.Kind != RemoteOperand {
			l.errf(path, ErrOperand, "%s: %s takes %s here, got %s", where, name, want, got)
			return false
		}
		ct := op.ChannelType
		if !slices.Contains(spec.remoteVia, ct) {
			if !*remoteReported {
				l.errf(path, ErrOperand, "%s is remote: %s reaches remote buffers through %s channels, but channel_type is %q", where, name, typeList(spec.remoteVia), ct)
				*remoteReported = true
			}
			return false
		}
		if !t.refsOK[ct] {
			return false
		}
		refs := t.tb.RemoteRefs[ct]
		if opd.BufferID >= len(refs) {
			l.errf(path, ErrOutOfRange, "%s: buffer_id = %d out of range: the thread block has %d remote buffers accessed through %s channels", where, opd.BufferID, len(refs), ct)
			return false
		}
		gid := refs[opd.BufferID]
		if gid < 0 || gid >= len(t.gpu.RemoteBuffers) {
			return false
		}
		rb := t.gpu.RemoteBuffers[gid]
		if r.packet && rb.Type != Scratch {
			l.errf(path, ErrOperand, "%s: remote buffer %d is rank %d's %q buffer: %s writes LL packets to remote scratch only", where, gid, rb.Rank, rb.Type, name)
			return false
		}
		if l.plan.UseDoubleScratch && !r.packet && rb.Type == Scratch {
			l.errf(path, ErrQuirk, "%s: %s accesses rank %d's scratch without packets in a double-scratch plan: MSCCL++ does not add the scratch half offset here (quirk Q8)", where, name, rb.Rank)
		}
		owner := rb.Rank
		if owner < 0 || owner >= len(l.gpus) {
			return false
		}
		buf = operandBuffer{ranks: []int{owner}, typ: rb.Type, ok: l.gpus[owner].chunksOK}
	case rSwitch:
		if opd.Kind != SwitchOperand {
			l.errf(path, ErrOperand, "%s: %s takes %s here, got %s", where, name, want, got)
			return false
		}
		if !t.chOK[Switch] {
			return false
		}
		table := t.tb.Channels[Switch]
		if opd.SwitchID >= len(table) {
			l.errf(path, ErrOutOfRange, "%s: switch_channel_id = %d out of range: the thread block has %d switch channels", where, opd.SwitchID, len(table))
			return false
		}
		g := table[opd.SwitchID]
		groups := t.gpu.SwitchGroups()
		if g < 0 || g >= len(groups) {
			return false
		}
		if _, seen := t.g.used[Switch][g]; !seen {
			t.g.used[Switch][g] = path
		}
		sw := groups[g]
		if l.plan.UseDoubleScratch && !r.packet && sw.Buffer == Scratch {
			l.errf(path, ErrQuirk, "%s: %s uses a switch channel bound to scratch in a double-scratch plan: MSCCL++ does not add the scratch half offset here (quirk Q8)", where, name)
		}
		ok := true
		for _, m := range sw.Ranks {
			if m < 0 || m >= len(l.gpus) {
				return false
			}
			ok = ok && l.gpus[m].chunksOK
		}
		buf = operandBuffer{ranks: sw.Ranks, typ: sw.Buffer, ok: ok}
	}
	if buf.ok {
		l.checkBounds(path, where, name, opd, r.packet, buf)
	}
	return true
}

// checkBounds checks that an operand's chunks lie inside its buffer on
// every rank that owns it. Packet operands take twice their data size,
// which the LL protocol's doubled scratch provides.
func (l *loader) checkBounds(path, where, name string, opd Operand, packet bool, buf operandBuffer) {
	end := opd.Index + opd.Size
	double := packet && !(buf.typ == Scratch && l.plan.Protocol == "LL")
	for _, m := range buf.ranks {
		g := &l.plan.GPUs[m]
		have := uint64([...]int{g.InputChunks, g.OutputChunks, g.ScratchChunks}[buf.typ])
		key := [...]string{KeyInputChunks, KeyOutputChunks, KeyScratchChunks}[buf.typ]
		need := end
		if double {
			need = 2 * end
		}
		if need > have {
			why := ""
			if double {
				why = fmt.Sprintf(" (LL packets take twice the space: %d chunks)", need)
			}
			l.errf(path, ErrOutOfRange, "%s: chunks [%d, %d)%s beyond rank %d's %s buffer (%s = %d)", where, opd.Index, end, why, m, buf.typ.Name(), key, have)
			return
		}
	}
}

// SwitchGroups flattens a rank's switch channel declarations
// (docs/semantics.md §1.5): one group per rank group of each switch
// channel, in declaration order, indexed by the global switch index.
func (g *GPU) SwitchGroups() []SwitchGroup {
	var out []SwitchGroup
	for _, d := range g.Channels {
		if d.Type != Switch {
			continue
		}
		for _, ranks := range d.RankGroups {
			out = append(out, SwitchGroup{Buffer: d.Buffer, Ranks: ranks})
		}
	}
	return out
}

// checkPairing checks that the memory and port channels that ops use pair
// between ranks (docs/semantics.md §4.1): A's k-th channel of a type to B pairs with B's
// k-th channel of that type to A.
func (l *loader) checkPairing() {
	for _, ct := range []ChannelType{Memory, Port} {
		// counts[r][p]: rank r's channels of type ct to p, counted once so
		// that the check is linear in the channels.
		counts := make([]map[int]int, len(l.gpus))
		for r, g := range l.gpus {
			counts[r] = map[int]int{}
			for _, p := range g.peers[ct] {
				counts[r][p]++
			}
		}
		for r, g := range l.gpus {
			if !g.channelsOK {
				continue
			}
			seen := map[int]int{}
			for gi, p := range g.peers[ct] {
				k := seen[p]
				seen[p]++
				if p == r || p < 0 || p >= len(l.gpus) || !l.gpus[p].channelsOK {
					continue
				}
				back := counts[p][r]
				if k < back {
					continue
				}
				mine := counts[r][p]
				msg := fmt.Sprintf("%s channel %d (to rank %d) is unpaired: rank %d declares %d %s channel(s) to rank %d, rank %d declares %d back",
					ct, gi, p, r, mine, ct, p, p, back)
				if use, ok := g.used[ct][gi]; ok {
					l.errf(g.path, ErrPairing, "%s; %s signals or waits on it", msg, use)
				} else {
					l.errf(g.path, ErrUnpairedUnused, "%s; no op signals or waits on it", msg)
				}
			}
		}
	}
}

// checkSwitchGroups checks that any two ranks declare the switch
// channels they share in the same order: NVLS groups are set up
// collectively, in each rank's flattened order. Only pairs of ranks named
// together in some group are compared, so the check is linear in the
// groups' members, not quadratic in the ranks.
func (l *loader) checkSwitchGroups() {
	n := len(l.gpus)
	// sorted[r] are rank r's groups, members sorted; with[r][m] the
	// indices into sorted[r] of the groups that hold rank m, in order.
	sorted := make([][][]int, n)
	with := make([]map[int][]int, n)
	for r := range n {
		if !l.gpus[r].channelsOK {
			continue
		}
		for _, sw := range l.plan.GPUs[r].SwitchGroups() {
			s := slices.Clone(sw.Ranks)
			slices.Sort(s)
			gi := len(sorted[r])
			sorted[r] = append(sorted[r], s)
			for _, m := range s {
				if m < 0 || m >= n || m == r {
					continue
				}
				if with[r] == nil {
					with[r] = map[int][]int{}
				}
				if gs := with[r][m]; len(gs) == 0 || gs[len(gs)-1] != gi {
					with[r][m] = append(gs, gi)
				}
			}
		}
	}
	shared := func(r, m int) [][]int {
		var out [][]int
		for _, gi := range with[r][m] {
			out = append(out, sorted[r][gi])
		}
		return out
	}
	type pair struct{ r, m int }
	var bad []pair
	for r := range n {
		for m := range with[r] {
			if !l.gpus[m].channelsOK {
				continue
			}
			lo, hi := r, m
			if m < r {
				if _, seen := with[m][r]; seen {
					continue // compared from rank m's side
				}
				lo, hi = m, r
			}
			if !slices.EqualFunc(shared(lo, hi), shared(hi, lo), slices.Equal[[]int]) {
				bad = append(bad, pair{lo, hi})
			}
		}
	}
	slices.SortFunc(bad, func(a, b pair) int {
		if a.r != b.r {
			return a.r - b.r
		}
		return a.m - b.m
	})
	for _, p := range bad {
		l.errf(l.gpus[p.r].path, ErrPairing, "switch channels shared with rank %d do not match rank %d's: rank %d declares groups %v, rank %d declares %v", p.m, p.m, p.r, shared(p.r, p.m), p.m, shared(p.m, p.r))
	}
}
