//go:build unix

package gpu

// reserve_unix.go reserves address space that can be neither read nor
// written: the image of a rank in another process, whose addresses the
// rank table needs (a port transfer's destination is translated back to
// the rank, buffer and offset) and whose bytes are never touched here.

import "syscall"

// reservation is reserved address space.
type reservation struct{ b []byte }

func reserve(n uint64) (reservation, error) {
	b, err := syscall.Mmap(-1, 0, int(max(n, 1)), syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return reservation{}, err
	}
	return reservation{b: b[:n]}, nil
}

func (r reservation) release() {
	if r.b != nil {
		_ = syscall.Munmap(r.b[:cap(r.b)])
	}
}
