//go:build unix

package atomicfile

// lock_unix.go: the temporary file of an output is locked with
// flock(2) while its writer lives (the kernel drops the lock when the
// process ends, however it ends), so that a later write of the same
// output can tell a stale temporary from one being written.

import (
	"errors"
	"os"
	"syscall"
)

// lockTemp takes the writer's lock on its temporary file.
func lockTemp(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// writerGone reports whether no process holds the lock of the temporary
// file path (a regular file, not followed if it is a link).
func writerGone(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil
	}
}

// renameTemp puts the temporary file f in place as final and closes it:
// renamed while still open, so that it stays locked until it has its
// final name.
func renameTemp(f *os.File, final string) error {
	if err := os.Rename(f.Name(), final); err != nil {
		return err
	}
	return f.Close()
}
