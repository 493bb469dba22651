package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHostile is issue 31's sweep: the library under hostile callers (C
// callers as threads and processes, Python callers through the mscclgo
// package and through ctypes, bad environments). Each row runs one
// caller, bounded in time (a hang fails the row), and asserts the result
// codes, the messages (ncclGetLastError, per thread) and, where a call was
// refused, that its buffers were left alone. The rows are grouped by the
// issue's classes (hostileClasses); TestHostile's log ends with the count
// of rows passed and failed per class.

// hostileCase is one row of the sweep.
type hostileCase struct {
	class string
	name  string
	args  []string // hostile's arguments, or hostile.py's
	py    bool     // a Python caller (testdata/hostile.py)
	env   []string
	emu   bool     // the emulated-device build of the library
	want  []string // in the output
	re    []string // regular expressions matching the output
	not   []string // never in the output (a crash's trace, wrong data)
	check func(t *testing.T, out string)
}

var (
	hostileOnce sync.Once
	hostileErr  error
)

// hostileArtifacts builds testdata/hostile.c against the library and the
// stub NCCL without ncclCommAbort, beside artifacts' builds.
func hostileArtifacts(t *testing.T) string {
	dir := artifacts(t)
	hostileOnce.Do(func() {
		cflags := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude"}
		if err := os.MkdirAll(filepath.Join(dir, "stubnoabort"), 0o755); err != nil {
			hostileErr = err
			return
		}
		for _, s := range [][]string{
			append(append([]string{"gcc"}, cflags...), "-o", filepath.Join(dir, "hostile"), "testdata/hostile.c",
				"-L"+filepath.Join(dir, "ours"), "-l:libnccl.so.2", "-Wl,-rpath,"+filepath.Join(dir, "ours"), "-lpthread"),
			append(append([]string{"gcc"}, cflags...), "-DSTUB_NCCL_NO_ABORT", "-fPIC", "-shared", "-Wl,-soname,libnccl.so.2",
				"-o", filepath.Join(dir, "stubnoabort", "libnccl.so.2"), "testdata/stubnccl.c"),
		} {
			out, err := exec.Command(s[0], s[1:]...).CombinedOutput()
			if err != nil || len(out) > 0 {
				hostileErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
				return
			}
		}
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return dir
}

// hostileBound bounds each row: a caller still running then hangs.
const hostileBound = 90 * time.Second

// runHostile runs row c and returns its output.
func runHostile(t *testing.T, c hostileCase, plans, big string) string {
	dir := hostileArtifacts(t)
	ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
	defer cancel()
	var cmd *exec.Cmd
	if c.py {
		args := c.args
		if strings.HasPrefix(args[0], "ctypes_") {
			args = append(args, filepath.Join(dir, "ours", "libnccl.so.2"))
		}
		cmd = exec.CommandContext(ctx, torchPythonOrSkip(t), append([]string{filepath.Join("testdata", "hostile.py")}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, filepath.Join(dir, "hostile"), c.args...)
	}
	env := append(cleanEnv(), "MSCCLGO_CACHE_DIR="+t.TempDir(), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_TIMEOUT=30s",
		"PYTHONPATH="+filepath.Join("..", "python"), "PYTHONDONTWRITEBYTECODE=1",
		"MSCCLGO_LIBRARY="+filepath.Join(dir, "ours", "libnccl.so.2"))
	if c.emu {
		env = append(env, "LD_LIBRARY_PATH="+filepath.Join(dir, "emu"))
	}
	for _, e := range c.env {
		e = strings.ReplaceAll(e, "$BIGPLANS", big)
		e = strings.ReplaceAll(e, "$PLANS", plans)
		e = strings.ReplaceAll(e, "$DIR", dir)
		env = append(env, e)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v ran past %v (a hang):\n%s", c.args, hostileBound, out)
	}
	if err != nil {
		t.Fatalf("%v: %v (a crash or a failed set-up):\n%s", c.args, err, out)
	}
	return string(out)
}

// torchPythonOrSkip is a Python with torch (Debian's), or skips t.
func torchPythonOrSkip(t *testing.T) string {
	p := torchPython()
	if p == "" {
		t.Skip("no python3 with torch (Debian: apt-get install python3-torch)")
	}
	return p
}

func TestHostile(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	// Plans for messages of any size (the timeout rows' 64 MiB).
	big := bundledPlans(t, map[string]planDef{"allreduce_rsag.json": {"allreduce_rsag", map[string]string{"world_size": "4"}}})
	// A plan set whose only plan file is cut short.
	broken := t.TempDir()
	whole, err := os.ReadFile(filepath.Join(plans, "allreduce_2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "allreduce_2.json"), whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := hostileCases(fifo, broken)
	passed := map[string][2]int{}
	var mu sync.Mutex
	t.Run("sweep", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.class+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				defer func() {
					mu.Lock()
					defer mu.Unlock()
					n := passed[c.class]
					if t.Failed() {
						n[1]++
					} else if !t.Skipped() {
						n[0]++
					}
					passed[c.class] = n
				}()
				out := runHostile(t, c, plans, big)
				for _, w := range c.want {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
				for _, r := range c.re {
					if !regexp.MustCompile(r).MatchString(out) {
						t.Errorf("output does not match %q:\n%s", r, out)
					}
				}
				for _, w := range append(c.not, "panic", "fatal error", "SIGSEGV", "CHANGED", "WRONG") {
					if strings.Contains(out, w) {
						t.Errorf("output has %q:\n%s", w, out)
					}
				}
				if c.check != nil {
					c.check(t, out)
				}
			})
		}
	})
	total := [2]int{}
	var lines []string
	for class, n := range passed {
		lines = append(lines, fmt.Sprintf("  %-28s %3d passed %3d failed", class, n[0], n[1]))
		total[0] += n[0]
		total[1] += n[1]
	}
	sortStrings(lines)
	t.Logf("hostile sweep: %d cases, %d passed, %d failed\n%s", len(cases), total[0], total[1], strings.Join(lines, "\n"))
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// oneWinner checks that every round of an ends run had exactly one call
// that succeeded and the others refused with ncclInvalidUsage (5),
// each refusal naming the winner.
func oneWinner(t *testing.T, out string) {
	rounds := 0
	for _, l := range strings.Split(out, "\n") {
		_, codes, ok := strings.Cut(l, ": codes ")
		if !ok {
			continue
		}
		rounds++
		wins := 0
		for _, c := range strings.Split(codes, ",") {
			switch c {
			case "0":
				wins++
			case "5":
			default:
				t.Errorf("%q: a code other than 0 or 5 (ncclInvalidUsage)", l)
			}
		}
		if wins != 1 {
			t.Errorf("%q: %d calls won, want 1", l, wins)
		}
	}
	if rounds == 0 {
		t.Errorf("no rounds:\n%s", out)
	}
}

// hostileCases are the sweep's rows.
func hostileCases(fifo, brokenPlans string) []hostileCase {
	var cs []hostileCase
	add := func(c hostileCase) { cs = append(cs, c) }
	none := []string{"MSCCLGO_NCCL_FALLBACK=none"}
	hostmem := []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=$PLANS"}
	device := []string{"MSCCLGO_PLAN_PATH=$PLANS"}

	// Arguments: data types, reductions, roots and peers out of their
	// ranges, and counts whose size in bytes wraps or exceeds 2^48; on
	// one rank without plans, on four with host-memory runs and on four
	// on the emulated device (where a wrapped size ran a plan).
	type arg struct {
		name, coll, count, dtype, op, peer, msg string
	}
	args := []arg{
		{"op -1", "allreduce", "16", "7", "-1", "0", "reduction -1 is not an ncclRedOp_t"},
		{"op INT_MIN", "allreduce", "16", "7", "-2147483648", "0", "reduction -2147483648 is not an ncclRedOp_t"},
		{"op 5 not created", "allreduce", "16", "7", "5", "0", "reduction 5 is neither one of ncclSum to ncclAvg"},
		{"op INT_MAX", "allreduce", "16", "7", "2147483647", "0", "reduction 2147483647 is neither"},
		{"reducescatter op -1", "reducescatter", "4", "7", "-1", "0", "reduction -1 is not an ncclRedOp_t"},
		{"reducescatter op 99", "reducescatter", "4", "7", "99", "0", "reduction 99 is neither"},
		{"reduce op -7", "reduce", "16", "7", "-7", "0", "reduction -7 is not an ncclRedOp_t"},
		{"dtype -1", "allreduce", "16", "-1", "0", "0", "data type -1 is not an ncclDataType_t (0 to 9)"},
		{"dtype 10", "allreduce", "16", "10", "0", "0", "data type 10 is not an ncclDataType_t"},
		{"dtype INT_MAX", "allgather", "16", "2147483647", "0", "0", "data type 2147483647 is not an ncclDataType_t"},
		{"reducescatter dtype 12", "reducescatter", "4", "12", "0", "0", "data type 12 is not an ncclDataType_t"},
		{"broadcast dtype -3", "broadcast", "16", "-3", "0", "0", "data type -3 is not an ncclDataType_t"},
		{"send dtype 77", "send", "16", "77", "0", "0", "data type 77 is not an ncclDataType_t"},
		{"broadcast root -1", "broadcast", "16", "7", "0", "-1", "root -1 outside the"},
		{"broadcast root n", "broadcast", "16", "7", "0", "4", "root 4 outside the"},
		{"bcast root 1000", "bcast", "16", "7", "0", "1000", "root 1000 outside the"},
		{"reduce root 9", "reduce", "16", "7", "0", "9", "root 9 outside the"},
		{"send peer -2", "send", "16", "7", "0", "-2", "peer -2 outside the"},
		{"recv peer 64", "recv", "16", "7", "0", "64", "peer 64 outside the"},
		{"allreduce 2^62+256 floats", "allreduce", "0x4000000000000100", "7", "0", "0", "overflows 64 bits"},
		{"allreduce 2^61 doubles", "allreduce", "0x2000000000000000", "8", "0", "0", "overflows 64 bits"},
		{"allreduce SIZE_MAX int8", "allreduce", "0xffffffffffffffff", "0", "0", "0", "(2^48) one call may name"},
		{"allreduce 2^47 floats", "allreduce", "0x800000000000", "7", "0", "0", "(2^48) one call may name"},
		{"allreduce (size_t)-1 floats", "allreduce", "-1", "7", "0", "0", "overflows 64 bits"},
		{"allgather 2^60+64 floats", "allgather", "0x1000000000000040", "7", "0", "0", "(2^48) one call may name"},
		{"reducescatter 2^60+64 floats", "reducescatter", "0x1000000000000040", "7", "0", "0", "(2^48) one call may name"},
		{"allgather 2^46+1 floats", "allgather", "0x400000000001", "7", "0", "0", "one call may name"},
		{"broadcast 2^63 int8", "broadcast", "0x8000000000000000", "0", "0", "0", "one call may name"},
		{"send 2^62 halfs", "send", "0x4000000000000000", "6", "0", "0", "one call may name"},
		{"recv 2^61 int64", "recv", "0x2000000000000000", "4", "0", "0", "overflows 64 bits"},
	}
	fnOf := map[string]string{"allreduce": "ncclAllReduce", "allgather": "ncclAllGather", "reducescatter": "ncclReduceScatter",
		"reduce": "ncclReduce", "broadcast": "ncclBroadcast", "bcast": "ncclBcast", "send": "ncclSend", "recv": "ncclRecv"}
	for _, a := range args {
		for _, w := range []struct {
			where string
			n     string
			env   []string
			emu   bool
		}{{"1 rank", "1", none, false}, {"4 ranks host memory", "4", hostmem, false}, {"4 ranks emulated device", "4", device, true}} {
			n := w.n
			if n == "1" && (strings.Contains(a.name, "root") || strings.Contains(a.name, "peer")) && !strings.Contains(a.name, "-") {
				continue // a root or peer of 1 or more is out of range on one rank, but named by the 4-rank rows
			}
			if w.emu && !(strings.Contains(a.name, "2^") || strings.Contains(a.name, "op")) {
				continue // the device rows: the classes where a plan ran
			}
			add(hostileCase{class: "arguments", name: a.name + " on " + w.where, args: []string{"call", n, a.coll, a.count, a.dtype, a.op, a.peer},
				env: w.env, emu: w.emu,
				want: []string{fmt.Sprintf("rank 0: %s -> 4", a.coll), fmt.Sprintf("rank 0: %s error: mscclgo: %s: rank 0 of %s: ", a.coll, fnOf[a.coll], n), a.msg, "rank 0: data untouched"}})
		}
	}
	// Zero elements: every collective, ncclSend and ncclRecv of count 0
	// on NULL buffers is a no-op that succeeds (as a zero-element
	// tensor's call), on one rank, on two with host-memory runs and on
	// two on the emulated device.
	for _, w := range []struct {
		where, n string
		env      []string
		emu      bool
	}{{"1 rank", "1", none, false}, {"2 ranks host memory", "2", hostmem, false}, {"2 ranks emulated device", "2", device, true}} {
		add(hostileCase{class: "zero elements", name: "every call on " + w.where, args: []string{"zero", w.n}, env: w.env, emu: w.emu,
			want: []string{"rank 0: zero allreduce -> 0", "rank 0: zero broadcast -> 0", "rank 0: zero send -> 0", "rank 0: zero send and recv in a group -> 0"},
			not:  []string{"NULL buffer"},
			check: func(t *testing.T, out string) {
				n := 0
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, ": zero ") {
						n++
						if !strings.HasSuffix(l, " -> 0") {
							t.Errorf("a call of zero elements that did not succeed: %q", l)
						}
					}
				}
				if want := 12 * int(w.n[0]-'0'); n != want {
					t.Errorf("%d zero-element calls answered, want %d:\n%s", n, want, out)
				}
			}})
	}

	// Signals: the library's threads (the Go runtime's, started when
	// the library loads, and its own) keep the signals main blocked
	// after the load; a SIGTERM the program waits for reaches its
	// sigwait instead of killing it.
	for _, w := range []struct {
		where string
		env   []string
		emu   bool
	}{{"host memory", []string{"MSCCLGO_NCCL_HOSTMEM=1"}, false}, {"emulated device", device, true}} {
		add(hostileCase{class: "signals", name: "SIGTERM blocked in main reaches sigwait on " + w.where, args: []string{"sigwait"}, env: w.env, emu: w.emu,
			want: []string{"rank 0: ncclAllReduce -> 0", "threads that do not block SIGTERM: 0 of ", "sigtimedwait: SIGTERM", "main still blocks SIGTERM: 1"}})
	}

	// A created reduction is the communicator's: a forwarded call may name
	// it (the stub's ncclRedOpCreatePreMulSum makes op 6).
	add(hostileCase{class: "arguments", name: "created op forwarded", args: []string{"call", "1", "allreduce", "16", "7", "6", "0"},
		env: []string{"MSCCLGO_NCCL_FALLBACK=$DIR/stub/libnccl.so.2"}, want: []string{"reduction 6 is neither", "rank 0: allreduce -> 4"}})
	add(hostileCase{class: "arguments", name: "ncclCommInitAll ndev 200000000", args: []string{"initall", "200000000"},
		want: []string{"rank 0: ncclCommInitAll -> 4", "mscclgo: ncclCommInitAll: ndev 200000000: a communicator has 1 to 65536 ranks"},
		re:   []string{`peak memory \d{1,2} MiB`}})
	add(hostileCase{class: "arguments", name: "ncclCommInitAll ndev INT_MAX", args: []string{"initall", "2147483647"},
		want: []string{"rank 0: ncclCommInitAll -> 4", "ndev 2147483647: a communicator has 1 to 65536 ranks"},
		re:   []string{`peak memory \d{1,2} MiB`}})
	add(hostileCase{class: "arguments", name: "mscclgoExecute 2^62+256 floats", args: []string{"execute", "0x4000000000000100"},
		env: []string{"MSCCLGO_NCCL_HOSTMEM=1"}, want: []string{"rank 0: mscclgoExecute -> 4", "overflows 64 bits", "rank 0: data untouched"}})

	// Python callers: the package's tensor checks (as torch.distributed's),
	// ctypes callers of the NCCL API.
	for _, p := range []struct{ name, code, msg string }{
		{"allgather_small_output", "4", "allgather: the output has 4 elements, want 8"},
		{"reducescatter_small_input", "4", "reducescatter: the input has 4 elements, want 8"},
		{"allgather_dtype_mismatch", "4", "input torch.float32 and output torch.int32 differ"},
		{"allreduce_float64", "4", "tensor type torch.float64"},
		{"allreduce_not_contiguous", "4", "is not contiguous"},
		{"allreduce_not_a_tensor", "4", "output is a list, not a tensor"},
		{"ctypes_op_minus_one", "4", "reduction -1 is not an ncclRedOp_t"},
		{"ctypes_dtype_99", "4", "data type 99 is not an ncclDataType_t"},
		{"ctypes_count_wraps", "4", "overflows 64 bits"},
		{"ctypes_destroy_twice", "5", "was ended already by ncclCommDestroy"},
		{"ctypes_initall_huge", "4", "ndev 200000000"},
	} {
		add(hostileCase{class: "python", name: p.name, py: true, args: []string{p.name},
			want: []string{p.name + " -> " + p.code + ": ", p.msg}})
	}

	// Selector callbacks: an exception, a wrong type or "" is a refusal
	// of that call, named.
	for _, p := range []struct{ name, msg string }{
		{"selector_raises", "the selector failed: ValueError(\"the selector's own bug\")"},
		{"selector_int", "the selector returned 5 (int), want a plan name (str) or None"},
		{"selector_bytes", "the selector returned b'plan' (bytes)"},
		{"selector_empty", "the selector returned an empty plan name for allreduce"},
	} {
		add(hostileCase{class: "selector", name: p.name, py: true, args: []string{p.name}, want: []string{p.name + " -> 5: ", p.msg}})
	}
	add(hostileCase{class: "selector", name: "C selector returns empty", args: []string{"selector", "EMPTY"},
		want: []string{"rank 0: mscclgoSelect -> 5", "the selector returned an empty plan name for allreduce of 256 bytes (in-place)"}})
	add(hostileCase{class: "selector", name: "C selector returns NULL", args: []string{"selector", "NULL"},
		want: []string{"rank 0: mscclgoSelect -> 5", "the selector chose no plan for allreduce of 256 bytes"}})

	// One end per communicator: destroy, abort and finalize at once from
	// several threads, and again after the end.
	for _, e := range []struct {
		name string
		ops  []string
	}{
		{"3 destroys at once", []string{"destroy", "destroy", "destroy"}},
		{"3 aborts at once", []string{"abort", "abort", "abort"}},
		{"destroy and abort at once", []string{"destroy", "abort"}},
		{"8 destroys and aborts at once", []string{"destroy", "abort", "destroy", "abort", "destroy", "abort", "destroy", "abort"}},
	} {
		add(hostileCase{class: "ends", name: e.name, args: append([]string{"ends", "par", "25"}, e.ops...), check: oneWinner,
			not: []string{"invalid Handle"}})
	}
	add(hostileCase{class: "ends", name: "2 finalizes at once", args: []string{"ends", "par", "25", "finalize", "finalize"}, check: oneWinner})
	for _, e := range []struct {
		ops   []string
		codes string
		msg   string
	}{
		{[]string{"destroy", "destroy"}, "0,5", "destroy error: mscclgo: ncclCommDestroy: communicator 0x"},
		{[]string{"abort", "abort"}, "0,5", "was ended already by ncclCommAbort"},
		{[]string{"destroy", "abort"}, "0,5", "abort error: mscclgo: ncclCommAbort: communicator"},
		{[]string{"abort", "finalize"}, "0,5", "finalize error: mscclgo: ncclCommFinalize: communicator"},
		{[]string{"finalize", "finalize"}, "0,5", "ncclCommFinalize after ncclCommFinalize"},
		{[]string{"finalize", "destroy", "destroy"}, "0,0,5", "was ended already by ncclCommDestroy"},
	} {
		add(hostileCase{class: "ends", name: "in order " + strings.Join(e.ops, " "), args: append([]string{"ends", "seq", "3"}, e.ops...),
			want: []string{"round 2: codes " + e.codes, e.msg}})
	}

	// Abort interrupts a wait for a peer that never comes (the timeout is
	// longer than the row's bound).
	add(hostileCase{class: "abort", name: "host memory wait", args: []string{"abortwait"},
		env:  append([]string{"MSCCLGO_NCCL_TIMEOUT=600s"}, hostmem...),
		want: []string{"rank 0: ncclCommAbort -> 0", "rank 0: ncclAllReduce waiting for rank 1 -> 5", "ended its communicator (ncclCommDestroy or ncclCommAbort) while it waited for ranks [1]", "the waiting call returned", "rank 1: ncclCommDestroy -> 0"}})

	add(hostileCase{class: "abort", name: "emulated device wait", args: []string{"abortwait"}, emu: true,
		env:  []string{"MSCCLGO_NCCL_TIMEOUT=600s", "MSCCLGO_PLAN_PATH=$PLANS"},
		want: []string{"rank 0: ncclCommAbort -> 0", "rank 0: ncclAllReduce waiting for rank 1 -> 5", "rank 1 had not arrived", "the waiting call returned", "rank 1: ncclCommDestroy -> 0"}})

	// A call that returns an error has stopped touching the buffers: a
	// run outlasting the waiting ranks' timeout is stopped first, and a
	// caller that unmaps its buffer then does not crash.
	for _, ms := range []string{"1000", "2000"} {
		add(hostileCase{class: "buffers after an error", name: "run outlasts a " + ms + "ms timeout", args: []string{"timeoutfree", "0x1000000"},
			env:  []string{"MSCCLGO_NCCL_TIMEOUT=" + ms + "ms", "HOSTILE_TIMEOUT_MS=" + ms, "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=$BIGPLANS"},
			want: []string{"all ranks returned"},
			check: func(t *testing.T, out string) {
				// A rank whose peers were late to call (a loaded machine:
				// the threads start apart) times out before any run, its
				// buffers untouched: that error names the ranks it waited for.
				late := regexp.MustCompile(`waited \S+ \(MSCCLGO_NCCL_TIMEOUT\) for ranks \[[0-9 ]+\] to call`)
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, "ncclAllReduce error:") && !strings.Contains(l, "and stopped its run") && !late.MatchString(l) {
						t.Errorf("an error that does not say the run was stopped: %q", l)
					}
				}
			}})
	}

	// Unique ids: used once; an init refused for its arguments leaves its
	// id unspent (and no descriptor open once the id is used).
	for _, u := range []struct{ n1, n2, destroy string }{{"2", "4", "0"}, {"2", "4", "1"}, {"2", "2", "1"}, {"4", "2", "0"}, {"3", "3", "0"}} {
		add(hostileCase{class: "unique ids", name: "reused " + u.n1 + " then " + u.n2 + " destroy " + u.destroy, args: []string{"reuseid", u.n1, u.n2, u.destroy},
			env: []string{"MSCCLGO_NCCL_TIMEOUT=600s", "MSCCLGO_NCCL_HOSTMEM=1"},
			want: []string{"rank 0: first ncclCommInitRank -> 0", "rank 0: second ncclCommInitRank -> 5", "rank 1: second ncclCommInitRank -> 5",
				"a unique id makes one communicator (make a new one with ncclGetUniqueId)"}})
	}
	add(hostileCase{class: "unique ids", name: "500 refused inits", args: []string{"refusedfds", "500"},
		want: []string{"500 of 500 inits refused, 500 of their ids then made a communicator", "rank 0: init after the refused one -> 0"},
		re:   []string{`communicator, -?\d descriptors more`}})
	add(hostileCase{class: "unique ids", name: "100 finished inits", args: []string{"finishedfds", "100"}, env: []string{"MSCCLGO_NCCL_HOSTMEM=1"},
		want: []string{"100 communicators made and destroyed"}, re: []string{`destroyed, -?\d descriptors more`}})
	add(hostileCase{class: "unique ids", name: "id of a refused init", args: []string{"reuseid", "1", "1", "1"}, env: []string{"MSCCLGO_NCCL_TIMEOUT=600s"},
		want: []string{"rank 0: first ncclCommInitRank -> 0", "rank 0: second ncclCommInitRank -> 5", "rank 0 of unique id"}})

	// Two ranks of one process on one device (the emulated device build).
	add(hostileCase{class: "devices", name: "two threads on device 0", args: []string{"samedev"}, emu: true, env: []string{"MSCCLGO_NCCL_TIMEOUT=600s"},
		want: []string{"rank 0: ncclCommInitRank -> 5", "rank 1: ncclCommInitRank -> 5", "ranks 0 and 1 of 2 are threads of one process on device 0: NCCL refuses a duplicate GPU"}})
	add(hostileCase{class: "devices", name: "shared device mode", args: []string{"samedev"}, emu: true, env: []string{"MSCCLGO_NCCL_SHARED_DEVICE=1"},
		want: []string{"rank 0: ncclCommInitRank -> 0", "rank 1: ncclCommInitRank -> 0"}})
	add(hostileCase{class: "devices", name: "shared device variable bad", args: []string{"samedev"}, emu: true, env: []string{"MSCCLGO_NCCL_SHARED_DEVICE=yes"},
		want: []string{"rank 0: ncclCommInitRank -> 4", `MSCCLGO_NCCL_SHARED_DEVICE="yes": want 1`}})

	// The environment.
	for _, v := range []struct{ value, msg string }{
		{"1e99", `MSCCLGO_NCCL_TIMEOUT="1e99": 1e+99 seconds is more than 24h0m0s`},
		{"1e-12", `MSCCLGO_NCCL_TIMEOUT="1e-12": 1e-12 seconds is less than 1ms`},
		{"0", `MSCCLGO_NCCL_TIMEOUT="0": 0s is outside 1ms to 24h0m0s`},
		{"-5s", `MSCCLGO_NCCL_TIMEOUT="-5s": -5s is outside`},
		{"25h", `MSCCLGO_NCCL_TIMEOUT="25h": 25h0m0s is outside`},
		{"NaN", `MSCCLGO_NCCL_TIMEOUT="NaN": not a duration`},
		{"inf", `MSCCLGO_NCCL_TIMEOUT="inf": +Inf seconds is more than`},
		{"soon", `MSCCLGO_NCCL_TIMEOUT="soon": not a duration`},
		{"9999999999h", `MSCCLGO_NCCL_TIMEOUT="9999999999h": not a duration`},
	} {
		add(hostileCase{class: "environment", name: "timeout " + v.value, args: []string{"env"}, env: []string{"MSCCLGO_NCCL_TIMEOUT=" + v.value},
			want: []string{"rank 0: ncclCommInitRank -> 4", v.msg}})
	}
	for _, v := range []struct{ name, path, msg string }{
		{"a FIFO", fifo, fifo + ": not a regular file"},
		{"a directory", "/tmp", "/tmp: not a regular file"},
		{"/dev/null", "/dev/null", "/dev/null: not a regular file"},
	} {
		add(hostileCase{class: "environment", name: "fallback " + v.name, args: []string{"env"}, env: []string{"MSCCLGO_NCCL_FALLBACK=" + v.path},
			want: []string{"rank 0: ncclGetVersion -> 0", "rank 0: ncclCommInitRank -> 0", "rank 0: ncclAllReduce -> 5", v.msg}})
	}

	// The fallback: a symbol it lacks is named, never called.
	add(hostileCase{class: "fallback", name: "no ncclCommAbort", args: []string{"abortonly"}, env: []string{"MSCCLGO_NCCL_FALLBACK=$DIR/stubnoabort/libnccl.so.2"},
		want: []string{"rank 0: ncclCommAbort -> 5", "lacks ncclCommAbort, so its communicator cannot be aborted", "rank 0: ncclCommDestroy -> 0"}})

	// Messages.
	add(hostileCase{class: "messages", name: "truncated plan file", args: []string{"register", filepath.Join(brokenPlans, "allreduce_2.json")},
		want: []string{"rank 0: mscclgoRegisterPlan -> 4", filepath.Join(brokenPlans, "allreduce_2.json") + ": "}, not: []string{"mscclgo-plan-"}})
	add(hostileCase{class: "messages", name: "truncated plan in a plan set", args: []string{"call", "2", "allreduce", "1024", "7", "0", "0"},
		env: []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + brokenPlans}, re: []string{`rank 0: allreduce error: .*` + regexp.QuoteMeta(filepath.Join(brokenPlans, "allreduce_2.json"))}})
	add(hostileCase{class: "messages", name: "register /dev/null", args: []string{"register", "/dev/null"},
		want: []string{"rank 0: mscclgoRegisterPlan -> 4", "mscclgoRegisterPlan: /dev/null: not a plan file or a plan-set directory"}, not: []string{"mscclgo-plan-"}})
	add(hostileCase{class: "ends", name: "mscclgoCommDestroy twice", args: []string{"selector", "NULL"},
		want: []string{"rank 0: mscclgoCommDestroy -> 0", "rank 0: mscclgoCommDestroy again -> 5", "mscclgoCommDestroy: communicator 0x", "was destroyed already"}})
	add(hostileCase{class: "messages", name: "group after a refused ncclGroupSimulateEnd", args: []string{"simgroup"},
		want: []string{"rank 0: ncclGroupSimulateEnd -> 5", "rank 0: empty group's ncclGroupEnd -> 0", "rank 0: ncclCommCount of the simulated init -> 5",
			"used after ncclGroupSimulateEnd, which creates no communicator"}})
	return cs
}
