//go:build linux

package shmfile

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// host is the running system.
func host() system {
	return system{self: self, alive: alive, reserve: reserve, space: space}
}

// reserveStep is how much one fallocate call reserves: tmpfs gives up a
// call at a signal (EINTR), so a large file is reserved in pieces, each
// tried again until it holds.
const reserveStep = 16 << 20

// reserve gives f size bytes of room with fallocate, or by writing zeros
// where the file system has no fallocate.
func reserve(f *os.File, size int64) error {
	fd := int(f.Fd())
	for off, intr := int64(0), 0; off < size; {
		n := min(reserveStep, size-off)
		err := unix.Fallocate(fd, 0, off, n)
		switch {
		case err == nil:
			off, intr = off+n, 0
		case errors.Is(err, unix.EINTR) && intr < 1000:
			intr++
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			return writeZeros(f, off, size)
		default:
			return fmt.Errorf("fallocate: %w", err)
		}
	}
	return nil
}

// space is the room free in dir and its size (statfs).
func space(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// self is this process as /proc sees it; false where /proc does not show
// this process under its own pid (another pid namespace's /proc) or the
// boot id or pid namespace cannot be read.
func self() (Owner, bool) {
	me := Owner{UID: os.Geteuid(), PID: os.Getpid()}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return me, false
	}
	pid, _, start, ok := parseStat(b)
	if !ok || pid != me.PID {
		return me, false
	}
	me.Start = start
	boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, err2 := os.Readlink("/proc/self/ns/pid")
	if err1 != nil || err2 != nil {
		return me, false
	}
	h := fnv.New32a()
	h.Write(bytes.TrimSpace(boot))
	h.Write([]byte{0})
	h.Write([]byte(ns))
	me.Key = max(h.Sum32(), 1)
	return me, true
}

// alive says whether o's process runs: its pid is taken by a process
// that started when o did and is not a zombie. True where /proc cannot
// tell.
func alive(o Owner) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(o.PID) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return false
	}
	if err != nil {
		return true
	}
	pid, state, start, ok := parseStat(b)
	if !ok || pid != o.PID {
		return true
	}
	return state != 'Z' && state != 'X' && start == o.Start
}

// parseStat reads the pid, the state and the start time of a
// /proc/PID/stat line: "PID (COMM) STATE PPID ..." with the start time
// the 22nd field (COMM may hold spaces and parentheses: the last ')'
// ends it).
func parseStat(b []byte) (pid int, state byte, start uint64, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return 0, 0, 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return 0, 0, 0, false
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, 0, false
	}
	return pid, f[0][0], start, true
}
