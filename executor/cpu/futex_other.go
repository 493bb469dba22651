//go:build !linux

package cpu

// futex_other.go: without futexes the doorbell's sleeper naps briefly and
// looks again.

import "time"

func sleepOn(addr *uint32, val uint32, d time.Duration) { time.Sleep(min(d, 100*time.Microsecond)) }

func wakeAll(*uint32) {}
