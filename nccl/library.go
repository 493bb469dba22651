package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// library is the state of the loaded library that outlives one call: the
// bootstrap listeners of the ids this process made, waiting for their
// rank 0. A C library has no caller-owned value to keep it in, so the
// process holds exactly one (theLibrary); everything else hangs off the
// communicators.
type library struct {
	mu    sync.Mutex
	roots map[string]net.Listener // by the id's token
	hubs  map[string]*hostHub     // host-memory runs' meeting points, by the id's token
	// devices is the build's device backend (device.go), nil for none.
	devices *devices
}

// theLibrary is the library's one instance (see library).
var theLibrary = &library{roots: map[string]net.Listener{}, hubs: map[string]*hostHub{}, devices: newDevices()}

// hostHub is the meeting point of the ranks of id u in this process.
func (l *library) hostHub(u uniqueID, size int) *hostHub {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hubs[u.tokenString()]
	if h == nil {
		h = newHostHub(size)
		l.hubs[u.tokenString()] = h
	}
	return h
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

// DefaultInitTimeout bounds a communicator's set-up: every rank must join
// within it (MSCCLGO_NCCL_TIMEOUT overrides it).
const DefaultInitTimeout = 120 * time.Second

// initTimeout is MSCCLGO_NCCL_TIMEOUT (a Go duration, or seconds), else
// DefaultInitTimeout.
func initTimeout() (time.Duration, error) {
	return envDuration("MSCCLGO_NCCL_TIMEOUT", DefaultInitTimeout)
}

// DefaultReplayTimeout bounds how long a launch replayed from a CUDA
// graph may make no progress before it is stopped
// (MSCCLGO_NCCL_REPLAY_TIMEOUT overrides it).
const DefaultReplayTimeout = 10 * time.Minute

// replayTimeout is MSCCLGO_NCCL_REPLAY_TIMEOUT, else DefaultReplayTimeout.
func replayTimeout() (time.Duration, error) {
	return envDuration("MSCCLGO_NCCL_REPLAY_TIMEOUT", DefaultReplayTimeout)
}

// envDuration reads variable name as a Go duration or a number of
// seconds; def when it is unset.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%s=%q: not a positive duration (e.g. 30s) or number of seconds", name, v)
}
