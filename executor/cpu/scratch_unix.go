//go:build unix

package cpu

// scratch_unix.go allocates scratch with an anonymous private mapping:
// pages a plan never touches never become resident (a plan's scratch is
// sized for its largest message and for both halves of double
// buffering), and Close gives the memory back to the system at once
// instead of leaving it to the collector.

import (
	"sync"
	"syscall"
)

// allocScratch returns n zeroed bytes, 8-byte aligned, and the function
// that releases them; calls after the first do nothing, so that Close
// and the session's cleanup may both call it.
func allocScratch(n uint64) ([]byte, func(), error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return b, func() { once.Do(func() { _ = syscall.Munmap(b) }) }, nil
}
