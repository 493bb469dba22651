package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsSelectCollectives checks that docs/cli.md's select table names
// every collective select accepts.
func TestDocsSelectCollectives(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| `-c NAME`, `--collective NAME`") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/cli.md: no row for select's -c")
	}
	for _, c := range selectable() {
		if !strings.Contains(row, "`"+c+"`") {
			t.Errorf("docs/cli.md: select's -c row lacks %s: %s", c, row)
		}
	}
}

// TestDocumentedOutputsIgnored checks that every file the commands of the
// README and docs/*.md write in the checkout (-o FILE, and FILE.map with
// --source-map; --dir DIR, --plot FILE; cat > FILE, mkdir DIR) is ignored
// by git, so that following the docs leaves no untracked files.
func TestDocumentedOutputsIgnored(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skip("not a git checkout")
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A command's output: -o, --dir or --plot of mscclgo, a redirection
	// of cat, python3 or nvidia-smi, a mkdir; relative paths only, and
	// not the synopses' placeholders (OUT, FILE.svg).
	out := regexp.MustCompile("(?:(?:mscclgo|go run \\.) [^`|]*?(?:-o|--dir|--plot) |(?:^|[;&`]\\s*|\\$ )(?:cat|python3 [^`>]*|nvidia-smi [^`>]*) > |mkdir (?:-p )?)([\\w./-]+)")
	placeholder := regexp.MustCompile(`^[A-Z_]+(\.|/|$)`)
	var files []string
	for _, doc := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			for _, m := range out.FindAllStringSubmatch(line, -1) {
				f := strings.TrimRight(m[1], ".")
				if f == "" || strings.HasPrefix(f, "/") || placeholder.MatchString(f) {
					continue
				}
				files = append(files, f)
				if strings.Contains(line, "--source-map") {
					files = append(files, f+".map")
				}
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("README.md and docs/*.md: found only %d commands that write files (%v): the pattern no longer matches", len(files), files)
	}
	// And what a command that imports the Python package writes beside
	// it (docs/integration.md's torchrun line).
	files = append(files, "bin/mscclgo", "build/x", "python/mscclgo/__pycache__/__init__.cpython-311.pyc")
	for _, f := range files {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", f).Run(); err != nil {
			t.Errorf("%s, written by a command of the README or docs/, is not ignored by git (.gitignore): %v", f, err)
		}
	}
}
