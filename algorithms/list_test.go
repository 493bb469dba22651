package algorithms

// list_test.go tests List and the header summaries of the bundled
// algorithms.

import (
	"strings"
	"testing"
)

// TestList describes every bundled algorithm: each has a summary, declares
// world_size, and lists its default-set shapes.
func TestList(t *testing.T) {
	t.Parallel()
	infos, err := List()
	if err != nil {
		t.Fatal(err)
	}
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(names) || len(infos) == 0 {
		t.Fatalf("%d infos for %d names", len(infos), len(names))
	}
	jobs, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	shapes := 0
	for i, info := range infos {
		if info.Name != names[i] {
			t.Errorf("info %d is %s, want %s", i, info.Name, names[i])
		}
		if info.Summary == "" || strings.HasPrefix(info.Summary, info.Name+":") || !strings.HasSuffix(info.Summary, ".") {
			t.Errorf("%s: summary %q", info.Name, info.Summary)
		}
		found := false
		for _, p := range info.Params {
			found = found || p.Name == "world_size"
		}
		if !found {
			t.Errorf("%s: no world_size parameter in %v", info.Name, info.Params)
		}
		shapes += len(info.Shapes)
	}
	if shapes != len(jobs) {
		t.Errorf("%d shapes in all, want the %d jobs of the default set", shapes, len(jobs))
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, text, want string }{
		{"a", "# a: one thing,\n# over two lines. More.\n#\n# Body.\n", "one thing, over two lines."},
		{"a", "# No name prefix\n\nx = 1\n", "No name prefix"},
		{"a", "x = 1\n", ""},
	}
	for _, tt := range tests {
		if got := summary(tt.name, tt.text); got != tt.want {
			t.Errorf("summary(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
