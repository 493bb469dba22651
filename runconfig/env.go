package runconfig

// env.go: the Settings of the NCCL-compatible library, from its
// environment variables.

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/gpu"
)

// The library's environment variables (and fabric.TransportVar).
const (
	// TimeoutEnv is Settings.SetupTimeout: a communicator's set-up, and
	// every wait of its calls for their peers.
	TimeoutEnv = "MSCCLGO_NCCL_TIMEOUT"
	// HelloTimeoutEnv is Settings.HelloTimeout, read under auto only.
	HelloTimeoutEnv = "MSCCLGO_FABRIC_HELLO_TIMEOUT"
	// ReplayTimeoutEnv is Settings.ReplayTimeout.
	ReplayTimeoutEnv = "MSCCLGO_NCCL_REPLAY_TIMEOUT"
	// MaxSessionsEnv is Settings.MaxSessions: the plan instances each
	// communicator keeps open; beyond it, the least recently called one
	// is closed, on every rank, and opened again at its next call.
	MaxSessionsEnv = "MSCCLGO_NCCL_MAX_SESSIONS"
	// ThreadsEnv is Settings.Threads.
	ThreadsEnv = "MSCCLGO_NCCL_THREADS"
	// MeetEveryCallEnv set to 1 is Settings.MeetEveryCall.
	MeetEveryCallEnv = "MSCCLGO_NCCL_MEET_EVERY_CALL"
)

// The library's defaults.
const (
	// DefaultSetupTimeout bounds a communicator's set-up: every rank must
	// join within it.
	DefaultSetupTimeout = 120 * time.Second
	// DefaultReplayTimeout bounds how long a launch replayed from a CUDA
	// graph may make no progress before it is stopped.
	DefaultReplayTimeout = 10 * time.Minute
)

// The bounds of the library's durations: shorter than a millisecond is
// no time to meet in, longer than a day is a hang in all but name.
const (
	MinEnvDuration = time.Millisecond
	MaxEnvDuration = 24 * time.Hour
)

// FromEnv returns the library's Settings from the environment that
// getenv (os.Getenv) gives, each variable unset taking its default:
// fabric.TransportVar (auto), TimeoutEnv (DefaultSetupTimeout),
// HelloTimeoutEnv (fabric.DefaultAutoHelloTimeout; read under auto
// only), ReplayTimeoutEnv (DefaultReplayTimeout), MaxSessionsEnv
// (gpu.DefaultMaxSessions), ThreadsEnv (a value that is not an integer
// is 0, the default) and MeetEveryCallEnv. The error names the first
// variable that is malformed and its value; the transport itself is
// checked by OpenTransport (CheckTransport).
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{Transport: fabric.Transport(fabric.TransportSetting(getenv)), SetupBound: TimeoutEnv}
	var err error
	if s.SetupTimeout, err = EnvDuration(getenv, TimeoutEnv, DefaultSetupTimeout); err != nil {
		return Settings{}, err
	}
	if s.ReplayTimeout, err = EnvDuration(getenv, ReplayTimeoutEnv, DefaultReplayTimeout); err != nil {
		return Settings{}, err
	}
	if s.MaxSessions, err = ParseMaxSessions(getenv(MaxSessionsEnv)); err != nil {
		return Settings{}, err
	}
	if s.Transport == fabric.Auto {
		if s.HelloTimeout, err = EnvDuration(getenv, HelloTimeoutEnv, fabric.DefaultAutoHelloTimeout); err != nil {
			return Settings{}, err
		}
		s.HelloBound = HelloTimeoutEnv
	}
	s.Threads, _ = strconv.Atoi(getenv(ThreadsEnv))
	s.Threads = max(s.Threads, 0)
	s.MeetEveryCall = getenv(MeetEveryCallEnv) == "1"
	return s, nil
}

// EnvDuration reads variable name of getenv as a Go duration or a
// number of seconds, from MinEnvDuration to MaxEnvDuration; def when it
// is unset.
func EnvDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	return ParseDuration(name, v)
}

// ParseDuration is EnvDuration's reading of value v of variable name.
func ParseDuration(name, v string) (time.Duration, error) {
	var d time.Duration
	if pd, err := time.ParseDuration(v); err == nil {
		d = pd
	} else if s, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(s) {
		// Bounded before the conversion, which would overflow.
		switch {
		case s > MaxEnvDuration.Seconds():
			return 0, fmt.Errorf("%s=%q: %g seconds is more than %v: set a duration from %v to %v", name, v, s, MaxEnvDuration, MinEnvDuration, MaxEnvDuration)
		case s < MinEnvDuration.Seconds():
			return 0, fmt.Errorf("%s=%q: %g seconds is less than %v: set a duration from %v to %v", name, v, s, MinEnvDuration, MinEnvDuration, MaxEnvDuration)
		}
		d = time.Duration(s * float64(time.Second))
	} else {
		return 0, fmt.Errorf("%s=%q: not a duration (e.g. 30s) or a number of seconds", name, v)
	}
	if d < MinEnvDuration || d > MaxEnvDuration {
		return 0, fmt.Errorf("%s=%q: %v is outside %v to %v", name, v, d, MinEnvDuration, MaxEnvDuration)
	}
	return d, nil
}

// ParseMaxSessions reads value v of MaxSessionsEnv ("" for unset:
// gpu.DefaultMaxSessions).
func ParseMaxSessions(v string) (int, error) {
	if v == "" {
		return gpu.DefaultMaxSessions, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > gpu.MaxSessionsLimit {
		return 0, fmt.Errorf("%s=%q: want a number of plan instances open per communicator from 1 to %d (default %d)",
			MaxSessionsEnv, v, gpu.MaxSessionsLimit, gpu.DefaultMaxSessions)
	}
	return n, nil
}
