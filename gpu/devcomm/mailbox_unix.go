//go:build unix

package devcomm

// mailbox_unix.go maps a communicator's mailbox (mailbox.go): a file
// (internal/shmfile: in /dev/shm where there is one, its room reserved at
// creation) that the host's first rank creates and every rank of the
// host maps MAP_SHARED; the creator removes it once every rank has
// mapped it, so nothing is left behind, and the next job reaps the file
// of a creator that died before.

import (
	"fmt"
	"os"
	"syscall"

	"github.com/mscclgo/mscclgo/internal/shmfile"
)

// createMailbox creates and maps a zeroed mailbox for n ranks; it
// returns the file's path, for the host's other ranks.
func createMailbox(n int) (string, *mailbox, error) {
	f, err := shmfile.Create("", "comm", mailboxSize(n))
	if err != nil {
		return "", nil, fmt.Errorf("the communicator's mailbox: %w", err)
	}
	defer f.Close()
	mb, err := mapMailbox(f, n)
	if err != nil {
		_ = os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), mb, nil
}

// openMailbox maps the mailbox at path.
func openMailbox(path string, n int) (*mailbox, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the communicator's mailbox: %w", err)
	}
	defer f.Close()
	return mapMailbox(f, n)
}

func mapMailbox(f *os.File, n int) (*mailbox, error) {
	size := mailboxSize(n)
	if fi, err := f.Stat(); err != nil || uint64(fi.Size()) != size {
		return nil, fmt.Errorf("the mailbox %s is not %d bytes (%v)", f.Name(), size, err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the mailbox %s: %w", f.Name(), err)
	}
	return &mailbox{b: b, n: n, peersRead: make([]uint64, n), unmap: func() error { return syscall.Munmap(b) }}, nil
}

func removeMailbox(path string) error { return os.Remove(path) }
