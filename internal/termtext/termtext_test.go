package termtext

import (
	"strings"
	"testing"
)

func TestWrapLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		width      int
		want       string
	}{
		{"short", "   --x   a b", 20, "   --x   a b"},
		{"hanging", "   --x   aaa bbb ccc ddd", 20, "   --x   aaa bbb ccc\n         ddd"},
		{"wide names", "   --long-flag-name VALUE   aaa bbb", 20, "   --long-flag-name VALUE\n         aaa bbb"},
		{"text", "  aaa bbb ccc", 9, "  aaa bbb\n  ccc"},
		{"long word", "  aaaaaaaaaaaa b", 6, "  aaaaaaaaaaaa\n  b"},
	}
	for _, tt := range tests {
		if got := WrapLine(tt.line, tt.width); got != tt.want {
			t.Errorf("%s: WrapLine(%q, %d) =\n%q\nwant\n%q", tt.name, tt.line, tt.width, got, tt.want)
		}
	}
}

func TestFit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{{"allreduce_packet", 20, "allreduce_packet"}, {"allreduce_packet", 10, "allredu..."}, {"abcdef", 3, "abc"}, {"αβγδεζ", 5, "αβ..."}} {
		if got := Fit(tt.s, tt.n); got != tt.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// TestWriter: only the chosen sections are wrapped, a line is written
// once complete, and Flush writes an unfinished one.
func TestWriter(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	w := NewWriter(&out, 12, func(h string) bool { return h == "WRAPPED:" })
	for _, piece := range []string{"KEPT:\n  aaa bbb ccc ddd\nWRAP", "PED:\n  aaa bbb ccc ddd\n", "  eee fff ggg hhh"} {
		if _, err := w.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	want := "KEPT:\n  aaa bbb ccc ddd\nWRAPPED:\n  aaa bbb\n  ccc ddd\n"
	if out.String() != want {
		t.Errorf("before Flush:\n%q\nwant\n%q", out.String(), want)
	}
	w.Flush()
	want += "  eee fff\n  ggg hhh"
	if out.String() != want {
		t.Errorf("after Flush:\n%q\nwant\n%q", out.String(), want)
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"evl", "eval", 1}, {"slect", "select", 1}, {"rnu", "run", 2}, {"abc", "", 3}, {"kitten", "sitting", 3}} {
		if d := EditDistance(tt.a, tt.b); d != tt.d || EditDistance(tt.b, tt.a) != tt.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, d, tt.d)
		}
	}
}

func TestCapMessage(t *testing.T) {
	long := strings.Repeat("x", 50)
	tests := []struct {
		name, msg, want string
	}{
		{"short", "a\nb", "a\nb"},
		{"long line", long, strings.Repeat("x", 10) + "... (40 bytes more)"},
		{"rune boundary", "aéééééé", "aéééé... (4 bytes more)"},
		{"many lines", "1\n2\n3\n4\n5", "1\n2\n3\n... (2 lines more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cap(tt.msg, 10, 3); got != tt.want {
				t.Errorf("Cap(%q) = %q, want %q", tt.msg, got, tt.want)
			}
		})
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	words := []string{"eval", "check", "run", "select", "install"}
	for _, tt := range []struct {
		w    string
		want int
	}{{"evl", 0}, {"slect", 3}, {"rnu", 2}, {"frobnicate", -1}, {"chk", 1}, {"xyzzy", -1}, {"", -1}} {
		if got := Nearest(tt.w, words, 2); got != tt.want {
			t.Errorf("Nearest(%q) = %d, want %d", tt.w, got, tt.want)
		}
	}
}
