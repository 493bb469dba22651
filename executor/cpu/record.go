package cpu

// record.go holds the CPU backend's logical clock: Record runs a plan once
// with a recorder attached to the session, which gives every executed op
// (every pipeline iteration of a body op) a logical start and end and
// notes which signal, packet write, semaphore release or barrier arrival
// released which op. The hooks in the rest of the package call recorder
// methods on a nil *recorder when nothing records; those return at once.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// Record opens a CPU session on inst, runs one launch on bufs (the first
// launch of the session: LL flag 1, the first scratch half) and returns
// its logical timeline (timeline.Steps): every op starts at the later of
// the end of its thread block's previous op and the end of the op whose
// signal, packet, semaphore release or barrier arrival released it, and
// takes one step. Flows link each releasing op to the op it released. The
// data results in bufs are those of an ordinary launch.
func Record(ctx context.Context, inst *executor.Instance, opts executor.Options, bufs []executor.RankBuffers) (*timeline.Timeline, error) {
	s, err := open(inst, opts, schedule{})
	if err != nil {
		return nil, err
	}
	s.rec = newRecorder(s)
	err = s.Launch(ctx, bufs)
	var dl *executor.DeadlockError
	if errors.As(err, &dl) {
		// The call up to the deadlock, with the blocked ops.
		tl := blockedTimeline(s.rec.timeline(inst), dl)
		_ = s.Close()
		return tl, err
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return s.rec.timeline(inst), nil
}

// blockedTimeline moves the op each blocked thread block of dl stopped in
// from tl's slices to tl.Blocked (with what it waits for), and drops the
// flows into or out of those ops.
func blockedTimeline(tl *timeline.Timeline, dl *executor.DeadlockError) *timeline.Timeline {
	drop := map[int]bool{}
	for _, b := range dl.Blocked {
		last := -1
		for i, sl := range tl.Slices {
			name := sl.Op + " " + sl.Name
			// b.Op is the op's description: path, type and, with a
			// source map, its positions.
			same := b.Op == name || strings.HasPrefix(b.Op, name+" ")
			if sl.Rank == b.Rank && sl.TB == b.TB && same && (last < 0 || sl.Start >= tl.Slices[last].Start) {
				last = i
			}
		}
		bl := timeline.Blocked{Rank: b.Rank, TB: b.TB, Op: b.Op, Waiting: b.Waiting}
		if last >= 0 {
			sl := tl.Slices[last]
			bl.Op, bl.Name, bl.At, bl.Source = sl.Op, sl.Name, sl.Start, sl.Source
			drop[last] = true
		}
		tl.Blocked = append(tl.Blocked, bl)
	}
	at := make([]int, len(tl.Slices))
	var kept []timeline.Slice
	tl.Total = 0
	for i, sl := range tl.Slices {
		at[i] = len(kept)
		if !drop[i] {
			kept = append(kept, sl)
			tl.Total = max(tl.Total, sl.End)
		}
	}
	var flows []timeline.Flow
	for _, f := range tl.Flows {
		if !drop[f.From] && !drop[f.To] {
			flows = append(flows, timeline.Flow{From: at[f.From], To: at[f.To], Kind: f.Kind})
		}
	}
	tl.Slices, tl.Flows = kept, flows
	return tl
}

// event is a release: the slice that released and the logical time at
// which what it released may start.
type event struct {
	slice int
	time  float64
}

// recTB is the clock of one thread block, touched only by its goroutine.
type recTB struct {
	cur     int     // the slice of the op being executed
	start   float64 // its start so far (raised by acquires)
	prevEnd float64 // the end of the thread block's previous op
}

// pktWrite is a packet store: bytes [off, end) of a buffer of a rank.
type pktWrite struct {
	off, end uint64
	ev       event
}

// barKey is one generation of one barrier.
type barKey struct {
	b   *barrier
	gen uint64
}

// recorder is the logical clock of one recorded launch. Its maps are
// guarded by mu; tbs[tid] belongs to thread block tid's goroutine.
type recorder struct {
	s   *session
	tbs []recTB

	mu      sync.Mutex
	slices  []timeline.Slice
	flows   []timeline.Flow
	seen    map[[2]int]bool
	signals map[*counter][]event
	sems    map[*semaphore]event
	arrived map[barKey][]event
	pushed  map[*trigger]event
	done    map[*trigger]event
	proxyT  []float64 // per rank: the time of the proxy's last trigger
	packets map[[2]int][]pktWrite
}

func newRecorder(s *session) *recorder {
	return &recorder{
		s:       s,
		tbs:     make([]recTB, s.ntid),
		seen:    map[[2]int]bool{},
		signals: map[*counter][]event{},
		sems:    map[*semaphore]event{},
		arrived: map[barKey][]event{},
		pushed:  map[*trigger]event{},
		done:    map[*trigger]event{},
		proxyT:  make([]float64, len(s.ranks)),
		packets: map[[2]int][]pktWrite{},
	}
}

// begin starts the slice of op (pipeline iteration iter, -1 outside
// pipelines) on t.
func (r *recorder) begin(t *tbRun, op *executor.OpInstance, iter int) {
	if r == nil {
		return
	}
	c := &r.tbs[t.tid]
	c.start = c.prevEnd
	sl := describe(t.r.ri, t.r.members, op, iter)
	sl.Rank, sl.TB = t.r.id, t.tb.ID
	r.mu.Lock()
	c.cur = len(r.slices)
	r.slices = append(r.slices, sl)
	r.mu.Unlock()
}

// end closes t's current slice: one step after its start.
func (r *recorder) end(t *tbRun) {
	if r == nil {
		return
	}
	c := &r.tbs[t.tid]
	c.prevEnd = c.start + 1
	r.mu.Lock()
	r.slices[c.cur].Start, r.slices[c.cur].End = c.start, c.prevEnd
	r.mu.Unlock()
}

// now is the release event of t's current op (r.mu held or not: c is
// t's own).
func (r *recorder) now(t *tbRun) event {
	c := &r.tbs[t.tid]
	return event{slice: c.cur, time: c.start + 1}
}

// acquire makes t's current op start no earlier than ev and draws a flow
// of kind from ev's slice (r.mu held).
func (r *recorder) acquire(t *tbRun, ev event, kind string) {
	c := &r.tbs[t.tid]
	c.start = max(c.start, ev.time)
	if ev.slice < 0 || ev.slice == c.cur || r.seen[[2]int{ev.slice, c.cur}] {
		return
	}
	r.seen[[2]int{ev.slice, c.cur}] = true
	r.flows = append(r.flows, timeline.Flow{From: ev.slice, To: c.cur, Kind: kind})
}

// signal notes a memory-channel signal of t to the counter c (s.mu held).
func (r *recorder) signal(t *tbRun, c *counter) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.signals[c] = append(r.signals[c], r.now(t))
	r.mu.Unlock()
}

// wait notes that t's wait for signal e of c completed (s.mu held).
func (r *recorder) wait(t *tbRun, c *counter, e uint64) {
	if r == nil || e <= c.base {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if evs := r.signals[c]; e-c.base-1 < uint64(len(evs)) {
		r.acquire(t, evs[e-c.base-1], "signal")
	}
}

// semRelease notes a release of sem by t (s.mu held).
func (r *recorder) semRelease(t *tbRun, sem *semaphore) {
	if r == nil {
		return
	}
	r.mu.Lock()
	ev := r.now(t)
	if old, ok := r.sems[sem]; ok && old.time > ev.time {
		ev.time = old.time
	}
	r.sems[sem] = ev
	r.mu.Unlock()
}

// semAcquire notes that t acquired sem: it starts after the latest
// release so far (s.mu held).
func (r *recorder) semAcquire(t *tbRun, sem *semaphore) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if ev, ok := r.sems[sem]; ok {
		r.acquire(t, ev, "semaphore")
	}
	r.mu.Unlock()
}

// arrive notes t's arrival at b's current generation at the start of
// its barrier op (s.mu held).
func (r *recorder) arrive(t *tbRun, b *barrier) {
	if r == nil {
		return
	}
	r.mu.Lock()
	k := barKey{b, b.gen}
	c := &r.tbs[t.tid]
	r.arrived[k] = append(r.arrived[k], event{slice: c.cur, time: c.start})
	r.mu.Unlock()
}

// barrierDone notes that generation gen of b let t go: every participant
// starts its barrier op with the last arrival, and the others get a flow
// from it (s.mu held).
func (r *recorder) barrierDone(t *tbRun, b *barrier, gen uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last := event{slice: -1}
	for _, ev := range r.arrived[barKey{b, gen}] {
		if last.slice < 0 || ev.time >= last.time {
			last = ev
		}
	}
	if last.slice >= 0 {
		r.acquire(t, last, "barrier")
	}
}

// push notes a trigger pushed by t (s.mu held).
func (r *recorder) push(t *tbRun, tr *trigger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.pushed[tr] = r.now(t)
	r.mu.Unlock()
}

// proxyTake notes that rank's proxy took tr: it completes at the later of
// its push and the proxy's previous trigger.
func (r *recorder) proxyTake(rank int, tr *trigger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	ev := r.pushed[tr]
	ev.time = max(ev.time, r.proxyT[rank])
	r.proxyT[rank] = ev.time
	r.done[tr] = ev
	r.mu.Unlock()
}

// proxySignal notes the FLAG of tr to counter c (s.mu held).
func (r *recorder) proxySignal(tr *trigger, c *counter) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.signals[c] = append(r.signals[c], r.done[tr])
	r.mu.Unlock()
}

// awaitTrigger notes that t saw tr complete (s.mu held): time only, the
// flow would point at t's own op.
func (r *recorder) awaitTrigger(t *tbRun, tr *trigger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if ev, ok := r.done[tr]; ok {
		c := &r.tbs[t.tid]
		c.start = max(c.start, ev.time)
	}
	r.mu.Unlock()
}

// proxyPackets notes the packets a DATA trigger stores, before it stores
// them.
func (r *recorder) proxyPackets(tr *trigger) {
	if r == nil || !tr.packets {
		return
	}
	r.mu.Lock()
	r.addPackets(tr.dst, r.done[tr])
	r.mu.Unlock()
}

// writePackets notes that t stores packets [a, b) of each span of outs,
// before it stores them.
func (r *recorder) writePackets(t *tbRun, outs []span, a, b uint64) {
	if r == nil {
		return
	}
	pk := r.s.packet
	r.mu.Lock()
	for _, out := range outs {
		r.addPackets(out.sub(a*pk, (b-a)*pk), r.now(t))
	}
	r.mu.Unlock()
}

func (r *recorder) addPackets(sp span, ev event) {
	k := [2]int{sp.rank, int(sp.bt)}
	r.packets[k] = append(r.packets[k], pktWrite{off: sp.off, end: sp.off + uint64(len(sp.b)), ev: ev})
}

// readPackets notes that t found packets [a, b) of sp valid: it starts
// after every store of this launch into them.
func (r *recorder) readPackets(t *tbRun, sp span, a, b uint64) {
	if r == nil {
		return
	}
	pk := r.s.packet
	lo, hi := sp.off+a*pk, sp.off+b*pk
	r.mu.Lock()
	for _, w := range r.packets[[2]int{sp.rank, int(sp.bt)}] {
		if w.off < hi && lo < w.end {
			r.acquire(t, w.ev, "packet")
		}
	}
	r.mu.Unlock()
}

// timeline returns the recorded launch, slices ordered by rank, thread
// block and start.
func (r *recorder) timeline(inst *executor.Instance) *timeline.Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	tl := &timeline.Timeline{
		Collective: "",
		Size:       inst.Sizes.Input,
		Clock:      timeline.Steps,
		Source:     "cpu backend",
		Ranks:      len(inst.Ranks),
	}
	if p := inst.Plan; p != nil {
		tl.Plan, tl.Collective = p.Name, p.Collective
	}
	for _, ri := range inst.Ranks {
		tl.TBs = append(tl.TBs, len(ri.TBs))
	}
	order := make([]int, len(r.slices))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := &r.slices[order[i]], &r.slices[order[j]]
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.TB != b.TB {
			return a.TB < b.TB
		}
		return a.Start < b.Start
	})
	at := make([]int, len(order))
	for i, o := range order {
		at[o] = i
		tl.Slices = append(tl.Slices, r.slices[o])
		tl.Total = max(tl.Total, r.slices[o].End)
	}
	for _, f := range r.flows {
		tl.Flows = append(tl.Flows, timeline.Flow{From: at[f.From], To: at[f.To], Kind: f.Kind})
	}
	sort.Slice(tl.Flows, func(i, j int) bool {
		a, b := tl.Flows[i], tl.Flows[j]
		if a.From != b.From {
			return a.From < b.From
		}
		return a.To < b.To
	})
	return tl
}

// describe fills the plan-level fields of op's slice: path, type, bytes,
// peers, channels and source positions. members are the rank's switch
// groups' ranks.
func describe(ri *executor.RankInstance, members [][]int, op *executor.OpInstance, iter int) timeline.Slice {
	sl := timeline.Slice{Op: op.Path, Index: op.Index, Name: op.Type.String(), Iteration: iter, Source: op.Source}
	if sl.Op == "" {
		sl.Op = fmt.Sprintf("op %d", op.Index)
	}
	var src, dst uint64
	for _, g := range op.Src {
		src += g.Size
	}
	for _, g := range op.Dst {
		dst += g.Size
	}
	sl.Bytes = max(src, dst)
	if iter >= 0 && op.UnitSize > 0 {
		// One iteration moves at most one unit per operand.
		sl.Bytes = min(sl.Bytes, op.UnitSize*uint64(max(len(op.Src), len(op.Dst), 1)))
	}
	peers := map[int]bool{}
	for _, rs := range [][]executor.Region{op.Src, op.Dst} {
		for _, g := range rs {
			if g.Rank >= 0 && g.Rank != ri.Rank {
				peers[g.Rank] = true
			}
		}
	}
	ids := make([]string, len(op.Channels))
	for i, c := range op.Channels {
		ids[i] = strconv.Itoa(c)
		switch op.ChannelType {
		case plan.Memory:
			if c < len(ri.MemoryChannels) {
				peers[ri.MemoryChannels[c].Peer] = true
			}
		case plan.Port:
			if c < len(ri.PortChannels) {
				peers[ri.PortChannels[c].Peer] = true
			}
		case plan.Switch:
			if c < len(members) {
				for _, m := range members[c] {
					if m != ri.Rank {
						peers[m] = true
					}
				}
			}
		}
	}
	if len(ids) > 0 {
		sl.Channel = fmt.Sprintf("%s %s", op.ChannelType, strings.Join(ids, ","))
	}
	for p := range peers {
		sl.Peers = append(sl.Peers, p)
	}
	sort.Ints(sl.Peers)
	return sl
}
