//go:build unix

package cpu

// shm_unix.go holds the shared memory of multi-process sessions: a file
// (internal/shmfile: in /dev/shm where there is one, its room reserved
// at creation) mapped MAP_SHARED by its owner rank and by every peer rank
// on the same host, the CPU analogue of a CUDA IPC memory handle. The
// owner removes the file once every peer has mapped it, so nothing is
// left behind if a process dies later; the next job reaps the file of an
// owner that died before.

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/mscclgo/mscclgo/internal/shmfile"
)

// mapping is one shared mapping.
type mapping struct {
	b    []byte
	once sync.Once
}

// createMapping creates a zeroed file of n bytes in dir (shmfile.Dir)
// and maps it.
func createMapping(dir string, n uint64) (string, *mapping, error) {
	f, err := shmfile.Create(dir, "rank", n)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	path := f.Name()
	m, err := mapFile(f, n)
	if err != nil {
		os.Remove(path)
		return "", nil, fmt.Errorf("mapping shared memory %s: %w", path, err)
	}
	return path, m, nil
}

// openMapping maps a peer's file of n bytes.
func openMapping(path string, n uint64) (*mapping, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if uint64(fi.Size()) != n {
		return nil, fmt.Errorf("%s has %d bytes, want %d", path, fi.Size(), n)
	}
	return mapFile(f, n)
}

func mapFile(f *os.File, n uint64) (*mapping, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &mapping{b: b}, nil
}

// release unmaps m; later calls do nothing.
func (m *mapping) release() {
	if m != nil {
		m.once.Do(func() { _ = syscall.Munmap(m.b) })
	}
}

// reserveMapping reserves n bytes of address space that can be neither
// read nor written: the image of a rank on another host, whose regions
// only give port transfers their offsets and lengths (the bytes travel
// over the network).
func reserveMapping(n uint64) (*mapping, error) {
	b, err := syscall.Mmap(-1, 0, int(max(n, 1)), syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	return &mapping{b: b[:n]}, nil
}
