package gpu

// rank.go holds GPU rank sessions: one rank of a job run as one process
// per rank (OpenRank). The process places only its own rank on the device
// (buffers, scratch, state block, FIFO, progress records of its blocks),
// exports its buffers, scratch and state block with the driver's IPC
// handles, all-gathers the handles through the job's bootstrap, opens
// those of the peers on its host and writes their addresses into the rank
// table, so that remote operands, memory-channel signals and NVLS groups
// reach them as they do in one process; the grid is its rank's blocks.
// Port channels to other processes go through the proxy and the
// bootstrap (wire.go); deadlocks that span processes are found by the
// job-wide watch (rankwire.Watch), fed by the progress records the
// watchdog reads.

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// RankSession is the session of one rank of a multi-process job on a GPU
// backend. Its buffers live on the device; Buffers are their host
// copies: Launch copies the input to the device before the kernel and
// both buffers back after it.
type RankSession struct {
	s *session
}

// multi is the multi-process part of a session.
type multi struct {
	w     rankwire.World
	rank  int
	l     *executor.BufferLayout
	setup context.Context // the set-up's all-gathers (OpenRank's context)
	// setupTimeout bounds each step of the set-up.
	setupTimeout time.Duration
	ctx          context.Context // the session's life: ends at Close or with the job
	cancel       context.CancelFunc
	wg           sync.WaitGroup

	// The rank's own buffers: one device allocation io holding input and
	// output as l.Place lays them out, and their host copies.
	io      DevPtr
	ioHost  []byte
	own     executor.RankBuffers
	devIn   DevPtr
	devOut  DevPtr
	base    [][3]uint64 // per rank: input, output, scratch as addressed here
	lens    [3]uint64   // input, output, scratch bytes (every rank alike)
	opened  []DevPtr    // peers' memory from IpcOpen
	held    []DevPtr    // same-process peers' memory, retained (Retainer)
	reserve []reservation

	// send is the proxy's side of the port transport.
	send *rankwire.Sender

	// inProcess: every rank runs in this process (a local session), so
	// no memory is exported; bindable, when set, allocates the buffers
	// and scratch a switch may bind as multicast-bindable memory.
	inProcess bool
	bindable  Multicaster
	// user: the input and output are the caller's device buffers, whose
	// addresses (base, devIn, devOut) a communicator sets per launch.
	user bool

	// The deadlock watch's view (mu).
	mu       sync.Mutex
	launches uint64
	active   bool
	progress uint64
	wd       *watchdog
	verdict  *executor.DeadlockError
	failure  error // a receiver's, stops the launch
}

// gather runs one step of the set-up: an all-gather of handles records,
// which fails when not every rank reaches it within the set-up timeout.
func (m *multi) gather(mine handles, step string) ([]handles, error) {
	cause := fmt.Errorf("rank %d: %s: not every rank reached this step within %v (the set-up timeout, --join-timeout)",
		m.rank, step, m.setupTimeout)
	ctx, cancel := context.WithTimeoutCause(m.setup, m.setupTimeout, cause)
	defer cancel()
	all, err := gatherHandles(ctx, m.w.Net, mine, step)
	if err != nil && context.Cause(ctx) == cause {
		return nil, cause
	}
	return all, err
}

// gatherHandles is rankwire.GatherSetup of handles records.
func gatherHandles(ctx context.Context, nt rankwire.Net, mine handles, step string) ([]handles, error) {
	return rankwire.GatherSetup(ctx, nt, mine, func(h *handles) string { return h.Err }, step)
}

// handles is what each rank contributes to the set-up's all-gathers.
type handles struct {
	Err     string     `json:"err,omitempty"`
	IO      *IpcHandle `json:"io,omitempty"`
	Scratch *IpcHandle `json:"scratch,omitempty"`
	State   *IpcHandle `json:"state,omitempty"`
	// Proc names the rank's process: peers in the same process use Ptrs
	// (buffers, scratch, state block) directly, since CUDA does not open
	// an IPC handle in the process that exported it.
	Proc string     `json:"proc,omitempty"`
	Ptrs *[3]DevPtr `json:"ptrs,omitempty"`
	// Dev names the rank's physical device (Device.DeviceID; empty for a
	// driver without one), Blocks its grid.
	Dev    string `json:"dev,omitempty"`
	Blocks int    `json:"blocks,omitempty"`
}

// thisProcess names this process among the job's: its host name, id and
// a random number (process ids repeat across containers and hosts).
var thisProcess = func() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}()

// OpenRank opens this process's rank of inst (w.Net.Rank) on a new
// session of cfg's driver, for the buffer layout l, on every rank of the
// job at once. Ranks on one host (w.Host) reach each other's buffers,
// scratch and channel counters through the driver's IPC handles; port
// channels to any other process go over the bootstrap. A plan whose
// world size differs from the job's, or whose memory channels or switch
// groups join ranks on different hosts, is refused on every rank.
func OpenRank(ctx context.Context, cfg Config, inst *executor.Instance, l *executor.BufferLayout, opts executor.Options, w rankwire.World) (*RankSession, error) {
	return openRank(ctx, cfg, inst, l, opts, w, rankOpts{})
}

// rankOpts are what a local session (local.go) asks of its rank
// sessions: every rank is in this process, and switch-bound buffers in
// multicast-bindable memory where the device has multicast.
type rankOpts struct {
	inProcess, multicast bool
	// user: the buffers are the caller's, set per launch (StreamSession): no
	// buffer allocation is made or exported.
	user bool
}

// openRank checks what a rank session asks of its job (checkRank),
// prepares inst for the device over l (prepare.go) and opens the rank.
func openRank(ctx context.Context, cfg Config, inst *executor.Instance, l *executor.BufferLayout, opts executor.Options, w rankwire.World, ro rankOpts) (*RankSession, error) {
	if err := checkRank(cfg, inst, opts, w, ro); err != nil {
		return nil, err
	}
	gp, err := prepare(cfg.Name, inst, opts)
	if err != nil {
		return nil, err
	}
	p, err := gp.ForLayout(l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	gp = &prepared{Prepared: p, dtype: gp.dtype, tabs: gp.tabs}
	return openPreparedRank(ctx, cfg, gp, w, ro)
}

// checkRank refuses a rank session that its job cannot run, before
// anything is prepared: no bootstrap, a world size other than the
// plan's, race detection, no driver, or an alltoallv plan where the
// session does not place its own buffers in a process of its own.
func checkRank(cfg Config, inst *executor.Instance, opts executor.Options, w rankwire.World, ro rankOpts) error {
	if w.Net == nil {
		return fmt.Errorf("%s: OpenRank without a bootstrap", cfg.Name)
	}
	n := w.Net.Size()
	if len(inst.Ranks) != n {
		return fmt.Errorf("%s: the plan has %d ranks and the job %d processes (world size %d): run it with %d", cfg.Name, len(inst.Ranks), n, n, len(inst.Ranks))
	}
	if len(w.Host) != n {
		return fmt.Errorf("%s: World.Host names %d ranks, the job has %d", cfg.Name, len(w.Host), n)
	}
	if opts.Race {
		return fmt.Errorf("%s: race detection runs on the cpu backend in one process", cfg.Name)
	}
	if cfg.Open == nil {
		return fmt.Errorf("%s: no driver", cfg.Name)
	}
	if inst.Plan != nil && inst.Plan.AllToAllV != nil && (ro.inProcess || ro.user) {
		return fmt.Errorf("%s: plan %q is an alltoallv plan: one process over several devices does not run variable-size plans yet; run it on one device, or one process per rank", cfg.Name, inst.Plan.Name)
	}
	return nil
}

// openPreparedRank opens rank w.Net.Rank() of gp (prepared over its
// Layout) on a new session of cfg's driver, on every rank at once.
func openPreparedRank(ctx context.Context, cfg Config, gp *prepared, w rankwire.World, ro rankOpts) (*RankSession, error) {
	inst, l, opts := gp.Inst, gp.Layout, gp.Opts
	rank := w.Net.Rank()
	isVar := inst.Plan != nil && inst.Plan.AllToAllV != nil
	// The rank's own blocks, gp's tables left whole.
	tabs := new(tables)
	*tabs = *gp.tabs
	tabs.keepRank(rank)
	d, err := cfg.Open()
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(w.Net.Context())
	m := &multi{w: w, rank: rank, l: l, ctx: mctx, cancel: cancel, send: rankwire.NewSender(w.Net, w.Tag)}
	m.lens = [3]uint64{l.Sizes.Input, l.Sizes.Output, inst.ScratchBytes}
	m.setupTimeout = cfg.SetupTimeout
	m.inProcess = ro.inProcess
	m.user = ro.user
	if mc, ok := d.(Multicaster); ok && ro.multicast && d.Info().Multicast {
		m.bindable = mc
	}
	if m.setupTimeout <= 0 {
		m.setupTimeout = 2 * time.Minute
	}
	s := &session{name: cfg.Name, inst: inst, opts: opts, prep: gp.Prepared, d: d, tabs: tabs, dtype: gp.dtype, mp: m}
	s.guard.Name = cfg.Name
	// connect (called by place) runs the set-up's all-gathers.
	m.setup = ctx
	err = s.place(cfg.Threads)
	if err == nil && isVar {
		// Variable-size plans: terms and the per-call table (varsize.go),
		// written before each launch (Launch).
		err = s.openVar()
	}
	if err != nil {
		cancel()
		m.releasePeers(s)
		s.release()
		return nil, err
	}
	// No rank may launch (and signal a peer) before every rank has
	// written its state block's initial image.
	if _, err := m.gather(handles{}, "set-up"); err != nil {
		cancel()
		m.releasePeers(s)
		s.release()
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	m.startReceivers(s)
	rankwire.Watch(rankwire.WatchConfig{Net: w.Net, Ctx: mctx, Tag: w.Tag + rankwire.TagWatch, Timeout: s.timeout}, rankWatch{s}, &m.wg)
	return &RankSession{s: s}, nil
}

// keepRank drops every block of other ranks: a rank session's grid is
// its own rank's blocks (the op, region and id tables stay whole; the
// blocks index into them).
func (t *tables) keepRank(rank int) {
	var blocks []mgBlock
	var refs [][]*executor.OpInstance
	for b, blk := range t.blocks {
		if int(blk.Rank) == rank {
			blocks = append(blocks, blk)
			refs = append(refs, t.refs[b])
		}
	}
	t.blocks, t.refs = blocks, refs
}

// connect allocates the rank's buffers, exchanges the IPC handles of its
// buffers, scratch and state block with every rank, opens those of the
// same-host peers and sets every rank's addresses in the rank records.
func (m *multi) connect(s *session) error {
	inst, l, d := s.inst, m.l, s.d
	n := len(inst.Ranks)
	me := m.rank
	if !m.user {
		var err error
		if m.io, err = s.allocBound(l.RankBytes(me)); err != nil {
			return err
		}
		m.ioHost = alignedHost(l.RankBytes(me))
		if m.own, err = l.Place(me, m.ioHost); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		m.devIn = m.io + DevPtr(offsetIn(m.ioHost, m.own.Input))
		m.devOut = m.io + DevPtr(offsetIn(m.ioHost, m.own.Output))
	}

	myDev := ""
	dv, _ := d.(Device)
	if dv != nil {
		myDev = dv.DeviceID()
	}
	mine := handles{Proc: thisProcess, Ptrs: &[3]DevPtr{m.io, s.ranks[me].scratch, s.ranks[me].state},
		Dev: myDev, Blocks: len(s.tabs.blocks)}
	if err := rankwire.CheckLocality(inst, me, m.w.Host); err != nil {
		mine.Err = err.Error()
	} else if !m.inProcess {
		// Peers in other processes open these (same-process peers take
		// Ptrs, and multicast-bindable memory has no IPC handle).
		for _, e := range []struct {
			p  DevPtr
			to **IpcHandle
		}{{m.io, &mine.IO}, {s.ranks[me].scratch, &mine.Scratch}, {s.ranks[me].state, &mine.State}} {
			if e.p == 0 {
				continue // the caller's buffers (m.user): registered per call
			}
			h, err := d.IpcGet(e.p)
			if err != nil {
				mine.Err = fmt.Sprintf("exporting device memory: %v", err)
				break
			}
			*e.to = &h
		}
	}
	all, err := m.gather(mine, "exchanging IPC handles")
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}

	m.base = make([][3]uint64, n)
	mine = handles{}
	if err := m.checkDevices(s, all, myDev); err != nil {
		mine.Err = err.Error()
	}
	enabled := map[string]bool{}
	for r := range n {
		if r == me {
			m.base[r] = [3]uint64{uint64(m.devIn), uint64(m.devOut), uint64(s.ranks[r].scratch)}
			continue
		}
		// Address space for the peer's image: where its input and output
		// sit in its buffer allocation, and for a rank on another host
		// the addresses its regions take (port transfers only carry
		// their offsets).
		io := (l.RankBytes(r) + 255) &^ 255
		rv, err := reserve(io + max(inst.ScratchBytes, 1))
		if err != nil {
			return fmt.Errorf("%s: reserving address space for rank %d: %w", s.name, r, err)
		}
		m.reserve = append(m.reserve, rv)
		rb, err := l.Place(r, rv.b[:l.RankBytes(r)])
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		inOff, outOff := offsetIn(rv.b, rb.Input), offsetIn(rv.b, rb.Output)
		if m.w.Host[r] != m.w.Host[me] {
			b := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(rv.b))))
			m.base[r] = [3]uint64{b + inOff, b + outOff, b + io}
			continue
		}
		if mine.Err != "" {
			continue
		}
		var ptrs [3]DevPtr
		if all[r].Proc == thisProcess {
			// A peer in this process: its device addresses as they are,
			// with peer access to its device where that is another.
			if all[r].Ptrs == nil {
				mine.Err = fmt.Sprintf("rank %d sent no device addresses", r)
				continue
			}
			if pd := all[r].Dev; dv != nil && pd != "" && pd != myDev && !enabled[pd] {
				if err := dv.EnablePeer(pd); err != nil {
					mine.Err = fmt.Sprintf("rank %d (device %s) cannot reach rank %d's memory (device %s): %v", me, myDev, r, pd, err)
					continue
				}
				enabled[pd] = true
			}
			ptrs = *all[r].Ptrs
			if rt, ok := d.(Retainer); ok {
				// Held until this rank's kernels can no longer touch
				// it (releasePeers), whenever the peer frees it.
				for _, p := range ptrs {
					if p != 0 {
						rt.Retain(p)
						m.held = append(m.held, p)
					}
				}
			}
		}
		for i, h := range []*IpcHandle{all[r].IO, all[r].Scratch, all[r].State} {
			if all[r].Proc == thisProcess {
				break
			}
			if i == 0 && m.user {
				continue
			}
			if h == nil {
				mine.Err = fmt.Sprintf("rank %d sent no IPC handle", r)
				break
			}
			p, err := d.IpcOpen(*h)
			if err != nil {
				mine.Err = fmt.Sprintf("opening rank %d's device memory: %v", r, err)
				break
			}
			m.opened = append(m.opened, p)
			ptrs[i] = p
		}
		if mine.Err != "" {
			continue
		}
		m.base[r] = [3]uint64{uint64(ptrs[0]) + inOff, uint64(ptrs[0]) + outOff, uint64(ptrs[1])}
		s.ranks[r].rec.MemInbound = uint64(ptrs[2]) + layoutState(s.ranks[r].ri).memIn
	}
	if _, err := m.gather(mine, "opening peers' memory"); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if s.adm != nil {
		// The rank's room on its device, for the session's life: its
		// blocks wait for peers' blocks of this process, which must be
		// resident too (a launch-time admission could let them wait on
		// each other's room).
		ctx, cancel := context.WithTimeout(m.setup, m.setupTimeout)
		defer cancel()
		held, err := s.adm.Acquire(ctx, s.units, fmt.Sprintf("%s: rank %d's session (%d blocks)", s.name, me, len(s.tabs.blocks)), s.timeout)
		if err != nil {
			return fmt.Errorf("%s: opening rank %d: %w", s.name, me, err)
		}
		s.held = held
	}
	for r := range n {
		s.ranks[r].rec.Buf = m.base[r]
	}
	return nil
}

// checkDevices refuses ranks of different processes on one device, and
// ranks of this process on one device whose blocks do not fit it
// together.
func (m *multi) checkDevices(s *session, all []handles, myDev string) error {
	if myDev == "" {
		return nil
	}
	me := m.rank
	var together []int
	blocks := 0
	for r, h := range all {
		if h.Dev != myDev || m.w.Host[r] != m.w.Host[me] {
			continue
		}
		if h.Proc != all[me].Proc {
			return fmt.Errorf("ranks %d and %d run in different processes on the same GPU (%s): kernels of different "+
				"processes on one GPU are time-sliced, never resident together, so a rank spinning for its peer's "+
				"signal may wait for ever; run every rank of the host in one process (mscclgo run --one-process, or "+
				"without a launcher) or give each process a GPU of its own", min(r, me), max(r, me), myDev)
		}
		together = append(together, r)
		blocks += h.Blocks
	}
	if s.resident > 0 && blocks > s.resident {
		names := make([]string, len(together))
		for i, r := range together {
			names[i] = fmt.Sprint(r)
		}
		return fmt.Errorf("ranks %s of this process share GPU %s: together %d thread blocks, which must all be resident "+
			"at once, and it holds %d of their shape", strings.Join(names, ", "), myDev, blocks, s.resident)
	}
	return nil
}

// writeRanks writes the rank table once: a rank session's addresses do
// not change between launches.
func (m *multi) writeRanks(s *session) error {
	ranks := make([]mgRank, len(s.ranks))
	for r, rd := range s.ranks {
		ranks[r] = rd.rec
	}
	if err := s.d.HtoD(s.ranksT, encode(ranks)); err != nil {
		return fmt.Errorf("%s: writing the rank table: %w", s.name, err)
	}
	return nil
}

// alignedHost returns n zeroed bytes, 8-byte aligned.
func alignedHost(n uint64) []byte {
	w := make([]uint64, (n+7)/8)
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

// offsetIn returns where sub starts in b (0 for an empty sub).
func offsetIn(b, sub []byte) uint64 {
	if len(sub) == 0 || len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// releasePeers unmaps the peers' memory and the reservations.
func (m *multi) releasePeers(s *session) {
	for _, p := range m.opened {
		_ = s.d.IpcClose(p)
	}
	m.opened = nil
	if rt, ok := s.d.(Retainer); ok {
		for _, p := range m.held {
			rt.Release(p)
		}
	}
	m.held = nil
	for _, rv := range m.reserve {
		rv.release()
	}
	m.reserve = nil
}

// Rank is the rank this session runs.
func (r *RankSession) Rank() int { return r.s.mp.rank }

// Buffers are the host copies of the rank's input and output: fill the
// input before a launch, read the output after.
func (r *RankSession) Buffers() executor.RankBuffers { return r.s.mp.own }

// Launch runs one execute() of this rank: the input goes to the device,
// the rank's blocks run with its proxy, and both buffers come back. Every
// rank of the job must launch as many times. It returns an
// *executor.DeadlockError listing every rank's blocked thread blocks when
// the job as a whole makes no progress for the deadlock timeout, and an
// error naming the lost rank when a peer dies; after either the session
// is unusable.
func (r *RankSession) Launch(ctx context.Context) error {
	s, m := r.s, r.s.mp
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, stop := rankwire.Merge(ctx, m.ctx)
	defer stop()
	if err := s.guard.Ready(ctx); err != nil {
		return err
	}
	if len(m.own.Input) > 0 {
		if err := s.d.HtoD(m.devIn, m.own.Input); err != nil {
			return fmt.Errorf("%s: copying rank %d's input: %w", s.name, m.rank, err)
		}
	}
	if s.v != nil {
		if err := s.prepareVarRank(m.own); err != nil {
			return err
		}
	}
	s.flag++
	m.mu.Lock()
	m.launches++
	m.mu.Unlock()
	if err := s.run(ctx); err != nil {
		err = fmt.Errorf("rank %d: launch %d: %w", m.rank, m.launches, err)
		s.guard.Fail(err)
		return err
	}
	if len(m.own.Input) > 0 {
		if err := s.d.DtoH(m.own.Input, m.devIn); err != nil {
			return fmt.Errorf("%s: copying rank %d's input back: %w", s.name, m.rank, err)
		}
	}
	if len(m.own.Output) > 0 {
		if err := s.d.DtoH(m.own.Output, m.devOut); err != nil {
			return fmt.Errorf("%s: copying rank %d's output back: %w", s.name, m.rank, err)
		}
	}
	return nil
}

// DeviceTime returns how long the last launch's kernel ran.
func (r *RankSession) DeviceTime() time.Duration { return r.s.DeviceTime() }

// Close stops the session's goroutines and releases its device memory.
// Every rank should close its session before the job reuses its tags.
func (r *RankSession) Close() error {
	s, m := r.s, r.s.mp
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.guard.Close() {
		return nil
	}
	if err := rankwire.Stop(m.cancel, &m.wg, s.name, m.rank); err != nil {
		// The memory stays until the process ends.
		return err
	}
	m.releasePeers(s)
	s.release()
	return nil
}

// started, moved and ended are the launch's reports to the watch.
func (m *multi) started(wd *watchdog) {
	m.mu.Lock()
	m.wd, m.active, m.verdict, m.failure = wd, true, nil, nil
	m.progress++
	m.mu.Unlock()
}

func (m *multi) moved() {
	m.mu.Lock()
	m.progress++
	m.mu.Unlock()
}

// ended closes the launch for the watch and returns its verdict.
func (m *multi) ended() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wd, m.active = nil, false
	if v := m.verdict; v != nil {
		m.verdict = nil
		return v
	}
	err := m.failure
	m.failure = nil
	return err
}

// rankWatch is a GPU rank session as the job-wide deadlock watch sees it.
type rankWatch struct{ s *session }

func (w rankWatch) WatchState() (uint64, bool, uint64) {
	m := w.s.mp
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.launches, m.active && m.verdict == nil && m.failure == nil, m.progress
}

func (w rankWatch) WatchBlocked() []executor.BlockedTB {
	m := w.s.mp
	m.mu.Lock()
	wd := m.wd
	m.mu.Unlock()
	if wd == nil {
		return nil
	}
	return wd.deadlock(wd.read()).Blocked
}

func (w rankWatch) WatchDeadlock(launch uint64, blocked []executor.BlockedTB) {
	m := w.s.mp
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active && m.launches == launch && m.verdict == nil {
		m.verdict = &executor.DeadlockError{Blocked: blocked}
		if err := w.s.abort(); err != nil && m.failure == nil { // every spin loop of the kernel sees it
			m.failure = err
		}
	}
}

// launchWith runs Launch with the caller's buffers b, of the session's
// layout: both go to the device (a plan may read what the output held)
// and come back.
func (r *RankSession) launchWith(ctx context.Context, b executor.RankBuffers) error {
	s, m := r.s, r.s.mp
	// Aliased buffers alias alike on both sides, so the order is free.
	copy(m.own.Output, b.Output)
	copy(m.own.Input, b.Input)
	if len(m.own.Output) > 0 {
		if err := s.d.HtoD(m.devOut, m.own.Output); err != nil {
			return fmt.Errorf("%s: copying rank %d's output: %w", s.name, m.rank, err)
		}
	}
	if err := r.Launch(ctx); err != nil {
		return err
	}
	copy(b.Output, m.own.Output)
	copy(b.Input, m.own.Input)
	return nil
}
