// Tests of the evaluation limits: one-line scripts that would exhaust
// time or memory through operators and builtins stop with an error that
// names the limit, the line and the flag; ordinary programs see the same
// values and errors as without the metering.
package starlib

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.starlark.net/syntax"
)

// TestLimitsStopHostileScripts: each script is stopped on its line with
// the named limit. The limits are small so that the gradual cases stop
// quickly; the instant ones are refused before anything is built.
func TestLimitsStopHostileScripts(t *testing.T) {
	small := Limits{MaxSteps: 20_000_000, MaxTime: time.Minute, MaxMemory: 64 << 20, MaxOps: 10_000}
	cases := []struct {
		name, script string
		line         int
		want         string
	}{
		{"all over a huge range", "x = all(range(1, 1 << 62))", 1, "step limit of 20000000 exceeded"},
		{"max over a huge range", "x = max(range(1 << 62))", 1, "--max-steps"},
		{"set of a huge range", "x = set(range(1 << 62))", 1, "set of 4611686018427387904 elements"},
		{"list of a range", "x = list(range(100000000))", 1, "--max-memory raises it"},
		{"sorted of a range", "x = sorted(range(100000000))", 1, "--max-memory"},
		{"zip of ranges", "x = dict(zip(range(1 << 62), range(1 << 62)))", 1, "zip of"},
		{"enumerate", "x = enumerate(range(1 << 40))", 1, "enumerate of"},
		{"extend", "x = []\nx.extend(range(1 << 40))", 2, "extend of"},
		{"repeat a list", "x = [0] * 1000000000", 1, "list * int (1 elements repeated 1000000000 times) would need about 14.9 GiB"},
		{"repeat a string", "x = 'ab' * (1 << 30)", 1, "string * int"},
		{"double a string", "s = 'ab'\nfor i in range(40):\n    s = s + s", 3, "string + string"},
		{"double a string in place", "s = 'ab'\nfor i in range(40):\n    s += s", 3, "string + string"},
		{"double a list in place", "s = [1]\nfor i in range(40):\n    s += s", 3, "list + list"},
		{"square an int", "x = 3\nfor i in range(40):\n    x = x * x", 3, "over the limit of 1048576 bits"},
		{"square an int in place", "x = 3\nfor i in range(40):\n    x *= x", 3, "bits for an integer"},
		{"str of a deep list", "x = []\nfor i in range(20000):\n    x = [x]\ns = str(x)", 4, "nests deeper than 10000 levels"},
		{"print of a deep list", "x = []\nfor i in range(20000):\n    x = [x]\nprint(x)", 4, "print: the value nests deeper"},
		{"format of a deep list", "x = []\nfor i in range(20000):\n    x = [x]\ns = '%s' % x", 4, "nests deeper"},
		{"deep tuple", "x = (1,)\nfor i in range(20000):\n    x = (x,)\nd = {x: 1}", 3, "the tuple would nest deeper than 10000 levels"},
		{"deep list at the end", "x = []\nfor i in range(20000):\n    x = [x]", 0, "global x holds a value nested deeper than 10000 levels"},
		{"deep dict at the end", "x = {}\nfor i in range(20000):\n    x = {'k': x}", 0, "global x holds a value nested deeper"},
		{"str of a shared doubling", "x = [1]\nfor i in range(60):\n    x = [x, x]\ns = str(x)", 4, "--max-memory"},
		{"huge join", "x = ','.join(['a' * 1000000] * 1000)", 1, "join of 1000 strings"},
		{"huge replace", "x = ('a' * 1000000).replace('a', 'b' * 1000)", 1, "replace would need"},
		{"huge format", "s = 'a' * 10000000\nx = ('{}' * 8).format(*([s] * 8))", 2, "format would need"},
		{"huge dict", "d = {i: i for i in range(1 << 40)}", 1, ", past the memory budget of 64.0 MiB"},
		{"runaway loop", "def f():\n    x = 0\n    while True:\n        x += 1\nf()", 4, "step limit"},
		{"many ranks", "c = AllReduce(1 << 40, 1, False)", 1, "num_ranks 1099511627776 exceeds the limit of 65536 ranks"},
		{"many chunks", "c = AllReduce(8, 1 << 40, False)", 1, "over the limit of 16777216 chunks"},
		{"thread block id", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2)\nr = Rank(0)\nb = r.get_output_buffer()\nr.copy(b[1:2], b[0:1], tb = 65535)", 5, "65535 is not below the executor's limit of 8192 thread blocks per rank"},
		{"split", "s = 'a ' * 10000000\nx = s.split()", 2, "split of a string of 20000000 bytes (up to 10000001 parts) would need"},
		{"list of elems", "s = 'a' * 10000000\nx = list(s.elems())", 2, "list of 10000000 elements would need about 305.2 MiB"},
		{"repr of escapes", "s = '\\x00' * 20000000\nx = repr(s)", 2, "repr() would need about 76.3 MiB"},
		{"int of long text", "x = int('1' * 400000)", 1, "int: a string of 400000 characters: an integer has at most 315654 digits"},
		{"many operands", "c = AllReduce(2, 2, True)\np = CollectiveProgram('x', c, 2)\nr = Rank(0)\nb = r.get_input_buffer()\nr.reduce(b[0:1], [b[1:2]] * 2000, tb = 0)", 5, "other_chunks: 2000 chunks: an op takes at most 1024"},
		{"many instances", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2, instances = 100000)", 2, "instances 100000 exceeds the limit of 4096"},
		{"many ops", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2)\nr = Rank(0)\nb = r.get_output_buffer()\nfor i in range(100000):\n    r.copy(b[1:2], b[0:1], tb = 0)", 6, "records more than 10000 ops (--max-ops raises the limit)"},
		{"ops times instances", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2, instances = 100)\nr = Rank(0)\nb = r.get_output_buffer()\nfor i in range(1000):\n    r.copy(b[1:2], b[0:1], tb = 0)", 6, "× 100 instances pass the limit of 10000 ops"},
		{"huge scratch", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2)\nb = Buffer(0, 1 << 40)", 3, "over the limit of 16777216 chunks"},
	}
	// One at a time: the memory budget is measured on the process's heap,
	// which parallel cases would share.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Eval(memSource{"p.star": c.script + "\n"}, "p.star", Options{Limits: small})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *starlib.Error", err)
			}
			if int(se.Pos.Line) != c.line || !strings.Contains(se.Msg, c.want) {
				t.Errorf("got %s, want line %d and %q", se, c.line, c.want)
			}
		})
	}
}

// TestLimitsTime: the wall-clock limit stops a loop that the step limit
// would let run for long (each step copies a growing string).
func TestLimitsTime(t *testing.T) {
	t.Parallel()
	src := memSource{"p.star": "x = ''\nwhile True:\n    x += 'a'\n"}
	_, err := Eval(src, "p.star", Options{Limits: Limits{MaxTime: 300 * time.Millisecond}})
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "time limit of 300ms (--max-time raises it)") || se.Pos.Line < 2 {
		t.Fatalf("got %v, want the time limit inside the loop", err)
	}
}

// TestMeteredOperatorsKeepSemantics: the rewritten operators, augmented
// assignments and methods give the interpreter's values and errors.
func TestMeteredOperatorsKeepSemantics(t *testing.T) {
	t.Parallel()
	script := `
a = [1, 2]
b = a
a += [3]
if b != [1, 2, 3]:
    fail("list += must extend in place, b = %s" % b)
s = "x"
s += "y"
s *= 2
if s != "xyxy":
    fail(s)
n = 5
n %= 3
d = {"k": [1]}
d["k"] += [2]
if d["k"] != [1, 2] or n != 2:
    fail("%s %d" % (d, n))
if "-".join(["a", "b"]) != "a-b" or "aXa".replace("X", "yy") != "ayya" or "{}{}".format(1, "z") != "1z":
    fail("methods")
l = []
l.extend(range(5000))
if len(l) != 5000 or list(range(5000))[-1] != 4999 or sorted(range(5000), reverse = True)[0] != 4999:
    fail("ranges")
if max(range(10000)) != 9999 or not any(range(10000)) or len(dict(zip(range(5000), range(5000)))) != 5000:
    fail("builtins over ranges")
if (1 << 200) * 3 != 3 << 200 or 2 * [1] != [1, 1] or "%d%%" % 5 != "5%":
    fail("operators")
`
	if _, err := Eval(memSource{"p.star": script}, "p.star", Options{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ script, want string }{
		{"x = 1 + 'a'", "unknown binary op: int + string"},
		{"x = [1] * 'a'", "unknown binary op: list * string"},
		{"x = 1\nx += 'a'", "unknown binary op: int + string"},
		{"x = (1).join([])", "int has no .join field or method"},
		{"x = ','.join([1])", "join: in list, want string, got int"},
	} {
		_, err := Eval(memSource{"p.star": c.script + "\n"}, "p.star", Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.script, err, c.want)
		}
	}
}

// TestRewriteLeavesBoundedOperators: only the operators that can build a
// value much larger than their operands become metered calls.
func TestRewriteLeavesBoundedOperators(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr    string
		metered bool
	}{
		{"a + 1", false},
		{"1 + a", false},
		{"a % 8", false},
		{"a + b", true},
		{"a * 2", true},
		{"2 * a", true},
		{"'%s%s' % a", true},
		{"a % b", true},
		{"a + 1.5", true},
	} {
		f, err := syntax.Parse("e.star", "x = "+c.expr+"\n", 0)
		if err != nil {
			t.Fatal(err)
		}
		rewriteSlices(f)
		_, isCall := f.Stmts[0].(*syntax.AssignStmt).RHS.(*syntax.CallExpr)
		if isCall != c.metered {
			t.Errorf("%s: rewritten into a metered call = %v, want %v", c.expr, isCall, c.metered)
		}
	}
}
