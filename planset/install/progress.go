package install

// progress.go: the words of an install's progress, and where its
// validation cache lives by default.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mscclgo/mscclgo/internal/bytesize"
)

// DefaultCacheDir is the directory of the validation cache:
// $MSCCLGO_CACHE_DIR/validated, or ~/.cache/mscclgo/validated; "" (no
// cache) when neither can be found.
func DefaultCacheDir() string {
	if d := os.Getenv("MSCCLGO_CACHE_DIR"); d != "" {
		return filepath.Join(d, ValidationCacheDir)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "mscclgo", ValidationCacheDir)
}

// Line is the line mscclgo install prints for a finished job when its
// standard error is not a terminal: "install: [12/34] JOB: validated at
// 1, 32, 1024 KiB" (or "cached"); a job with several plans names each.
func (ev Event) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "install: [%d/%d] %s:", ev.Done, ev.Total, ev.Job)
	for i, p := range ev.Plans {
		if i > 0 {
			b.WriteByte(';')
		}
		if len(ev.Plans) > 1 {
			fmt.Fprintf(&b, " %s", p.Name)
		}
		if p.Cached {
			b.WriteString(" cached")
			continue
		}
		if len(p.Sizes) == 0 {
			b.WriteString(" validated with the counts matrices of harness.VarValidationCases")
			continue
		}
		b.WriteString(" validated at ")
		b.WriteString(bytesize.List(p.Sizes))
	}
	return b.String()
}
