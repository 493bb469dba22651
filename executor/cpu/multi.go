package cpu

// multi.go holds sessions of one rank of a job run as one process per
// rank (OpenRank): the exchange of shared mappings through the job's
// bootstrap, the placement of every rank's buffers as this process sees
// them, and the checks that a plan's memory channels and switch groups
// stay inside one host. transport.go moves port-channel traffic between
// the processes; package rankwire's watch finds deadlocks that span them,
// through cpuWatch.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/plan"
)

// RankSession is the session of one rank of a multi-process job: it owns
// the rank's input and output (in shared memory, where same-host peers
// read and write them as GPUs do through IPC handles), and each Launch
// runs the rank's thread blocks and port proxy only.
type RankSession struct {
	s    *session
	bufs executor.RankBuffers
	// direct says whether LaunchDirect takes the input, the output from
	// the caller (directBuffers).
	direct [2]bool
}

// multi is the multi-process part of a session.
type multi struct {
	w      rankwire.World
	rank   int
	ctx    context.Context // the session's life: ends at Close or with the job
	cancel context.CancelFunc
	bufs   [][3][]byte // per rank: input, output, scratch as mapped here; nil on other hosts
	maps   []*mapping
	// bells[r] is the doorbell of same-host rank r (nil on other hosts).
	bells []*bell
	wg    sync.WaitGroup
	// send is the proxy goroutine's side of the port transport.
	send *rankwire.Sender
	// launches counts launches started (s.mu).
	launches uint64
	// unplace releases the registration of this rank's mapping for
	// peers' direct writes (nil: none).
	unplace func() error
}

// gatherExchange is rankwire.GatherSetup of exchange records.
func gatherExchange(ctx context.Context, nt rankwire.Net, mine exchange, step string) ([]exchange, error) {
	all, err := rankwire.GatherSetup(ctx, nt, mine, func(e *exchange) string { return e.Err }, step)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return all, nil
}

// exchange is what each rank contributes to the set-up's all-gathers.
type exchange struct {
	Err  string `json:"err,omitempty"`
	Path string `json:"path,omitempty"`
	Size uint64 `json:"size,omitempty"`
	// Place says the rank's mapping takes direct writes (over a
	// rankwire.Placer: package fabric), at Addr with Key.
	Place bool   `json:"place,omitempty"`
	Addr  uint64 `json:"addr,omitempty"`
	Key   uint64 `json:"key,omitempty"`
}

// OpenRank opens this process's rank of inst (Net.Rank) for the buffer
// layout l, on every rank of the job at once: each creates its buffers
// and scratch in a shared mapping, the ranks exchange the mappings' names
// through the bootstrap and map their same-host peers'. A plan whose
// world size differs from the job's, or that joins ranks on different
// hosts by a memory channel or a switch group, is refused on every rank
// with the same error. Race detection is not available across processes.
func OpenRank(ctx context.Context, inst *executor.Instance, l *executor.BufferLayout, opts executor.Options, w rankwire.World) (*RankSession, error) {
	if w.Net == nil {
		return nil, errors.New("cpu: OpenRank without a bootstrap")
	}
	rank, n := w.Net.Rank(), w.Net.Size()
	if len(inst.Ranks) != n {
		return nil, fmt.Errorf("cpu: the plan has %d ranks and the job %d processes (world size %d): run it with %d", len(inst.Ranks), n, n, len(inst.Ranks))
	}
	if len(w.Host) != n {
		return nil, fmt.Errorf("cpu: World.Host names %d ranks, the job has %d", len(w.Host), n)
	}
	if opts.Race {
		return nil, errors.New("cpu: race detection (--race) runs every rank in one process; it is not available across processes")
	}
	p, err := prepare(inst, opts)
	if err != nil {
		return nil, err
	}
	s := newSession(p, schedule{})
	mctx, cancel := context.WithCancel(w.Net.Context())
	m := &multi{w: w, rank: rank, ctx: mctx, cancel: cancel, send: rankwire.NewSender(w.Net, w.Tag)}
	s.mp = m
	if opts.Threads == 0 {
		s.split.threads = hostShare(runtime.GOMAXPROCS(0), w.Host, rank)
	}
	fail := func(err error) (*RankSession, error) {
		cancel()
		if m.unplace != nil {
			_ = m.unplace()
		}
		for _, mp := range m.maps {
			mp.release()
		}
		return nil, err
	}

	// Each rank's mapping: its counters' inbound words, its input and
	// output as l places them, its scratch.
	syncBytes := func(r int) uint64 {
		ri := &inst.Ranks[r]
		return (bellBytes + uint64(len(ri.MemoryChannels)+len(ri.PortChannels))*8 + 63) &^ 63
	}
	ioBytes := func(r int) uint64 { return (l.RankBytes(r) + 63) &^ 63 }
	total := func(r int) uint64 { return syncBytes(r) + ioBytes(r) + inst.ScratchBytes + 64 }

	mine := exchange{}
	var path string
	if err := rankwire.CheckLocality(inst, rank, w.Host); err != nil {
		mine.Err = err.Error()
	} else if p, mp, err := createMapping(w.ShmDir, total(rank)); err != nil {
		mine.Err = err.Error()
	} else {
		path, mine.Path, mine.Size = p, p, total(rank)
		m.maps = append(m.maps, mp)
		// Over a wire that can, peers write the DATA of their port
		// channels straight into this mapping: no copy out of a ring
		// here. Where it cannot register, peers send through the ring.
		if pl, ok := w.Net.(rankwire.Placer); ok && pl.CanPlace() {
			if addr, key, release, err := pl.RegisterPlace(mp.b); err == nil {
				mine.Place, mine.Addr, mine.Key, m.unplace = true, addr, key, release
			}
		}
	}
	all, err := gatherExchange(ctx, w.Net, mine, "set-up")
	if path != "" {
		// Peers map it before the second gather; remove it after, or now
		// if the set-up already failed.
		defer os.Remove(path)
	}
	if err != nil {
		return fail(err)
	}
	maps := make([]*mapping, n)
	maps[rank] = m.maps[0]
	mine = exchange{}
	for r := range n {
		if r == rank || w.Host[r] != w.Host[rank] {
			continue
		}
		if all[r].Size != total(r) {
			mine.Err = fmt.Sprintf("rank %d's shared memory has %d bytes, this plan needs %d: the ranks run different plans or sizes", r, all[r].Size, total(r))
			break
		}
		mp, err := openMapping(all[r].Path, all[r].Size)
		if err != nil {
			mine.Err = fmt.Sprintf("mapping rank %d's shared memory: %v", r, err)
			break
		}
		maps[r] = mp
		m.maps = append(m.maps, mp)
	}
	if _, err := gatherExchange(ctx, w.Net, mine, "mapping peers"); err != nil {
		return fail(err)
	}

	m.bufs = make([][3][]byte, n)
	m.bells = make([]*bell, n)
	var own executor.RankBuffers
	for r := range n {
		var scratch []byte
		inbound := make([]uint64, len(inst.Ranks[r].MemoryChannels)+len(inst.Ranks[r].PortChannels))
		mp, shared := maps[r], true
		if mp == nil {
			// A rank on another host: regions without memory.
			shared = false
			var err error
			if mp, err = reserveMapping(total(r)); err != nil {
				return fail(fmt.Errorf("cpu: reserving address space for rank %d: %w", r, err))
			}
			m.maps = append(m.maps, mp)
		}
		{
			b := mp.b
			sb := syncBytes(r)
			if shared {
				m.bells[r] = bellAt(b)
				if k := len(inst.Ranks[r].MemoryChannels) + len(inst.Ranks[r].PortChannels); k > 0 {
					inbound = words(b[bellBytes : bellBytes+8*k])
				}
			}
			io := b[sb : sb+ioBytes(r)]
			rb, err := l.Place(r, io)
			if err != nil {
				return fail(fmt.Errorf("cpu: %w", err))
			}
			scratch = b[sb+ioBytes(r) : sb+ioBytes(r)+inst.ScratchBytes : sb+ioBytes(r)+inst.ScratchBytes]
			m.bufs[r] = [3][]byte{rb.Input, rb.Output, scratch}
			if r == rank {
				own = rb
			} else if all[r].Place {
				for bt, buf := range m.bufs[r] {
					if len(buf) > 0 {
						at := uint64(uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&b[0])))
						m.send.SetPlace(r, plan.BufferType(bt), all[r].Addr+at, all[r].Key, uint64(len(buf)))
					}
				}
			}
		}
		s.addRank(r, scratch, nil, inbound)
	}
	s.finishRanks()
	m.startReceivers(s)
	rankwire.Watch(rankwire.WatchConfig{Net: w.Net, Ctx: mctx, Tag: w.Tag + rankwire.TagWatch, Timeout: s.timeout}, cpuWatch{s}, &m.wg)
	rs := &RankSession{s: s, bufs: own}
	rs.direct[0], rs.direct[1] = directBuffers(inst.Plan, rank)
	return rs, nil
}

// bell is a rank's doorbell, at the start of its shared mapping: a peer
// process that changes what the rank may be waiting for (a memory-channel
// signal, packets) rings it, and the rank's poller sleeps on it.
type bell struct {
	ring     uint32 // incremented by every ring
	sleeping uint32 // 1 while the rank's poller sleeps
}

// bellBytes is the room the doorbell takes before the counters.
const bellBytes = 16

func bellAt(b []byte) *bell { return (*bell)(unsafe.Pointer(&b[0])) }

// ringBell tells same-host rank r that something changed; a no-op for
// other ranks.
func (m *multi) ringBell(r int) {
	if b := m.bells[r]; b != nil && r != m.rank {
		atomic.AddUint32(&b.ring, 1)
		if atomic.LoadUint32(&b.sleeping) != 0 {
			wakeAll(&b.ring)
		}
	}
}

// ringSelf wakes this rank's own poller (the launch ended or stopped).
func (m *multi) ringSelf() {
	if b := m.bells[m.rank]; b != nil {
		atomic.AddUint32(&b.ring, 1)
		wakeAll(&b.ring)
	}
}

// Rank is the rank this session runs.
func (r *RankSession) Rank() int { return r.s.mp.rank }

// Buffers are the rank's input and output: fill the input before a
// launch, read the output after.
func (r *RankSession) Buffers() executor.RankBuffers { return r.bufs }

// Launch runs one execute() of this rank. Every rank of the job must
// launch as many times. It returns a *executor.DeadlockError that lists
// every rank's blocked thread blocks when the job as a whole makes no
// progress for the deadlock timeout, and an error naming the lost rank
// when a peer dies.
func (r *RankSession) Launch(ctx context.Context) error {
	m := r.s.mp
	ctx, stop := rankwire.Merge(ctx, m.ctx)
	defer stop()
	return r.s.Launch(ctx, nil)
}

// Close stops the session's goroutines and unmaps its memory. Every rank
// should close its session before the job moves on to messages that
// reuse its tags.
func (r *RankSession) Close() error {
	s := r.s
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	if !s.guard.Close() {
		return nil
	}
	m := s.mp
	if err := rankwire.Stop(m.cancel, &m.wg, "cpu", m.rank); err != nil {
		// The mappings stay until the process ends.
		return err
	}
	if m.unplace != nil {
		// Peers write no more: every launch ended with a fence.
		if err := m.unplace(); err != nil {
			return fmt.Errorf("cpu: rank %d: %w", m.rank, err)
		}
	}
	for _, mp := range m.maps {
		mp.release()
	}
	return nil
}

// cpuWatch is the CPU backend's rank session as a WatchTarget.
type cpuWatch struct{ s *session }

func (c cpuWatch) WatchState() (uint64, bool, uint64) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.cur; l != nil && !l.tbsDone && l.err == nil {
		return s.mp.launches, true, l.progress.Load()
	}
	return s.mp.launches, false, 0
}

func (c cpuWatch) WatchBlocked() []executor.BlockedTB {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.cur; l != nil {
		return l.deadlock(fmt.Sprintf("no progress for %v (running an op)", s.timeout)).Blocked
	}
	return nil
}

func (c cpuWatch) WatchDeadlock(launch uint64, blocked []executor.BlockedTB) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.cur; l != nil && s.mp.launches == launch {
		l.abort(&executor.DeadlockError{Blocked: blocked})
	}
}
