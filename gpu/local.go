package gpu

// local.go holds the session of a plan run in one process on several
// devices (NCCL's ncclCommInitAll shape): rank r runs on device r mod N,
// each rank in a rank session of its own (rank.go) on its device,
// connected by an in-process exchange instead of a bootstrap. Peers in
// the process reach each other's memory by device address with peer
// access between their devices (enabled where cuDeviceCanAccessPeer
// allows it, the pair named where it does not); a launch starts every
// rank's kernel, each from its own goroutine, before any is waited for,
// since the kernels spin on each other's signals.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// localSession runs every rank of an instance in this process, rank r
// on device r mod devices; see executor.Session.
type localSession struct {
	cfg     Config
	inst    *executor.Instance
	opts    executor.Options
	prep    *prepared // inst prepared with opts, for every layout
	devices int

	mu    sync.Mutex     // serialises Launch and Close
	guard executor.Guard // mu
	l     *executor.BufferLayout
	shape []bufShape
	hub   *localHub
	ranks []*RankSession
	// NVLS (nvls.go): the multicast objects, and what NVLS says.
	mcGroups []*mcGroup
	nvls     string
}

// openLocal opens the rank sessions of gp on devices devices, for the
// buffer layout of the plan's own in-place setting (a launch with other
// buffers reopens them for its layout).
func openLocal(cfg Config, gp *prepared, devices int) (*localSession, error) {
	if gp.Opts.Race {
		// The device does not detect races (as New's sessions).
		p := *gp.Prepared
		p.Opts.Race = false
		gp = &prepared{Prepared: &p, dtype: gp.dtype, tabs: gp.tabs}
	}
	ls := &localSession{cfg: cfg, inst: gp.Inst, opts: gp.Opts, prep: gp, devices: devices}
	ls.guard.Name = cfg.Name
	inPlace := gp.Inst.Plan != nil && gp.Inst.Plan.Inplace
	l, err := gp.OwnLayout(inPlace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	if err := ls.open(l); err != nil {
		return nil, err
	}
	return ls, nil
}

// open opens one rank session per rank, all at once (their set-up is a
// collective), for layout l: each opens from the session's preparation,
// checked against l once.
func (ls *localSession) open(l *executor.BufferLayout) error {
	n := len(ls.inst.Ranks)
	ro := rankOpts{inProcess: true, multicast: ownDevices(ls.inst, ls.devices)}
	fail := func(err error) error {
		return fmt.Errorf("%s: %d ranks on %d devices (rank r on device r mod %d): %w", ls.cfg.Name, n, ls.devices, ls.devices, err)
	}
	p, err := ls.prep.ForLayout(l)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", ls.cfg.Name, err))
	}
	gp := &prepared{Prepared: p, dtype: ls.prep.dtype, tabs: ls.prep.tabs}
	hub := newLocalHub(n)
	ranks := make([]*RankSession, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev := r % ls.devices
			cfg := ls.cfg
			cfg.Open = func() (Driver, error) {
				d, err := ls.cfg.OpenDevice(dev)
				if err != nil {
					return nil, fmt.Errorf("rank %d: opening device %d: %w", r, dev, err)
				}
				return d, nil
			}
			w := rankwire.World{Net: hub.net(r), Host: make([]int, n), Tag: 1000}
			if errs[r] = checkRank(cfg, ls.inst, ls.opts, w, ro); errs[r] == nil {
				ranks[r], errs[r] = openPreparedRank(context.Background(), cfg, gp, w, ro)
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		for _, rs := range ranks {
			if rs != nil {
				_ = rs.Close()
			}
		}
		hub.close()
		return fail(err)
	}
	ls.l, ls.hub, ls.ranks = l, hub, ranks
	ls.shape = nil
	nvls, err := ls.setupMulticast()
	if err != nil {
		_ = ls.release()
		return err
	}
	ls.nvls = nvls
	return nil
}

// ownDevices reports whether inst has switch channels and every member
// of each switch group runs on a device of its own (rank r on device r
// mod devices): the set-up a multicast object needs.
func ownDevices(inst *executor.Instance, devices int) bool {
	if switchChannels(inst) == 0 {
		return false
	}
	for _, ri := range inst.Ranks {
		for _, g := range ri.Switches {
			seen := map[int]bool{}
			for _, r := range g.Ranks {
				if seen[r%devices] {
					return false
				}
				seen[r%devices] = true
			}
		}
	}
	return true
}

// firstError returns the error of the lowest rank that has one: the
// set-up's all-gathers give every rank the same account of a failure.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// release closes the rank sessions and the exchange.
func (ls *localSession) release() error {
	var errs []error
	if err := ls.releaseMulticast(); err != nil {
		errs = append(errs, err)
	}
	for _, rs := range ls.ranks {
		if err := rs.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	ls.ranks = nil
	if ls.hub != nil {
		ls.hub.close()
		ls.hub = nil
	}
	return errors.Join(errs...)
}

// Close releases every rank's session; later launches fail with
// executor.ErrClosed.
func (ls *localSession) Close() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.guard.Close() {
		return nil
	}
	return ls.release()
}

// fits reports whether bufs have the lengths and aliasing of the open
// layout.
func (ls *localSession) fits(bufs []executor.RankBuffers) bool {
	shape := shapes(bufs)
	if ls.shape != nil {
		return slices.Equal(ls.shape, shape)
	}
	for r, b := range bufs {
		mem := alignedHost(ls.l.RankBytes(r))
		want, err := ls.l.Place(r, mem)
		if err != nil || len(want.Input) != len(b.Input) || len(want.Output) != len(b.Output) ||
			overlapAt(want) != overlapAt(b) {
			return false
		}
	}
	ls.shape = shape
	return true
}

// Launch runs one execute() on every rank: each rank's input and output
// go to its device, every rank's kernel starts (from its own goroutine)
// before any is waited for, and both buffers come back.
func (ls *localSession) Launch(ctx context.Context, bufs []executor.RankBuffers) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.guard.Launch(ctx, bufs, len(ls.inst.Ranks)); err != nil {
		return err
	}
	if !ls.fits(bufs) {
		// Other buffers than the layout opened for: reopen for theirs.
		if err := ls.prep.CheckBuffers(bufs); err != nil {
			return fmt.Errorf("%s: %w", ls.cfg.Name, err)
		}
		inPlace := false
		for _, b := range bufs {
			inPlace = inPlace || overlapAt(b) != -1<<62
		}
		l, err := ls.prep.OwnLayout(inPlace)
		if err != nil {
			return fmt.Errorf("%s: %w", ls.cfg.Name, err)
		}
		if err := ls.release(); err != nil {
			return err
		}
		if err := ls.open(l); err != nil {
			ls.guard.Fail(err)
			return err
		}
		if !ls.fits(bufs) {
			return fmt.Errorf("%s: launch: the buffers' lengths or aliasing differ from the %s layout of %d ranks (executor.Layout); "+
				"a session on several devices runs that layout only", ls.cfg.Name, ls.l.Collective, len(bufs))
		}
	}
	errs := make([]error, len(bufs))
	var wg sync.WaitGroup
	for r, rs := range ls.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = rs.launchWith(ctx, bufs[r])
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		ls.guard.Fail(err)
		return err
	}
	return nil
}

// DeviceTime returns the longest kernel time of the last launch's ranks.
func (ls *localSession) DeviceTime() time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var t time.Duration
	for _, rs := range ls.ranks {
		t = max(t, rs.DeviceTime())
	}
	return t
}

// NVLS says which path the plan's switch channels take: multimem
// through multicast objects, or the unicast fallback and why.
func (ls *localSession) NVLS() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.nvls != "" || len(ls.ranks) == 0 {
		return ls.nvls
	}
	return ls.ranks[0].NVLS()
}
