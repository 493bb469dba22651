package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// errInterrupted stands for the signal that cancels a write.
var errInterrupted = errors.New("interrupted by SIGINT")

// TestLargeOutputWrittenBack: an output several times writeBackEvery
// long, whose write-back starts as it is written, commits byte for byte.
func TestLargeOutputWrittenBack(t *testing.T) {
	t.Parallel()
	final := filepath.Join(t.TempDir(), "big.json")
	p, err := createPending(context.Background(), final)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, 3*writeBackEvery+12345)
	chunk := make([]byte, 65536+7)
	for i := 0; len(want) < cap(want); i++ {
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		n := min(len(chunk), cap(want)-len(want))
		if _, err := p.Write(chunk[:n]); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk[:n]...)
	}
	if p.flushed == 0 || p.flushed > p.written {
		t.Errorf("write-back started for %d of %d bytes", p.flushed, p.written)
	}
	if err := p.commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(final)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("committed %d bytes, not the %d written", len(got), len(want))
	}
}

// TestWriteAllInterrupted: a cancellation while writing removes every
// temporary file, leaves the existing outputs alone, and says what it
// removed.
func TestWriteAllInterrupted(t *testing.T) {
	t.Parallel()
	for _, stopAt := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			paths := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")}
			err := WriteAll(ctx, paths, func(i int, w io.Writer) error {
				if _, err := io.WriteString(w, "new "); err != nil {
					return err
				}
				if i == stopAt {
					cancel(errInterrupted)
				}
				_, err := io.WriteString(w, "plan")
				return err
			})
			if stopAt == 3 {
				// Never cancelled: everything written.
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(paths[0]); string(b) != "new plan" {
					t.Errorf("a.json = %q", b)
				}
				return
			}
			if !errors.Is(err, errInterrupted) || !strings.HasPrefix(err.Error(), "interrupted by SIGINT: removed the partial output "+filepath.Join(dir, ".a.json.tmp")) {
				t.Errorf("got %v", err)
			}
			if stopAt > 0 && !strings.Contains(err.Error(), fmt.Sprintf("(and %d more)", stopAt)) {
				t.Errorf("got %v", err)
			}
			des, _ := os.ReadDir(dir)
			var names []string
			for _, de := range des {
				names = append(names, de.Name())
			}
			if !slices.Equal(names, []string{"a.json"}) {
				t.Errorf("left %v", names)
			}
			if b, _ := os.ReadFile(paths[0]); string(b) != "old" {
				t.Errorf("a.json = %q", b)
			}
		})
	}
}

// TestStaleTemporaries: WriteAll removes the temporary files of the same
// output that no live writer holds (left by a SIGKILL), and keeps one a
// live writer holds, one just created, another output's and a file whose
// name CreateTemp does not give.
func TestStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Minute)
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk := func(name string) string {
		p := write(name)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(".out.json.tmp123")         // stale: no writer
	live := mk(".out.json.tmp456") // held below
	write(".out.json.tmp789")      // just created: its writer may not have locked it yet
	mk(".other.json.tmp1")         // another output's
	mk(".out.json.tmpx")           // not a temporary's name
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := lockTemp(f); err != nil {
		t.Skipf("no lock here: %v", err)
	}
	err = WriteAll(context.Background(), []string{filepath.Join(dir, "out.json")}, func(_ int, w io.Writer) error {
		_, err := io.WriteString(w, "plan")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	want := ".other.json.tmp1 .out.json.tmp456 .out.json.tmp789 .out.json.tmpx out.json"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("directory holds %s\nwant %s", got, want)
	}
}
