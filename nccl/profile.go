package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// cpuProfileEnv names a directory: while it is set, every process that
// loads the library writes a pprof CPU profile of each stretch of time
// it has communicators (from the first one's init to the last one's
// destroy or abort) into a file of its own there (docs/integration.md,
// "Profiling"). The library is loaded into programs (python under
// torchrun) that have no flag of their own for it.
const cpuProfileEnv = "MSCCLGO_CPUPROFILE"

// cpuProfiler is the library's CPU profile: the file of the stretch
// being profiled, nil between stretches. Its methods run under
// library.mu, which orders the starts and the stops.
type cpuProfiler struct {
	f    *os.File
	path string
	seq  int // stretches profiled (or tried) so far
}

// start begins a profile in dir (made if missing) for the communicator
// of rank rank: the file cpu-rank<rank>-pid<pid>-<seq>.pprof. It does
// nothing when dir is "" or a profile runs.
func (p *cpuProfiler) start(dir string, rank int) error {
	if dir == "" || p.f != nil {
		return nil
	}
	p.seq++
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s=%q: %w", cpuProfileEnv, dir, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("cpu-rank%d-pid%d-%d.pprof", rank, os.Getpid(), p.seq))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", cpuProfileEnv, dir, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("%s=%q: starting the CPU profile %s: %w", cpuProfileEnv, dir, path, err)
	}
	p.f, p.path = f, path
	return nil
}

// stop ends the running profile, if any, and returns its file's path
// ("" for none).
func (p *cpuProfiler) stop() (string, error) {
	if p.f == nil {
		return "", nil
	}
	pprof.StopCPUProfile()
	f, path := p.f, p.path
	p.f, p.path = nil, ""
	if err := f.Close(); err != nil {
		return path, fmt.Errorf("%s: writing the CPU profile %s: %w", cpuProfileEnv, path, err)
	}
	return path, nil
}

// profileStarted and profileStopped are what the library says of its
// profile: a failure always on stderr (the variable asked for a file
// that will not be written), the file at INFO.
func profileStarted(p *cpuProfiler, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "mscclgo: no CPU profile: %v\n", err)
	} else if p.f != nil {
		logInfo("mscclgo: CPU profile to %s", p.path)
	}
}

func profileStopped(path string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "mscclgo: %v\n", err)
	} else if path != "" {
		logInfo("mscclgo: CPU profile written to %s", path)
	}
}
