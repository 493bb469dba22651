package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCPUProfiler: a stretch writes a gzip'd pprof file named by rank,
// process and stretch into the directory (made if missing); a second
// start while one runs is a no-op; an unset variable profiles nothing;
// a directory that cannot be made is an error naming the variable and
// the value.
func TestCPUProfiler(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	var p cpuProfiler
	if err := p.start("", 3); err != nil || p.f != nil {
		t.Fatalf("start without a directory: %v, running %v", err, p.f != nil)
	}
	for seq := 1; seq <= 2; seq++ {
		if err := p.start(dir, 3); err != nil {
			t.Fatal(err)
		}
		first := p.path
		if err := p.start(dir, 5); err != nil || p.path != first {
			t.Fatalf("second start: %v, path %s (want %s)", err, p.path, first)
		}
		path, err := p.stop()
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, "cpu-rank3-pid"+strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(seq)+".pprof")
		if path != want {
			t.Fatalf("profile %s, want %s", path, want)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Fatalf("profile %s: %v, %d bytes, want gzip", path, err, len(b))
		}
	}
	if path, err := p.stop(); path != "" || err != nil {
		t.Fatalf("stop without a profile: %q, %v", path, err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub")
	err := p.start(bad, 0)
	if err == nil || !strings.Contains(err.Error(), cpuProfileEnv+`="`+bad+`"`) || p.f != nil {
		t.Fatalf("start in %s: %v (running %v), want an error naming %s and the value", bad, err, p.f != nil, cpuProfileEnv)
	}
}
