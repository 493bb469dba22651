package starlib

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const twoRankCopy = `
CollectiveProgram(name, AllReduce(2, 1, True), 2)
r = Rank(0)
b = r.get_input_buffer()
o = r.get_output_buffer()
r.copy(o[0:1], b[0:1], tb = 0)
`

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lib/util.star", "def twice(x):\n    return 2 * x\nwho = __name__\n")
	write("lib/chain.star", `load("util.star", "twice")`+"\nfour = twice(2)\n")
	write("main.star", `load("lib/chain.star", "four")`+"\n"+`load("lib/util.star", "who")`+"\nif four != 4 or who != \"lib/util.star\" or __name__ != \"__main__\":\n    fail(\"load\")\n")
	write("escape.star", `load("../x.star", "y")`+"\n")
	write("abs.star", `load("/etc/x.star", "y")`+"\n")
	write("missing.star", "\n"+`load("nope.star", "y")`+"\n")
	write("cycle_a.star", `load("cycle_b.star", "b")`+"\na = 1\n")
	write("cycle_b.star", `load("cycle_a.star", "a")`+"\nb = 1\n")
	write("link.star", `load("evil.star", "y")`+"\n")
	if err := os.WriteFile(filepath.Join(outside, "evil.star"), []byte("y = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "evil.star"), filepath.Join(dir, "evil.star")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file, want string
		line       int32
	}{
		{"main.star", "", 0},
		{"escape.star", `leaves the root`, 1},
		{"abs.star", `absolute path`, 1},
		{"missing.star", `cannot read`, 2},
		{"cycle_a.star", `load cycle`, 1},
		{"link.star", `resolves outside the root`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			_, err := Eval(DirSource(dir), tt.file, Options{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.Contains(se.Msg, tt.want) || se.Pos.Line != tt.line {
				t.Errorf("got %s, want %q at line %d", se, tt.want, tt.line)
			}
		})
	}
}

func TestStepLimit(t *testing.T) {
	t.Parallel()
	src := memSource{"loop.star": "def spin():\n    x = 0\n    while True:\n        x += 1\nspin()\n"}
	_, err := Eval(src, "loop.star", Options{Limits: Limits{MaxSteps: 10000}})
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "step limit of 10000 exceeded") || se.Pos.Filename() != "loop.star" || se.Pos.Line != 4 {
		t.Fatalf("got %v, want a too-many-steps error inside loop.star", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	src := memSource{"loop.star": "while True:\n    pass\n"}
	_, err := Eval(src, "loop.star", Options{Context: ctx})
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("got %v, want a cancellation", err)
	}
}

func TestPrintGoesToStderr(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if _, err := Eval(memSource{"p.star": `print("hello", 1)`}, "p.star", Options{Stderr: &stderr}); err != nil {
		t.Fatal(err)
	}
	if stderr.String() != "hello 1\n" {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	script := `
n = param("n", 8, help = "ranks")
b = param("b", False)
s = param("s", "x")
f = param("f", 0.5)
big = param("big", (1 << 64) - 1)
result = [n, b, s, f, big]
`
	tests := []struct {
		name    string
		defines map[string]string
		want    string // expected error substring, or "" for success
	}{
		{"defaults", nil, ""},
		{"all", map[string]string{"n": "0x10", "b": "true", "s": "hello", "f": "2.5", "big": "340282366920938463463374607431768211455"}, ""},
		{"bad int", map[string]string{"n": "eight"}, `parameter "n": -D n=eight: want an int`},
		{"bad bool", map[string]string{"b": "yes"}, `want a bool`},
		{"bad float", map[string]string{"f": "x"}, `want a float`},
		{"undeclared", map[string]string{"nope": "1"}, `-D nope: the script declares no such parameter (declared: b, big, f, n, s)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Eval(memSource{"p.star": script}, "p.star", Options{Defines: tt.defines})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Params) != 5 || res.Params[0].Name != "n" || res.Params[0].Help != "ranks" {
				t.Errorf("params = %+v", res.Params)
			}
		})
	}
}

// TestConcurrentEvaluations proves there is no shared mutable state: many
// evaluations at once give the same plans as one alone.
func TestConcurrentEvaluations(t *testing.T) {
	t.Parallel()
	plan := func(name string) string {
		res, err := Eval(memSource{"c.star": "name = " + `"` + name + `"` + twoRankCopy + "\nMemoryChannel(1, 0)\nSemaphore(0, 1)\nRank(1).barrier([0, 1])\n"}, "c.star", Options{})
		if err != nil {
			t.Error(err)
			return ""
		}
		p, err := res.Programs[0].Plan()
		if err != nil {
			t.Error(err)
		}
		return string(p)
	}
	want := map[string]string{"a": plan("a"), "b": plan("b")}
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		name := []string{"a", "b"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := plan(name); got != want[name] {
				t.Errorf("concurrent plan of %s differs", name)
			}
		}()
	}
	wg.Wait()
}

func TestSeveralPrograms(t *testing.T) {
	t.Parallel()
	script := `
for n in [2, 4]:
    CollectiveProgram("ar%d" % n, AllReduce(n, 1, True), n)
    Rank(0).barrier([0, 1])
`
	res, err := Eval(memSource{"m.star": script}, "m.star", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Programs) != 2 || res.Programs[0].Name() != "ar2" || res.Programs[1].Name() != "ar4" {
		t.Fatalf("programs = %v", res.Programs)
	}
	for _, p := range res.Programs {
		plan, err := p.Plan()
		if err != nil {
			t.Fatal(err)
		}
		// Barrier ids restart with every program.
		if !strings.Contains(string(plan), `"barrier_id": 0`) {
			t.Errorf("%s: barrier ids did not restart:\n%s", p.Name(), plan)
		}
	}
}

func TestJSONMatchesPlan(t *testing.T) {
	t.Parallel()
	script := "name = \"j\"" + twoRankCopy + "\nprog = CollectiveProgram.from_spec(AlgoSpec(\"s\", AllReduce(2, 1, True), 2, 2, True, 1, \"LL\"))\nj1 = prog.to_json()\nj2 = JSON()\nif j1 != j2 or prog.protocol != \"LL\":\n    fail(\"to_json\")\n"
	res, err := Eval(memSource{"j.star": script}, "j.star", Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := res.Programs[1].Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(plan), "}\n") || !strings.Contains(string(plan), `"name": "s"`) {
		t.Errorf("plan = %s", plan)
	}
}
