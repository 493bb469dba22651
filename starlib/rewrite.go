package starlib

import (
	"strconv"

	"go.starlark.net/syntax"
)

// sliceFunc is the predeclared name that slice expressions are rewritten
// to call.
const sliceFunc = "__slice__"

// rewriteSlices replaces every slice expression x[a:b:c] of f by the call
// __slice__(x, a, b, c) (absent bounds become None), positioned at the
// bracket. go.starlark.net normalises slice bounds before a Sliceable value
// sees them, which would hide the negative, reversed and out-of-range
// bounds that buffer slicing must reject.
func rewriteSlices(f *syntax.File) {
	for _, s := range f.Stmts {
		rwStmt(s)
	}
}

func rwStmts(ss []syntax.Stmt) {
	for _, s := range ss {
		rwStmt(s)
	}
}

func rwStmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		s.LHS = rwTarget(s.LHS)
		s.RHS = rw(s.RHS)
		if fn, ok := augmentedChecks[s.Op]; ok {
			if lhs, ok := copyPure(s.LHS); ok {
				s.RHS = call(fn, s.OpPos, lhs, s.RHS)
			}
		}
	case *syntax.DefStmt:
		rwList(s.Params)
		rwStmts(s.Body)
	case *syntax.ExprStmt:
		s.X = rw(s.X)
	case *syntax.ForStmt:
		s.Vars = rwTarget(s.Vars)
		s.X = rw(s.X)
		rwStmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = rw(s.Cond)
		rwStmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = rw(s.Cond)
		rwStmts(s.True)
		rwStmts(s.False)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rw(s.Result)
		}
	}
}

// rwTarget rewrites an assignment target: its tuples and lists stay
// targets, the expressions inside (indexes, slices) are rewritten.
func rwTarget(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.TupleExpr:
		for i := range e.List {
			e.List[i] = rwTarget(e.List[i])
		}
		return e
	case *syntax.ListExpr:
		for i := range e.List {
			e.List[i] = rwTarget(e.List[i])
		}
		return e
	case *syntax.ParenExpr:
		e.X = rwTarget(e.X)
		return e
	}
	return rw(e)
}

func rwList(es []syntax.Expr) {
	for i := range es {
		es[i] = rw(es[i])
	}
}

func none(pos syntax.Position) syntax.Expr {
	return &syntax.Ident{NamePos: pos, Name: "None"}
}

func rw(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.SliceExpr:
		x := rw(e.X)
		args := []syntax.Expr{x}
		for _, b := range []syntax.Expr{e.Lo, e.Hi, e.Step} {
			if b == nil {
				args = append(args, none(e.Lbrack))
			} else {
				args = append(args, rw(b))
			}
		}
		return &syntax.CallExpr{
			Fn:     &syntax.Ident{NamePos: e.Lbrack, Name: sliceFunc},
			Lparen: e.Lbrack,
			Args:   args,
			Rparen: e.Rbrack,
		}
	case *syntax.BinaryExpr:
		e.X = rw(e.X)
		e.Y = rw(e.Y)
		if fn, ok := meteredOps[e.Op]; ok && !boundedOp(e) {
			return call(fn, e.OpPos, e.X, e.Y)
		}
	case *syntax.CallExpr:
		e.Fn = rw(e.Fn)
		rwList(e.Args)
		if d, ok := e.Fn.(*syntax.DotExpr); ok && meteredMethods[d.Name.Name] {
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: d.Name.NamePos, Raw: strconv.Quote(d.Name.Name), Value: d.Name.Name}
			e.Fn = &syntax.Ident{NamePos: d.Dot, Name: methodFunc}
			e.Args = append([]syntax.Expr{d.X, name}, e.Args...)
		}
	case *syntax.Comprehension:
		e.Body = rw(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.Vars = rwTarget(c.Vars)
				c.X = rw(c.X)
			case *syntax.IfClause:
				c.Cond = rw(c.Cond)
			}
		}
	case *syntax.CondExpr:
		e.Cond = rw(e.Cond)
		e.True = rw(e.True)
		e.False = rw(e.False)
	case *syntax.DictEntry:
		e.Key = rw(e.Key)
		e.Value = rw(e.Value)
	case *syntax.DictExpr:
		rwList(e.List)
	case *syntax.DotExpr:
		e.X = rw(e.X)
	case *syntax.IndexExpr:
		e.X = rw(e.X)
		e.Y = rw(e.Y)
	case *syntax.LambdaExpr:
		rwList(e.Params)
		e.Body = rw(e.Body)
	case *syntax.ListExpr:
		rwList(e.List)
	case *syntax.ParenExpr:
		e.X = rw(e.X)
	case *syntax.TupleExpr:
		rwList(e.List)
		pos := e.Lparen
		if !pos.IsValid() && len(e.List) > 0 {
			pos, _ = e.List[0].Span()
		}
		return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: tupleFunc}, Lparen: pos, Args: e.List, Rparen: e.Rparen}
	case *syntax.UnaryExpr:
		if e.X != nil {
			e.X = rw(e.X)
		}
	}
	return e
}

// boundedOp reports whether e cannot build a value much larger than its
// operands, so that it needs no check: x + k and k + x with an integer
// literal k (an integer grows by a bit, anything else fails), and x % k
// (an integer, or a string formatted with one integer).
func boundedOp(e *syntax.BinaryExpr) bool {
	switch e.Op {
	case syntax.PLUS:
		return isIntLiteral(e.X) || isIntLiteral(e.Y)
	case syntax.PERCENT:
		return isIntLiteral(e.Y)
	}
	return false
}

func isIntLiteral(e syntax.Expr) bool {
	l, ok := e.(*syntax.Literal)
	return ok && l.Token == syntax.INT
}

// meteredOps are the binary operators rewritten into calls of the metered
// builtins (guardops.go), which check the size of the result first.
var meteredOps = map[syntax.Token]string{syntax.PLUS: addFunc, syntax.STAR: mulFunc, syntax.PERCENT: modFunc}

// augmentedChecks are the augmented assignments x op= y whose right side
// is rewritten to check(x, y), which checks x op y and returns y.
var augmentedChecks = map[syntax.Token]string{syntax.PLUS_EQ: addCheckFunc, syntax.STAR_EQ: mulCheckFunc, syntax.PERCENT_EQ: modCheckFunc}

// call returns the call fn(args...) positioned at pos.
func call(fn string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: fn}, Lparen: pos, Args: args, Rparen: pos}
}

// copyPure returns a copy of e when evaluating e twice is harmless (names,
// literals, fields and indexes of those); augmented assignments to other
// targets are left unchecked.
func copyPure(e syntax.Expr) (syntax.Expr, bool) {
	switch e := e.(type) {
	case *syntax.Ident:
		return &syntax.Ident{NamePos: e.NamePos, Name: e.Name}, true
	case *syntax.Literal:
		c := *e
		return &c, true
	case *syntax.ParenExpr:
		x, ok := copyPure(e.X)
		return &syntax.ParenExpr{Lparen: e.Lparen, X: x, Rparen: e.Rparen}, ok
	case *syntax.DotExpr:
		x, ok := copyPure(e.X)
		return &syntax.DotExpr{X: x, Dot: e.Dot, NamePos: e.NamePos, Name: &syntax.Ident{NamePos: e.Name.NamePos, Name: e.Name.Name}}, ok
	case *syntax.IndexExpr:
		x, ok1 := copyPure(e.X)
		y, ok2 := copyPure(e.Y)
		return &syntax.IndexExpr{X: x, Lbrack: e.Lbrack, Y: y, Rbrack: e.Rbrack}, ok1 && ok2
	}
	return nil, false
}
