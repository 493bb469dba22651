package cpu

// futex_linux.go: the doorbell of a multi-process session sleeps and wakes
// through futexes on the shared mapping (shared, not private, so that
// they work across processes).

import (
	"syscall"
	"time"
	"unsafe"
)

const (
	futexWait = 0
	futexWake = 1
)

// sleepOn blocks until *addr != val, a wake-up, or d.
func sleepOn(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeAll wakes every sleeper on addr.
func wakeAll(addr *uint32) {
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<30), 0, 0, 0)
}
