//go:build !unix

package atomicfile

// lock_other.go: systems without flock(2) cannot tell a stale
// temporary output from one being written, so none is removed.

import "os"

// lockTemp does nothing: there is no lock on this system.
func lockTemp(*os.File) error { return nil }

// writerGone is always false: without a lock, a writer cannot be told
// gone.
func writerGone(string) bool { return false }

// renameTemp closes the temporary file f and puts it in place as final.
func renameTemp(f *os.File, final string) error {
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), final)
}
