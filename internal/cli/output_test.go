package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteTargets: -o writes through a symlink to its target (the link
// stays a link), creates the target of a dangling link, streams into a
// FIFO or a device, and refuses a directory; a regular file is replaced
// atomically.
func TestWriteTargets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "one.star"), oneProgram)
	plan := func(args ...string) (int, string) {
		code, _, stderr := run(t, dir, append([]string{"eval", "$DIR/one.star"}, args...)...)
		return code, stderr
	}
	// A symlink to an existing file.
	if err := os.WriteFile(filepath.Join(dir, "real.json"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.json", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if code, stderr := plan("-o", "$DIR/link.json"); code != 0 {
		t.Fatalf("through a symlink: exit %d: %s", code, stderr)
	}
	if st, err := os.Lstat(filepath.Join(dir, "link.json")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.json is no longer a symlink (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "real.json")); !strings.Contains(string(b), `"name": "one"`) {
		t.Errorf("real.json holds %q, want the plan", b)
	}
	// A dangling symlink.
	if err := os.Symlink("sub/new.json", filepath.Join(dir, "dangling.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, stderr := plan("-o", "$DIR/dangling.json"); code != 0 {
		t.Fatalf("through a dangling symlink: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "new.json")); err != nil {
		t.Errorf("the dangling link's target was not created: %v", err)
	}
	// A device.
	if code, stderr := plan("-o", "/dev/null"); code != 0 {
		t.Errorf("/dev/null: exit %d: %s", code, stderr)
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeDevice == 0 {
		t.Errorf("/dev/null is no longer a device (%v)", err)
	}
	// A FIFO with a reader.
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		got := make(chan string)
		go func() {
			f, err := os.Open(fifo)
			if err != nil {
				got <- err.Error()
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			got <- string(b)
		}()
		if code, stderr := plan("-o", fifo); code != 0 {
			t.Errorf("FIFO: exit %d: %s", code, stderr)
		}
		if s := <-got; !strings.Contains(s, `"name": "one"`) {
			t.Errorf("the FIFO's reader got %q", s)
		}
		if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("fifo.json is no longer a FIFO (%v)", err)
		}
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
