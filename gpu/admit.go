package gpu

// admit.go holds the launch admission of a device that several sessions
// of one process share. The interpreter's blocks spin until their peers
// signal, so a launch makes progress only when all of its blocks are
// resident at once; two launches that each hold part of the device and
// wait for the rest never end. The admission counts the device's
// residency in units (a multiprocessor is ResidencyUnit of them, a block
// of a shape that fits k to a multiprocessor takes ResidencyUnit/k) and
// lets a launch start only when its blocks fit beside the launches that
// hold units already; the others wait, first come first served, until
// enough are released, and give up with an error that names what they
// waited for when nothing was released for their timeout.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ResidencyUnit is one multiprocessor's capacity in residency units.
const ResidencyUnit = 1 << 20

// BlockUnits returns the residency units of grid blocks of a shape that
// fits perSM blocks to a multiprocessor.
func BlockUnits(grid, perSM int) int64 {
	if perSM <= 0 {
		return 0
	}
	return int64(grid) * ((ResidencyUnit + int64(perSM) - 1) / int64(perSM))
}

// Device is implemented by drivers of a physical device that other
// sessions of the process, or other processes, may use too. Sessions
// and rank sessions use it to share the device safely; a driver without
// it (the emulated device, whose blocks are host threads) has no limit.
type Device interface {
	// DeviceID names the physical device the same way in every process
	// of the host (a CUDA device's UUID).
	DeviceID() string
	// Admission is the device's launch admission, shared by every
	// session of the process on the device (nil: none).
	Admission() *Admission
	// EnablePeer lets this driver's kernels access the memory of the
	// device id, which this process has opened too; the error names the
	// pair when the devices have no peer access.
	EnablePeer(id string) error
}

// Admission is the residency account of one device. Its methods are
// safe for concurrent use.
type Admission struct {
	name     string
	capacity int64

	mu      sync.Mutex
	used    int64
	changed time.Time // last acquire or release
	holders map[uint64]holder
	queue   []*waiter
	next    uint64
}

type holder struct {
	who   string
	units int64
	since time.Time
}

type waiter struct {
	who   string
	units int64
	ready chan uint64 // the holder id once admitted
}

// NewAdmission returns the admission of a device called name with sms
// multiprocessors.
func NewAdmission(name string, sms int) *Admission {
	return &Admission{name: name, capacity: int64(sms) * ResidencyUnit, holders: map[uint64]holder{}, changed: time.Now()}
}

// Acquire waits until units fit beside the launches that hold the device
// and takes them for who; release gives them back (once). It fails at
// once when units exceed the whole device, when ctx ends, and when
// nothing was acquired or released on the device for timeout while it
// waited; the error names the device, the request and every holder.
func (a *Admission) Acquire(ctx context.Context, units int64, who string, timeout time.Duration) (release func(), err error) {
	if units > a.capacity {
		return nil, fmt.Errorf("%s needs %d%% of %s's residency, more than the whole device", who, percent(units, a.capacity), a.name)
	}
	a.mu.Lock()
	if len(a.queue) == 0 && a.used+units <= a.capacity {
		id := a.take(units, who)
		a.mu.Unlock()
		return a.releaser(id), nil
	}
	w := &waiter{who: who, units: units, ready: make(chan uint64, 1)}
	a.queue = append(a.queue, w)
	a.mu.Unlock()

	tick := time.NewTicker(max(timeout/8, time.Millisecond))
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case id := <-w.ready:
			return a.releaser(id), nil
		case <-ctx.Done():
			if id, ok := a.abandon(w); ok {
				return a.releaser(id), nil
			}
			return nil, fmt.Errorf("%s: waiting for room on %s: %w", who, a.name, context.Cause(ctx))
		case now := <-tick.C:
			a.mu.Lock()
			quiet := now.Sub(a.changed)
			a.mu.Unlock()
			if quiet < timeout {
				continue
			}
			if id, ok := a.abandon(w); ok {
				return a.releaser(id), nil
			}
			return nil, a.timeoutError(who, units, now.Sub(start), quiet)
		}
	}
}

// take records a holder; a.mu is held.
func (a *Admission) take(units int64, who string) uint64 {
	a.next++
	a.used += units
	a.changed = time.Now()
	a.holders[a.next] = holder{who: who, units: units, since: a.changed}
	return a.next
}

func (a *Admission) releaser(id uint64) func() {
	var once sync.Once
	return func() { once.Do(func() { a.release(id) }) }
}

func (a *Admission) release(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.holders[id]
	if !ok {
		return
	}
	delete(a.holders, id)
	a.used -= h.units
	a.changed = time.Now()
	a.grant()
}

// grant admits waiters in order while the first fits; a.mu is held.
func (a *Admission) grant() {
	for len(a.queue) > 0 && a.used+a.queue[0].units <= a.capacity {
		w := a.queue[0]
		a.queue = a.queue[1:]
		w.ready <- a.take(w.units, w.who)
	}
}

// abandon takes w out of the queue; when it was admitted meanwhile, it
// returns its holder id instead.
func (a *Admission) abandon(w *waiter) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			a.grant() // the next one may fit now
			return 0, false
		}
	}
	return <-w.ready, true
}

func (a *Admission) timeoutError(who string, units int64, waited, quiet time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var hs []string
	for _, h := range a.holders {
		hs = append(hs, fmt.Sprintf("%s (%d%%, for %v)", h.who, percent(h.units, a.capacity), time.Since(h.since).Round(time.Millisecond)))
	}
	sort.Strings(hs)
	return fmt.Errorf("%s waited %v for room on %s: it needs %d%% of the device's residency, %d%% is held by %s, "+
		"and nothing was released for %v (a launch whose blocks cannot all be resident never ends, so it is not started)",
		who, waited.Round(time.Millisecond), a.name, percent(units, a.capacity), percent(a.used, a.capacity),
		strings.Join(hs, ", "), quiet.Round(time.Millisecond))
}

func percent(u, c int64) int64 {
	if c == 0 {
		return 0
	}
	return (u*100 + c - 1) / c
}

// admit takes room for one launch of s on its device and returns its
// release; a rank session took its room at Open for its whole life.
func (s *session) admit(ctx context.Context) (func(), error) {
	if s.adm == nil || s.held != nil || s.units == 0 {
		return func() {}, nil
	}
	return s.adm.Acquire(ctx, s.units, s.launchName(), s.timeout)
}

// launchName names the session's current launch in errors.
func (s *session) launchName() string {
	name := ""
	if s.inst.Plan != nil {
		name = fmt.Sprintf(" of plan %q", s.inst.Plan.Name)
	}
	if s.mp != nil {
		return fmt.Sprintf("%s: rank %d: launch %d%s (%d blocks)", s.name, s.mp.rank, s.flag, name, len(s.tabs.blocks))
	}
	return fmt.Sprintf("%s: launch %d%s (%d blocks)", s.name, s.flag, name, len(s.tabs.blocks))
}
