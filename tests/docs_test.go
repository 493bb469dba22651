package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.starlark.net/syntax"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// codeExts are the source files whose comments TestCitations reads.
var codeExts = map[string]bool{".go": true, ".h": true, ".cuh": true, ".cu": true, ".cc": true, ".c": true, ".star": true}

var (
	// docRef is a mention of a page of docs/.
	docRef = regexp.MustCompile(`docs/([A-Za-z0-9_-]+)\.md`)
	// sectionRef is one citation: the section number after the section sign.
	sectionRef = regexp.MustCompile(`§\s?([0-9]+(?:\.[0-9]+)*)`)
	// fileDefault declares, in a file's header comment, which page the
	// file's bare citations refer to.
	fileDefault = regexp.MustCompile(`Section numbers \(§\) in this file refer to docs/([A-Za-z0-9_-]+)\.md`)
	// outside names the reference notes that live outside the repository.
	outside = regexp.MustCompile(`shared/(reference|spec)|runtime-semantics|compiler-passes\.md|dsl-api|starlark-dsl\.md|(^|[^/])plan-format(\.md|\s*§)`)
)

// commentLine is one line of a comment in a source file.
type commentLine struct {
	line   int
	text   string
	header bool // part of the file's header comment
}

// citation is one section citation resolved to a page of docs/.
type citation struct {
	where   string // file:line
	doc     string // page name, without docs/ and .md
	section string
}

// TestCitations checks the section citations of code comments (a section
// sign and a number): each names a page of docs/, on its line before the
// sign or in the file's header comment (see fileDefault), that page has a
// heading with that section number, and no comment points at the
// reference notes outside the repository.
func TestCitations(t *testing.T) {
	var cites []citation
	n := 0
	err := walkSources(func(rel string, src []byte) {
		lines, err := commentLines(rel, src)
		if err != nil {
			t.Error(err)
			return
		}
		cs, errs := fileCitations(rel, lines)
		for _, e := range errs {
			t.Error(e)
		}
		n += len(cs)
		cites = append(cites, cs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no § citation found in the sources: is the walk broken?")
	}
	headings := map[string]map[string]bool{}
	for _, c := range cites {
		h, ok := headings[c.doc]
		if !ok {
			h, err = docSections(filepath.Join(repoRoot, "docs", c.doc+".md"))
			if err != nil {
				t.Errorf("%s: cites docs/%s.md: %v", c.where, c.doc, err)
			}
			headings[c.doc] = h
		}
		if h != nil && !h[c.section] {
			t.Errorf("%s: cites docs/%s.md §%s, which has no such section heading", c.where, c.doc, c.section)
		}
	}
}

// TestCitationRules runs the resolution of TestCitations on small files,
// so that each of its rules is seen to reject what it must.
func TestCitationRules(t *testing.T) {
	tests := []struct {
		name  string
		lines []commentLine
		want  []citation // doc and section only
		errs  int
	}{
		{"named on the line", []commentLine{{line: 3, text: "see docs/semantics.md §2.6 and §2.7"}},
			[]citation{{doc: "semantics", section: "2.6"}, {doc: "semantics", section: "2.7"}}, 0},
		{"nearest page before the sign", []commentLine{{line: 1, text: "docs/language.md §5.1, docs/executor.md §14"}},
			[]citation{{doc: "language", section: "5.1"}, {doc: "executor", section: "14"}}, 0},
		{"header default", []commentLine{
			{line: 1, text: "Section numbers (§) in this file refer to docs/passes.md.", header: true},
			{line: 9, text: "pass 2 (§4)"}},
			[]citation{{doc: "passes", section: "4"}}, 0},
		{"default outside the header", []commentLine{
			{line: 5, text: "Section numbers (§) in this file refer to docs/passes.md."},
			{line: 9, text: "pass 2 (§4)"}}, nil, 2},
		{"bare citation", []commentLine{{line: 2, text: "the roles (§2.11)"}}, nil, 1},
		{"page after the sign", []commentLine{{line: 2, text: "§2.7 of docs/semantics.md"}}, nil, 1},
		{"no number", []commentLine{{line: 2, text: "docs/semantics.md §"}}, nil, 1},
		{"reference notes", []commentLine{{line: 2, text: "(shared/reference/runtime-semantics.md §1)"}}, nil, 2},
		{"reference note by name", []commentLine{{line: 2, text: "plan-format §12"}}, nil, 2},
		{"in-repo plan format", []commentLine{{line: 2, text: "docs/plan-format.md §3.1"}},
			[]citation{{doc: "plan-format", section: "3.1"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := fileCitations("f.go", tt.lines)
			if len(errs) != tt.errs {
				t.Errorf("%d errors, want %d: %v", len(errs), tt.errs, errs)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("citations %v, want %v", got, tt.want)
			}
			for i, c := range got {
				if c.doc != tt.want[i].doc || c.section != tt.want[i].section {
					t.Errorf("citation %d: docs/%s.md §%s, want docs/%s.md §%s", i, c.doc, c.section, tt.want[i].doc, tt.want[i].section)
				}
			}
		})
	}
}

// TestPackageComments checks that every package of the module has exactly
// one package comment, which begins "Package NAME " ("Command NAME " for
// a command), as go doc expects. Files of every build tag count; a
// directory holding only tests is checked on its test files.
func TestPackageComments(t *testing.T) {
	dirs := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories: is the walk broken?", len(dirs))
	}
	for dir, files := range dirs {
		var src, tests []string
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				tests = append(tests, f)
			} else {
				src = append(src, f)
			}
		}
		if len(src) == 0 {
			src = tests
		}
		if err := checkPackageComment(dir, src); err != nil {
			t.Error(err)
		}
	}
}

// checkPackageComment checks the package comments of one package's files
// (in a test-only directory, of the internal test package).
func checkPackageComment(dir string, files []string) error {
	fset := token.NewFileSet()
	var docs []*ast.File
	var names []string
	name := ""
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(af.Name.Name, "_test") && strings.HasSuffix(f, "_test.go") {
			continue
		}
		name = af.Name.Name
		if af.Doc != nil {
			docs = append(docs, af)
			names = append(names, filepath.Base(f))
		}
	}
	rel, _ := filepath.Rel(repoRoot, dir)
	switch {
	case len(docs) == 0:
		return fmt.Errorf("%s: package %s has no package comment", rel, name)
	case len(docs) > 1:
		return fmt.Errorf("%s: package %s has %d package comments (%s): keep one, in doc.go, and separate the others from the package clause by a blank line", rel, name, len(docs), strings.Join(names, ", "))
	}
	text := docs[0].Doc.Text()
	want := "Package " + name + " "
	if name == "main" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		want = "Command " + commandName(abs) + " "
	}
	if !strings.HasPrefix(text, want) {
		first, _, _ := strings.Cut(text, "\n")
		return fmt.Errorf("%s/%s: the package comment begins %q, want %q", rel, names[0], first, want+"…")
	}
	return nil
}

// commandName is the name of the command built from dir: the last element
// of the module path for the module root, else the directory name.
func commandName(dir string) string {
	if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(mod))
		for sc.Scan() {
			if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
				return path.Base(strings.TrimSpace(m))
			}
		}
	}
	return filepath.Base(dir)
}

// skipDir reports whether the walks leave a directory out: version
// control, hidden and underscore directories, and testdata.
func skipDir(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// walkSources calls fn for every code file of the repository, with its
// path relative to the root.
func walkSources(fn func(rel string, src []byte)) error {
	return filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !codeExts[filepath.Ext(p)] {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), src)
		return nil
	})
}

// commentLines returns the comment lines of a source file. The header is
// what precedes the package clause in a Go file, the first statement in a
// Starlark file, and the leading comment block of a C or C++ file.
func commentLines(rel string, src []byte) ([]commentLine, error) {
	switch {
	case strings.HasSuffix(rel, ".go"):
		return goCommentLines(rel, src)
	case strings.HasSuffix(rel, ".star"):
		return starCommentLines(rel, src)
	}
	return cCommentLines(src), nil
}

// starCommentLines reads the comments of a Starlark script with the
// Starlark parser, so that strings are not mistaken for comments.
func starCommentLines(rel string, src []byte) ([]commentLine, error) {
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}
	f, err := opts.Parse(rel, src, syntax.RetainComments)
	if err != nil {
		return nil, err
	}
	first := int32(1 << 30)
	if len(f.Stmts) > 0 {
		start, _ := f.Stmts[0].Span()
		first = start.Line
	}
	seen := map[syntax.Position]bool{}
	var out []commentLine
	add := func(cs []syntax.Comment) {
		for _, c := range cs {
			if !seen[c.Start] {
				seen[c.Start] = true
				out = append(out, commentLine{line: int(c.Start.Line), text: c.Text, header: c.Start.Line < first})
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil { // Walk's end-of-children call
			return false
		}
		if c := n.Comments(); c != nil {
			add(c.Before)
			add(c.Suffix)
			add(c.After)
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out, nil
}

// goCommentLines reads the comments of a Go file with go/scanner, so that
// strings are not mistaken for comments.
func goCommentLines(rel string, src []byte) ([]commentLine, error) {
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	var serr error
	s.Init(file, src, func(pos token.Position, msg string) {
		if serr == nil {
			serr = fmt.Errorf("%s: %s", pos, msg)
		}
	}, scanner.ScanComments)
	var out []commentLine
	header := true
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PACKAGE {
			header = false
		}
		if tok != token.COMMENT {
			continue
		}
		first := file.Line(pos)
		for i, l := range strings.Split(lit, "\n") {
			out = append(out, commentLine{line: first + i, text: l, header: header})
		}
	}
	return out, serr
}

// cCommentLines extracts the // and /* */ comments of a C, C++ or CUDA
// file, skipping string and character literals.
func cCommentLines(src []byte) []commentLine {
	var out []commentLine
	line, header := 1, true
	var cur strings.Builder
	flush := func() {
		out = append(out, commentLine{line: line, text: cur.String(), header: header})
		cur.Reset()
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			line++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			cur.Write(src[i : i+j])
			flush()
			i += j - 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := bytes.Index(src[i+2:], []byte("*/"))
			end := len(src)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			for _, b := range src[i:end] {
				if b == '\n' {
					flush()
					line++
					continue
				}
				cur.WriteByte(b)
			}
			flush()
			i = end - 1
		case c == '"' || c == '\'':
			header = false
			for i++; i < len(src) && src[i] != c && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case c != ' ' && c != '\t' && c != '\r':
			header = false
		}
	}
	return out
}

// fileCitations resolves the section citations of one file's comment lines and
// returns the errors of those that break the rules.
func fileCitations(rel string, lines []commentLine) ([]citation, []error) {
	var errs []error
	def := ""
	for _, l := range lines {
		if m := fileDefault.FindStringSubmatch(l.text); m != nil {
			if !l.header {
				errs = append(errs, fmt.Errorf("%s:%d: the page of the file's § citations must be named in its header comment", rel, l.line))
				continue
			}
			def = m[1]
		}
	}
	var cites []citation
	for _, l := range lines {
		where := fmt.Sprintf("%s:%d", rel, l.line)
		if outside.MatchString(l.text) {
			errs = append(errs, fmt.Errorf("%s: cites the reference notes outside the repository; cite the page of docs/ that says it: %q", where, strings.TrimSpace(l.text)))
		}
		text := fileDefault.ReplaceAllString(l.text, "")
		if !strings.Contains(text, "§") {
			continue
		}
		docs := docRef.FindAllStringSubmatchIndex(text, -1)
		secs := sectionRef.FindAllStringSubmatchIndex(text, -1)
		if strings.Count(text, "§") != len(secs) {
			errs = append(errs, fmt.Errorf("%s: a § without a section number: %q", where, strings.TrimSpace(l.text)))
		}
		for _, s := range secs {
			doc := def
			for _, d := range docs {
				if d[1] <= s[0] {
					doc = text[d[2]:d[3]]
				}
			}
			if doc == "" {
				errs = append(errs, fmt.Errorf("%s: §%s names no page of docs/: write docs/X.md before it or declare %q in the file's header comment", where, text[s[2]:s[3]], "Section numbers (§) in this file refer to docs/X.md."))
				continue
			}
			cites = append(cites, citation{where: where, doc: doc, section: text[s[2]:s[3]]})
		}
	}
	return cites, errs
}

// docSections returns the section numbers of a Markdown page's headings
// ("## 2. Title", "### 2.6 Title").
func docSections(file string) (map[string]bool, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	heading := regexp.MustCompile(`^#+\s+([0-9]+(?:\.[0-9]+)*)\.?\s`)
	secs := map[string]bool{}
	fence := false
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if m := heading.FindStringSubmatch(l); m != nil && !fence {
			secs[m[1]] = true
		}
	}
	return secs, nil
}

// TestCommentLines checks that the comment readers find comments, and only
// comments, in each language, and tell the header from the rest.
func TestCommentLines(t *testing.T) {
	tests := []struct {
		file string
		src  string
		want []commentLine
	}{
		{"a.go", "// head\n\n// doc\npackage a\n\nvar s = \"// not a comment\" // tail\n",
			[]commentLine{{1, "// head", true}, {3, "// doc", true}, {6, "// tail", false}}},
		{"a.h", "// head\n/* two\n   lines */\nint x; const char *s = \"// no\"; // tail\nchar c = '\\''; /* last */\n",
			[]commentLine{{1, "// head", true}, {2, "/* two", true}, {3, "   lines */", true}, {4, "// tail", false}, {5, "/* last */", false}}},
		{"a.star", "# head\n\ndef f():\n    \"\"\"# not a comment\"\"\"\n    return 1  # tail\n",
			[]commentLine{{1, "# head", true}, {5, "# tail", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := commentLines(tt.file, []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}
