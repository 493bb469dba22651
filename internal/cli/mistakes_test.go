package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// allgatherRing is a correct 4-rank allgather: every rank puts its chunk
// to every peer and signals; every rank waits for every peer.
const allgatherRing = `n = param("num_gpus", 4, help = "number of GPUs")

CollectiveProgram("allgather_ring", AllGather(n, 1, True), n, protocol = "Simple")
for src in range(n):
    chunk = Rank(src).get_output_buffer()[src:src + 1]
    for dst in range(n):
        if dst != src:
            ch = MemoryChannel(dst, src)
            ch.put(Rank(dst).get_output_buffer()[src:src + 1], chunk, tb = 0)
            ch.signal(tb = 0, data_sync = SyncType.before)
            MemoryChannel(src, dst).wait(tb = 0, data_sync = SyncType.after)
`

// allreduceDirect is a correct allreduce: rank r gathers chunk r of every
// peer into its scratch, reduces it, and puts the sum back to the peers.
const allreduceDirect = `n = param("num_gpus", 2, help = "number of GPUs")

CollectiveProgram("allreduce_direct", AllReduce(n, 1, True), n, protocol = "Simple")
scratch = [Buffer(r, n) for r in range(n)]
ch = [[MemoryChannel(dst, src) if dst != src else None for src in range(n)] for dst in range(n)]
for r in range(n):
    for peer in range(n):
        if peer != r:
            ch[r][peer].put(scratch[r][peer:peer + 1], Rank(peer).get_input_buffer()[r:r + 1], tb = 0)
            ch[r][peer].signal(tb = 0, data_sync = SyncType.before)
            ch[peer][r].wait(tb = 0, data_sync = SyncType.after)
for r in range(n):
    for peer in range(n):
        if peer != r:
            Rank(r).reduce(Rank(r).get_input_buffer()[r:r + 1], [scratch[r][peer:peer + 1]], tb = 0)
for r in range(n):
    for peer in range(n):
        if peer != r:
            ch[peer][r].put(Rank(peer).get_input_buffer()[r:r + 1], Rank(r).get_input_buffer()[r:r + 1], tb = 0)
            ch[peer][r].signal(tb = 0, data_sync = SyncType.before)
            ch[r][peer].wait(tb = 0, data_sync = SyncType.after)
`

// starPos finds the first .star position in a report.
var starPos = regexp.MustCompile(`algo\.star:(\d+):\d+`)

// TestMistakesPointAtTheLine plants the usual mistakes in two small
// algorithms and checks that the first report of eval, check or run
// names the .star line of the mistake or of the op it broke.
func TestMistakesPointAtTheLine(t *testing.T) {
	t.Parallel()
	for _, base := range []string{allgatherRing, allreduceDirect} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "algo.star"), base)
		for _, args := range [][]string{{"run", "$DIR/algo.star", "-s", "4K", "-n", "2", "--race"}, {"check", "$DIR/algo.star"}} {
			if code, stdout, stderr := run(t, dir, args...); code != 0 {
				t.Fatalf("the correct algorithm: %v: exit %d\n%s%s", args, code, stdout, stderr)
			}
		}
	}
	cases := []struct {
		name      string
		base      string
		old, new  string // the mistake: old replaced by new (once)
		args      []string
		wantLines []string // the first .star line of the report is one of these
		wantText  string
	}{
		{name: "wrong chunk index", base: allgatherRing,
			old: "ch.put(Rank(dst).get_output_buffer()[src:src + 1]", new: "ch.put(Rank(dst).get_output_buffer()[(src + 1) % n:(src + 1) % n + 1]",
			args: []string{"run"}, wantLines: []string{"9"}, wantText: "written by"},
		{name: "missing wait", base: allgatherRing,
			old: "            MemoryChannel(src, dst).wait(tb = 0, data_sync = SyncType.after)\n", new: "",
			args: []string{"run"}, wantLines: []string{"10"}, wantText: "signal/wait mismatch"},
		{name: "signal to the wrong peer", base: allgatherRing,
			old: "ch.signal(tb = 0", new: "MemoryChannel((dst + 1) % n if (dst + 1) % n != src else (dst + 2) % n, src).signal(tb = 0",
			args: []string{"run"}, wantLines: []string{"10", "11"}, wantText: "deadlock"},
		{name: "wait on the wrong thread block", base: allreduceDirect,
			old: "ch[peer][r].wait(tb = 0", new: "ch[peer][r].wait(tb = 1",
			args: []string{"run", "--race"}, wantLines: []string{"9", "11", "15"}, wantText: "race"},
		{name: "scratch too small", base: allreduceDirect,
			old: "Buffer(r, n)", new: "Buffer(r, 1)",
			args: []string{"run"}, wantLines: []string{"4", "9"}, wantText: "out of bounds"},
		{name: "put without a matching signal", base: allgatherRing,
			old: "            ch.signal(tb = 0, data_sync = SyncType.before)\n", new: "",
			// The wait, now on line 10, is the op it broke.
			args: []string{"run"}, wantLines: []string{"9", "10"}, wantText: "signal/wait mismatch"},
		{name: "wrong chunk index, through a plan and its source map", base: allgatherRing,
			old: "ch.put(Rank(dst).get_output_buffer()[src:src + 1]", new: "ch.put(Rank(dst).get_output_buffer()[(src + 1) % n:(src + 1) % n + 1]",
			args: []string{"plan"}, wantLines: []string{"9"}, wantText: "written by"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(c.base, c.old) {
				t.Fatalf("the mistake's text %q is not in the algorithm", c.old)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "algo.star"), strings.Replace(c.base, c.old, c.new, 1))
			var args []string
			switch c.args[0] {
			case "plan":
				if code, _, stderr := run(t, dir, "eval", "$DIR/algo.star", "-o", "$DIR/plan.json", "--source-map"); code != 0 {
					t.Fatalf("eval: exit %d: %s", code, stderr)
				}
				if _, err := os.Stat(filepath.Join(dir, "plan.json.map")); err != nil {
					t.Fatal(err)
				}
				args = []string{"run", "$DIR/plan.json", "-s", "4K", "-n", "2"}
			default:
				args = append([]string{c.args[0], "$DIR/algo.star", "-s", "4K", "-n", "2"}, c.args[1:]...)
			}
			code, stdout, stderr := run(t, dir, args...)
			report := stderr + stdout
			if code == 0 {
				t.Fatalf("the mistake went unnoticed:\n%s", report)
			}
			if !strings.Contains(report, c.wantText) {
				t.Errorf("report does not say %q:\n%s", c.wantText, report)
			}
			m := starPos.FindStringSubmatch(report)
			if m == nil {
				t.Fatalf("no algo.star position in the report:\n%s", report)
			}
			found := false
			for _, l := range c.wantLines {
				found = found || m[1] == l
			}
			if !found {
				t.Errorf("first position is line %s, want one of %v:\n%s", m[1], c.wantLines, report)
			}
		})
	}
}

// TestMistakeInALoadedFunction: an op recorded by a function of a loaded
// file is named with its line there and the call that led to it.
func TestMistakeInALoadedFunction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "lib.star"), `def send(src, dst, n):
    ch = MemoryChannel(dst, src)
    ch.put(Rank(dst).get_output_buffer()[(src + 1) % n:(src + 1) % n + 1], Rank(src).get_output_buffer()[src:src + 1], tb = 0)
    ch.signal(tb = 0, data_sync = SyncType.before)
`)
	writeFile(t, filepath.Join(dir, "algo.star"), `load("lib.star", "send")
n = param("num_gpus", 4, help = "number of GPUs")

CollectiveProgram("allgather_lib", AllGather(n, 1, True), n, protocol = "Simple")
for src in range(n):
    for dst in range(n):
        if dst != src:
            send(src, dst, n)
            MemoryChannel(src, dst).wait(tb = 0, data_sync = SyncType.after)
`)
	code, stdout, stderr := run(t, dir, "run", "$DIR/algo.star", "-s", "4K", "-n", "1")
	if code != ExitError || !regexp.MustCompile(`missing rank 0 input\[0\] \(chunk 0\): rank 3 tb 0 op 8 put \(\S*lib\.star:3:11 called from \S*algo\.star:8:17\) wrote it to rank 2 output\[0\]`).MatchString(stderr) {
		t.Errorf("exit %d; stderr:\n%s%s", code, stderr, stdout)
	}
}
