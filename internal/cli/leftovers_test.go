package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestInstallDirNotADirectory: install --dir naming a device or a FIFO
// is refused before anything is created beside it (its lock file).
func TestInstallDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	// A link is replaced by install (its target left alone), so the
	// device is named directly; its lock file would be /dev/.null.lock.
	_, err := os.Lstat("/dev/.null.lock")
	nullLockBefore := err == nil
	for _, target := range []string{fifo, "/dev/null"} {
		t.Run(filepath.Base(target), func(t *testing.T) {
			code, _, stderr := run(t, dir, "install", "--dir", target)
			if code != ExitError || !strings.Contains(stderr, target+" exists and is not a directory") {
				t.Errorf("exit %d, stderr %q; want 1 and a refusal naming %s", code, stderr, target)
			}
			if got := dirNames(t, dir); strings.Join(got, " ") != "pipe" {
				t.Errorf("left behind: %v", got)
			}
			if _, err := os.Lstat("/dev/.null.lock"); err == nil && !nullLockBefore {
				t.Errorf("created /dev/.null.lock")
			}
		})
	}
}

// TestSourceMapBesideDevice: eval -o DEVICE --source-map is refused, and
// no DEVICE.map is created.
func TestSourceMapBesideDevice(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "one.star"), oneProgram)
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	null := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ out, kind string }{{fifo, "a FIFO"}, {null, "a device"}} {
		t.Run(filepath.Base(c.out), func(t *testing.T) {
			code, _, stderr := run(t, dir, "eval", filepath.Join(dir, "one.star"), "-o", c.out, "--source-map")
			want := "-o " + c.out + " is " + c.kind + ", not a file"
			if code != ExitUsage || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
			}
			if got := dirNames(t, dir); strings.Join(got, " ") != "null one.star pipe" {
				t.Errorf("left behind: %v", got)
			}
		})
	}
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
