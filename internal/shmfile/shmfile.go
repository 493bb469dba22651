//go:build unix

// Package shmfile owns the shared-memory files of mscclgo's jobs of
// processes: a CPU rank session's mapping (executor/cpu) and a
// communicator's mailbox (gpu). Every such file is made by Create, which
//
//   - reserves the file's room up front (fallocate on Linux), so that a
//     directory without room fails at creation with an error naming the
//     file, the room it needs, the room free and the remedy, instead of
//     a SIGBUS at the first touch of a page tmpfs cannot give (Docker's
//     /dev/shm is 64 MiB unless told otherwise);
//   - names the file after its owner process (user, pid, start time, and
//     a key of the machine's boot and the pid namespace), so that
//   - it can first reap the files of dead jobs: a file whose owner is
//     gone (a SIGKILL between its creation and its removal) is removed
//     by the next job, and a live process's file is never touched.
//
// The directory is the caller's, else $MSCCLGO_SHM_DIR, else /dev/shm
// where it is a directory, else the temporary directory.
package shmfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// EnvDir is the variable that names the directory of the files.
const EnvDir = "MSCCLGO_SHM_DIR"

// prefix begins the name of every file Create makes.
const prefix = "mscclgo-"

// Dir returns the directory of the files: dir if it is not empty, else
// $MSCCLGO_SHM_DIR if set, else /dev/shm where it is a directory, else
// the temporary directory. A directory named by the variable that is not
// one is an error naming the variable.
func Dir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if v := os.Getenv(EnvDir); v != "" {
		if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("%s=%s: not a directory", EnvDir, v)
		}
		return v, nil
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm", nil
	}
	return os.TempDir(), nil
}

// Owner is the process that made a file, as its name records it.
type Owner struct {
	UID int
	PID int
	// Start is the process's start time (clock ticks after boot, as
	// /proc/PID/stat has it): with it a pid taken again by a later
	// process does not pass for the owner.
	Start uint64
	// Key is a hash of the machine's boot id and the process's pid
	// namespace: pids of another machine sharing the directory, of an
	// earlier boot or of another container mean nothing here. 0: not
	// known (such files are never reaped).
	Key uint32
}

// name is the file name of a file of kind (a word: "rank", "comm") made
// by o: mscclgo-KIND-UID-PID-START-KEY-RANDOM.
func (o Owner) name(kind string, r uint32) string {
	return fmt.Sprintf("%s%s-%d-%d-%d-%08x-%08x", prefix, kind, o.UID, o.PID, o.Start, o.Key, r)
}

// parseName returns the owner that a file name made by Create records;
// false for any other name (files of older versions among them).
func parseName(name string) (string, Owner, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return "", Owner{}, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 6 || f[0] == "" || strings.Trim(f[0], "abcdefghijklmnopqrstuvwxyz") != "" || len(f[4]) != 8 || len(f[5]) != 8 {
		return "", Owner{}, false
	}
	uid, err1 := strconv.ParseUint(f[1], 10, 31)
	pid, err2 := strconv.ParseUint(f[2], 10, 31)
	start, err3 := strconv.ParseUint(f[3], 10, 64)
	key, err4 := strconv.ParseUint(f[4], 16, 32)
	_, err5 := strconv.ParseUint(f[5], 16, 32)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || pid == 0 {
		return "", Owner{}, false
	}
	return f[0], Owner{UID: int(uid), PID: int(pid), Start: start, Key: uint32(key)}, true
}

// system is what Create asks of the operating system; tests replace it.
type system struct {
	// self is this process; false when it cannot be told (then nothing
	// is reaped).
	self func() (Owner, bool)
	// alive says whether o's process still runs; true when it cannot
	// be told.
	alive func(o Owner) bool
	// reserve gives f size bytes of room (ENOSPC or EDQUOT where the
	// file system has not got them).
	reserve func(f *os.File, size int64) error
	// space is the room free in dir and its size, in bytes.
	space func(dir string) (free, total uint64, err error)
}

// Create makes a zeroed file of size bytes for kind (a word naming the
// file's use: "rank", "comm") in Dir(dir), its room reserved, after
// removing the files of dead jobs there (Reap). The caller maps it,
// closes it and removes it once its peers have mapped it.
func Create(dir, kind string, size uint64) (*os.File, error) {
	return create(host(), dir, kind, size)
}

func create(sys system, dir, kind string, size uint64) (*os.File, error) {
	dir, err := Dir(dir)
	if err != nil {
		return nil, fmt.Errorf("shared memory: %w", err)
	}
	if size > 1<<62 {
		return nil, fmt.Errorf("shared memory: %d bytes: too large a file", size)
	}
	me, known := sys.self()
	var held usage
	if known {
		_, held = reap(sys, dir, me)
	}
	var f *os.File
	for try := 0; ; try++ {
		f, err = os.OpenFile(filepath.Join(dir, me.name(kind, rand.Uint32())), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 16 {
			return nil, fmt.Errorf("shared memory: creating a file in %s: %w (%s)", dir, err, remedy(dir))
		}
	}
	if err := sys.reserve(f, int64(size)); err != nil {
		path := f.Name()
		_ = f.Close()
		_ = os.Remove(path)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return nil, noRoom(sys, dir, path, size, held)
		}
		return nil, fmt.Errorf("shared memory: reserving %s for %s: %w (%s)", bytesOf(size), path, err, remedy(dir))
	}
	return f, nil
}

// noRoom is the error of a file of size bytes at path that dir has no
// room for.
func noRoom(sys system, dir, path string, size uint64, held usage) error {
	var b strings.Builder
	fmt.Fprintf(&b, "shared memory: no room in %s for %s: it needs %s", dir, filepath.Base(path), bytesOf(size))
	if free, total, err := sys.space(dir); err == nil {
		fmt.Fprintf(&b, ", %s has %s free of %s", dir, bytesOf(free), bytesOf(total))
	}
	if held.files > 0 {
		fmt.Fprintf(&b, " (%d file(s) of running mscclgo jobs hold %s of it)", held.files, bytesOf(held.bytes))
	}
	fmt.Fprintf(&b, ": %s", remedy(dir))
	return errors.New(b.String())
}

// remedy says how to give the files more room.
func remedy(dir string) string {
	if dir == "/dev/shm" {
		return "give /dev/shm more room (docker run --shm-size=1g; in Kubernetes an emptyDir of medium Memory at /dev/shm; " +
			"else mount -o remount,size=... /dev/shm) or set " + EnvDir + " to a directory with room"
	}
	return "free room in " + dir + " or set " + EnvDir + " to a directory with room"
}

// usage counts files and the bytes they hold.
type usage struct {
	files int
	bytes uint64
}

// Reap removes the files in Dir(dir) whose owner process is gone: only
// files this user made, on this machine since its boot, in this
// process's pid namespace, whose owner's pid is free or taken by a later
// process. Every other file is left alone. It returns the paths removed.
func Reap(dir string) ([]string, error) {
	dir, err := Dir(dir)
	if err != nil {
		return nil, err
	}
	sys := host()
	me, ok := sys.self()
	if !ok {
		return nil, nil
	}
	removed, _ := reap(sys, dir, me)
	return removed, nil
}

// reap removes dir's dead files and returns them and what the other
// files of the prefix hold.
func reap(sys system, dir string, me Owner) ([]string, usage) {
	var removed []string
	var held usage
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, held
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue
		}
		_, o, ok := parseName(e.Name())
		st, isStat := fi.Sys().(*syscall.Stat_t)
		if ok && isStat && me.Key != 0 && o.Key == me.Key && o.UID == me.UID && int(st.Uid) == me.UID &&
			(o.PID != me.PID || o.Start != me.Start) && !sys.alive(o) {
			if err := os.Remove(path); err == nil {
				removed = append(removed, path)
				continue
			}
		}
		held.files++
		if isStat {
			held.bytes += uint64(st.Blocks) * 512
		} else {
			held.bytes += uint64(fi.Size())
		}
	}
	return removed, held
}

// bytesOf writes n bytes in the largest binary unit not above it, with
// the exact count where that unit does not divide it.
func bytesOf(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	u := 0
	for u < len(units)-1 && n >= uint64(1)<<(10*(u+2)) {
		u++
	}
	unit := uint64(1) << (10 * (u + 1))
	if n%unit == 0 {
		return fmt.Sprintf("%d %s", n/unit, units[u])
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", float64(n)/float64(unit), units[u], n)
}
