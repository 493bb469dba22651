package tests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/plan"
)

// opSet is a set of op types the op table names by a predicate: a list
// of every member outside plan should ask the table instead, so that a
// new member needs no case of its own (docs/architecture.md §2.1).
type opSet struct {
	name string
	ops  []string // the plan constants, "OpReduce"
}

// opSets are the predicates' sets over the ops a plan may hold, each of
// two members or more.
func opSets(t *testing.T) []opSet {
	t.Helper()
	names := opConstants(t)
	preds := []struct {
		name string
		f    func(plan.OpType) bool
	}{
		{"the reduce family without packets (Family() == FamReduce && !Packet())", func(o plan.OpType) bool { return o.Family() == plan.FamReduce && !o.Packet() }},
		{"the reduce family with packets (Family() == FamReduce && Packet())", func(o plan.OpType) bool { return o.Family() == plan.FamReduce && o.Packet() }},
		{"the put family without packets (Family() == FamPut && !Packet())", func(o plan.OpType) bool { return o.Family() == plan.FamPut && !o.Packet() }},
		{"the reductions of elements (ReducesElements())", plan.OpType.ReducesElements},
		{"the ops that signal (Signals())", plan.OpType.Signals},
		{"the ops that wait (Waits())", plan.OpType.Waits},
		{"the ops that signal, wait on or flush channels (SignalsChannels())", plan.OpType.SignalsChannels},
	}
	var out []opSet
	for _, p := range preds {
		s := opSet{name: p.name}
		for o := range plan.NumOpTypes {
			if p.f(o) {
				s.ops = append(s.ops, names[o])
			}
		}
		if len(s.ops) >= 2 {
			out = append(out, s)
		}
	}
	return out
}

// opConstants returns the name of each op type's constant, read from the
// iota block of plan/ops.go.
func opConstants(t *testing.T) map[plan.OpType]string {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "plan", "ops.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[plan.OpType]string{}
	for _, d := range af.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || len(gd.Specs) == 0 || gd.Specs[0].(*ast.ValueSpec).Names[0].Name != "OpNop" {
			continue
		}
		for i, s := range gd.Specs {
			names[plan.OpType(i)] = s.(*ast.ValueSpec).Names[0].Name
		}
	}
	if names[plan.OpPipeline] != "OpPipeline" {
		t.Fatalf("plan/ops.go: the op constants' iota block was not found (OpPipeline is %q)", names[plan.OpPipeline])
	}
	return names
}

// listedSets reports each case list and each chain of || in af that
// names every member of one of sets.
func listedSets(fset *token.FileSet, file string, af *ast.File, sets []opSet) []string {
	var out []string
	check := func(at token.Pos, exprs ...ast.Expr) {
		named := map[string]bool{}
		for _, e := range exprs {
			ast.Inspect(e, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "plan" && strings.HasPrefix(sel.Sel.Name, "Op") {
						named[sel.Sel.Name] = true
					}
				}
				return true
			})
		}
		for _, s := range sets {
			if !slices.ContainsFunc(s.ops, func(o string) bool { return !named[o] }) {
				out = append(out, fmt.Sprintf("%s:%d: lists every op of %s: ask the op table (plan.Ops, plan/ops.go) instead", file, fset.Position(at).Line, s.name))
			}
		}
	}
	ast.Inspect(af, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CaseClause:
			check(n.Pos(), n.List...)
		case *ast.BinaryExpr:
			if n.Op == token.LOR {
				check(n.Pos(), n)
				return false // the chain is checked whole
			}
		}
		return true
	})
	return out
}

// TestFamiliesAskTheTable: outside plan, no case list or chain of ||
// names every op of a set the op table has a predicate for.
func TestFamiliesAskTheTable(t *testing.T) {
	sets := opSets(t)
	eachSource(t, func(pkg, file string, fset *token.FileSet, af *ast.File) {
		if pkg == "plan" {
			return
		}
		for _, p := range listedSets(fset, file, af, sets) {
			t.Error(p)
		}
	})
}

// TestListedSets: the rule catches a case list and a chain of || that
// name a whole set, and lets a part of one pass.
func TestListedSets(t *testing.T) {
	src := `package x
func f(k plan.OpType) bool {
	switch k {
	case plan.OpWait, plan.OpRelaxedWait:
		return true
	case plan.OpWait:
	}
	return k == plan.OpSignal || k == plan.OpRelaxedSignal || k == plan.OpPutWithSignal || k == plan.OpPutWithSignalAndFlush || k == plan.OpNop
}
func g(k plan.OpType) bool { return k == plan.OpPut || k == plan.OpPutWithSignal }
`
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := listedSets(fset, "x.go", af, opSets(t))
	want := []string{
		"x.go:4: lists every op of the ops that wait (Waits()): ask the op table (plan.Ops, plan/ops.go) instead",
		"x.go:8: lists every op of the ops that signal (Signals()): ask the op table (plan.Ops, plan/ops.go) instead",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
