// Package memlimit finds how much more memory this process may really
// use: the address-space limit (RLIMIT_AS, `ulimit -v`) less the address
// space already reserved, the cgroup's memory limit less its usage, and
// the machine's available memory. Budgets that ignore these let the Go
// runtime die with "fatal error: out of memory" far below them: at start
// the process already holds several GiB of address space, 4 GiB of it a
// PROT_READ mapping that go.starlark.net makes in a package-level
// variable (smallints, reserveAddresses(1 << 32) in int_posix64.go) to
// represent small integers as addresses.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Headroom is how many more bytes the process may use, and what bounds
// it.
type Headroom struct {
	// Bytes is the tightest bound; 0 with What empty when none could be
	// read.
	Bytes uint64
	// What says which bound it is and how to raise it.
	What string
}

// Now returns the headroom of this process.
func Now() Headroom {
	return headroom(os.DirFS("/"), addressLimit())
}

// headroom computes the headroom from the files under fsys (/proc and
// /sys/fs/cgroup) and the address-space limit as (0: none).
func headroom(fsys fs.FS, as uint64) Headroom {
	var best Headroom
	take := func(n uint64, what string) {
		if best.What == "" || n < best.Bytes {
			best = Headroom{n, what}
		}
	}
	status, _ := fs.ReadFile(fsys, "proc/self/status")
	if as > 0 {
		if vm, ok := field(status, "VmSize:"); ok {
			left := uint64(0)
			if as > vm<<10 {
				left = as - vm<<10
			}
			take(left, fmt.Sprintf("the address-space limit (ulimit -v) of %s less the %s this process has reserved", text(as), text(vm<<10)))
		}
	}
	for _, c := range []struct{ max, cur string }{
		{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory.current"},
		{"sys/fs/cgroup/memory/memory.limit_in_bytes", "sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		lim, ok := number(fsys, c.max)
		if !ok || lim == 0 || lim >= 1<<60 { // "max" or v1's "no limit"
			continue
		}
		cur, _ := number(fsys, c.cur)
		left := uint64(0)
		if lim > cur {
			left = lim - cur
		}
		take(left, fmt.Sprintf("the cgroup memory limit of %s less the %s in use", text(lim), text(cur)))
	}
	if info, err := fs.ReadFile(fsys, "proc/meminfo"); err == nil {
		if kb, ok := field(info, "MemAvailable:"); ok {
			take(kb<<10, fmt.Sprintf("the machine's available memory, %s", text(kb<<10)))
		}
	}
	return best
}

// Machine returns the memory this process may use at most, whatever
// else runs: MemTotal of /proc/meminfo, or the cgroup limit (v2
// memory.max, v1 memory.limit_in_bytes) when lower; 0 when neither can
// be read. The string says which it is ("this machine's 23.5 GiB").
func Machine() (uint64, string) {
	return machine(os.DirFS("/"))
}

// machine is Machine with the files under fsys.
func machine(fsys fs.FS) (uint64, string) {
	total, src := uint64(0), ""
	if data, err := fs.ReadFile(fsys, "proc/meminfo"); err == nil {
		if kb, ok := field(data, "MemTotal:"); ok && kb > 0 {
			total, src = kb<<10, "this machine's "+text(kb<<10)
		}
	}
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		lim, ok := number(fsys, p)
		if !ok || lim == 0 { // "max": no limit
			continue
		}
		if total == 0 || lim < total {
			total, src = lim, "the cgroup memory limit of "+text(lim)
		}
	}
	return total, src
}

// field reads the number after name in a /proc file of "Name: N kB"
// lines.
func field(data []byte, name string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == name {
			n, err := strconv.ParseUint(f[1], 10, 64)
			return n, err == nil && n < 1<<50
		}
	}
	return 0, false
}

// number reads a file holding one decimal number.
func number(fsys fs.FS, name string) (uint64, bool) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// text writes a byte count in GiB or MiB.
func text(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
