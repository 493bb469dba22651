package main

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/runconfig"
)

// library is the state of the loaded library that outlives one call: the
// bootstrap listeners of the ids this process made, waiting for their
// rank 0. A C library has no caller-owned value to keep it in, so the
// process holds exactly one (theLibrary); everything else hangs off the
// communicators.
type library struct {
	mu sync.Mutex
	// lastFn is the name of the function of the last call (fnName).
	lastFn atomic.Pointer[fnName]
	roots  map[string]net.Listener // by the id's token
	hubs   map[string]*hostHub     // host-memory runs' meeting points, by the id's token
	// hubRefs counts the live communicators of each hub; the last to end
	// removes it.
	hubRefs map[string]int
	// ids are the unique ids ranks of this process joined, by token: a
	// unique id makes one communicator, and a second use is refused by
	// name instead of meeting a stale peer (see joinID).
	ids map[string]*idUse
	// devices is the build's device backend (device.go), nil for none.
	devices *devices
	// comms are the live communicators by their C handle (exports.go);
	// lastHandle is the last handle given.
	comms      map[uintptr]*comm
	lastHandle uintptr
	// profile is the CPU profile of MSCCLGO_CPUPROFILE (profile.go),
	// running while comms is not empty.
	profile cpuProfiler
}

// hasDevices reports whether the build runs plans on a device backend.
func (l *library) hasDevices() bool { return l.devices != nil && l.devices.open != nil }

// addComm gives c a handle for the C side.
func (l *library) addComm(c *comm) uintptr {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastHandle++
	l.comms[l.lastHandle] = c
	if len(l.comms) == 1 {
		profileStarted(&l.profile, l.profile.start(os.Getenv(cpuProfileEnv), c.rank))
	}
	return l.lastHandle
}

// comm is the communicator of handle h, nil once it was ended.
func (l *library) comm(h uintptr) *comm {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.comms[h]
}

// dropComm forgets handle h.
func (l *library) dropComm(h uintptr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.comms, h)
	if len(l.comms) == 0 {
		profileStopped(l.profile.stop())
	}
}

// theLibrary is the library's one instance (see library).
var theLibrary = &library{roots: map[string]net.Listener{}, hubs: map[string]*hostHub{}, hubRefs: map[string]int{},
	ids: map[string]*idUse{}, comms: map[uintptr]*comm{}, devices: newDevices()}

// hostHub is the meeting point of the ranks of id u in this process; each
// communicator that takes it gives it back with releaseHub.
func (l *library) hostHub(u uniqueID, size int) *hostHub {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := u.tokenString()
	h := l.hubs[key]
	if h == nil || h.size != size {
		h = newHostHub(size)
		l.hubs[key] = h
		l.hubRefs[key] = 0
	}
	l.hubRefs[key]++
	return h
}

// releaseHub gives back a communicator's hub of token key; the last one
// removes it.
func (l *library) releaseHub(key string, h *hostHub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hubs[key] != h {
		return
	}
	if l.hubRefs[key]--; l.hubRefs[key] <= 0 {
		delete(l.hubs, key)
		delete(l.hubRefs, key)
	}
}

// idUse is what this process knows of one unique id's communicator: its
// size, the ranks of this process that joined it, and, once an init of
// it was refused or failed, why (the id is spent).
type idUse struct {
	size   int
	joined map[int]bool
	spent  string
	// ctx bounds the inits of the id in this process: a refusal of one
	// cancels the others, with the refusal as the cause.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// joinID records that rank of a communicator of size ranks joins with
// id u, or says why it may not: the id made a communicator of another
// size, this rank joined it already, or an init of it failed.
//
// The context it returns ends, with the refusal as its cause, when an
// init of the same id in this process is refused: the ranks already
// waiting for their peers give up at once instead of at the timeout.
func (l *library) joinID(u uniqueID, size, rank int) (context.Context, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := u.tokenString()
	use := l.ids[key]
	if use == nil {
		use = &idUse{size: size, joined: map[int]bool{rank: true}}
		use.ctx, use.cancel = context.WithCancelCause(context.Background())
		l.ids[key] = use
		return use.ctx, nil
	}
	var err error
	switch {
	case use.spent != "":
		return nil, errorf(resultInvalidUsage, "unique id %s is spent: %s (make a new one with ncclGetUniqueId)", u.short(), use.spent)
	case use.size != size:
		err = errorf(resultInvalidUsage, "unique id %s was used for a communicator of %d ranks in this process, and rank %d asks for %d: a unique id makes one communicator (make a new one with ncclGetUniqueId)", u.short(), use.size, rank, size)
	case use.joined[rank]:
		err = errorf(resultInvalidUsage, "rank %d of unique id %s joined already in this process: a unique id makes one communicator (make a new one with ncclGetUniqueId)", rank, u.short())
	default:
		use.joined[rank] = true
		return use.ctx, nil
	}
	use.spent = err.Error()
	use.joined = nil
	use.cancel(err)
	return nil, err
}

// spendID marks id u spent by a refused or failed init (why), and closes
// its bootstrap listener if this process made it and it still waits: no
// rank 0 will take it now.
func (l *library) spendID(u uniqueID, size int, why string) {
	l.mu.Lock()
	key := u.tokenString()
	use := l.ids[key]
	if use == nil {
		use = &idUse{size: size}
		l.ids[key] = use
	}
	if use.spent == "" {
		use.spent = why
	}
	if use.cancel != nil {
		use.cancel(errorf(resultInvalidUsage, "unique id %s: %s", u.short(), why))
	}
	use.joined = nil
	ln := l.roots[key]
	delete(l.roots, key)
	l.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// keepRoot holds the listener of a new id until its rank 0 joins.
func (l *library) keepRoot(u uniqueID, ln net.Listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roots[u.tokenString()] = ln
}

// takeRoot hands the listener of id u over to its rank 0 (nil when the id
// was made in another process).
func (l *library) takeRoot(u uniqueID) net.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.roots[u.tokenString()]
	delete(l.roots, u.tokenString())
	return ln
}

// initTimeout is MSCCLGO_NCCL_TIMEOUT (a Go duration, or seconds), else
// runconfig.DefaultSetupTimeout.
func initTimeout() (time.Duration, error) {
	return runconfig.EnvDuration(os.Getenv, runconfig.TimeoutEnv, runconfig.DefaultSetupTimeout)
}

// maxSessionsEnv bounds the plan instances each communicator keeps open
// (runconfig.MaxSessionsEnv).
const maxSessionsEnv = runconfig.MaxSessionsEnv

// maxSessions is MSCCLGO_NCCL_MAX_SESSIONS, else gpu.DefaultMaxSessions.
func maxSessions() (int, error) {
	return parseMaxSessions(os.Getenv(maxSessionsEnv))
}

// parseMaxSessions reads value v of MSCCLGO_NCCL_MAX_SESSIONS ("" for
// unset).
func parseMaxSessions(v string) (int, error) { return runconfig.ParseMaxSessions(v) }

// parseEnvDuration reads value v of the duration variable name
// (runconfig.ParseDuration).
func parseEnvDuration(name, v string) (time.Duration, error) { return runconfig.ParseDuration(name, v) }
