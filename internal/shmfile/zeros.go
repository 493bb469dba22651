//go:build unix

package shmfile

import "os"

// writeZeros writes zeros over f's bytes [off, size): the room is then
// the file system's, where no fallocate reserves it.
func writeZeros(f *os.File, off, size int64) error {
	if off >= size {
		return nil
	}
	zero := make([]byte, min(1<<20, size-off))
	for off < size {
		n, err := f.WriteAt(zero[:min(int64(len(zero)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
