// mscclgo run under memory pressure and on broken plans: a run that would
// not fit the memory budget is refused before anything is allocated, and
// every error and report of run names the plan file.

package hostile

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// hugeChunkPlan is the project's pipeline test plan with 2^31 input and
// output chunks: valid at 32 GiB (16-byte chunks), and at 1 TiB.
func hugeChunkPlan(t *testing.T, dir string) string {
	t.Helper()
	m := loadPlanTree(t, testdataPlan)
	g := planRank0(m)
	g["input_chunks"], g["output_chunks"] = 1<<31, 1<<31
	planObj(planTB0Ops(m)[0], "iter_context")["num_chunks"] = 1
	return writePlanTree(t, dir, "huge.json", m)
}

func TestRunMemoryBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	huge := hugeChunkPlan(t, dir)
	ar8 := evalBundledPlan(t, dir, "ar8.json", "allreduce_rsag", "world_size=8", "min_message_size=0")
	const small = 1 << 30 // peak RSS bound of a refused run
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // regexps
		stderr []string // substrings
		// needsBelow: the case relies on the default budget refusing
		// the run, so on a machine with at least this much memory it
		// is skipped (the run would be allowed).
		needsBelow uint64
	}{
		{name: "check allocates nothing per byte", args: []string{"check", huge, "--size", "32G"},
			stdout: []string{`^huge.json: ok\n$`}},
		{name: "2^31 chunks, default budget", args: []string{"run", huge, "--size", "1T"}, code: 1,
			stderr: []string{"mscclgo: huge.json: size 1099511627776: a run needs about 2.0 TiB (1 rank × 2.0 TiB of buffers",
				"above the memory budget of ", "(half of ", "; --max-memory raises it"}},
		{name: "2^31 chunks at 32G", args: []string{"run", huge, "--size", "32G", "--max-memory", "8G"}, code: 1,
			stderr: []string{"mscclgo: huge.json: size 34359738368: a run needs about 64.0 GiB (1 rank × 64.0 GiB of buffers",
				"above the memory budget of 8.0 GiB (--max-memory); --max-memory raises it"}},
		{name: "8 ranks at 4G", args: []string{"run", ar8, "--size", "4G", "--max-memory", "8G"}, code: 1,
			stderr: []string{"mscclgo: ar8.json: size 4294967296: a run needs about 40.", "(8 ranks × 4.0 GiB of buffers + 8.0 GiB of generator and expected-result tables",
				"above the memory budget of 8.0 GiB (--max-memory); --max-memory raises it"}},
		{name: "8 ranks at 4G, default budget", args: []string{"run", ar8, "--size", "4G"}, code: 1, needsBelow: 80 << 30,
			stderr: []string{"mscclgo: ar8.json: size 4294967296: a run needs about 40.", "(half of "}},
		{name: "race detection counts", args: []string{"run", ar8, "--size", "1G", "--race", "--max-memory", "9G"}, code: 1,
			stderr: []string{"a run needs about 10.", "above the memory budget of 9.0 GiB"}},
		{name: "a sweep stops at the first size above the budget", args: []string{"run", ar8, "-b", "1K", "-e", "1T", "-f", "1024", "-n", "1", "--max-memory", "256M"}, code: 1,
			stdout: []string{`(?m)^        1024 .*      0$`, `(?m)^     1048576 .*      0$`},
			stderr: []string{"mscclgo: ar8.json: size 1073741824: a run needs about "}},
		{name: "a normal run", args: []string{"run", ar8, "--size", "1M", "-n", "2"},
			stdout: []string{`(?m)^     1048576 .*      0$`, `# Out of bounds values : 0 OK`}},
		{name: "no budget", args: []string{"run", ar8, "--size", "64K", "-n", "1", "--max-memory", "0"},
			stdout: []string{`# Out of bounds values : 0 OK`}},
		{name: "bad budget", args: []string{"run", ar8, "--size", "64K", "--max-memory", "lots"}, code: 2,
			stderr: []string{"--max-memory: size \"lots\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if mem := machineMemTotal(t); tt.needsBelow > 0 && mem >= tt.needsBelow {
				t.Skipf("this machine has %d GiB: the default budget would let the run go", mem>>30)
			}
			r := mscclgo(t, dir, tt.args...)
			r.wantError(t, tt.code, small, tt.stderr...)
			for _, re := range tt.stdout {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					t.Errorf("stdout does not match %q:\n%s", re, r.stdout)
				}
			}
		})
	}
}

// machineMemTotal returns the machine's memory (MemTotal of /proc/meminfo), 0 if
// unknown.
func machineMemTotal(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestRunErrorsNamePlan: every line run prints on standard error for a
// problem of the plan starts with the plan's name, as check's lines do.
func TestRunErrorsNamePlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plans := map[string]func(m map[string]any){
		"typo.json": func(m map[string]any) {
			planObj(planTB0Ops(m)[0], "ops", 0)["name"] = "cpy"
		},
		"limited.json": func(m map[string]any) {
			m["min_message_size"], m["max_message_size"] = 2048, 16384
		},
		"wrong.json": func(m map[string]any) {
			m["collective"] = "allreduce"
		},
		"unit1.json": func(m map[string]any) {
			pipe := planObj(planTB0Ops(m)[0])
			pipe["ops"] = []any{planReduceOp()}
			planObj(pipe, "iter_context")["unit_size"] = 1
		},
		"deadlock.json": func(m map[string]any) {
			g := planRank0(m)
			g["semaphores"] = []any{map[string]any{"init_value": 0}}
			setPlanTB0Ops(m, map[string]any{"name": "sem_acquire", "semaphore_ids": []any{0}})
		},
	}
	for name, edit := range plans {
		m := loadPlanTree(t, testdataPlan)
		edit(m)
		if name == "wrong.json" {
			planTwoRanks(t, m)
		}
		writePlanTree(t, dir, name, m)
	}
	writeFile(t, dir, "notaplan.json", "name = 1\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a plan that does not load", []string{"run", "typo.json", "--size", "4K"}, 1, `mscclgo: typo.json: gpus[0].threadblocks[0].ops[0].ops[0]: name = "cpy": invalid operation type`},
		{"a missing file", []string{"run", "none.json", "--size", "4K"}, 1, "mscclgo: none.json: no such file"},
		{"not a plan", []string{"run", "notaplan.json", "--size", "4K"}, 1, "mscclgo: notaplan.json is not an execution plan"},
		{"a size the plan cannot take", []string{"run", "limited.json", "--size", "1K"}, 1, "mscclgo: limited.json: message size 1024 (the input size): below min_message_size 2048"},
		{"an indivisible size", []string{"run", "limited.json", "--size", "4097"}, 1, "mscclgo: limited.json: size 4097 is not a whole number of 2-byte half elements"},
		{"no size of a sweep", []string{"run", "limited.json", "-b", "64K", "-e", "1M"}, 1, "mscclgo: limited.json: no size of the sweep suits the plan"},
		{"--split-mask on a test plan", []string{"run", "limited.json", "--size", "4K", "--split-mask", "1"}, 2, "mscclgo: limited.json: --split-mask applies to sendrecv plans"},
		{"a launch the backend rejects", []string{"run", "unit1.json", "--size", "4K"}, 1, "mscclgo: unit1.json: size 4096: gpus[0].threadblocks[0].ops[0].ops[0]: re: 1 bytes"},
		{"wrong results", []string{"run", "wrong.json", "--size", "4K", "-n", "1"}, 1, "mscclgo: wrong.json: size 4096, launch 0: wrong data:"},
		{"a deadlock", []string{"run", "deadlock.json", "--size", "4K", "--timeout", "100ms"}, 3, "mscclgo: deadlock.json: size 4096, launch 0: deadlock: 1 thread block(s) blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := mscclgo(t, dir, tt.args...)
			r.wantError(t, tt.code, 512<<20, tt.want)
			plan := tt.args[1]
			for _, line := range strings.Split(r.stderr, "\n") {
				if rest, ok := strings.CutPrefix(line, "mscclgo: "); ok && !strings.HasPrefix(rest, plan) {
					t.Errorf("stderr line %q does not start with the plan %s", line, plan)
				}
			}
		})
	}
}
