// Devices, FIFOs and directories where a script or a plan is expected:
// each is refused at once with a named error instead of being read
// forever.

package hostile

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestNonRegularInputs runs eval, check and run on /dev/zero, a FIFO
// nobody writes, a directory, and a script that loads a FIFO.
func TestNonRegularInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.star")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	fifoJSON := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(fifoJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "loads.star", "load(\"pipe.star\", \"x\")\n")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"eval /dev/zero", []string{"eval", "/dev/zero"}, []string{"zero", "not a regular file"}},
		{"eval a FIFO", []string{"eval", "pipe.star"}, []string{"pipe.star is a FIFO"}},
		{"eval loading a FIFO", []string{"eval", "loads.star"}, []string{"loads.star:1:", "pipe.star is a FIFO"}},
		{"check /dev/zero", []string{"check", "/dev/zero"}, []string{"/dev/zero"}},
		{"check a FIFO", []string{"check", "pipe.json"}, []string{"pipe.json"}},
		{"run /dev/zero", []string{"run", "/dev/zero", "--size", "1M"}, []string{"/dev/zero"}},
		{"run a FIFO", []string{"run", "pipe.json", "--size", "1M"}, []string{"pipe.json"}},
		{"check a directory", []string{"check", "."}, []string{"directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := mscclgo(t, dir, c.args...)
			r.wantError(t, 1, 512<<20, c.want...)
		})
	}
}
