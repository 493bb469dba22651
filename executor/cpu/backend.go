package cpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// defaultDeadlockTimeout is the watchdog backstop when Options leaves it 0.
const defaultDeadlockTimeout = time.Second

// New returns the CPU reference backend ("cpu").
func New() executor.Backend { return backend{} }

type backend struct{}

// Name returns "cpu".
func (backend) Name() string { return "cpu" }

// Open validates inst and allocates the session's persistent state: per
// rank a zeroed scratch of inst.ScratchBytes, channel counters, semaphores
// at their initial values, 16 barriers, a port FIFO; the LL flag starts at
// 0 and every Launch pre-increments it. Options.DType is required.
func (backend) Open(inst *executor.Instance, opts executor.Options) (executor.Session, error) {
	return open(inst, opts, schedule{})
}

// OpenPrepared is Open of an instance Prepare already validated and
// resolved (executor.PreparedOpener).
func (backend) OpenPrepared(p *executor.Prepared) (executor.Session, error) {
	if !littleEndian() {
		return nil, errBigEndian
	}
	return openPrepared(p, schedule{})
}

// errBigEndian refuses a host whose packet words the backend cannot read.
var errBigEndian = errors.New("cpu: the CPU backend needs a little-endian host (LL packet words)")

// prepare is executor.Prepare with the backend's own refusal first and
// its name on the error.
func prepare(inst *executor.Instance, opts executor.Options) (*executor.Prepared, error) {
	if !littleEndian() {
		return nil, errBigEndian
	}
	p, err := executor.Prepare(inst, opts)
	if err != nil {
		return nil, fmt.Errorf("cpu: open: %w", err)
	}
	return p, nil
}

// schedule is the internal scheduling knob of tests: with yield set, every
// op boundary yields the processor or sleeps a little, with a
// pseudo-random choice per thread block seeded by seed, to shake out
// interleavings. It is not part of executor.Options.
type schedule struct {
	yield bool
	seed  int64
}

// session is an opened instance; see executor.Session.
type session struct {
	inst *executor.Instance
	opts executor.Options
	// prep is inst prepared with opts (executor.Prepare): the per-launch
	// operand resolution and checks reuse it.
	prep *executor.Prepared
	dt   executor.DType
	// red is opts.Reduce and combine its pairwise block reduction
	// (executor.Combiner): dt.Add for ReduceSum.
	red     executor.ReduceOp
	combine func(dst, a, b []byte)
	// combineStream is combine with streaming stores
	// (executor.ElemType.ReduceStream), for the last pass of a large
	// reduce op; nil for a DType other than an ElemType.
	combineStream func(dst, a, b []byte)
	// split bounds and counts the parts of large reduce ops
	// (sum_split.go).
	split   splitter
	sched   schedule
	timeout time.Duration

	double  bool   // use_double_scratch_buffer
	half    uint64 // bytes of one scratch half (the whole scratch without double buffering)
	payload uint64 // LL payload bytes: 8 (LL16) or 4 (LL8)
	packet  uint64 // LL packet bytes: 16 or 8

	launchMu sync.Mutex     // serialises Launch and Close
	guard    executor.Guard // launchMu
	flag     uint32         // LL flag of the last launch (docs/semantics.md §3.2)
	launches int            // launches started (launchMu)
	// carry is the race detector's history from the last launch
	// (launchMu; nil before the first and without Options.Race).
	carry *raceCarry

	// mu is the monitor: it guards every synchronisation object of the
	// ranks (counters, semaphores, barriers, FIFOs) and the current
	// launch's bookkeeping. Data is never touched under mu.
	mu    sync.Mutex
	ranks []*rankState
	ntid  int // vector-clock threads: every TB, then one proxy per rank
	// bufs are every thread block's block buffers, by vector-clock
	// thread, kept across launches.
	bufs []tbBufs

	rec  *recorder // the logical clock of Record; nil otherwise
	prov *provLog  // the movement log of Provenance; nil otherwise

	// mp is set in a multi-process session (OpenRank): only rank mp.rank
	// runs here. cur is the running launch (s.mu), for the goroutines
	// that outlive launches (port receivers, the deadlock watch).
	mp  *multi
	cur *launch
}

// rankState is the persistent state of one rank.
type rankState struct {
	id       int
	ri       *executor.RankInstance
	scratch  []byte
	free     func()    // releases scratch
	mem      []counter // by global memory channel index
	port     []counter // by global port channel index
	sems     []semaphore
	barriers [plan.MaxBarrierID + 1]barrier
	proxy    proxy
	tid0     int // vector-clock thread of TB 0
	// reuseSlot is, for reuse_resources plans, scratchChunkSize of
	// docs/semantics.md §1.11/§1.13: pipelines offset scratch operands modulo it. 0 if unused.
	reuseSlot uint64
	members   [][]int // per switch channel: member ranks, ascending
}

func open(inst *executor.Instance, opts executor.Options, sched schedule) (*session, error) {
	p, err := prepare(inst, opts)
	if err != nil {
		return nil, err
	}
	return openPrepared(p, sched)
}

// openPrepared allocates the persistent state of every rank of p.
func openPrepared(p *executor.Prepared, sched schedule) (*session, error) {
	s := newSession(p, sched)
	inst := p.Inst
	for r := range inst.Ranks {
		// Scratch is 8-byte aligned for the atomics of packet.go.
		scratch, free, err := allocScratch(inst.ScratchBytes)
		if err != nil {
			s.release()
			return nil, fmt.Errorf("cpu: rank %d: allocating %d bytes of scratch: %w", r, inst.ScratchBytes, err)
		}
		ri := &inst.Ranks[r]
		words := make([]uint64, len(ri.MemoryChannels)+len(ri.PortChannels))
		s.addRank(r, scratch, free, words)
	}
	s.finishRanks()
	// A session dropped without Close still gives its scratch back.
	frees := make([]func(), len(s.ranks))
	for i, rs := range s.ranks {
		frees[i] = rs.free
	}
	runtime.AddCleanup(s, func(frees []func()) {
		for _, f := range frees {
			f()
		}
	}, frees)
	return s, nil
}

// newSession sets up a session of p without ranks.
func newSession(p *executor.Prepared, sched schedule) *session {
	inst, opts := p.Inst, p.Opts
	s := &session{inst: inst, opts: opts, prep: p, dt: opts.DType, sched: sched, timeout: opts.DeadlockTimeout}
	s.red, s.combine = opts.Reduce, executor.Combiner(opts.DType, opts.Reduce)
	if et, ok := opts.DType.(executor.ElemType); ok {
		red := opts.Reduce
		s.combineStream = func(dst, a, b []byte) { et.ReduceStream(red, dst, a, b) }
	}
	s.split.threads = opts.Threads
	if s.split.threads == 0 {
		s.split.threads = runtime.GOMAXPROCS(0)
	}
	s.guard.Name = "cpu"
	if s.timeout <= 0 {
		s.timeout = defaultDeadlockTimeout
	}
	s.payload, s.packet = p.Payload, p.Packet
	s.double, s.half = p.Double, p.Half
	return s
}

// addRank appends rank r's state: its scratch (released by free) and its
// channel counters' inbound words (memory channels, then port channels).
func (s *session) addRank(r int, scratch []byte, free func(), words []uint64) {
	inst := s.inst
	ri := &inst.Ranks[r]
	rs := &rankState{id: r, ri: ri, scratch: scratch, free: free}
	if len(s.ranks) > 0 {
		prev := s.ranks[len(s.ranks)-1]
		rs.tid0 = prev.tid0 + len(prev.ri.TBs)
	}
	rs.proxy.cond.L = &s.mu
	rs.reuseSlot = s.prep.Ranks[r].Slot
	rs.mem = make([]counter, len(ri.MemoryChannels))
	rs.port = make([]counter, len(ri.PortChannels))
	for i := range rs.mem {
		rs.mem[i].in = &words[i]
	}
	for i := range rs.port {
		rs.port[i].in = &words[len(rs.mem)+i]
	}
	rs.sems = make([]semaphore, len(ri.Semaphores))
	for i, v := range ri.Semaphores {
		rs.sems[i].v = v
	}
	rs.members = s.prep.Ranks[r].Members
	s.ranks = append(s.ranks, rs)
}

// finishRanks numbers the proxies' vector-clock threads after every
// thread block's.
func (s *session) finishRanks() {
	tid := 0
	if n := len(s.ranks); n > 0 {
		tid = s.ranks[n-1].tid0 + len(s.ranks[n-1].ri.TBs)
	}
	for _, rs := range s.ranks {
		rs.proxy.tid = tid
		tid++
	}
	s.ntid = tid
	s.bufs = make([]tbBufs, tid)
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// Launch runs one execute() on every rank; see executor.Session.
func (s *session) Launch(ctx context.Context, bufs []executor.RankBuffers) error {
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	var err error
	if s.mp == nil {
		err = s.guard.Launch(ctx, bufs, len(s.ranks))
	} else {
		// A rank session's buffers are its own (RankSession.Launch),
		// or the caller's where LaunchDirect checked them.
		err = s.guard.Ready(ctx)
	}
	if err != nil {
		return err
	}
	l := newLaunch(s, bufs, s.flag+1)
	if err := l.precheck(); err != nil {
		return err
	}
	s.flag++
	s.launches++
	err = l.run(ctx)
	var re *executor.RaceError
	if err != nil && !errors.As(err, &re) {
		s.guard.Fail(err)
		return err
	}
	if l.race != nil {
		s.carry = l.carryOver()
	}
	return err
}

// Close releases the session; later launches fail with
// executor.ErrClosed.
func (s *session) Close() error {
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	if s.guard.Close() {
		s.release()
	}
	return nil
}

// release gives back every rank's scratch.
func (s *session) release() {
	for _, rs := range s.ranks {
		if rs.free != nil {
			rs.free()
			rs.free = nil
		}
		rs.scratch = nil
	}
}
