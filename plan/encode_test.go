package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDir holds the plans MSCCL++'s DSL printed for its own test
// scripts (docs/testing.md); the tests skip it when it is absent.
const goldenDir = "../../shared/golden"

// fixedPointFiles lists every plan the project holds: the golden plans of
// MSCCL++, the reference plans of tests/testdata and tests/ports, and the
// examples of emit/testdata.
func fixedPointFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{filepath.Join(goldenDir, "*.json"), "../emit/testdata/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, root := range []string{"../tests/testdata", "../tests/ports"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".plan.json") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestEncodeFixedPoint reads every plan of the project and writes it back
// with Encode: the bytes are the file's, so the reader and the encoder
// agree on every key and every layout the DSL prints.
func TestEncodeFixedPoint(t *testing.T) {
	files := fixedPointFiles(t)
	if len(files) < 50 {
		t.Fatalf("only %d plans found", len(files))
	}
	for _, file := range files {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// A script that prints several programs leaves their plans one
		// after the other.
		var got bytes.Buffer
		for _, text := range bytes.SplitAfter(want, []byte("\n}\n")) {
			if len(text) == 0 {
				continue
			}
			p, err := ReadCompiled(text)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if err := Encode(&got, p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: Encode(Load(file)) differs from the file at byte %d:\n%s", file, firstDiff(got.Bytes(), want), excerpt(got.Bytes(), want))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// excerpt shows the two texts around their first difference.
func excerpt(got, want []byte) string {
	i := firstDiff(got, want)
	cut := func(b []byte) string {
		lo, hi := max(0, i-200), min(len(b), i+200)
		return string(b[lo:hi])
	}
	return "got:\n" + cut(got) + "\nwant:\n" + cut(want)
}
