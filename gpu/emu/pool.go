//go:build cgo

package emu

/*
#include <stdint.h>
uint64_t mg_host_threads_started(void);
*/
import "C"

// HostThreadsStarted returns how many host threads the emulated
// devices of this process have started: the launcher keeps them in a
// pool across launches and devices (csrc/host/launch.cc), so a launch
// starts only those its grid needs beyond the idle ones.
func HostThreadsStarted() uint64 { return uint64(C.mg_host_threads_started()) }

// cString returns s NUL-terminated in Go memory, for a C call that reads
// it during the call only. Unlike C.CString it needs no C.free: a malloc
// on one OS thread and its free on another (a goroutine moves between
// them) is a race to ThreadSanitizer (make gpu-tsan), which does not see
// the goroutine's order.
func cString(s string) []byte { return append([]byte(s), 0) }
