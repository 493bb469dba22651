package tests

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the import path of this repository's module.
const modulePath = "github.com/mscclgo/mscclgo"

// allowedImports is the architecture: for each package of the tree (its
// directory, "." for main), the packages of ours it may import. A new
// package or edge is a design decision: add it here, with the layer it
// belongs to, and run `go test ./tests -run TestImportEdges -update` to
// redraw docs/architecture.md. Test-only packages (tests/...) may import
// anything and are not listed.
var allowedImports = map[string][]string{
	// The format: imports nothing of ours (closedDeps says it too).
	"plan": nil,

	// The compile wing: a script becomes a plan.
	"ir":         {"plan"},
	"passes":     {"ir", "plan"},
	"emit":       {"ir", "plan"},
	"starlib":    {"emit", "internal/infile", "internal/memlimit", "ir", "passes", "plan"},
	"algorithms": {"internal/infile", "starlib"},

	// Plans at run time: loading and instantiation, what every backend
	// shares, and the backends side by side (neither imports the other).
	"executor":              {"internal/infile", "internal/memlimit", "plan"},
	"executor/rankwire":     {"executor", "plan"},
	"executor/diagnose":     {"executor", "plan"},
	"executor/fabric":       nil, // a rankwire.PortWire over libfabric, below both backends
	"executor/cpu":          {"executor", "executor/diagnose", "executor/rankwire", "internal/shmfile", "plan", "timeline"},
	"gpu":                   {"executor", "executor/rankwire", "plan"},
	"gpu/devcomm":           {"executor", "executor/rankwire", "gpu", "internal/shmfile"}, // the communicator over gpu.StreamSession
	"gpu/emu":               {"gpu"},
	"gpu/cuda":              {"gpu"},
	"gpu/internal/clayout":  nil,
	"gpu/sass":              nil, // the audit of the kernel's SASS (make gpu-sass)
	"gpu/sass/cmd/gpu-sass": {"gpu/sass"},
	"bootstrap":             {"internal/infile"},

	// Drivers of the layers above: the run loops, plan sets, the cost
	// model and the pictures.
	"harness": {"executor", "internal/memlimit", "plan"},
	"planset": {"executor", "internal/infile", "plan"},
	// The run-time settings: gpu.Config, every field, and the transport.
	"runconfig":       {"executor/fabric", "executor/rankwire", "gpu"},
	"planset/install": {"algorithms", "executor", "executor/cpu", "harness", "internal/bytesize", "model", "plan", "planset", "starlib"},
	"model":           {"executor", "internal/infile", "plan", "timeline"},
	// Synthesis: trees packed on a topology, written as .star, verified
	// on the CPU backend and modelled on the topology's links.
	"synth":    {"algorithms", "executor", "executor/cpu", "harness", "model", "plan", "starlib", "topo"},
	"timeline": nil,
	"trace":    {"timeline"},
	"view":     {"executor", "plan", "timeline", "trace"},

	// The programs: the command line, the NCCL-compatible library, and
	// the GPU tests' comparison with the CPU oracle.
	".":            {"internal/cli"},
	"internal/cli": {"algorithms", "bootstrap", "emit", "executor", "executor/cpu", "executor/diagnose", "executor/fabric", "executor/rankwire", "gpu", "gpu/cuda", "gpu/emu", "harness", "internal/atomicfile", "internal/bytesize", "internal/complete", "internal/infile", "internal/sigctx", "internal/termtext", "model", "plan", "planset", "planset/install", "runconfig", "starlib", "synth", "timeline", "topo", "trace", "view"},
	"nccl":         {"bootstrap", "executor", "executor/cpu", "executor/fabric", "executor/rankwire", "gpu", "gpu/cuda", "gpu/devcomm", "gpu/emu", "plan", "planset", "runconfig"},
	"gpu/gputest":  {"algorithms", "bootstrap", "executor", "executor/cpu", "executor/rankwire", "gpu", "harness", "plan", "starlib"},

	// The base: utilities any layer may import, importing nothing of ours.
	"internal/atomicfile": nil, // output files written atomically (temporary, then rename)
	"internal/bytesize":   nil, // byte counts read and written in one style
	"internal/complete":   nil, // shell completion scripts from a command tree
	"internal/infile":     nil,
	"internal/memlimit":   nil,
	"internal/shmfile":    nil, // shared-memory files: the cpu backend's sessions and the communicator's mailbox
	"internal/sigctx":     nil, // SIGINT and SIGTERM as a cancelled context
	"internal/termtext":   nil, // terminal width, cutting and wrapping of text
	"internal/testnote":   nil,
	"topo":                {"internal/infile"}, // machine topologies: read by synth and the CLI
}

// closedDeps are rules on a package's whole dependency closure (its
// imports, their imports and so on, from non-test files whatever their
// build tags), which allowedImports, one edge at a time, does not state:
// the NCCL library (a shared object PyTorch loads) links select, search
// and the runtime, never the compiler or the drivers above it; the plan
// format imports nothing of ours. An entry names packages of ours
// (directories) or module paths (go.starlark.net); "*" forbids every
// package of ours.
var closedDeps = map[string][]string{
	"nccl": {"algorithms", "emit", "harness", "ir", "model", "passes", "planset/install", "starlib", "go.starlark.net"},
	"plan": {"*"},
}

// ourImports returns, for each package directory of the tree, the
// packages of ours its non-test Go files import (whatever their build
// tags).
func ourImports(t *testing.T) map[string][]string {
	t.Helper()
	ours, _ := allImports(t)
	return ours
}

// allImports returns, for each package directory of the tree, the
// packages of ours and the other modules' packages (neither ours nor the
// standard library's) its non-test Go files import, whatever their build
// tags.
func allImports(t *testing.T) (ours, others map[string][]string) {
	t.Helper()
	ext := map[string]map[string]bool{}
	deps := map[string]map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if deps[pkg] == nil {
			deps[pkg] = map[string]bool{}
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %v", p, err)
			}
			if rest, ok := strings.CutPrefix(ip, modulePath+"/"); ok {
				deps[pkg][rest] = true
			} else if first, _, _ := strings.Cut(ip, "/"); strings.Contains(first, ".") {
				if ext[pkg] == nil {
					ext[pkg] = map[string]bool{}
				}
				ext[pkg][ip] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sortedSets(deps), sortedSets(ext)
}

func sortedSets(sets map[string]map[string]bool) map[string][]string {
	out := map[string][]string{}
	for pkg, set := range sets {
		list := []string{}
		for d := range set {
			list = append(list, d)
		}
		sort.Strings(list)
		out[pkg] = list
	}
	return out
}

// closureProblems checks the closedDeps rules against the import graph:
// ours (packages of ours each package imports) and others (the other
// modules' packages each imports).
func closureProblems(ours, others map[string][]string, rules map[string][]string) []string {
	var out []string
	for pkg, banned := range rules {
		// The closure, in breadth-first order with the path that reached
		// each package, to name the chain in the message.
		via := map[string]string{pkg: ""}
		queue := []string{pkg}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, d := range ours[p] {
				if _, seen := via[d]; !seen {
					via[d] = p
					queue = append(queue, d)
				}
			}
		}
		chain := func(p string) string {
			parts := []string{p}
			for q := via[p]; q != ""; q = via[q] {
				parts = append([]string{q}, parts...)
			}
			return strings.Join(parts, " -> ")
		}
		for p := range via {
			for _, b := range banned {
				switch {
				case b == "*" && p != pkg:
					out = append(out, fmt.Sprintf("%s depends on %s (%s): it may depend on no package of ours (closedDeps in tests/architecture_test.go)", pkg, p, chain(p)))
				case b == p && p != pkg:
					out = append(out, fmt.Sprintf("%s depends on %s (%s), which closedDeps forbids", pkg, p, chain(p)))
				}
			}
			for _, e := range others[p] {
				for _, b := range banned {
					if e == b || strings.HasPrefix(e, b+"/") {
						out = append(out, fmt.Sprintf("%s depends on %s (%s imports it: %s), which closedDeps forbids", pkg, e, p, chain(p)))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestImportEdges: every import between our packages is one
// allowedImports allows, every allowed edge is used (so that the table,
// and the picture drawn from it, stay the tree's), and the package graph
// in docs/architecture.md is current.
func TestImportEdges(t *testing.T) {
	got, others := allImports(t)
	for _, p := range edgeProblems(got, allowedImports) {
		t.Error(p)
	}
	for _, p := range closureProblems(got, others, closedDeps) {
		t.Error(p)
	}
	checkGenerated(t, filepath.Join(repoRoot, "docs", "architecture.md"), graphText(got))
}

// TestEdgeProblems: the rule catches a backend importing its sibling, an
// unplaced package, an unused allowance and a package that is gone.
func TestEdgeProblems(t *testing.T) {
	allowed := map[string][]string{"executor": nil, "gpu": {"executor"}, "executor/cpu": {"executor"}, "old": nil}
	got := map[string][]string{"executor": nil, "gpu": {"executor", "executor/cpu"}, "executor/cpu": nil, "new": nil, "tests/x": {"gpu"}}
	want := []string{
		"allowedImports lets executor/cpu import executor, which it does not: remove the edge",
		"allowedImports lists old, which is not a package of the tree",
		"gpu imports executor/cpu, which the architecture does not allow (allowedImports in tests/architecture_test.go)",
		"package new is not in allowedImports (tests/architecture_test.go): place it in a layer",
	}
	if got := edgeProblems(got, allowed); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestClosureProblems: the closure rule catches a banned package reached
// through another, a banned module, and any import of a package that may
// import nothing of ours.
func TestClosureProblems(t *testing.T) {
	ours := map[string][]string{"nccl": {"planset"}, "planset": {"algorithms"}, "algorithms": {"internal/infile", "starlib"}, "starlib": nil, "plan": {"internal/infile"}}
	others := map[string][]string{"starlib": {"go.starlark.net/starlark"}}
	rules := map[string][]string{"nccl": {"algorithms", "go.starlark.net"}, "plan": {"*"}}
	want := []string{
		"nccl depends on algorithms (nccl -> planset -> algorithms), which closedDeps forbids",
		"nccl depends on go.starlark.net/starlark (starlib imports it: nccl -> planset -> algorithms -> starlib), which closedDeps forbids",
		"plan depends on internal/infile (plan -> internal/infile): it may depend on no package of ours (closedDeps in tests/architecture_test.go)",
	}
	if got := closureProblems(ours, others, rules); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// edgeProblems compares the imports of the tree with the allowed ones.
func edgeProblems(got, allowed map[string][]string) []string {
	var out []string
	for pkg, imports := range got {
		if pkg == "tests" || strings.HasPrefix(pkg, "tests/") {
			continue
		}
		allow, listed := allowed[pkg]
		if !listed {
			out = append(out, fmt.Sprintf("package %s is not in allowedImports (tests/architecture_test.go): place it in a layer", pkg))
			continue
		}
		for _, imp := range imports {
			if !contains(allow, imp) {
				out = append(out, fmt.Sprintf("%s imports %s, which the architecture does not allow (allowedImports in tests/architecture_test.go)", pkg, imp))
			}
		}
		for _, a := range allow {
			if !contains(imports, a) {
				out = append(out, fmt.Sprintf("allowedImports lets %s import %s, which it does not: remove the edge", pkg, a))
			}
		}
	}
	for pkg := range allowed {
		if _, ok := got[pkg]; !ok {
			out = append(out, fmt.Sprintf("allowedImports lists %s, which is not a package of the tree", pkg))
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Markers around the generated part of docs/architecture.md.
const (
	genBegin = "<!-- BEGIN package graph: generated by `go test ./tests -run TestImportEdges -update` -->"
	genEnd   = "<!-- END package graph -->"
)

// graphText draws the package graph: a Mermaid diagram and, for readers
// without one, the same edges as a table.
func graphText(deps map[string][]string) string {
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		if p == "tests" || strings.HasPrefix(p, "tests/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	node := func(p string) string {
		if p == "." {
			return "main"
		}
		return strings.NewReplacer("/", "_", ".", "_").Replace(p)
	}
	label := func(p string) string {
		if p == "." {
			return "mscclgo (main)"
		}
		return p
	}
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TD\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "  %s[%q]\n", node(p), label(p))
	}
	for _, p := range pkgs {
		for _, d := range deps[p] {
			fmt.Fprintf(&b, "  %s --> %s\n", node(p), node(d))
		}
	}
	b.WriteString("```\n\n| package | imports of ours |\n|---|---|\n")
	for _, p := range pkgs {
		imps := make([]string, 0, len(deps[p]))
		for _, d := range deps[p] {
			imps = append(imps, "`"+d+"`")
		}
		if len(imps) == 0 {
			imps = []string{"none"}
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", label(p), strings.Join(imps, ", "))
	}
	return b.String()
}

// checkGenerated checks that the part of file between genBegin and genEnd
// is want, or with -update rewrites it.
func checkGenerated(t *testing.T, file, want string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(genBegin))
	j := bytes.Index(data, []byte(genEnd))
	if i < 0 || j < i {
		t.Fatalf("%s: no generated part between %q and %q", file, genBegin, genEnd)
	}
	start := i + len(genBegin) + 1
	if string(data[start:j]) == want {
		return
	}
	if !*update {
		t.Errorf("%s: the package graph is not the tree's: run `go test ./tests -run TestImportEdges -update`", path.Base(filepath.ToSlash(file)))
		return
	}
	out := append(append(append([]byte{}, data[:start]...), want...), data[j:]...)
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// eachSource calls f on every non-test Go file of the tree outside
// tests/ with its package directory, parsed with comments.
func eachSource(t *testing.T, f func(pkg, file string, fset *token.FileSet, af *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "tests") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
		if err != nil {
			return err
		}
		relFile, _ := filepath.Rel(repoRoot, p)
		f(filepath.ToSlash(rel), filepath.ToSlash(relFile), fset, af)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// opPredicates lists the functions of af that answer a yes-or-no
// question about an op type (parameters of type plan.OpType and int
// only, one bool result): such facts are the op table's (plan.Ops), and a copy
// elsewhere drifts from it.
func opPredicates(fset *token.FileSet, file string, af *ast.File) []string {
	var out []string
	for _, d := range af.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 || len(fd.Type.Results.List[0].Names) > 1 {
			continue
		}
		if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); !ok || id.Name != "bool" {
			continue
		}
		// The parameters are op types and at most ints (an operand's
		// position): anything else makes it a question about more than
		// the op type.
		opType, other := false, false
		for _, p := range fd.Type.Params.List {
			switch pt := p.Type.(type) {
			case *ast.SelectorExpr:
				x, ok := pt.X.(*ast.Ident)
				if ok && x.Name == "plan" && pt.Sel.Name == "OpType" {
					opType = true
				} else {
					other = true
				}
			case *ast.Ident:
				other = other || pt.Name != "int"
			default:
				other = true
			}
		}
		if opType && !other {
			out = append(out, fmt.Sprintf("%s:%d: %s is a predicate over op types: ask the op table (plan.Ops, plan/ops.go) instead", file, fset.Position(fd.Pos()).Line, fd.Name.Name))
		}
	}
	return out
}

// TestOpsOwnedByPlan: package plan is the one owner of the ops. No other
// package declares an op enum of its own (a type named Kind or OpType)
// or a predicate over op types.
func TestOpsOwnedByPlan(t *testing.T) {
	eachSource(t, func(pkg, file string, fset *token.FileSet, af *ast.File) {
		if pkg == "plan" {
			return
		}
		for _, p := range opPredicates(fset, file, af) {
			t.Error(p)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				if ts := s.(*ast.TypeSpec); (ts.Name.Name == "OpType" || ts.Name.Name == "Kind") && pkg == "ir" {
					t.Errorf("%s:%d: ir declares %s: the IR's ops are plan.OpType", file, fset.Position(ts.Pos()).Line, ts.Name.Name)
				}
			}
		}
	})
}

// TestOpPredicates: the rule catches a predicate over op types and lets
// other functions of op types pass.
func TestOpPredicates(t *testing.T) {
	src := `package x
func isPacket(t plan.OpType) bool { return false }
func (s *sim) waits(op int, t plan.OpType) bool { return false }
func name(t plan.OpType) string { return "" }
func pair(t plan.OpType) (bool, bool) { return false, false }
func other(t executor.OpType) bool { return false }
func extend(ops []int, t plan.OpType) bool { return false }
`
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := opPredicates(fset, "x.go", af)
	want := []string{
		"x.go:2: isPacket is a predicate over op types: ask the op table (plan.Ops, plan/ops.go) instead",
		"x.go:3: waits is a predicate over op types: ask the op table (plan.Ops, plan/ops.go) instead",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPlanKeysSpelledOnce: the JSON keys of the plan are spelled once,
// in plan/keys.go; the reader, the encoder and every package that names a
// key in a message use the constants. Keys with an underscore are checked
// (short words such as "name" or "size" are everyday strings); starlib is
// left out, since the DSL's attribute names coincide with some keys.
func TestPlanKeysSpelledOnce(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "plan", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	af, err := parser.ParseFile(token.NewFileSet(), "keys.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(af, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if k, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(k, "_") {
				keys[k] = true
			}
		}
		return true
	})
	if len(keys) < 30 {
		t.Fatalf("plan/keys.go: %d keys with an underscore, want the plan's", len(keys))
	}
	eachSource(t, func(pkg, file string, fset *token.FileSet, af *ast.File) {
		if pkg == "plan" || pkg == "starlib" {
			return
		}
		for _, p := range keyLiterals(fset, file, af, keys) {
			t.Error(p)
		}
	})
}

// keyLiterals lists the string literals of af (struct tags aside) that
// spell one of keys.
func keyLiterals(fset *token.FileSet, file string, af *ast.File, keys map[string]bool) []string {
	tags := map[*ast.BasicLit]bool{}
	var out []string
	ast.Inspect(af, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if n.Tag != nil {
				tags[n.Tag] = true
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING || tags[n] {
				return true
			}
			if k, err := strconv.Unquote(n.Value); err == nil && keys[k] {
				out = append(out, fmt.Sprintf("%s:%d: %q spells a plan key: use the constant of plan/keys.go", file, fset.Position(n.Pos()).Line, k))
			}
		}
		return true
	})
	return out
}

// TestKeyLiterals: the rule catches a key spelled as a literal and lets a
// struct tag and other strings pass.
func TestKeyLiterals(t *testing.T) {
	src := "package x\ntype T struct{ A int `json:\"src_buff\"` }\nvar a = \"src_buff\"\nvar b = \"src_buffer\"\n"
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := keyLiterals(fset, "x.go", af, map[string]bool{"src_buff": true})
	want := []string{`x.go:3: "src_buff" spells a plan key: use the constant of plan/keys.go`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTransportReadOnce: the transport policy has one owner. Only
// executor/fabric spells the variable MSCCLGO_TRANSPORT as a literal of
// its own (TransportVar, read by TransportSetting); the command line and
// the library ask it, and name the variable only inside their messages.
func TestTransportReadOnce(t *testing.T) {
	keys := map[string]bool{"MSCCLGO_TRANSPORT": true}
	eachSource(t, func(pkg, file string, fset *token.FileSet, af *ast.File) {
		if pkg == "executor/fabric" {
			return
		}
		for _, p := range keyLiterals(fset, file, af, keys) {
			t.Errorf("%s (the transport is read by executor/fabric's TransportSetting alone)", p)
		}
	})
}

// TestGPUConfigBuiltOnce: a GPU backend's configuration has one maker.
// Outside package gpu (and the tests), only runconfig writes a gpu.Config
// literal (Settings.GPUConfig, every field); the programs give it their
// settings and a runconfig.Device.
func TestGPUConfigBuiltOnce(t *testing.T) {
	eachSource(t, func(pkg, file string, fset *token.FileSet, af *ast.File) {
		if pkg == "runconfig" || pkg == "gpu" || strings.HasPrefix(pkg, "gpu/") {
			return
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if cl, ok := n.(*ast.CompositeLit); ok {
				if se, ok := cl.Type.(*ast.SelectorExpr); ok && se.Sel.Name == "Config" {
					if id, ok := se.X.(*ast.Ident); ok && id.Name == "gpu" {
						t.Errorf("%s: a gpu.Config literal (make it with runconfig.Settings.GPUConfig)", fset.Position(cl.Pos()))
					}
				}
			}
			return true
		})
	})
}
