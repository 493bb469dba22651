package tests

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/mscclgo/mscclgo/internal/testnote"
)

// TestMain says, before any test runs, when the MSCCL++ reference plans
// are missing, so that the skipped comparisons are seen without -v.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := os.Stat(filepath.Join(sharedGolden, "MANIFEST.tsv")); err != nil {
		testnote.Announce("tests: ../shared/golden not found: the byte-for-byte comparison with the MSCCL++ reference plans, and their runs on the CPU backend, are skipped")
	}
	os.Exit(testnote.Run(m, "tests")) // a minute or more: says every 25 s that it is still testing
}
