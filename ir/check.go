package ir

import (
	"fmt"
	"strconv"
	"strings"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/plan"
)

// CheckError reports one violated IR invariant, found by Check.
type CheckError struct {
	Rank int         // -1 for program-level invariants
	TB   int         // -1 for rank-level invariants
	Op   []int       // op index path: outer index, then index inside a pipeline
	Kind plan.OpType // the offending op's kind, when Op is set
	Pos  syntax.Position
	Msg  string
}

// Error returns "POS: check: rank R tb T op I (KIND): MSG", leaving out the
// parts that do not apply.
func (e *CheckError) Error() string {
	s := "check: " + e.Detail()
	if e.Pos != (syntax.Position{}) {
		s = e.Pos.String() + ": " + s
	}
	return s
}

// Detail returns the error text without position and "check:" prefix.
func (e *CheckError) Detail() string {
	var b strings.Builder
	if e.Rank >= 0 {
		fmt.Fprintf(&b, "rank %d ", e.Rank)
	}
	if e.TB >= 0 {
		fmt.Fprintf(&b, "tb %d ", e.TB)
	}
	if len(e.Op) > 0 {
		b.WriteString("op ")
		for i, x := range e.Op {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.Itoa(x))
		}
		fmt.Fprintf(&b, " (%s) ", e.Kind)
	}
	if b.Len() == 0 {
		return e.Msg
	}
	return strings.TrimSuffix(b.String(), " ") + ": " + e.Msg
}

// ReduceKindOf returns the name a reduce-family op must carry given its
// fields (docs/passes.md §2.2, "Name derivation"); ok is false for the
// invalid combination (packet with remote sources).
func ReduceKindOf(o *Op) (k plan.OpType, ok bool) {
	return plan.ReduceType(o.Packet, len(o.RemoteSrc) > 0, len(o.RemoteDst) > 0, o.Packet && len(o.LocalPktDst) > 0)
}

// Check verifies the structural invariants that every pass needs and keeps:
//
//   - GPUs are indexed by rank and thread blocks by id (ids dense from 0);
//   - thread-block channel and remote-buffer tables name existing rank-level
//     channels and remote buffers, with one table per channel type;
//   - every op has a known kind and only the fields of its family
//     (ir.Op's doc): data_sync only on data-sync ops, id sets only on
//     signal/wait/flush, remote refs exactly where the family has them, a
//     reduce-family name that matches its fields, a barrier record on
//     barriers, a body on pipelines;
//   - channel indices, remote buffer indices and semaphore ids are within
//     the tables of the op's thread block and rank;
//   - pipelines are not nested and have a non-empty body;
//   - no op other than a barrier appears twice in the program (passes
//     rewrite ops in place).
//
// It returns the first violation as a *CheckError, or nil.
func Check(p *Program) error {
	if p == nil {
		return &CheckError{Rank: -1, TB: -1, Msg: "nil program"}
	}
	if len(p.GPUs) != p.NumRanks {
		return &CheckError{Rank: -1, TB: -1, Msg: fmt.Sprintf("%d GPU records for %d ranks", len(p.GPUs), p.NumRanks)}
	}
	c := checker{seen: map[*Op]bool{}}
	for r, g := range p.GPUs {
		if err := c.gpu(r, g); err != nil {
			return err
		}
	}
	return nil
}

type checker struct {
	g    *GPU
	tb   *ThreadBlock
	rank int
	seen map[*Op]bool
}

func (c *checker) gpu(r int, g *GPU) *CheckError {
	c.rank, c.g = r, g
	fail := func(tb int, format string, args ...any) *CheckError {
		return &CheckError{Rank: r, TB: tb, Msg: fmt.Sprintf(format, args...)}
	}
	if g == nil {
		return fail(-1, "nil GPU record")
	}
	if g.ID != r {
		return fail(-1, "GPU record has id %d", g.ID)
	}
	for i, t := range g.Channels {
		if t.Type != Memory && t.Type != Port {
			return fail(-1, "channel table %d has type %s", i, t.Type)
		}
		for j := 0; j < i; j++ {
			if g.Channels[j].Type == t.Type {
				return fail(-1, "two %s channel tables", t.Type)
			}
		}
	}
	for i, tb := range g.ThreadBlocks {
		if tb == nil {
			return fail(i, "nil thread block")
		}
		if tb.ID != i {
			return fail(i, "thread block at position %d has id %d (ids must be dense)", i, tb.ID)
		}
		for j, t := range tb.Channels {
			for k := 0; k < j; k++ {
				if tb.Channels[k].Type == t.Type {
					return fail(i, "two %s channel tables", t.Type)
				}
			}
			n := c.rankChannels(t.Type)
			for _, id := range t.IDs {
				if id < 0 || id >= n {
					return fail(i, "%s channel id %d out of range [0:%d]", t.Type, id, n)
				}
			}
		}
		for j, t := range tb.RemoteRefs {
			for k := 0; k < j; k++ {
				if tb.RemoteRefs[k].Type == t.Type {
					return fail(i, "two %s remote buffer tables", t.Type)
				}
			}
			for _, id := range t.IDs {
				if id < 0 || id >= len(g.RemoteBuffers) {
					return fail(i, "remote buffer id %d out of range [0:%d]", id, len(g.RemoteBuffers))
				}
			}
		}
		c.tb = tb
		for k, o := range tb.Ops {
			if err := c.op(o, []int{k}, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// rankChannels returns the number of rank-level channels of type t.
func (c *checker) rankChannels(t ChannelType) int {
	if t == Switch {
		return len(c.g.Switches)
	}
	for _, tab := range c.g.Channels {
		if tab.Type == t {
			return len(tab.ConnectedTo)
		}
	}
	return 0
}

func tableLen(tabs []IDTable, t ChannelType) int {
	for _, tab := range tabs {
		if tab.Type == t {
			return len(tab.IDs)
		}
	}
	return 0
}

func (c *checker) op(o *Op, path []int, inPipeline bool) *CheckError {
	fail := func(format string, args ...any) *CheckError {
		e := &CheckError{Rank: c.rank, TB: c.tb.ID, Op: append([]int(nil), path...), Msg: fmt.Sprintf(format, args...)}
		if o != nil {
			e.Kind, e.Pos = o.Kind, o.Pos
		}
		return e
	}
	if o == nil {
		return fail("nil op")
	}
	if o.Kind > plan.OpGroupLoadReduce {
		return fail("unknown kind %d", uint8(o.Kind))
	}
	if o.Kind == plan.OpBarrier {
		if o.Barrier == nil {
			return fail("barrier without barrier record")
		}
		if len(o.Barrier.TBList) < 2 {
			return fail("barrier lists %d thread blocks, want at least 2", len(o.Barrier.TBList))
		}
	} else {
		if c.seen[o] {
			return fail("op appears twice in the program")
		}
		c.seen[o] = true
		if o.Barrier != nil {
			return fail("barrier record on a non-barrier op")
		}
	}
	fam := o.Kind.Family()

	// Fields that belong to one family only.
	switch {
	case fam != plan.FamDataSync && o.DataSync != SyncNone:
		return fail("data_sync %s on an op that is not a data-sync op", o.DataSync)
	case fam == plan.FamDataSync && o.DataSync > SyncBoth:
		return fail("invalid data_sync %d", uint8(o.DataSync))
	case o.IDSet != nil && !o.Kind.SignalsChannels():
		return fail("channel id set on an op that is not signal, wait or flush")
	case o.SemaphoreIDs != nil && o.Kind != plan.OpSemAcquire && o.Kind != plan.OpSemRelease:
		return fail("semaphore ids on a non-semaphore op")
	case fam != plan.FamPipeline && o.Body != nil:
		return fail("body on a non-pipeline op")
	case (len(o.Src) > 0 || len(o.Dst) > 0) && fam != plan.FamCopy && fam != plan.FamGet && fam != plan.FamPut:
		return fail("src/dst refs on a %s op", o.Kind)
	case (len(o.LocalSrc) > 0 || len(o.LocalDst) > 0 || len(o.LocalPktDst) > 0 || len(o.RemoteSrc) > 0 ||
		len(o.RemoteDst) > 0 || len(o.PutChannelIDs) > 0) && fam != plan.FamReduce:
		return fail("reduce operands on a %s op", o.Kind)
	case o.SwitchChunk != nil && o.Kind != plan.OpGroupLoadReduce && o.Kind != plan.OpMultiStore && o.Kind != plan.OpMultiStorePacket:
		return fail("switch chunk on a %s op", o.Kind)
	case (o.SrcIndex != nil || o.DstIndex != nil) && o.Kind != plan.OpMultiLoadReduceStore:
		return fail("glres indices on a %s op", o.Kind)
	case o.ChannelIDs != nil && (fam == plan.FamSync || fam == plan.FamDataSync || fam == plan.FamCopy || fam == plan.FamPipeline):
		return fail("channel id list on a %s op", o.Kind)
	case o.TBG != nil && fam != plan.FamCopy && fam != plan.FamGet && fam != plan.FamPut && fam != plan.FamReduce:
		return fail("tbg_info on a %s op", o.Kind)
	}
	if o.TBG != nil && (o.TBG.TBID < 0 || o.TBG.TBID >= o.TBG.TBGSize) {
		return fail("tbg_info tb_id %d outside group of %d", o.TBG.TBID, o.TBG.TBGSize)
	}

	switch fam {
	case plan.FamDataSync:
		if o.Kind.SignalsChannels() {
			if o.IDSet == nil || o.IDSet.Len() == 0 {
				return fail("empty channel id set")
			}
			if o.ChannelType != Memory && o.ChannelType != Port {
				return fail("channel type %s", o.ChannelType)
			}
			if o.Kind == plan.OpFlush && o.ChannelType != Port {
				return fail("flush on a %s channel", o.ChannelType)
			}
			if err := c.channels(o.IDSet.Keys(), o.ChannelType); err != "" {
				return fail("%s", err)
			}
		} else {
			if len(o.SemaphoreIDs) == 0 {
				return fail("no semaphore ids")
			}
			for _, id := range o.SemaphoreIDs {
				if id < 0 || id >= len(c.g.Semaphores) {
					return fail("semaphore id %d out of range [0:%d]", id, len(c.g.Semaphores))
				}
			}
		}
	case plan.FamCopy:
		if o.ChannelType != NoChannel {
			return fail("channel type %s on a local copy", o.ChannelType)
		}
		if err := c.refs("src", o.Src, false, o.ChannelType); err != "" {
			return fail("%s", err)
		}
		if err := c.refs("dst", o.Dst, false, o.ChannelType); err != "" {
			return fail("%s", err)
		}
	case plan.FamGet, plan.FamPut:
		if o.ChannelType != Memory && o.ChannelType != Port {
			return fail("channel type %s", o.ChannelType)
		}
		if err := c.refs("src", o.Src, fam == plan.FamGet, o.ChannelType); err != "" {
			return fail("%s", err)
		}
		if err := c.refs("dst", o.Dst, fam == plan.FamPut, o.ChannelType); err != "" {
			return fail("%s", err)
		}
		if len(o.ChannelIDs) == 0 {
			return fail("no channel ids")
		}
		if err := c.channels(o.ChannelIDs, o.ChannelType); err != "" {
			return fail("%s", err)
		}
	case plan.FamReduce:
		if len(o.LocalSrc) == 0 || len(o.LocalDst) == 0 {
			return fail("reduction needs a local source and a local destination")
		}
		for _, x := range []struct {
			name   string
			refs   []Ref
			remote bool
		}{{"local_src", o.LocalSrc, false}, {"local_dst", o.LocalDst, false}, {"local_pkt_dst", o.LocalPktDst, false},
			{"remote_src", o.RemoteSrc, true}, {"remote_dst", o.RemoteDst, true}} {
			if err := c.refs(x.name, x.refs, x.remote, o.ChannelType); err != "" {
				return fail("%s", err)
			}
		}
		if k, ok := ReduceKindOf(o); !ok || k != o.Kind {
			return fail("reduce fields do not match the name %s", o.Kind)
		}
		if o.ChannelType == Switch {
			return fail("reduction over a switch channel")
		}
		if o.ChannelType != NoChannel {
			if err := c.channels(o.ChannelIDs, o.ChannelType); err != "" {
				return fail("%s", err)
			}
		}
		if len(o.PutChannelIDs) > 0 {
			if o.ChannelType != Memory {
				return fail("put channel ids on a %s reduction", o.ChannelType)
			}
			if err := c.channels(o.PutChannelIDs, Memory); err != "" {
				return fail("%s", err)
			}
		}
	case plan.FamSwitch:
		if o.ChannelType != Switch {
			return fail("channel type %s", o.ChannelType)
		}
		if len(o.ChannelIDs) == 0 {
			return fail("no channel ids")
		}
		if err := c.channels(o.ChannelIDs, Switch); err != "" {
			return fail("%s", err)
		}
		if o.SwitchBuffer > Scratch {
			return fail("invalid buffer type %d", uint8(o.SwitchBuffer))
		}
		if o.Kind == plan.OpMultiLoadReduceStore {
			if len(o.SrcIndex) == 0 || len(o.SrcIndex) != len(o.DstIndex) {
				return fail("glres with %d src and %d dst indices", len(o.SrcIndex), len(o.DstIndex))
			}
		} else if o.SwitchChunk == nil {
			return fail("no chunk")
		}
	case plan.FamPipeline:
		if inPipeline {
			return fail("nested pipeline")
		}
		if len(o.Body) == 0 {
			return fail("empty pipeline")
		}
		for k, in := range o.Body {
			if err := c.op(in, append(path, k), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// channels checks thread-block-local channel indices of type t.
func (c *checker) channels(ids []int, t ChannelType) string {
	n := tableLen(c.tb.Channels, t)
	for _, id := range ids {
		if id < 0 || id >= n {
			return fmt.Sprintf("%s channel index %d out of range [0:%d]", t, id, n)
		}
	}
	return ""
}

// refs checks that refs are all remote or all local and in range.
func (c *checker) refs(name string, refs []Ref, remote bool, t ChannelType) string {
	n := tableLen(c.tb.RemoteRefs, t)
	for i, r := range refs {
		switch {
		case r.Remote != remote && remote:
			return fmt.Sprintf("%s[%d] is local, want remote", name, i)
		case r.Remote != remote:
			return fmt.Sprintf("%s[%d] is remote, want local", name, i)
		case r.Index < 0 || r.Size < 0:
			return fmt.Sprintf("%s[%d] has index %d size %d", name, i, r.Index, r.Size)
		case !remote && r.Buffer > Scratch:
			return fmt.Sprintf("%s[%d] has invalid buffer type %d", name, i, uint8(r.Buffer))
		case remote && (r.BufferID < 0 || r.BufferID >= n):
			return fmt.Sprintf("%s[%d] remote buffer index %d out of range [0:%d] of the %s table", name, i, r.BufferID, n, t)
		}
	}
	return ""
}
