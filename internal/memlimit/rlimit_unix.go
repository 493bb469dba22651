//go:build unix

package memlimit

import "syscall"

// addressLimit returns the soft RLIMIT_AS, 0 when there is none.
func addressLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur >= 1<<62 { // RLIM_INFINITY
		return 0
	}
	return uint64(r.Cur)
}
