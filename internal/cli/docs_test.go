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

// TestDocumentedOutputsIgnored checks that every file the README's
// commands write in the checkout (-o FILE, and FILE.map with
// --source-map; cat > FILE) is ignored by git, so that following the README leaves
// no untracked files.
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
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := regexp.MustCompile(`(?:(?:mscclgo|go run \.) .* -o|^cat >) ([\w.-]+)`)
	var files []string
	for _, line := range strings.Split(string(data), "\n") {
		m := out.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		files = append(files, m[1])
		if strings.Contains(line, "--source-map") {
			files = append(files, m[1]+".map")
		}
	}
	if len(files) < 3 {
		t.Fatalf("README.md: found only %d commands that write files (%v): the pattern no longer matches", len(files), files)
	}
	files = append(files, "bin/mscclgo", "build/x")
	for _, f := range files {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", f).Run(); err != nil {
			t.Errorf("%s, written by a command of the README, is not ignored by git (.gitignore): %v", f, err)
		}
	}
}
