//go:build !unix

package install

// planset_lock_other.go: systems without flock(2) have no plan set lock,
// so concurrent installs into one directory are not serialised there.

import "os"

// tryLockFile always succeeds: there is no lock on this system.
func tryLockFile(*os.File) (bool, error) { return true, nil }

// unlockFile does nothing.
func unlockFile(*os.File) {}
