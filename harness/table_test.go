package harness

import (
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

func TestFormatTime(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		us   float64
		want string
	}{{1.234, "   1.23"}, {99.999, " 100.00"}, {123.45, "  123.5"}, {12345.6, "  12346"}} {
		if got := FormatTime(tt.us); got != tt.want {
			t.Errorf("FormatTime(%g) = %q, want %q", tt.us, got, tt.want)
		}
	}
}

// TestTable: the rows' bandwidths and wrong elements, and the closing
// lines.
func TestTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tb := NewTable(&b, executor.Float32)
	l, err := executor.Layout("allreduce", 2, 1<<20, executor.Float32, false)
	if err != nil {
		t.Fatal(err)
	}
	tb.Row(l, Row{TimeUS: 100, Wrong: 3, Checked: true})
	tb.Row(l, Row{TimeUS: 50})
	tb.End()
	lines := strings.Split(b.String(), "\n")
	for i, want := range []string{
		"#       size         count      type   redop    root     time   algbw   busbw #wrong",
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
		"     1048576        262144     float     sum      -1    100.0   10.49   10.49      3",
		"     1048576        262144     float     sum      -1    50.00   20.97   20.97      -",
		"# Out of bounds values : 3 FAILED",
		"# Avg bus bandwidth    : 15.7286",
	} {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("line %d:\n%q\nwant\n%q", i, lines[min(i, len(lines)-1)], want)
		}
	}
	if tb.Wrong != 3 {
		t.Errorf("Wrong = %d, want 3", tb.Wrong)
	}
}
