package infile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	loop := filepath.Join(dir, "loop.json")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		path    string
		want    string // contents, or the error's text
		wantErr error
	}{
		{"regular", small, "{}\n", nil},
		{"at the cap", big, strings.Repeat("\x00", 2048), nil},
		{"above the cap", big, big + " has 2048 bytes (2 KiB): a test file may have at most 1024 bytes (1 KiB)", ErrTooLarge},
		{"FIFO", fifo, fifo + " is a FIFO, not a regular file (want a test file)", ErrNotRegular},
		{"device", "/dev/zero", "/dev/zero is a device, not a regular file (want a test file)", ErrNotRegular},
		{"directory", dir, dir + " is a directory, not a regular file (want a test file)", ErrNotRegular},
		{"link loop", loop, loop + ": a loop of symbolic links (want a test file)", ErrLinkLoop},
		{"missing", filepath.Join(dir, "none"), filepath.Join(dir, "none") + ": no such file or directory", fs.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			max := int64(1024)
			if c.name == "at the cap" {
				max = 2048
			}
			// A FIFO must be refused without blocking: a read that
			// blocks fails here instead of hanging the test.
			type read struct {
				data []byte
				err  error
			}
			done := make(chan read, 1)
			go func() {
				data, err := Read(c.path, "a test file", max)
				done <- read{data, err}
			}()
			var data []byte
			var err error
			select {
			case r := <-done:
				data, err = r.data, r.err
			case <-time.After(hangBound):
				t.Fatalf("Read(%s) still blocked after %v", c.path, hangBound)
			}
			if c.wantErr == nil {
				if err != nil || string(data) != c.want {
					t.Fatalf("got %q, %v; want %q", data, err, c.want)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if err.Error() != c.want {
				t.Errorf("error %q\nwant  %q", err, c.want)
			}
		})
	}
}

// TestReadGrowing reads a file that is larger when read than its size
// said: /proc files report size 0.
func TestReadGrowing(t *testing.T) {
	data, err := Read("/proc/self/status", "a proc file", 1<<20)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if len(data) == 0 {
		t.Fatal("read nothing")
	}
	_, err = Read("/proc/self/status", "a proc file", 16)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "has more than 16 bytes") {
		t.Errorf("error %v, want one saying it has more than 16 bytes", err)
	}
}

// hangBound is how long a read may take before the test calls it blocked.
const hangBound = 10 * time.Second
