package cpu

import (
	"syscall"
	"time"
)

// procCPU returns the process's CPU time (user and system, every
// thread) f took: the time a loaded machine's other processes lengthen
// least (not by preemption; by the memory and caches they share). The
// process runs nothing else meanwhile.
func procCPU(f func()) (time.Duration, bool) {
	var a, b syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &a) != nil {
		return 0, false
	}
	f()
	if syscall.Getrusage(syscall.RUSAGE_SELF, &b) != nil {
		return 0, false
	}
	return time.Duration(b.Utime.Nano() + b.Stime.Nano() - a.Utime.Nano() - a.Stime.Nano()), true
}
