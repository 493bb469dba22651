package gpu

// session.go holds the session every other kind is built on: one driver
// session running an instance's ranks (all of them, or, as a rank
// session's base, one). place puts the instance on the device (tables,
// scratch, counters, semaphores, barriers, FIFOs, progress records);
// Launch copies the caller's buffers in, runs the launch (run.go: the
// interpreter with every rank's blocks, the port FIFOs' proxies, the
// watchdog) and copies the buffers back.

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
)

// defaultTimeout is the watchdog's no-progress limit when Options leaves
// it 0.
const defaultTimeout = 10 * time.Second

// session is an opened instance; see executor.Session.
type session struct {
	name string
	inst *executor.Instance
	opts executor.Options
	// prep is inst prepared with opts (executor.Prepare): the launches'
	// operand checks and resolution reuse it.
	prep  *executor.Prepared
	d     Driver
	tabs  *tables
	dtype uint32

	threads int
	timeout time.Duration
	packet  uint64
	double  bool
	half    uint64

	mu    sync.Mutex     // serialises Launch and Close
	guard executor.Guard // mu
	flag  uint32
	// kernelTime is the time of the last launch from the kernel launch to
	// its end (DeviceTime).
	kernelTime time.Duration
	// ranksImg is the rank table last enqueued (rewritten when a buffer
	// moves); graph the captured launch (Config.Graph), for ranksImg.
	ranksImg []byte
	graph    Graph
	useGraph bool
	// pending is the launch being enqueued in a batch, by enqueueFn
	// (enqueuePending, bound once).
	pending   pendingLaunch
	enqueueFn func() error
	// watcher runs the launches' watchdogs (complete), from the first.
	watcher *watcher

	// portMu guards ports: the values of the port inbound counters of
	// the local ranks (the proxies and receivers write them with Post).
	portMu sync.Mutex
	ports  [][]uint64

	allocs []DevPtr // everything to free
	host   HostMem  // staging of the per-launch records, then the FIFOs
	ctl    DevPtr   // mg_control, then every block's mg_progress
	// epoch is the word holding the last launch's LL flag (mg_args.epoch)
	// in a communicator's session, whose launches may be captured into a
	// graph and replayed with no host involved; 0: the host sets flags.
	epoch  DevPtr
	kernel string // the interpreter entry (KernelName)
	tblDev struct{ blocks, ops, regions, ids DevPtr }
	ranks  []*rankDev
	ranksT DevPtr      // mg_rank[n]
	args   DevPtr      // mg_args
	v      *varSession // alltoallv plans (varsize.go), else nil

	// The caller's buffers of the last launch, and their device copies.
	bufs    []devBufs
	checked []bufShape // the buffer shapes executor.CheckBuffers last accepted
	// copies are the ranges of bufs a launch copies in and out
	// (bufcopy.go), nil for everything; copiesOK says they are those of
	// the shapes checked.
	copies   *copyRanges
	copiesOK bool
	// mapped says the last launch ran on the caller's memory in place
	// (bufcopy.go: a HostMapper driver): mappedBufs, pinned by pin while
	// a launch or Relaunch runs.
	mapped     bool
	mappedBufs []executor.RankBuffers
	pin        runtime.Pinner

	// mp is the multi-process part of a rank session (rank.go); nil when
	// the session runs every rank.
	mp *multi

	// The device's launch admission (admit.go): nil when the driver has
	// none. resident is how many blocks of the session's shape the device
	// holds (0: no limit), units a launch's residency; held releases what
	// a rank session took for its life.
	adm      *Admission
	resident int
	units    int64
	held     func()

	// nvls says which path the plan's switch channels take (NVLS); empty
	// without switch channels.
	nvls string
}

// local reports whether rank r runs in this process.
func (s *session) local(r int) bool { return s.mp == nil || r == s.mp.rank }

// rankDev is one rank's device state.
type rankDev struct {
	ri      *executor.RankInstance
	scratch DevPtr
	state   DevPtr // counters, semaphores, barriers, switches, FIFO head
	rec     mgRank
	fifoOff uint64 // offset of its mg_fifo in host
	tail    uint64 // FIFO positions the proxy has handled
}

// devBufs are one rank's input and output on the device: one allocation
// when the caller's buffers overlap (in-place collectives).
type devBufs struct {
	alloc         DevPtr
	size          uint64
	in, out       DevPtr
	inLen, outLen uint64
	inAt, outAt   uint64 // offsets in the allocation
}

// Host-mapped memory layout: the staging of the launch arguments and of
// the rank table, then per local rank its FIFO. The control word and the
// progress records are in device memory (ctl): progressOff is where the
// records start there.
const (
	progressOff = sizeControl
	argsAt      = 0
	ranksAt     = (sizeArgs + 63) &^ 63
)

// abort raises the kernel's abort word (a write on the watch stream).
func (s *session) abort() error {
	if err := s.d.Poke(s.ctl, 1); err != nil {
		return fmt.Errorf("%s: raising abort: %w", s.name, err)
	}
	return nil
}

// raisePort adds one to port inbound counter idx of local rank r and
// posts the new value on the proxy's stream, after the copies before it.
func (s *session) raisePort(r, idx int) error {
	s.portMu.Lock()
	defer s.portMu.Unlock()
	c := s.ports[r]
	if idx < 0 || idx >= len(c) {
		return fmt.Errorf("%s: port inbound counter %d of rank %d, which has %d", s.name, idx, r, len(c))
	}
	c[idx]++
	if err := s.d.Post(DevPtr(s.ranks[r].rec.PortInbound+8*uint64(idx)), c[idx]); err != nil {
		return fmt.Errorf("%s: raising rank %d's port inbound counter %d: %w", s.name, r, idx, err)
	}
	return nil
}

// stage writes b (a multiple of 8 bytes) into the host staging at off.
func (s *session) stage(off uint64, b []byte) { storeWords(s.host, off, b) }

// storeWords writes b (a multiple of 8 bytes) into h at off, word by word.
func storeWords(h HostMem, off uint64, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		h.Store(off+uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
}

func (s *session) alloc(n uint64) (DevPtr, error) {
	if n == 0 {
		n = 8
	}
	p, err := s.d.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("%s: allocating %d bytes: %w", s.name, n, err)
	}
	s.allocs = append(s.allocs, p)
	return p, nil
}

func (s *session) upload(b []byte) (DevPtr, error) {
	p, err := s.alloc(uint64(len(b)))
	if err != nil {
		return 0, err
	}
	if len(b) > 0 {
		if err := s.d.HtoD(p, b); err != nil {
			return 0, fmt.Errorf("%s: copying %d bytes to the device: %w", s.name, len(b), err)
		}
	}
	return p, nil
}

// place checks the launch shape against the device and allocates and
// initialises every persistent object of the session, in steps: the
// launch shape and kernel, the host-mapped memory and the control word,
// the static tables, every local rank's scratch and state block, the
// peers' addresses (a rank session), the state blocks' initial images,
// and the rank table and launch arguments.
func (s *session) place(threads int) error {
	if err := s.chooseShape(threads); err != nil {
		return err
	}
	s.timeout = s.opts.DeadlockTimeout
	if s.timeout <= 0 {
		s.timeout = defaultTimeout
	}
	s.double, s.half = s.prep.Double, s.prep.Half
	if err := s.allocHost(); err != nil {
		return err
	}
	if err := s.uploadTables(); err != nil {
		return err
	}
	if err := s.allocRanks(); err != nil {
		return err
	}
	if s.mp != nil {
		// The rank's buffers, the exchange of handles with the peers and
		// the peers' addresses.
		if err := s.mp.connect(s); err != nil {
			return err
		}
	}
	// The state blocks' initial images need every rank's addresses (peer
	// counters), so they are written once all are allocated.
	if err := s.writeStates(); err != nil {
		return err
	}
	var err error
	if s.ranksT, err = s.alloc(sizeRank * uint64(len(s.ranks))); err != nil {
		return err
	}
	if s.args, err = s.alloc(sizeArgs); err != nil {
		return err
	}
	if s.mp != nil && s.mp.user {
		if s.epoch, err = s.alloc(8); err != nil {
			return err
		}
	}
	if s.mp != nil {
		return s.mp.writeRanks(s)
	}
	return nil
}

// chooseShape sets the threads per block (threads, else the plan's, the
// device's default, bounded by what the device holds of the whole grid),
// checks them and the blocks' shared memory against the device, selects
// the kernel of the session's data type and packet size, checks that
// every block is resident at once (and takes the device's launch
// admission), and chooses the NVLS path.
func (s *session) chooseShape(threads int) error {
	inst, info := s.inst, s.d.Info()
	grid := len(s.tabs.blocks)
	s.threads = threads
	if s.threads <= 0 {
		s.threads = 1024
		if inst.Plan != nil && inst.Plan.NumThreadsPerBlock > 0 {
			s.threads = inst.Plan.NumThreadsPerBlock
		}
		if info.DefaultThreads > 0 {
			s.threads = info.DefaultThreads
		}
		if info.MaxTotalThreads > 0 && grid > 0 {
			s.threads = max(1, min(s.threads, info.MaxTotalThreads/grid))
		}
	}
	if info.MaxThreadsPerBlock > 0 && s.threads > info.MaxThreadsPerBlock {
		return fmt.Errorf("%s: %d threads per block, the device allows %d", s.name, s.threads, info.MaxThreadsPerBlock)
	}
	if info.MaxSharedPerBlock > 0 && s.tabs.shmem > uint64(info.MaxSharedPerBlock) {
		return fmt.Errorf("%s: a thread block's ops need %d bytes of shared memory, the device allows %d",
			s.name, s.tabs.shmem, info.MaxSharedPerBlock)
	}
	s.packet = s.prep.Packet
	name, err := KernelName(s.dtype, s.packet)
	if err != nil {
		return err
	}
	if err := s.d.UseKernel(name); err != nil {
		return fmt.Errorf("%s: kernel %s: %w", s.name, name, err)
	}
	s.kernel = name
	if grid > 0 {
		resident, err := s.d.Occupancy(s.threads, int(s.tabs.shmem))
		if err != nil {
			return fmt.Errorf("%s: occupancy: %w", s.name, err)
		}
		if resident > 0 && grid > resident {
			return fmt.Errorf("%s: the plan has %d thread blocks (all ranks), which must all be resident at once; "+
				"%s holds %d blocks of %d threads with %d bytes of shared memory", s.name, grid, info.Name, resident,
				s.threads, s.tabs.shmem)
		}
		s.resident = resident
		if dv, ok := s.d.(Device); ok && resident > 0 && info.SMs > 0 {
			s.adm = dv.Admission()
			s.units = BlockUnits(grid, resident/info.SMs)
		}
	}
	s.nvls = nvlsBranch(inst, info, s.mp != nil)
	return nil
}

// allocHost allocates the host-mapped memory (the staging of the launch
// arguments and the rank table, then a FIFO per local rank), the ranks'
// records, and the device memory of the control word and the blocks'
// progress records.
func (s *session) allocHost() error {
	inst := s.inst
	hostLen := uint64(ranksAt) + (sizeRank*uint64(len(inst.Ranks))+63)&^63
	s.ports = make([][]uint64, len(inst.Ranks))
	for r := range inst.Ranks {
		ri := &inst.Ranks[r]
		rd := &rankDev{ri: ri, fifoOff: hostLen}
		s.ranks = append(s.ranks, rd)
		if !s.local(r) {
			continue
		}
		s.ports[r] = make([]uint64, len(ri.PortChannels))
		hostLen += sizeFifo
	}
	h, err := s.d.AllocHost(hostLen)
	if err != nil {
		return fmt.Errorf("%s: allocating %d bytes of host-mapped memory: %w", s.name, hostLen, err)
	}
	s.host = h
	s.ctl, err = s.alloc(sizeControl + uint64(len(s.tabs.blocks))*sizeProgress)
	return err
}

// uploadTables copies the static tables to the device.
func (s *session) uploadTables() error {
	t := s.tabs
	for _, e := range []struct {
		to   *DevPtr
		data []byte
	}{
		{&s.tblDev.blocks, encode(t.blocks)},
		{&s.tblDev.ops, encode(t.ops)},
		{&s.tblDev.regions, encode(t.regions)},
		{&s.tblDev.ids, encode(t.ids)},
	} {
		p, err := s.upload(e.data)
		if err != nil {
			return err
		}
		*e.to = p
	}
	return nil
}

// allocRanks allocates every local rank's scratch and state block
// (laid out by layoutState) and fills its record with their addresses.
func (s *session) allocRanks() error {
	inst := s.inst
	for r, rd := range s.ranks {
		if !s.local(r) {
			continue
		}
		ri := rd.ri
		var err error
		if rd.scratch, err = s.allocBound(inst.ScratchBytes); err != nil {
			return err
		}
		sl := layoutState(ri)
		if rd.state, err = s.alloc(sl.size); err != nil {
			return err
		}
		base := uint64(rd.state)
		rd.rec = mgRank{
			MemInbound: base + sl.memIn, MemExpected: base + sl.memExp, MemPeer: base + sl.memPeer,
			PortInbound: base + sl.portIn, PortExpected: base + sl.portExp,
			Sems: base + sl.sems, Barriers: base + sl.bars, Switches: base + sl.sws,
			Fifo: uint64(s.host.Dev()) + rd.fifoOff, FifoHead: base + sl.head,
			ReuseSlot: s.prep.Ranks[r].Slot, FifoTail: base + sl.tail,
			NMem: uint32(len(ri.MemoryChannels)), NPort: uint32(len(ri.PortChannels)),
			NSwitch: uint32(len(ri.Switches)), NSems: uint32(len(ri.Semaphores)),
		}
	}
	return nil
}

// writeStates writes every local rank's state block's initial image.
func (s *session) writeStates() error {
	for r, rd := range s.ranks {
		if !s.local(r) {
			continue
		}
		if err := s.d.HtoD(rd.state, s.stateImage(rd)); err != nil {
			return fmt.Errorf("%s: initialising rank %d: %w", s.name, rd.ri.Rank, err)
		}
	}
	return nil
}

// stateImage is the initial image of rd's state block, each object at
// its layoutState offset: the memory channels' peer counter pointers
// (their peers' inbound counters), the semaphores' initial values, the
// switch records and their sorted members; counters, barriers and the
// FIFO head and tail replica start at zero.
func (s *session) stateImage(rd *rankDev) []byte {
	ri := rd.ri
	sl := layoutState(ri)
	img := make([]byte, sl.size)
	peers := make([]uint64, len(ri.MemoryChannels))
	for c, end := range ri.MemoryChannels {
		if end.PeerIndex >= 0 {
			peers[c] = s.ranks[end.Peer].rec.MemInbound + 8*uint64(end.PeerIndex)
		}
	}
	copy(img[sl.memPeer:], encode(peers))
	copy(img[sl.sems:], encode(ri.Semaphores))
	base := uint64(rd.state)
	sws := make([]mgSwitch, len(ri.Switches))
	for g, sw := range ri.Switches {
		m := sortedRanks(sw.Ranks)
		sws[g] = mgSwitch{Members: base + sl.members[g], NMembers: uint32(len(m)), Buf: uint32(sw.Buffer)}
		copy(img[sl.members[g]:], encode(m))
	}
	copy(img[sl.sws:], encode(sws))
	return img
}

// stateLayout is where a rank's state block keeps each object: mem
// inbound, mem expected, mem peer pointers, port inbound, port expected,
// semaphores, barriers, switches and, per switch, its members, FIFO
// head, the FIFO tail's replica. layoutState is the one place that
// orders them; allocRanks and stateImage place everything by it.
type stateLayout struct {
	memIn, memExp, memPeer, portIn, portExp, sems, bars, sws, head, tail, size uint64
	members                                                                    []uint64
}

func layoutState(ri *executor.RankInstance) stateLayout {
	var sl stateLayout
	nm, np := uint64(len(ri.MemoryChannels)), uint64(len(ri.PortChannels))
	off := uint64(0)
	at := func(n uint64) uint64 { o := off; off += align8(n); return o }
	sl.memIn, sl.memExp, sl.memPeer = at(8*nm), at(8*nm), at(8*nm)
	sl.portIn, sl.portExp = at(8*np), at(8*np)
	sl.sems = at(8 * uint64(len(ri.Semaphores)))
	sl.bars = at(sizeBarrier * numBarriers)
	sl.sws = at(sizeSwitch * uint64(len(ri.Switches)))
	for _, g := range ri.Switches {
		sl.members = append(sl.members, at(4*uint64(len(g.Ranks))))
	}
	sl.head = at(8)
	sl.tail = at(8)
	sl.size = off
	return sl
}

func sortedRanks(rs []int) []int32 {
	out := make([]int32, len(rs))
	for i, r := range rs {
		out[i] = int32(r)
	}
	slices.Sort(out)
	return out
}

// release frees everything the session holds and closes the driver.
func (s *session) release() {
	if s.watcher != nil {
		s.watcher.stop()
	}
	s.pin.Unpin()
	if s.held != nil {
		s.held()
		s.held = nil
	}
	if s.graph != nil {
		_ = s.graph.Release()
		s.graph = nil
	}
	for _, p := range s.allocs {
		_ = s.d.Free(p)
	}
	s.allocs = nil
	for _, b := range s.bufs {
		if b.alloc != 0 {
			_ = s.d.Free(b.alloc)
		}
	}
	s.bufs = nil
	if s.host != nil {
		_ = s.host.Free()
		s.host = nil
	}
	if s.v != nil && s.v.stage != nil {
		_ = s.v.stage.Free()
		s.v.stage = nil
	}
	_ = s.d.Close()
}

// DeviceTime returns how long the last launch's kernel ran, from its
// launch to the end of the last block: the time of the collective without
// the copies of the caller's buffers to and from the device, which a GPU
// user does not make (the buffers live there). mscclgo run reports it.
func (s *session) DeviceTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kernelTime
}

// Close releases the session; later launches fail with
// executor.ErrClosed.
func (s *session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard.Close() {
		s.release()
	}
	return nil
}

// Launch runs one execute() on every rank; see executor.Session.
func (s *session) Launch(ctx context.Context, bufs []executor.RankBuffers) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.guard.Launch(ctx, bufs, len(s.ranks)); err != nil {
		return err
	}
	if shape := shapes(bufs); !slices.Equal(s.checked, shape) {
		if err := s.prep.CheckBuffers(bufs); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		s.checked = shape
		s.copies, s.copiesOK = nil, false
	}
	if s.v != nil {
		if err := s.prepareVar(bufs); err != nil {
			return err
		}
	}
	defer s.pin.Unpin()
	if err := s.placeBuffers(bufs); err != nil {
		return err
	}
	s.flag++
	err := s.run(ctx)
	if err != nil {
		s.guard.Fail(err)
		return err
	}
	return s.fetchBuffers(bufs)
}

// bufShape is what executor.CheckBuffers depends on of a rank's buffers: their
// lengths and how they overlap.
type bufShape struct {
	in, out int
	overlap int64
}

func shapes(bufs []executor.RankBuffers) []bufShape {
	out := make([]bufShape, len(bufs))
	for i, b := range bufs {
		out[i] = bufShape{len(b.Input), len(b.Output), overlapAt(b)}
	}
	return out
}

// overlapAt returns where a rank's input starts relative to its output
// when the two share memory, and -1<<62 when they do not.
func overlapAt(b executor.RankBuffers) int64 {
	if len(b.Input) == 0 || len(b.Output) == 0 {
		return -1 << 62
	}
	pi := uintptr(unsafe.Pointer(unsafe.SliceData(b.Input)))
	po := uintptr(unsafe.Pointer(unsafe.SliceData(b.Output)))
	if pi < po+uintptr(len(b.Output)) && po < pi+uintptr(len(b.Input)) {
		return int64(pi) - int64(po)
	}
	return -1 << 62
}

// placeBuffers runs the launch on the caller's buffers in place where
// the driver can (mapBuffers), else makes device copies of them (one
// allocation per rank, input and output at their relative positions when
// they overlap) and copies the data in: what the plan reads (bufcopy.go),
// else both buffers whole.
func (s *session) placeBuffers(bufs []executor.RankBuffers) error {
	if len(s.bufs) != len(bufs) {
		s.bufs = make([]devBufs, len(bufs))
	}
	if s.mapped = s.mapBuffers(bufs); s.mapped {
		return nil
	}
	s.mappedBufs = nil
	for r, b := range bufs {
		want := devBufs{inLen: uint64(len(b.Input)), outLen: uint64(len(b.Output))}
		if d := overlapAt(b); d != -1<<62 {
			lo := min(d, 0)
			want.inAt, want.outAt = uint64(d-lo), uint64(-lo)
			want.size = max(want.inAt+want.inLen, want.outAt+want.outLen)
		} else {
			want.inAt, want.outAt = 0, align256(want.inLen)
			want.size = want.outAt + want.outLen
		}
		cur := &s.bufs[r]
		if cur.alloc == 0 || cur.size != want.size || cur.inAt != want.inAt || cur.outAt != want.outAt ||
			cur.inLen != want.inLen || cur.outLen != want.outLen {
			if cur.alloc != 0 {
				_ = s.d.Free(cur.alloc)
				cur.alloc = 0
			}
			p, err := s.d.Alloc(max(want.size, 8))
			if err != nil {
				return fmt.Errorf("%s: allocating rank %d's buffers (%d bytes): %w", s.name, r, want.size, err)
			}
			want.alloc = p
			want.in, want.out = p+DevPtr(want.inAt), p+DevPtr(want.outAt)
			*cur = want
		}
	}
	if !s.copiesOK {
		s.copies, s.copiesOK = s.planCopies(bufs), true
	}
	for r, b := range bufs {
		cur := &s.bufs[r]
		if s.copies != nil {
			for _, rg := range s.copies.in[r] {
				err := hostPieces(cur, b, rg, func(at uint64, host []byte) error { return s.d.HtoD(cur.alloc+DevPtr(at), host) })
				if err != nil {
					return fmt.Errorf("%s: copying rank %d's buffers [%d:%d]: %w", s.name, r, rg.lo, rg.hi, err)
				}
			}
			continue
		}
		if len(b.Input) > 0 {
			if err := s.d.HtoD(cur.in, b.Input); err != nil {
				return fmt.Errorf("%s: copying rank %d's input: %w", s.name, r, err)
			}
		}
		// Overlapping buffers share host bytes, so either order is right.
		if len(b.Output) > 0 {
			if err := s.d.HtoD(cur.out, b.Output); err != nil {
				return fmt.Errorf("%s: copying rank %d's output: %w", s.name, r, err)
			}
		}
	}
	return nil
}

func align256(n uint64) uint64 { return (n + 255) &^ 255 }

// fetchBuffers copies back what the plan writes (bufcopy.go), else both
// buffers of every rank (a plan may write its input too).
func (s *session) fetchBuffers(bufs []executor.RankBuffers) error {
	if s.mapped {
		return nil
	}
	for r, b := range bufs {
		cur := &s.bufs[r]
		if s.copies != nil {
			for _, rg := range s.copies.out[r] {
				err := hostPieces(cur, b, rg, func(at uint64, host []byte) error { return s.d.DtoH(host, cur.alloc+DevPtr(at)) })
				if err != nil {
					return fmt.Errorf("%s: copying rank %d's buffers [%d:%d] back: %w", s.name, r, rg.lo, rg.hi, err)
				}
			}
			continue
		}
		if len(b.Output) > 0 {
			if err := s.d.DtoH(b.Output, cur.out); err != nil {
				return fmt.Errorf("%s: copying rank %d's output back: %w", s.name, r, err)
			}
		}
		if len(b.Input) > 0 {
			if err := s.d.DtoH(b.Input, cur.in); err != nil {
				return fmt.Errorf("%s: copying rank %d's input back: %w", s.name, r, err)
			}
		}
	}
	return nil
}

// Relauncher is implemented by the sessions of the GPU backends.
type Relauncher interface {
	// Relaunch runs the collective n more times back to back on the
	// device buffers of the last Launch, copying nothing in or out (the
	// results are not meaningful: reductions accumulate), and returns the
	// mean wall time and the mean kernel time per launch. It measures the
	// host path between launches (benchmarks).
	Relaunch(ctx context.Context, n int) (wall, kernel time.Duration, err error)
}

var _ Relauncher = (*session)(nil)

// Relaunch runs n launches on the device buffers as they are.
func (s *session) Relaunch(ctx context.Context, n int) (time.Duration, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.guard.Ready(ctx); err != nil {
		return 0, 0, err
	}
	if s.bufs == nil || n <= 0 {
		return 0, 0, fmt.Errorf("%s: relaunch: %d launches after %d placed buffers (Launch once first)", s.name, n, len(s.bufs))
	}
	if s.mapped {
		pinBuffers(&s.pin, s.mappedBufs)
		defer s.pin.Unpin()
	}
	start := time.Now()
	var kernel time.Duration
	for range n {
		s.flag++
		if err := s.run(ctx); err != nil {
			s.guard.Fail(err)
			return 0, 0, err
		}
		kernel += s.kernelTime
	}
	return time.Since(start) / time.Duration(n), kernel / time.Duration(n), nil
}
