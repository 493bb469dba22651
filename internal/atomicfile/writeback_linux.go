package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteBack asks the kernel to start writing n bytes of f from off
// to the disk, without waiting for it. It is only a head start for the
// sync that makes the output durable; a failure is ignored.
func startWriteBack(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
