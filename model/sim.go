// This file holds the discrete-event simulation of one call of a plan:
// thread blocks stepping through their ops, the conditions ops wait for
// (signals, semaphores, barriers, LL packets, proxy completions), the
// port-channel proxies, and the transfers whose rates flow.go shares.

package model

import (
	"container/heap"
	"fmt"
	"math"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// Resources per rank, in this order.
const (
	resEgress  = iota // NVLink out of the GPU
	resIngress        // NVLink into the GPU
	resHBM            // local memory
	resNICOut
	resNICIn
	resPerRank
)

// event is a callback at a time; seq orders events of one time.
type event struct {
	t   float64
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// step is one op execution of a thread block: a top-level op, or one
// iteration of a pipeline body op.
type step struct {
	op   *executor.OpInstance
	pipe *executor.OpInstance // the enclosing pipeline, or nil
	iter int                  // pipeline iteration, -1 outside
}

// arrival is one signal received on a channel end: when, and the slice
// of the op that sent it (-1 without a timeline).
type arrival struct {
	at    float64
	slice int
}

// chanState is one end of a memory or port channel.
type chanState struct {
	arrivals []arrival
	expected int
	waiters  []*tbRun
	// Port channels: data transfers in flight, flags waiting for them,
	// and triggers pushed and completed (for flush).
	inflight     int
	pendingFlags []*trigger
	pushed, done int
}

// semState is a device semaphore.
type semState struct {
	v       int64
	queue   []*tbRun
	lastRel int // slice of the last release
}

// barState is a device barrier's current generation.
type barState struct {
	arrived []*tbRun
}

// pktWrite is a write of LL packets into a rank's buffer, as data bytes.
type pktWrite struct {
	rank     int
	buf      plan.BufferType
	off, end uint64
	done     bool
	at       float64 // when visible (done only)
	slice    int
}

// pktRead is a region a packet op reads.
type pktRead struct {
	rank     int
	buf      plan.BufferType
	off, end uint64
}

// trigger is one port-channel request to a rank's proxy.
type trigger struct {
	rank, ch   int // the pushing rank and its port channel
	data, flag bool
	sync       *tbRun // pwsf: the block waiting for completion
	bytes      uint64
	src, dst   int  // ranks
	pkt        bool // the destination holds packets
	dstRegion  executor.Region
	slice      int
}

// rankSim is one rank's state.
type rankSim struct {
	mem, port  []chanState
	sems       []semState
	bars       [plan.MaxBarrierID + 1]barState
	pkts       []*pktWrite
	pktWaiters []*tbRun
	proxyFree  float64 // when the proxy has served its last trigger
	nicFree    float64 // when the NIC has processed its last work request
}

// Phases of a thread block's current op.
const (
	phCond = iota // waiting for its condition
	phRun         // latency and transfer
	phTail        // waiting for packets it read or a pwsf completion
	phDone        // the block has run all its ops
)

// tbRun is one thread block.
type tbRun struct {
	rank, id int
	steps    []step
	pc       int
	phase    int
	start    float64
	slice    int
	// The current op's condition.
	need       []int // wait: per channel, the signal count needed
	semWant    int   // sem_acquire: semaphores not yet obtained
	barDone    bool  // barrier: released
	reads      []pktRead
	readWrites []*pktWrite // the writes covering reads
	syncs      int         // pwsf triggers not completed
	flush      []int       // flush: per channel, the triggers to complete
	released   []int       // slices that released this op (flows)
	readyAt    float64     // the op may not end before this
}

// sim is one simulation.
type sim struct {
	used      []int // shareRates' scratch: the resources in use
	inst      *executor.Instance
	prof      *Params
	opts      Options
	perNode   int
	nvlsScale float64
	now       float64
	seq       uint64
	events    eventHeap
	res       []resource
	flows     []*flow
	dirty     bool
	ranks     []rankSim
	tbs       []*tbRun
	tl        *timeline.Timeline
	end       float64
	// The topology (Options.Network): its links are resources from
	// netBase on; netErr is the first access without a route.
	net     *Network
	netBase int
	netErr  error
	// kc are the costs of KernelMSCCLGO, nil for MSCCL++'s.
	kc *kernelCosts
}

func (s *sim) at(t float64, fn func()) {
	s.seq++
	heap.Push(&s.events, event{t: t, seq: s.seq, fn: fn})
}

func (s *sim) node(r int) int {
	if s.opts.OneDevice {
		return 0
	}
	if s.net != nil {
		return s.net.Node(r)
	}
	return r / s.perNode
}

// gbps converts GB/s to bytes per µs.
func gbps(v float64) float64 { return v * 1e3 }

func newSim(inst *executor.Instance, p *Profile, opts Options) (*sim, error) {
	s := &sim{inst: inst, prof: &p.Params, opts: opts, perNode: opts.RanksPerNode}
	if s.perNode <= 0 {
		s.perNode = p.GPUsPerNode
	}
	pp := s.prof
	s.nvlsScale = pp.NVLinkEfficiency.Value / pp.NVLSEfficiency.Value
	n := len(inst.Ranks)
	s.res = make([]resource, n*resPerRank)
	link := gbps(pp.NVLinkGBps.Value * pp.NVLinkEfficiency.Value)
	nic := gbps(pp.NICGBps.Value * pp.NICEfficiency.Value)
	for r := 0; r < n; r++ {
		b := r * resPerRank
		s.res[b+resEgress].cap = link
		s.res[b+resIngress].cap = link
		s.res[b+resHBM].cap = gbps(pp.HBMGBps.Value)
		s.res[b+resNICOut].cap = nic
		s.res[b+resNICIn].cap = nic
	}
	kernel, err := ParseKernel(opts.Kernel)
	if err != nil {
		return nil, err
	}
	if kernel == KernelMSCCLGO {
		if s.kc, err = newKernelCosts(p, opts.DType, opts.LL8, inst.Plan.NumThreadsPerBlock); err != nil {
			return nil, err
		}
	}
	if opts.OneDevice && opts.Network != nil {
		return nil, fmt.Errorf("one device and a topology: the topology places the ranks on its GPUs")
	}
	if opts.Network != nil {
		if err := opts.Network.validate(n); err != nil {
			return nil, err
		}
		s.net = opts.Network
		s.netBase = s.addNetwork(opts.Network)
	}
	s.ranks = make([]rankSim, n)
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		rs := &s.ranks[r]
		rs.mem = make([]chanState, len(ri.MemoryChannels))
		rs.port = make([]chanState, len(ri.PortChannels))
		rs.sems = make([]semState, len(ri.Semaphores))
		for i, v := range ri.Semaphores {
			rs.sems[i].v = v
			rs.sems[i].lastRel = -1
		}
		if len(ri.Switches) > 0 && !p.NVLS {
			return nil, fmt.Errorf("rank %d uses switch channels (NVLS); hardware profile %s has no NVLS", r, p.Name)
		}
		for _, tb := range ri.TBs {
			t := &tbRun{rank: r, id: tb.ID, slice: -1}
			for i := range tb.Ops {
				op := &tb.Ops[i]
				if op.Type == plan.OpPipeline {
					for it := 0; it < op.Iterations; it++ {
						for j := range op.Body {
							t.steps = append(t.steps, step{op: &op.Body[j], pipe: op, iter: it})
						}
					}
					continue
				}
				t.steps = append(t.steps, step{op: op, iter: -1})
			}
			s.tbs = append(s.tbs, t)
		}
	}
	return s, nil
}

// run simulates the call; it returns the makespan.
func (s *sim) run() (float64, error) {
	for _, t := range s.tbs {
		t.pc = -1
		s.next(t)
	}
	for {
		te := math.Inf(1)
		if len(s.events) > 0 {
			te = s.events[0].t
		}
		tf := math.Inf(1)
		for _, f := range s.flows {
			if f.rate > 0 {
				tf = min(tf, s.now+f.left/f.rate)
			}
		}
		if math.IsInf(te, 1) && math.IsInf(tf, 1) {
			break
		}
		t := min(te, tf)
		if dt := t - s.now; dt > 0 {
			for _, f := range s.flows {
				if !math.IsInf(f.rate, 1) {
					f.left -= f.rate * dt
				}
			}
			s.now = t
		}
		if tf <= te {
			var done []*flow
			kept := s.flows[:0]
			for _, f := range s.flows {
				if math.IsInf(f.rate, 1) || f.left <= 1e-9*math.Max(1, f.rate) {
					done = append(done, f)
				} else {
					kept = append(kept, f)
				}
			}
			s.flows = kept
			s.dirty = true
			for _, f := range done {
				f.done()
			}
		}
		for len(s.events) > 0 && s.events[0].t <= s.now {
			e := heap.Pop(&s.events).(event)
			e.fn()
		}
		if s.dirty {
			s.used = shareRates(s.res, s.flows, s.used)
			s.dirty = false
		}
	}
	if s.netErr != nil {
		return 0, s.netErr
	}
	var blocked []executor.BlockedTB
	for _, t := range s.tbs {
		if t.phase != phDone {
			st := t.steps[t.pc]
			blocked = append(blocked, executor.BlockedTB{Rank: t.rank, TB: t.id, Op: st.op.Path + " " + st.op.Type.String(), Waiting: s.describe(t)})
		}
	}
	if len(blocked) > 0 {
		return 0, &executor.DeadlockError{Blocked: blocked}
	}
	return s.end, nil
}

// describe says what a blocked thread block waits for.
func (s *sim) describe(t *tbRun) string {
	op := t.steps[t.pc].op
	switch {
	case t.phase == phTail && t.syncs > 0:
		return "port transfer completion"
	case t.phase == phTail:
		return "LL packets being written"
	case len(t.need) > 0:
		return fmt.Sprintf("%s channel signals", op.ChannelType)
	case t.semWant > 0:
		return "semaphore"
	case op.Type == plan.OpBarrier:
		return fmt.Sprintf("barrier %d", op.BarrierID)
	case len(t.reads) > 0:
		return "LL packets not written"
	}
	return "a port flush"
}

// startFlow starts a transfer of units work at the given demands.
func (s *sim) startFlow(units, cap float64, uses []use, done func()) {
	if units <= 0 {
		done()
		return
	}
	f := &flow{left: units, cap: cap, uses: uses, done: done}
	s.flows = append(s.flows, f)
	s.dirty = true
}

// next moves t to its next op and begins it.
func (s *sim) next(t *tbRun) {
	t.pc++
	if t.pc >= len(t.steps) {
		t.phase = phDone
		s.end = max(s.end, s.now)
		return
	}
	st := t.steps[t.pc]
	op := st.op
	t.phase, t.start, t.released, t.readyAt = phCond, s.now, t.released[:0], s.now
	t.need, t.semWant, t.barDone, t.reads, t.readWrites, t.syncs, t.flush = t.need[:0], 0, false, t.reads[:0], t.readWrites[:0], 0, t.flush[:0]
	if s.tl != nil {
		t.slice = len(s.tl.Slices)
		s.tl.Slices = append(s.tl.Slices, s.sliceOf(t, st))
	}
	rs := &s.ranks[t.rank]
	switch ty := op.Type; {
	case ty.Waits():
		chans := s.chans(t.rank, op.ChannelType)
		for _, c := range op.Channels {
			if chans == nil || c >= len(chans) {
				continue
			}
			chans[c].expected++
			t.need = append(t.need, chans[c].expected)
		}
	case ty == plan.OpSemAcquire:
		for _, id := range op.Semaphores {
			sm := &rs.sems[id]
			if sm.v > 0 {
				sm.v--
				s.flowFrom(t, sm.lastRel)
			} else {
				sm.queue = append(sm.queue, t)
				t.semWant++
			}
		}
	case ty == plan.OpBarrier:
		if op.NumThreadBlocks <= 1 {
			t.barDone = true
			break
		}
		b := &rs.bars[op.BarrierID]
		b.arrived = append(b.arrived, t)
		if len(b.arrived) >= op.NumThreadBlocks {
			all := b.arrived
			b.arrived = nil
			last := t.slice
			s.at(s.now+s.prof.AtomicUS.Value, func() {
				for _, w := range all {
					w.barDone = true
					if w != t {
						s.flowFromKind(w, last, "barrier")
					}
					s.check(w)
				}
			})
		}
	case ty == plan.OpFlush:
		if op.ChannelType == plan.Port {
			for _, c := range op.Channels {
				t.flush = append(t.flush, rs.port[c].pushed)
			}
		}
	}
	t.reads = s.packetReads(t.rank, st, t.reads)
	s.check(t)
}

// chans returns rank r's channel ends of type ct.
func (s *sim) chans(r int, ct plan.ChannelType) []chanState {
	switch ct {
	case plan.Memory:
		return s.ranks[r].mem
	case plan.Port:
		return s.ranks[r].port
	}
	return nil
}

// check begins t's op if its condition holds, or parks t.
func (s *sim) check(t *tbRun) {
	if t.phase != phCond {
		return
	}
	op := t.steps[t.pc].op
	rs := &s.ranks[t.rank]
	switch ty := op.Type; {
	case ty.Waits():
		chans := s.chans(t.rank, op.ChannelType)
		ok := true
		for i, c := range op.Channels {
			if i >= len(t.need) {
				break
			}
			if len(chans[c].arrivals) < t.need[i] {
				chans[c].waiters = append(chans[c].waiters, t)
				ok = false
			}
		}
		if !ok {
			return
		}
		for i, c := range op.Channels {
			if i < len(t.need) {
				s.flowFromKind(t, chans[c].arrivals[t.need[i]-1].slice, "signal")
			}
		}
	case ty == plan.OpSemAcquire:
		if t.semWant > 0 {
			return
		}
	case ty == plan.OpBarrier:
		if !t.barDone {
			return
		}
	case ty == plan.OpFlush:
		for i, c := range op.Channels {
			if i < len(t.flush) && rs.port[c].done < t.flush[i] {
				rs.port[c].waiters = append(rs.port[c].waiters, t)
				return
			}
		}
	}
	if len(t.reads) > 0 {
		covered, writes := s.coverage(t.reads, false)
		if !covered {
			rs.pktWaiters = append(rs.pktWaiters, t)
			return
		}
		t.readWrites = append(t.readWrites[:0], writes...)
	}
	t.phase = phRun
	s.execute(t)
}

// wakeAll re-checks the blocks of a waiter list and empties it.
func (s *sim) wakeAll(list *[]*tbRun) {
	ws := *list
	*list = nil
	for _, w := range ws {
		switch w.phase {
		case phCond:
			s.check(w)
		case phTail:
			s.tail(w)
		}
	}
}

// flowFrom records that slice from released t's op.
func (s *sim) flowFrom(t *tbRun, from int) { s.flowFromKind(t, from, "semaphore") }

func (s *sim) flowFromKind(t *tbRun, from int, kind string) {
	if s.tl == nil || from < 0 || t.slice < 0 {
		return
	}
	s.tl.Flows = append(s.tl.Flows, timeline.Flow{From: from, To: t.slice, Kind: kind})
}

// coverage reports whether the packet writes registered so far cover
// every read region (all of them visible, with done), and the writes
// that overlap them.
func (s *sim) coverage(reads []pktRead, done bool) (bool, []*pktWrite) {
	var out []*pktWrite
	ok := true
	for _, rd := range reads {
		var iv [][2]uint64
		for _, w := range s.ranks[rd.rank].pkts {
			if w.buf != rd.buf || w.end <= rd.off || w.off >= rd.end || (done && !w.done) {
				continue
			}
			iv = append(iv, [2]uint64{max(w.off, rd.off), min(w.end, rd.end)})
			out = append(out, w)
		}
		sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
		at := rd.off
		for _, v := range iv {
			if v[0] > at {
				break
			}
			at = max(at, v[1])
		}
		if at < rd.end {
			ok = false
		}
	}
	return ok, out
}

// execute runs t's op once its condition holds: latency, transfer,
// effects, tail.
func (s *sim) execute(t *tbRun) {
	st := t.steps[t.pc]
	c := s.costOf(t.rank, st)
	s.at(s.now+c.pre, func() {
		writes := s.registerWrites(t, st)
		s.startFlow(c.units, c.cap, c.uses, func() {
			s.effects(t, st, writes)
			t.phase = phTail
			s.tail(t)
		})
	})
}

// tail ends t's op once the packets it read are visible and its pwsf
// triggers completed.
func (s *sim) tail(t *tbRun) {
	if t.phase != phTail {
		return
	}
	if t.syncs > 0 {
		return
	}
	rs := &s.ranks[t.rank]
	ready := t.readyAt
	for _, w := range t.readWrites {
		if !w.done {
			rs.pktWaiters = append(rs.pktWaiters, t)
			return
		}
		ready = max(ready, w.at)
	}
	if s.tl != nil {
		seen := map[int]bool{}
		for _, w := range t.readWrites {
			if w.slice >= 0 && !seen[w.slice] {
				seen[w.slice] = true
				s.flowFromKind(t, w.slice, "packet")
			}
		}
	}
	t.readWrites = t.readWrites[:0]
	t.phase = phRun // no more wake-ups
	finish := func() {
		if s.tl != nil {
			sl := &s.tl.Slices[t.slice]
			sl.End = s.now
		}
		s.next(t)
	}
	if ready > s.now {
		s.at(ready, finish)
		return
	}
	finish()
}
