//go:build !unix

package cpu

// scratch_other.go allocates scratch on the Go heap where there are no
// anonymous mappings.

import "unsafe"

// allocScratch returns n zeroed bytes, 8-byte aligned, and the function
// that releases them.
func allocScratch(n uint64) ([]byte, func(), error) {
	words := make([]uint64, (n+7)/8)
	if len(words) == 0 {
		return nil, func() {}, nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n), func() {}, nil
}
