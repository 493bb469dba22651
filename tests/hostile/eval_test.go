// Hostile scripts given to `mscclgo eval`: each ends with a named error
// (exit 1) on its line, naming the limit and its flag, with no Go stack
// trace, within bounded memory, and writes no plan.

package hostile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEvalHostileScripts runs one process per script. The instant cases
// run under the default limits: they are refused before anything is
// built. The gradual ones get small limits through the flags.
func TestEvalHostileScripts(t *testing.T) {
	t.Parallel()
	small := []string{"--max-memory", "256M", "--max-steps", "20000000", "--max-time", "30s"}
	cases := []struct {
		name, script string
		flags        []string
		want         []string
	}{
		{"list of a huge range", "x = list(range(1 << 62))", nil, []string{"h.star:1:9:", "--max-memory"}},
		{"tuple of a huge range", "x = tuple(range(1 << 62))", nil, []string{"h.star:1:10:", "--max-memory"}},
		{"sorted of a huge range", "x = sorted(range(1 << 62))", nil, []string{"--max-memory"}},
		{"reversed of a huge range", "x = reversed(range(1 << 62))", nil, []string{"--max-memory"}},
		{"zip of huge ranges", "x = dict(zip(range(1 << 62), range(1 << 62)))", nil, []string{"zip of 4611686018427387904 elements"}},
		{"enumerate of a huge range", "x = enumerate(range(1 << 62))", nil, []string{"--max-memory"}},
		{"set of a huge range", "x = set(range(1 << 62))", nil, []string{"--max-memory"}},
		{"repeat a list", "x = [0] * 1000000000", nil, []string{"h.star:1:9:", "14.9 GiB", "--max-memory"}},
		{"square an int", "x = 3\nfor i in range(40):\n    x = x * x", nil, []string{"h.star:3:11:", "bits for an integer"}},
		{"deep str", "x = []\nfor i in range(1000000):\n    x = [x]\nprint(str(x))", nil, []string{"h.star:4:", "nests deeper than 10000"}},
		{"deep list frozen", "x = []\nfor i in range(100000):\n    x = [x]", nil, []string{"h.star: error: global x holds a value nested deeper than 10000 levels"}},
		{"deep tuple hashed", "x = (1,)\nfor i in range(100000):\n    x = (x,)\nd = {x: 1}", nil, []string{"h.star:3:", "nest deeper than 10000 levels"}},
		{"runaway recursion", "def f(n):\n    return f(n + 1)\nf(0)", nil, []string{"h.star:2:", "Starlark stack overflow", "more frames"}},
		{"huge join", "x = ','.join(['a' * 1000000] * 10000)", nil, []string{"join of 10000 strings", "--max-memory"}},
		{"many ranks", "num_ranks = 1 << 40\nc = AllReduce(num_ranks, 1, False)", nil, []string{"h.star:2:", "num_ranks 1099511627776 exceeds the limit"}},
		{"many instances", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2, instances = 100000)", nil, []string{"h.star:2:", "instances 100000"}},
		{"all over a huge range", "x = all(range(1, 1 << 62))", small, []string{"h.star:1:8:", "step limit of 20000000", "--max-steps"}},
		{"double a string", "s = 'ab'\nfor i in range(40):\n    s += s", small, []string{"h.star:3:", "--max-memory"}},
		{"huge dict", "d = {i: i for i in range(1 << 40)}", small, []string{"h.star:1:", "memory budget of 256.0 MiB", "--max-memory"}},
		{"quadratic loop", "x = ''\nwhile True:\n    x += 'a'", []string{"--max-time", "2s"}, []string{"h.star:3:", "time limit of 2s", "--max-time"}},
		{"many ops", "c = AllGather(2, 1, False)\np = CollectiveProgram('x', c, 2)\nr = Rank(0)\nb = r.get_output_buffer()\nfor i in range(10000000):\n    r.copy(b[1:2], b[0:1], tb = 0)",
			[]string{"--max-ops", "100000"}, []string{"h.star:6:", "records more than 100000 ops", "--max-ops"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "h.star", c.script+"\n")
			args := append([]string{"eval", "h.star", "-o", "plan.json"}, c.flags...)
			r := mscclgo(t, dir, args...)
			r.wantError(t, 1, 1536<<20, c.want...)
			if _, err := os.Stat(filepath.Join(dir, "plan.json")); err == nil {
				t.Errorf("plan.json was written")
			}
		})
	}
}
