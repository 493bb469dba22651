package passes

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
	"go.starlark.net/syntax"
)

func syntaxPos(file string, line int32) syntax.Position {
	return syntax.MakePosition(&file, line, 1)
}

// TestPassOrder checks the pass table against the passOrder constraints
// and the names against the CLI-facing kebab-case convention.
func TestPassOrder(t *testing.T) {
	t.Parallel()
	index := map[string]int{}
	for i, ps := range passList {
		if _, dup := index[ps.name]; dup {
			t.Errorf("pass %q listed twice", ps.name)
		}
		index[ps.name] = i
		if ps.name != strings.ToLower(ps.name) || strings.ContainsAny(ps.name, " _") {
			t.Errorf("pass name %q is not kebab-case", ps.name)
		}
		fns := map[scope]bool{scopeProgram: ps.program != nil, scopeTB: ps.tb != nil, scopeRank: ps.rank != nil}
		if ps.wanted == nil || !fns[ps.scope] {
			t.Errorf("pass %q lacks its wanted function or its %d-scope function", ps.name, ps.scope)
		}
		// runRankMajor needs program passes first and rank passes last.
		if i > 0 && passList[i-1].scope > ps.scope {
			t.Errorf("pass %q (scope %d) follows %q (scope %d)", ps.name, ps.scope, passList[i-1].name, passList[i-1].scope)
		}
	}
	for _, c := range passOrder {
		a, okA := index[c.a]
		b, okB := index[c.b]
		switch {
		case !okA || !okB:
			t.Errorf("passOrder names an unknown pass: %s -> %s", c.a, c.b)
		case a >= b:
			t.Errorf("pass %s must run before %s (%s)", c.a, c.b, c.why)
		case c.why == "":
			t.Errorf("passOrder %s -> %s has no reason", c.a, c.b)
		}
	}
	want := []string{"validate", "fuse", "data-sync", "auto-sync", "replicate"}
	if got := Names(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

func smallProgram() *tprog {
	tp := newProg()
	tp.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
	tp.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
	return tp
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	tp := smallProgram()
	if err := Run(tp.p, Config{}); err != nil {
		t.Fatal(err)
	}
	first := ir.Sprint(tp.p)
	err := Run(tp.p, Config{})
	if !errors.Is(err, ErrFinalized) {
		t.Fatalf("second Run: got %v, want ErrFinalized", err)
	}
	if got := ir.Sprint(tp.p); got != first {
		t.Errorf("second Run changed the program:\n%s", got)
	}
}

func TestRunConfig(t *testing.T) {
	t.Parallel()
	t.Run("unknown disabled pass", func(t *testing.T) {
		t.Parallel()
		tp := smallProgram()
		err := Run(tp.p, Config{Disabled: map[string]bool{"fusion": true}})
		if !errors.Is(err, ErrUnknownPass) || !strings.Contains(err.Error(), `unknown pass "fusion"`) {
			t.Fatalf("got %v", err)
		}
		if tp.p.Finalized {
			t.Error("a rejected Config finalized the program")
		}
	})
	t.Run("unknown dump pass", func(t *testing.T) {
		t.Parallel()
		err := Run(smallProgram().p, Config{DumpAfter: "nope"})
		if !errors.Is(err, ErrUnknownPass) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("disabled auto-sync", func(t *testing.T) {
		t.Parallel()
		tp := smallProgram()
		if err := Run(tp.p, Config{Disabled: map[string]bool{"auto-sync": true}, Check: true}); err != nil {
			t.Fatal(err)
		}
		if got := ir.SprintOps(tp.p.GPUs[0].ThreadBlocks[0].Ops); strings.Contains(got, "nop") {
			t.Errorf("auto-sync ran although disabled:\n%s", got)
		}
	})
	t.Run("dump after every pass", func(t *testing.T) {
		t.Parallel()
		tp := smallProgram()
		tp.p.InstrFusion = false
		var seen []string
		var afterData string
		err := Run(tp.p, Config{DumpAfter: "*", Dump: func(pass string, p *ir.Program) {
			seen = append(seen, pass)
			if pass == "data-sync" {
				afterData = ir.SprintOps(p.GPUs[0].ThreadBlocks[0].Ops)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if want := "[validate data-sync auto-sync replicate]"; fmt.Sprint(seen) != want {
			t.Errorf("dumped after %v, want %s", seen, want)
		}
		if strings.Contains(afterData, "nop") {
			t.Errorf("dump after data-sync already shows auto-sync's nop:\n%s", afterData)
		}
	})
	t.Run("dump after one pass", func(t *testing.T) {
		t.Parallel()
		var seen []string
		err := Run(smallProgram().p, Config{DumpAfter: "fuse", Dump: func(pass string, _ *ir.Program) { seen = append(seen, pass) }})
		if err != nil || fmt.Sprint(seen) != "[fuse]" {
			t.Errorf("err %v, dumped after %v", err, seen)
		}
	})
}

// TestRunCheck checks that Config.Check reports a broken recorded IR.
func TestRunCheck(t *testing.T) {
	t.Parallel()
	tp := smallProgram()
	inner := &ir.Op{Kind: plan.OpPipeline, Pos: syntaxPos("x.star", 7), Body: []*ir.Op{{Kind: plan.OpNop}}}
	tb0 := tp.p.GPUs[0].ThreadBlocks[0]
	tb0.Ops = append(tb0.Ops, &ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{inner}})
	err := Run(tp.p, Config{Check: true})
	if !errors.Is(err, ErrInvariant) {
		t.Fatalf("got %v, want ErrInvariant", err)
	}
	want := "x.star:7:1: check: after recorded IR: rank 0 tb 0 op 2.0 (pipeline): nested pipeline"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	e := &Error{Pass: "replicate", Program: "p", Msg: "boom", Err: ErrReplicationPolicy}
	if e.Error() != "replicate: boom" {
		t.Errorf("got %q", e.Error())
	}
	e.Pos = syntaxPos("a.star", 3)
	if e.Error() != "a.star:3:1: replicate: boom" {
		t.Errorf("got %q", e.Error())
	}
	if !errors.Is(e, ErrReplicationPolicy) {
		t.Error("Unwrap does not reach the sentinel")
	}
}

// TestConcurrentRuns compiles independent programs at the same time: the
// package has no shared mutable state.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	ref := syntheticProgram(4, 8, 30, 2)
	if err := Run(ref, Config{Check: true}); err != nil {
		t.Fatal(err)
	}
	want := ir.Sprint(ref)
	for i := 0; i < 8; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			p := syntheticProgram(4, 8, 30, 2)
			if err := Run(p, Config{Check: true}); err != nil {
				t.Fatal(err)
			}
			if ir.Sprint(p) != want {
				t.Error("concurrent run differs from the serial one")
			}
		})
	}
}
