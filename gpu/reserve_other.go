//go:build !unix

package gpu

// reserve_other.go: systems without mmap have no rank sessions.

import "errors"

// reservation is reserved address space.
type reservation struct{ b []byte }

func reserve(n uint64) (reservation, error) {
	return reservation{}, errors.New("reserving address space needs a unix system")
}

func (r reservation) release() {}
