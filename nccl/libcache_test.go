package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The two c-shared builds of the library (the plain one and the emulated
// device's) are the slowest part of the package's set-up: the go command
// caches no c-shared link and, in this mode, compiles the cgo packages
// again (the C++ of the emulated kernel: some 15 s of CPU) on every run.
// cachedGoBuild keeps each built library in the user's cache directory
// under a key that covers everything the build reads: the go command's
// arguments, the toolchains (go version, go env, gcc and g++ versions)
// and the content of every file of the module (not only the package's,
// since cgo includes csrc/ from gpu/emu) but tests (*_test.go,
// testdata/), documentation (*.md) and Python (*.py), which no build
// reads. A change anywhere else in the checkout builds again; a hit
// copies the file. MSCCLGO_TEST_NO_LIBCACHE=1
// builds every time.

// libCacheKeep is how many built libraries the cache keeps (the newest):
// the two builds of the current tree and of one earlier tree.
const libCacheKeep = 4

// cachedGoBuild runs argv, a go build whose output is the file after -o,
// or copies the file a run of the same build on the same tree left in
// the cache.
func cachedGoBuild(ctx context.Context, argv []string) error {
	out := ""
	for i, a := range argv {
		if a == "-o" && i+1 < len(argv) {
			out = argv[i+1]
		}
	}
	build := func() error {
		b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, b)
		}
		return nil
	}
	cacheRoot, err := os.UserCacheDir()
	if out == "" || err != nil || os.Getenv("MSCCLGO_TEST_NO_LIBCACHE") == "1" {
		return build()
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return build()
	}
	key, err := buildKey(ctx, argv, out, root)
	if err != nil {
		return build()
	}
	dir := filepath.Join(cacheRoot, "mscclgo", "nccl-test-lib")
	cached := filepath.Join(dir, key+".so")
	if copyFile(cached, out) == nil {
		now := time.Now()
		os.Chtimes(cached, now, now) // the newest are kept
		return nil
	}
	if err := build(); err != nil {
		return err
	}
	// Into the cache through a temporary file and a rename, so that a
	// binary reading it at the same time sees the whole file or none.
	if os.MkdirAll(dir, 0o755) == nil {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", key, os.Getpid()))
		if copyFile(out, tmp) == nil && os.Rename(tmp, cached) == nil {
			pruneLibCache(dir)
		}
		os.Remove(tmp)
	}
	return nil
}

// buildKey is the hex SHA-256 of what a go build argv (its output out
// left out) reads: the arguments, the toolchains and the files under root
// (the module).
func buildKey(ctx context.Context, argv []string, out, root string) (string, error) {
	h := sha256.New()
	for _, a := range argv {
		if a != out {
			fmt.Fprintf(h, "arg %q\n", a)
		}
	}
	for _, tool := range [][]string{{argv[0], "version"}, {argv[0], "env"}, {"gcc", "--version"}, {"g++", "--version"}} {
		b, err := exec.CommandContext(ctx, tool[0], tool[1:]...).Output()
		if err != nil {
			return "", err
		}
		// GOGCCFLAGS names a temporary directory of its own each time.
		lines := slices.DeleteFunc(strings.Split(string(b), "\n"), func(l string) bool { return strings.HasPrefix(l, "GOGCCFLAGS=") })
		fmt.Fprintf(h, "%s\n%s\n", strings.Join(tool, " "), strings.Join(lines, "\n"))
	}
	for _, kv := range os.Environ() {
		// What go env does not show but the C compilers read.
		if name, _, _ := strings.Cut(kv, "="); slices.Contains([]string{"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH"}, name) {
			fmt.Fprintf(h, "env %s\n", kv)
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// The checkout's build outputs (bin/, build/), git's own,
			// and what a build never reads: testdata/.
			if rel == ".git" || rel == "bin" || rel == "build" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		// Neither does a build read tests, nor (no go:embed names them)
		// documentation and Python: editing them builds nothing again.
		if n := d.Name(); strings.HasSuffix(n, "_test.go") || strings.HasSuffix(n, ".md") || strings.HasSuffix(n, ".py") {
			return nil
		}
		if !d.Type().IsRegular() {
			fmt.Fprintf(h, "other %q %v\n", rel, d.Type())
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fh := sha256.New()
		if _, err := io.Copy(fh, f); err != nil {
			return err
		}
		fmt.Fprintf(h, "file %q %x\n", rel, fh.Sum(nil))
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies from to to (mode 0o755), through a write of the whole.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// pruneLibCache removes all but the libCacheKeep newest libraries of dir.
func pruneLibCache(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type lib struct {
		path string
		mod  time.Time
	}
	var libs []lib
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".so") {
			libs = append(libs, lib{filepath.Join(dir, e.Name()), info.ModTime()})
		}
	}
	slices.SortFunc(libs, func(a, b lib) int { return b.mod.Compare(a.mod) })
	for i := libCacheKeep; i < len(libs); i++ {
		os.Remove(libs[i].path)
	}
}

// TestBuildKey checks that the cache key of a build changes with any
// file of the tree, its name or the build's arguments, and not with the
// output's path or the tree's bin/ and build/.
func TestBuildKey(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("csrc/k.h", "int k;\n")
	argv := []string{"go", "build", "-buildmode=c-shared", "-o", "/tmp/a/libnccl.so.2", "."}
	key := func(argv []string) string {
		t.Helper()
		k, err := buildKey(context.Background(), argv, argv[len(argv)-2], root)
		if err != nil {
			t.Skipf("no toolchain to key on: %v", err)
		}
		return k
	}
	base := key(argv)
	for _, c := range []struct {
		name string
		edit func() []string
		same bool
	}{
		{"nothing changed", func() []string { return argv }, true},
		{"another output path", func() []string {
			return []string{"go", "build", "-buildmode=c-shared", "-o", "/tmp/b/libnccl.so.2", "."}
		}, true},
		{"a file under bin/", func() []string { write("bin/mscclgo", "x"); return argv }, true},
		{"a file under build/", func() []string { write("build/nccl/x.so", "x"); return argv }, true},
		{"a test, testdata, docs, Python", func() []string {
			write("nccl/x_test.go", "package main\n")
			write("nccl/testdata/x.c", "int x;\n")
			write("docs/x.md", "# x\n")
			write("python/x.py", "x = 1\n")
			return argv
		}, true},
		{"a header outside the package", func() []string { write("csrc/k.h", "int k2;\n"); return argv }, false},
		{"a new file", func() []string { write("nccl/extra.go", "package main\n"); return argv }, false},
		{"a renamed file", func() []string {
			if err := os.Rename(filepath.Join(root, "nccl", "extra.go"), filepath.Join(root, "nccl", "other.go")); err != nil {
				t.Fatal(err)
			}
			return argv
		}, false},
		{"a build tag", func() []string {
			return []string{"go", "build", "-tags", "mscclgo_emu", "-buildmode=c-shared", "-o", "/tmp/a/libnccl.so.2", "."}
		}, false},
	} {
		got := key(c.edit())
		if (got == base) != c.same {
			t.Errorf("%s: key changed %v, want %v", c.name, got != base, !c.same)
		}
		base = got
	}
}
