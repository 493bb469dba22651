package cpu

import (
	"slices"
	"sort"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Race detection (Options.Race) is happens-before based, as in
// FastTrack/ThreadSanitizer:
//
//   - Every thread block and every rank's proxy is a thread with a vector
//     clock. Release operations (signal, port push, sem_release, barrier
//     arrival, packet write) publish a snapshot of the releaser's clock and
//     advance its own component; acquire operations join a snapshot.
//   - Edges: the k-th wait on a channel end acquires the clocks of the
//     first k signals it received in the launch (memory signals directly,
//     port signals through the proxy, which itself acquired every earlier
//     push of its FIFO, so FIFO order is an edge); sem_acquire acquires
//     every earlier release of the semaphore; a barrier joins all its
//     participants; flush and pwsf acquire the proxy's clock at the
//     completion of their trigger; a packet read acquires the clock of
//     each packet's writer at write time (LL is self-synchronising). Ops
//     of one thread block are ordered by program order (nop and barrier
//     order threads within a block, which the CPU executes as one).
//   - A packet write that stores exactly the packets already in place is
//     not an access (see racePackets).
//   - Shadow memory: a sorted list of intervals of memory addresses (so
//     that aliased buffers, such as in-place input and output, share
//     their bytes), each with its last write and the reads since (one per
//     thread). An
//     access conflicts with a recorded one on overlapping bytes if one of
//     them writes and the recorded one does not happen before it.
//
// With race detection on, an op's memory accesses and its shadow update
// form one step under race.mu, so shadow and data stay consistent (and a
// racy plan does not race at the Go level).
//
// Across launches (raceCarry): a launch's execution ends when every rank
// has ended it, but on a GPU nothing orders one rank's launch k+1 after a
// peer's launch k, so the detector does not take the global end as an
// edge. The shadow and every thread's clock carry over from one launch to
// the next; each thread block of rank r starts launch k+1 with the join of
// rank r's thread blocks' clocks at the end of launch k (the kernels of one
// rank run in stream order), its proxy with its own (FIFO order). An
// access of launch k+1 that conflicts with one of launch k that does not
// happen before it is a race across the launch boundary: a schedule in
// which one rank runs ahead into launch k+1 while a peer is still in
// launch k can reorder them. Every such schedule is covered at once: the
// happens-before order, not the interleaving the CPU happened to run,
// decides.

// maxRaces bounds the races one launch reports.
const maxRaces = 20

// vclock is a vector clock over the session's threads.
type vclock []uint32

func newClock(n, tid int) vclock {
	v := make(vclock, n)
	v[tid] = 1
	return v
}

func (v vclock) join(w vclock) {
	for i, x := range w {
		if x > v[i] {
			v[i] = x
		}
	}
}

func (v vclock) clone() vclock { return slices.Clone(v) }

// actor is the thread performing accesses and the op to report.
type actor struct {
	tid      int
	vc       vclock
	rank, tb int
	op       string
	instr    *executor.OpInstance
	proxy    bool
}

// accRec is a recorded access: its thread and epoch, what to report, and
// for packet writes the writer's clock, which readers acquire.
type accRec struct {
	tid int
	clk uint32
	acc executor.Access
	vc  vclock
}

type seg struct {
	lo, hi uint64
	w      *accRec
	rs     []*accRec // never mutated in place: segments may share it
}

type shadowMem struct {
	segs []seg
}

type raceKey struct {
	a, b accessKey
}

type accessKey struct {
	rank, tb int
	op       string
	write    bool
	owner    int
	buf      plan.BufferType
}

type raceState struct {
	mu     sync.Mutex
	shadow shadowMem // by memory address: aliased buffers share bytes
	races  []executor.Race
	seen   map[raceKey]bool
	launch int // the session's launch index, recorded in every access
}

func newRaceState(launch int) *raceState {
	return &raceState{seen: map[raceKey]bool{}, launch: launch}
}

// raceCarry is what the race detector keeps from one launch of a session
// to the next (see above): the shadow, every thread's clock at the end of
// the launch, and the address ranges of the buffers the shadow covers.
type raceCarry struct {
	shadow shadowMem
	clocks []vclock // by thread: TBs, then proxies
	bufs   []addrRange
}

type addrRange struct{ lo, hi uint64 }

// rankClock is the clock a thread block of rank rs starts the next launch
// with: the join of the rank's thread blocks' clocks at the end of the
// last one (a kernel launch follows the rank's previous one).
func (c *raceCarry) rankClock(rs *rankState, n int) vclock {
	v := make(vclock, n)
	for i := range rs.ri.TBs {
		v.join(c.clocks[rs.tid0+i])
	}
	return v
}

// adopt moves the carried shadow into the launch's race state, first
// forgetting the history of memory that is no longer the buffer it was: a
// buffer of this launch that overlaps a carried one without being the same
// range (a new allocation, possibly where a freed buffer was).
func (c *raceCarry) adopt(rs *raceState, bufs [][3][]byte) {
	for _, rb := range bufs {
		for _, b := range rb {
			if len(b) == 0 {
				continue
			}
			r := addrRange{uint64(addr(b)), uint64(addr(b)) + uint64(len(b))}
			if slices.Contains(c.bufs, r) {
				continue
			}
			c.bufs = slices.DeleteFunc(c.bufs, func(o addrRange) bool {
				if o.lo < r.hi && r.lo < o.hi {
					c.shadow.drop(o)
					return true
				}
				return false
			})
			c.shadow.drop(r)
			c.bufs = append(c.bufs, r)
		}
	}
	rs.shadow = c.shadow
	c.shadow = shadowMem{}
}

// drop forgets the history of [r.lo, r.hi).
func (m *shadowMem) drop(r addrRange) {
	m.split(r.lo)
	m.split(r.hi)
	m.segs = slices.DeleteFunc(m.segs, func(sg seg) bool { return sg.lo >= r.lo && sg.hi <= r.hi })
}

func (rs *raceState) result() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.races) == 0 {
		return nil
	}
	return &executor.RaceError{Races: slices.Clone(rs.races)}
}

func keyOf(a executor.Access) accessKey {
	return accessKey{rank: a.Rank, tb: a.TB, op: a.Op, write: a.Write, owner: a.Region.Rank, buf: a.Region.Buffer}
}

func (rs *raceState) report(prev, cur *accRec) {
	k := raceKey{keyOf(prev.acc), keyOf(cur.acc)}
	if rs.seen[k] || rs.seen[raceKey{k.b, k.a}] || len(rs.races) >= maxRaces {
		return
	}
	rs.seen[k] = true
	rs.races = append(rs.races, executor.Race{A: prev.acc, B: cur.acc})
}

// access records an access of sp by a (rs.mu held). A packet read
// (acquire) first joins the clocks of the packets' writers into a.vc; a
// packet write passes its writer's clock snapshot in snap.
func (rs *raceState) access(a *actor, sp span, write, acquire bool, snap vclock) {
	if len(sp.b) == 0 {
		return
	}
	rec := &accRec{tid: a.tid, acc: executor.Access{Rank: a.rank, TB: a.tb, Op: a.op, Write: write, Region: sp.region(), Launch: rs.launch, Instr: a.instr, Proxy: a.proxy}}
	if write {
		rec.vc = snap
	}
	m := &rs.shadow
	lo := uint64(addr(sp.b))
	hi := lo + uint64(len(sp.b))
	m.split(lo)
	m.split(hi)
	// Make segs[i:j] cover [lo, hi) exactly, filling gaps with fresh
	// segments.
	i := sort.Search(len(m.segs), func(k int) bool { return m.segs[k].hi > lo })
	j, pos, gaps := i, lo, false
	for ; j < len(m.segs) && m.segs[j].lo < hi; j++ {
		gaps = gaps || m.segs[j].lo > pos
		pos = m.segs[j].hi
	}
	if gaps || pos < hi {
		mid := make([]seg, 0, j-i+4)
		pos = lo
		for _, sg := range m.segs[i:j] {
			if sg.lo > pos {
				mid = append(mid, seg{lo: pos, hi: sg.lo})
			}
			mid = append(mid, sg)
			pos = sg.hi
		}
		if pos < hi {
			mid = append(mid, seg{lo: pos, hi: hi})
		}
		m.segs = slices.Replace(m.segs, i, j, mid...)
		j = i + len(mid)
	}
	mid := m.segs[i:j]
	if acquire && !write {
		for k := range mid {
			if w := mid[k].w; w != nil && w.vc != nil {
				a.vc.join(w.vc)
			}
		}
	}
	rec.clk = a.vc[a.tid]
	hb := func(r *accRec) bool { return r.clk <= a.vc[r.tid] }
	var alone []*accRec // the read set {rec}, shared by segments
	for k := range mid {
		sg := &mid[k]
		if sg.w != nil && !hb(sg.w) {
			rs.report(sg.w, rec)
		}
		if write {
			for _, r := range sg.rs {
				if !hb(r) {
					rs.report(r, rec)
				}
			}
			sg.w, sg.rs = rec, nil
			continue
		}
		if len(sg.rs) == 0 || len(sg.rs) == 1 && sg.rs[0].tid == rec.tid {
			if alone == nil {
				alone = []*accRec{rec}
			}
			sg.rs = alone
			continue
		}
		nrs := make([]*accRec, 0, len(sg.rs)+1)
		for _, r := range sg.rs {
			if r.tid != rec.tid {
				nrs = append(nrs, r)
			}
		}
		sg.rs = append(nrs, rec)
	}
	m.merge(max(i-1, 0), min(j+1, len(m.segs)))
}

// split cuts the segment containing x strictly inside into two.
func (m *shadowMem) split(x uint64) {
	i := sort.Search(len(m.segs), func(k int) bool { return m.segs[k].hi > x })
	if i == len(m.segs) || m.segs[i].lo >= x {
		return
	}
	right := m.segs[i]
	right.lo = x
	m.segs[i].hi = x
	m.segs = slices.Insert(m.segs, i+1, right)
}

// merge joins adjacent segments of segs[from:to] with the same history.
func (m *shadowMem) merge(from, to int) {
	w := from
	for k := from + 1; k < to; k++ {
		sg := m.segs[k]
		last := &m.segs[w]
		if last.hi == sg.lo && last.w == sg.w && slices.Equal(last.rs, sg.rs) {
			last.hi = sg.hi
			continue
		}
		w++
		m.segs[w] = sg
	}
	if w+1 < to {
		m.segs = slices.Delete(m.segs, w+1, to)
	}
}

// actor returns t as the actor of its current op.
func (t *tbRun) actor() *actor {
	op := t.op.Load()
	return &actor{tid: t.tid, vc: t.vc, rank: t.r.id, tb: t.tb.ID, op: opName(op), instr: op}
}

func noop() {}

// enter makes a non-packet op one step: with race detection it records
// the op's reads and writes and holds the race lock, otherwise it holds
// the op's memory ranges, until the returned function is called.
func (t *tbRun) enter(reads, writes []span) func() {
	rs := t.l.race
	if rs == nil {
		h := &rangeHold{}
		h.add(false, reads...)
		h.add(true, writes...)
		if len(h.rs) == 0 {
			return noop
		}
		t.l.ranges.acquire(h)
		return func() { t.l.ranges.release(h) }
	}
	rs.mu.Lock()
	a := t.actor()
	for _, sp := range reads {
		rs.access(a, sp, false, false, nil)
	}
	for _, sp := range writes {
		rs.access(a, sp, true, false, nil)
	}
	return rs.mu.Unlock
}

// racePackets records the accesses of packets [a, b) of a packet op (race
// lock held), before payload is written: packet reads acquire their
// writers' clocks; packet writes publish a snapshot of t's clock, then t's
// clock advances. A packet write that stores exactly the packets already
// there (same payloads, same flag) is not recorded: such a rewrite is
// benign on the device (a reader sees the same packet either way), and
// plans do it on purpose (allgather_nvls_zero_copy_pkt packs a chunk into
// local scratch, then multicasts it to every member, itself included).
func (t *tbRun) racePackets(p *pktPlan, a, b uint64, payload []byte) {
	rs := t.l.race
	pk, pl := t.l.s.packet, t.l.s.payload
	act := t.actor()
	for _, in := range p.pktIn {
		rs.access(act, in.sub(a*pk, (b-a)*pk), false, true, nil)
	}
	for _, in := range p.rawIn {
		rs.access(act, in.sub(a*pl, (b-a)*pl), false, false, nil)
	}
	for _, out := range p.rawOut {
		rs.access(act, out.sub(a*pl, (b-a)*pl), true, false, nil)
	}
	if len(p.pktOut) > 0 {
		snap := t.vc.clone()
		for _, out := range p.pktOut {
			if !t.l.samePackets(words(out.b), a, payload) {
				rs.access(act, out.sub(a*pk, (b-a)*pk), true, false, snap)
			}
		}
		t.vc[t.tid]++
	}
}

// carryOver is what the next launch's race detector starts from: this
// launch's shadow and its threads' final clocks (called after every
// goroutine of the launch ended).
func (l *launch) carryOver() *raceCarry {
	s := l.s
	c := s.carry
	if c == nil {
		c = &raceCarry{clocks: make([]vclock, s.ntid)}
		for _, rb := range l.bufs {
			for _, b := range rb {
				if len(b) > 0 {
					c.bufs = append(c.bufs, addrRange{uint64(addr(b)), uint64(addr(b)) + uint64(len(b))})
				}
			}
		}
	}
	for _, t := range l.tbs {
		c.clocks[t.tid] = t.vc
	}
	for _, rs := range s.ranks {
		if rs.proxy.vc != nil {
			c.clocks[rs.proxy.tid] = rs.proxy.vc
		}
	}
	for i := range c.clocks {
		if c.clocks[i] == nil {
			c.clocks[i] = newClock(s.ntid, i)
		}
	}
	l.race.mu.Lock()
	c.shadow = l.race.shadow
	l.race.shadow = shadowMem{}
	l.race.mu.Unlock()
	return c
}
