package main

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/internal/testnote"
	"github.com/mscclgo/mscclgo/starlib"
)

// The tests build, once per test binary, the library (go build
// -buildmode=c-shared, soname libnccl.so.2), a copy of it, the stub NCCL
// (testdata/stubnccl.c) and the ncclcheck driver (testdata/ncclcheck.c,
// linked against the library as libnccl.so.2), all with -Wall -Wextra
// -Werror, and run the driver with the stub as the fallback NCCL or with
// none. The two builds of the library come from a cache keyed by the
// checkout's content when nothing changed (libcache_test.go).

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The parallel tests mostly wait: for subprocesses that sleep out a
	// timeout, a late peer, torchrun's agent. -parallel defaults to
	// GOMAXPROCS (2 on a 2-core machine), which leaves the CPU idle
	// meanwhile; twice that, unless -parallel was given, keeps it busy.
	if !flagGiven("test.parallel") {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
	// The package takes minutes (torchrun and multi-process jobs, and two
	// c-shared builds where the checkout changed): say so while it runs.
	stop := testnote.Heartbeat("nccl", "still testing (the package takes 1 to 4 minutes: torchrun and multi-process jobs, and two builds of the library when the checkout changed)", testnote.HeartbeatInterval)
	code := m.Run()
	stop()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// artifacts is the directory of the built library, stub and driver:
// ours/libnccl.so.2, copy/libnccl.so.2, stub/libnccl.so.2,
// stub222/libnccl.so.2 (the stub without the later functions), ncclcheck.
func artifacts(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mscclgo-nccl-test-")
		if buildErr == nil {
			buildErr = buildAll(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatalf("building the library and its test programs: %v", buildErr)
	}
	return buildDir
}

func buildAll(dir string) error {
	for _, d := range []string{"ours", "copy", "stub", "stub222", "emu"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cflags := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude"}
	// Two rounds: what needs nothing built, at once (the two c-shared
	// builds link for seconds each), then what needs the library.
	rounds := [][][]string{{
		{goTool, "build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "ours", "libnccl.so.2"), "."},
		// The emulated-device build (device_emu.go), for TestDeviceRuns.
		{goTool, "build", "-tags", "mscclgo_emu", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "emu", "libnccl.so.2"), "."},
		append(append([]string{"gcc"}, cflags...), "-fsyntax-only", "shim.c", "custom.c"),
		append(append([]string{"gcc"}, cflags...), "-fPIC", "-shared", "-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "stub", "libnccl.so.2"), "testdata/stubnccl.c"),
		// The stub as an NCCL 2.22, without the later functions (TestLaterAPI).
		append(append([]string{"gcc"}, cflags...), "-DMSCCLGO_NCCL_API_2_22_ONLY", "-fPIC", "-shared", "-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "stub222", "libnccl.so.2"), "testdata/stubnccl.c"),
	}, {
		append(append([]string{"gcc"}, cflags...), "-o", filepath.Join(dir, "ncclcheck"), "testdata/ncclcheck.c",
			"-L"+filepath.Join(dir, "ours"), "-l:libnccl.so.2", "-Wl,-rpath,"+filepath.Join(dir, "ours"), "-lpthread", "-ldl", "-rdynamic"),
		{"cp", filepath.Join(dir, "ours", "libnccl.so.2"), filepath.Join(dir, "copy", "libnccl.so.2")},
	}}
	for _, steps := range rounds {
		errs := make([]error, len(steps))
		var wg sync.WaitGroup
		for i, s := range steps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				if s[0] == goTool {
					errs[i] = cachedGoBuild(ctx, s)
					return
				}
				out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput()
				if err != nil || (s[0] == "gcc" && len(out) > 0) {
					errs[i] = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// run is one run of the driver: its output, its INFO log, the stub's log.
type run struct {
	stdout, stderr string
	stub           []string
}

// runCheck runs ncclcheck with args and env (added to a clean set of the
// library's variables); it fails the test if the driver fails or runs
// past a minute.
func runCheck(t *testing.T, env []string, args ...string) run {
	t.Helper()
	return runCheckExit(t, 0, env, args...)
}

// runCheckProcs runs ncclcheck as the n ranks of one job of processes
// at once (RANK, WORLD_SIZE, and the unique id through one
// NCCLCHECK_ID_FILE), each with env, and returns their runs in rank
// order.
func runCheckProcs(t *testing.T, n int, env []string, args ...string) []run {
	t.Helper()
	idFile := filepath.Join(t.TempDir(), "id")
	var wg sync.WaitGroup
	runs := make([]run, n)
	for rank := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := append(slices.Clone(env), fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", n), "NCCLCHECK_ID_FILE="+idFile)
			runs[rank] = runCheck(t, mine, args...)
		}()
	}
	wg.Wait()
	return runs
}

// runCheckExit is runCheck for a run that is to exit with status want.
func runCheckExit(t *testing.T, want int, env []string, args ...string) run {
	t.Helper()
	return runCheckIn(t, nil, want, env, args...)
}

// runCheckIn is runCheckExit with ncclcheck run by the command prefix
// (ip netns exec NS, say; nil: none).
func runCheckIn(t *testing.T, prefix []string, want int, env []string, args ...string) run {
	t.Helper()
	dir := artifacts(t)
	stubLog := filepath.Join(t.TempDir(), "stub.log")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append(append(slices.Clone(prefix), filepath.Join(dir, "ncclcheck")), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), "STUB_NCCL_LOG="+stubLog, "MSCCLGO_NCCL_DEBUG=INFO", "MSCCLGO_NCCL_TIMEOUT=20s",
		"MSCCLGO_CACHE_DIR="+t.TempDir(), "NCCL_STUB_DIR="+filepath.Join(dir, "stub"))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String(), stub: readLines(t, stubLog)}
	if ctx.Err() != nil {
		t.Fatalf("ncclcheck %v ran past a minute\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	}
	if got := cmd.ProcessState.ExitCode(); got != want {
		t.Fatalf("ncclcheck %v: %v, want exit status %d\nstdout:\n%s\nstderr:\n%s", args, err, want, r.stdout, r.stderr)
	}
	return r
}

// cleanEnv is the environment without the variables the library and the
// launchers' environment readers look at.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "MSCCLGO_"), strings.HasPrefix(name, "STUB_NCCL_"), strings.HasPrefix(name, "OMPI_"),
			strings.HasPrefix(name, "PMI"), strings.HasPrefix(name, "MPI_"), name == "LD_LIBRARY_PATH",
			name == "RANK", name == "WORLD_SIZE", name == "LOCAL_RANK", name == "LOCAL_WORLD_SIZE",
			name == "MASTER_ADDR", name == "MASTER_PORT":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// succeeded fails t for every call of the run that did not return 0.
func (r run) succeeded(t *testing.T) {
	t.Helper()
	for call, code := range r.results() {
		if code != "0" {
			t.Errorf("%s -> %s, want 0", call, code)
		}
	}
}

// results are the driver's "rank R: CALL -> CODE" lines, by "rank R: CALL".
func (r run) results() map[string]string {
	m := map[string]string{}
	re := regexp.MustCompile(`^(rank -?\d+: .+) -> (-?\d+)$`)
	for _, l := range strings.Split(r.stdout, "\n") {
		if s := re.FindStringSubmatch(l); s != nil {
			m[s[1]] = s[2]
		}
	}
	return m
}

func stubWith(dir string) string {
	return "MSCCLGO_NCCL_FALLBACK=" + filepath.Join(dir, "stub", "libnccl.so.2")
}

// perRankStubCalls are the stub lines every rank's calls() must produce,
// with %[1]s the stub communicator and %[2]s the stream.
var perRankStubCalls = []string{
	"ncclAllReduce %[1]s count=1024 dtype=7 op=0 inplace=0 stream=%[2]s",
	"ncclAllReduce %[1]s count=1024 dtype=7 op=0 inplace=1 stream=%[2]s",
	"ncclAllReduce %[1]s count=1024 dtype=8 op=0 inplace=1 stream=%[2]s",
	"ncclAllReduce %[1]s count=1024 dtype=7 op=2 inplace=1 stream=%[2]s",
	"ncclAllGather %[1]s count=1024 dtype=7 stream=%[2]s",
	"ncclReduceScatter %[1]s count=1024 dtype=9 op=0 stream=%[2]s",
	"ncclBroadcast %[1]s count=1024 dtype=2 root=0 stream=%[2]s",
	"ncclBcast %[1]s count=1024 dtype=2 root=0 stream=%[2]s",
	"ncclReduce %[1]s count=1024 dtype=6 op=0 root=0 stream=%[2]s",
	"ncclRedOpCreatePreMulSum %[1]s dtype=7 residence=1",
	"ncclAllReduce %[1]s count=1024 dtype=7 op=6 inplace=0 stream=%[2]s",
	"ncclRedOpDestroy %[1]s op=6",
	"ncclCommRegister %[1]s size=4096",
	"ncclCommDeregister %[1]s",
	"ncclCommGetAsyncError %[1]s",
	"ncclCommFinalize %[1]s",
	"ncclCommDestroy %[1]s",
}

// checkOrdered checks that want occur in lines in this order.
func checkOrdered(t *testing.T, lines, want []string) {
	t.Helper()
	i := 0
	for _, l := range lines {
		if i < len(want) && l == "stub "+want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("stub log lacks %q (after %d of %d expected calls in order); log:\n%s", want[i], i, len(want), strings.Join(lines, "\n"))
	}
}

func TestThreadsForwardToFallback(t *testing.T) {
	dir := artifacts(t)
	r := runCheck(t, []string{stubWith(dir)}, "threads", "4")
	for call, code := range r.results() {
		if code != "0" {
			t.Errorf("%s -> %s, want 0 (every call forwarded to the stub)", call, code)
		}
	}
	if n := len(r.results()); n < 4*25 {
		t.Errorf("%d results, want at least 100:\n%s", n, r.stdout)
	}
	checkOrdered(t, r.stub, []string{"ncclCommInitAll ndev=4 devlist=null"})
	for rank := range 4 {
		want := make([]string, len(perRankStubCalls))
		for i, f := range perRankStubCalls {
			want[i] = fmt.Sprintf(f, fmt.Sprintf("%d:%d/4", rank+1, rank), fmt.Sprintf("0x%x", 0x1000+rank))
		}
		// The group of the point-to-point calls, forwarded as a group.
		want = append(want[:9:9], append([]string{"ncclGroupStart",
			fmt.Sprintf("ncclSend %d:%d/4 count=1024 dtype=7 peer=%d stream=0x%x", rank+1, rank, (rank+1)%4, 0x1000+rank),
			fmt.Sprintf("ncclRecv %d:%d/4 count=1024 dtype=7 peer=%d stream=0x%x", rank+1, rank, (rank+3)%4, 0x1000+rank),
		}, want[9:]...)...)
		checkOrdered(t, r.stub, want)
		checkOrdered(t, r.stub, []string{fmt.Sprintf("ncclCommSplit %d:%d/4 color=%d key=%d", rank+1, rank, map[bool]int{true: -1, false: rank % 2}[rank == 3], rank)})
		for _, l := range []string{
			fmt.Sprintf("rank %d: count 4 user rank %d device %d", rank, rank, rank),
			fmt.Sprintf("mscclgo-nccl INFO rank %d of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (in-place, 4096 bytes): fallback: no plan set installed", rank),
			fmt.Sprintf("mscclgo-nccl INFO rank %d of 4: ncclAllGather count 1024 ncclFloat32 (in-place, 16384 bytes): fallback:", rank),
			fmt.Sprintf("mscclgo-nccl INFO rank %d of 4: ncclAllReduce count 1024 ncclFloat32 ncclMax (in-place, 4096 bytes): fallback: no plan set installed", rank),
			fmt.Sprintf("mscclgo-nccl INFO rank %d of 4: ncclSend count 1024 ncclFloat32 peer %d in a group: fallback: mscclgo has no plans for ncclSend", rank, (rank+1)%4),
		} {
			if !strings.Contains(r.stdout+r.stderr, l) {
				t.Errorf("output lacks %q", l)
			}
		}
	}
	// The split: ranks 0 and 2 (color 0), rank 1 alone (color 1), rank 3
	// without a color.
	for _, l := range []string{
		"rank 0: split color 0: rank 0 of 2", "rank 2: split color 0: rank 1 of 2",
		"rank 1: split color 1: rank 0 of 1", "rank 3: split color -1: no communicator",
		"mscclgo-nccl INFO fallback NCCL: " + filepath.Join(dir, "stub", "libnccl.so.2") + " (MSCCLGO_NCCL_FALLBACK)",
	} {
		if !strings.Contains(r.stdout+r.stderr, l) {
			t.Errorf("output lacks %q", l)
		}
	}
	// Nothing of a communicator reaches the stub after its destroy.
	destroyed := map[string]bool{}
	for _, l := range r.stub {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		if destroyed[f[2]] {
			t.Errorf("stub got %q after its communicator was destroyed", l)
		}
		if f[1] == "ncclCommDestroy" {
			destroyed[f[2]] = true
		}
	}
}

func TestProcessesShareTheFallbackID(t *testing.T) {
	dir := artifacts(t)
	stubLog := filepath.Join(t.TempDir(), "stub.log")
	runs := runCheckProcs(t, 2, []string{stubWith(dir), "STUB_NCCL_LOG=" + stubLog}, "procs")
	if t.Failed() {
		return
	}
	lines := readLines(t, stubLog)
	var stubID string
	inits := 0
	for _, l := range lines {
		f := strings.Fields(l)
		switch f[1] {
		case "ncclGetUniqueId":
			if stubID != "" {
				t.Errorf("stub made a second unique id: %q", l)
			}
			stubID = f[2]
		case "ncclCommInitRankConfig":
			inits++
			if f[3] != "id="+stubID {
				t.Errorf("%q: want the id rank 0 got from the stub, %s, handed over by mscclgo's bootstrap", l, stubID)
			}
		}
	}
	if stubID == "" || inits != 2 {
		t.Errorf("stub log: unique id %q and %d inits, want one id and 2 inits:\n%s", stubID, inits, strings.Join(lines, "\n"))
	}
	for rank, r := range runs {
		for call, code := range r.results() {
			if code != "0" {
				t.Errorf("rank %d: %s -> %s, want 0", rank, call, code)
			}
		}
		for _, l := range []string{fmt.Sprintf("rank %d: count 2 user rank %d", rank, rank), fmt.Sprintf("rank %d: split color %d: rank 0 of 1", rank, rank)} {
			if !strings.Contains(r.stdout, l) {
				t.Errorf("rank %d: output lacks %q:\n%s", rank, l, r.stdout)
			}
		}
	}
}

// TestInitInGroup: one thread makes every rank between ncclGroupStart and
// ncclGroupEnd (nccl-tests under mpirun); the communicators exist once the
// group ends, the fallback's are made inside its own group, and a failed
// init fails the group end and leaves the handles marked.
func TestInitInGroup(t *testing.T) {
	dir := artifacts(t)
	r := runCheck(t, []string{stubWith(dir)}, "group", "3")
	res := r.results()
	for _, c := range []struct{ call, code string }{
		{"rank 0: ncclCommInitRank 0 in a group", "0"},
		{"rank 2: ncclCommInitRank 2 in a group", "0"},
		{"rank 0: ncclCommCount before ncclGroupEnd", "5"},
		{"rank -1: ncclGroupEnd", "0"},
		{"rank 1: ncclAllReduce in-place", "0"},
		{"rank 2: ncclCommDestroy", "0"},
	} {
		if got := res[c.call]; got != c.code {
			t.Errorf("%s -> %q, want %s", c.call, got, c.code)
		}
	}
	if !strings.Contains(r.stdout, "was used before the ncclGroupEnd that creates it") {
		t.Errorf("use before ncclGroupEnd not named:\n%s", r.stdout)
	}
	// The stub's group: start, one id, three inits with it, end, in order.
	var stubID string
	for _, l := range r.stub {
		if f := strings.Fields(l); len(f) > 2 && f[1] == "ncclGetUniqueId" {
			stubID = f[2]
		}
	}
	for rank := range 3 {
		checkOrdered(t, r.stub, []string{"ncclGroupStart", "ncclGetUniqueId " + stubID,
			"ncclCommInitRankConfig 1:0/3 id=" + stubID + " config=null",
			"ncclCommInitRankConfig 2:1/3 id=" + stubID + " config=null",
			"ncclCommInitRankConfig 3:2/3 id=" + stubID + " config=null",
			"ncclGroupEnd",
			fmt.Sprintf("ncclAllReduce %d:%d/3 count=1024 dtype=7 op=0 inplace=1 stream=0x%x", rank+1, rank, 0x1000+rank),
			fmt.Sprintf("ncclCommDestroy %d:%d/3", rank+1, rank),
		})
	}
	if stubID == "" {
		t.Errorf("the stub made no unique id:\n%s", strings.Join(r.stub, "\n"))
	}

	// Ranks of one process that disagree on the size: the unique id's
	// record refuses the second size, and the others give up at once.
	bad := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_TIMEOUT=5s"}, "groupbad")
	if got := bad.results()["rank -1: ncclGroupEnd"]; got != "5" {
		t.Errorf("ncclGroupEnd of ranks that disagree -> %q, want 5\n%s", got, bad.stdout)
	}
	for _, s := range []string{"a unique id makes one communicator",
		"rank 0: ncclCommCount after a failed group error: mscclgo: ncclCommCount: communicator 0x"} {
		if !strings.Contains(bad.stdout, s) {
			t.Errorf("output lacks %q:\n%s", s, bad.stdout)
		}
	}
}

// planDef is a bundled algorithm and its defines.
type planDef struct {
	algorithm string
	defines   map[string]string
}

// bundledPlans writes plans of the bundled algorithms, evaluated with
// defines, into a new directory and returns it.
func bundledPlans(t *testing.T, plans map[string]planDef) string {
	t.Helper()
	dir := t.TempDir()
	for file, p := range plans {
		res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), p.algorithm+".star", starlib.Options{Defines: p.defines})
		if err != nil {
			t.Fatal(err)
		}
		text, err := res.Programs[0].Plan()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHostMemoryRuns runs plans for real with MSCCLGO_NCCL_HOSTMEM=1: four
// ranks as threads, buffers in host memory, the installed plans of the
// bundled algorithms for four ranks (and two, for the halves of a split),
// on the CPU backend; the driver checks every result. No fallback: every
// call is mscclgo's.
func TestHostMemoryRuns(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	r := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}, "data", "4")
	r.succeeded(t)
	const cases = 7 // six on the four ranks, one on each half of a split
	if n := strings.Count(r.stdout, " ok\n"); n != 4*cases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s", n, 4*cases, r.stdout)
	}
	for _, l := range []string{
		"rank 3 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_oop_4gpu on host memory (CPU backend)",
		"rank 0 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, 16384 bytes): plan reducescatter_4gpu on host memory (CPU backend)",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}

	// Ranks that call different things are told so, not left waiting.
	plans2 := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	m := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans2, "MSCCLGO_NCCL_TIMEOUT=10s"}, "datamismatch")
	for rank := range 2 {
		if got := m.results()[fmt.Sprintf("rank %d: ncclAllReduce mismatched", rank)]; got != "5" {
			t.Errorf("rank %d: mismatched allreduce -> %q, want 5\n%s", rank, got, m.stdout)
		}
	}
	if !strings.Contains(m.stdout, "mismatched calls: rank ") || !strings.Contains(m.stdout, "ncclAllReduce count 2048 ncclFloat32 ncclSum") {
		t.Errorf("the mismatch is not named:\n%s", m.stdout)
	}
}

// TestDeviceRuns runs the data checks of TestHostMemoryRuns through the
// emulated-device build of the library (go build -tags mscclgo_emu): each
// call whose plan fits is enqueued on the caller's stream through
// devcomm.Comm (the interpreter kernel on host threads, device pointers being
// host memory), the driver waits for the stream and checks the result; a
// mismatched call is named on both ranks, not hung.
func TestDeviceRuns(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	emuLib := "LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu")
	r := runCheck(t, []string{emuLib, "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, "data", "4")
	r.succeeded(t)
	const cases = 7 // six on the four ranks, one on each half of a split
	if n := strings.Count(r.stdout, " ok\n"); n != 4*cases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s", n, 4*cases, r.stdout)
	}
	for _, l := range []string{
		// The device prefers the in-place allreduce plan (devicePlace).
		"rank 3 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_4gpu on gpu-emu, enqueued",
		"rank 0 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, 16384 bytes): plan reducescatter_4gpu on gpu-emu, enqueued",
		"rank 2 of 4: ncclAllGather count 1024 ncclFloat32 (in-place, 16384 bytes): plan allgather_4gpu on gpu-emu, enqueued",
		"rank 1 of 2: ncclAllReduce count 2048 ncclFloat32 ncclSum (in-place, 8192 bytes): plan allreduce_packet_2gpu on gpu-emu, enqueued",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "CPU backend") {
		t.Errorf("a call ran on the CPU backend:\n%s", r.stderr)
	}

	plans2 := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	m := runCheck(t, []string{emuLib, "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans2, "MSCCLGO_NCCL_TIMEOUT=10s"}, "datamismatch")
	for rank := range 2 {
		if got := m.results()[fmt.Sprintf("rank %d: ncclAllReduce mismatched", rank)]; got != "5" {
			t.Errorf("rank %d: mismatched allreduce -> %q, want 5\n%s", rank, got, m.stdout)
		}
	}
	if !strings.Contains(m.stdout, "mismatched calls: rank 0 called ncclAllReduce count 1024 ncclFloat32 ncclSum with in-place plan allreduce_packet_2gpu, rank 1 called ncclAllReduce count 2048") {
		t.Errorf("the mismatch is not named:\n%s", m.stdout)
	}
}

// TestDeviceCapture: an allreduce captured into a graph on each rank's
// stream and replayed with new data, between calls outside the graph, on
// the emulated device; every round's result is checked (a replay that
// reused the captured LL flag would read the last round's packets).
func TestDeviceCapture(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}}})
	r := runCheck(t, []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, "capture", "4")
	checkCapture(t, r, 4, "gpu-emu", false)
}

// TestDeviceGroup: one thread drives four ranks, each round one group
// with an allreduce per rank (nccl-tests' -g 4): the calls are deferred
// to the group's end, where the ranks meet at once and run the plan.
func TestDeviceGroup(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
	})
	r := runCheck(t, []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, "groupdata", "4")
	r.succeeded(t)
	if got := strings.Count(r.stdout, " ok\n"); got != 8 || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want 8:\n%s\n%s", got, r.stdout, r.stderr)
	}
	for _, l := range []string{
		"rank 2 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (in-place, 4096 bytes) at the end of its group: plan allreduce_packet_4gpu on gpu-emu, enqueued",
		"rank 0 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes) at the end of its group: plan allreduce_packet_4gpu on gpu-emu, enqueued",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
}

// checkCapture checks the output of ncclcheck capture N (first: of
// capturefirst N, which makes no call before the capture).
func checkCapture(t *testing.T, r run, n int, backend string, first bool) {
	t.Helper()
	r.succeeded(t)
	rounds, calls := 5, 3 // one outside the graph, three replays, one outside
	if first {
		rounds, calls = 4, 2
	}
	if got := strings.Count(r.stdout, " ok\n"); got != n*rounds || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s\n%s", got, n*rounds, r.stdout, r.stderr)
	}
	for rank := range n {
		for _, l := range []string{"allreduce round 2 replayed ok", "allreduce round 4 outside the graph ok"} {
			if !strings.Contains(r.stdout, fmt.Sprintf("rank %d: DATA %s", rank, l)) {
				t.Errorf("rank %d: no %q:\n%s", rank, l, r.stdout)
			}
		}
	}
	// Every call ran the plan: the captured one too.
	l := fmt.Sprintf("ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_oop_%dgpu on %s, enqueued", n, backend)
	if got := strings.Count(r.stderr, l); got != calls*n {
		t.Errorf("%d calls logged %q, want %d:\n%s", got, l, calls*n, r.stderr)
	}
}

// TestPythonPackage runs python/tests/test_mscclgo.py: the package
// python/mscclgo over the library, driven with stand-in tensors on host
// memory by two ranks as threads, with no MSCCLGO_NCCL_HOSTMEM: tensors
// that are not CUDA tensors run on host memory.
func TestPythonPackage(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	dir := artifacts(t)
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "python", "tests", "test_mscclgo.py"))
	cmd.Env = append(cleanEnv(), "PYTHONPATH="+filepath.Join("..", "python"), "PYTHONDONTWRITEBYTECODE=1",
		"MSCCLGO_LIBRARY="+filepath.Join(dir, "ours", "libnccl.so.2"), "MSCCLGO_TEST_PLANS="+plans,
		"MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("test_mscclgo.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Ran 4 tests") {
		t.Errorf("want 4 tests run:\n%s", out)
	}
}

// TestCustomFromEnv: two processes make mscclgo.h communicators from
// torchrun's variables, register a plan directory and select from it;
// mscclgoExecute is refused, naming the real reason (this build has no
// device backend and MSCCLGO_NCCL_HOSTMEM is not set), and
// mscclgoExecuteHost runs the plan on host memory across the processes
// (the CPU backend's multi-process transport), in place and, through the
// in-place plan after a copy, out of place; the driver checks the data.
func TestCustomFromEnv(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	var wg sync.WaitGroup
	runs := make([]run, 2)
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[rank] = runCheck(t, []string{fmt.Sprintf("RANK=%d", rank), "WORLD_SIZE=2", "LOCAL_RANK=" + fmt.Sprint(rank), "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "NCCLCHECK_PLANS=" + plans}, "custom")
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for rank, r := range runs {
		res := r.results()
		for call, code := range map[string]string{
			"mscclgoCommSize": "0", "mscclgoRegisterPlan missing": "4", "mscclgoRegisterPlan": "0", "mscclgoSelect": "0",
			"mscclgoExecute": "5", "mscclgoExecute broadcast": "4", "mscclgoCommDestroy": "0", "mscclgoCommRank after destroy": "5",
			"mscclgoExecuteHost round 0": "0", "mscclgoExecuteHost round 1": "0", "mscclgoExecuteHost round 2": "0",
		} {
			if got := res[fmt.Sprintf("rank %d: %s", rank, call)]; got != code {
				t.Errorf("rank %d: %s -> %q, want %s\n%s", rank, call, got, code, r.stdout)
			}
		}
		for _, s := range []string{
			fmt.Sprintf("rank %d: size 2, 1 plans registered, selected allreduce_packet_2gpu", rank),
			"/nonexistent/plans: no such file or directory",
			"plan allreduce_packet_2gpu: this build has no device backend to launch plans on the caller's device buffers",
			`collective "broadcast": mscclgo runs allreduce, allgather and reducescatter`,
			"was used after mscclgoCommDestroy",
			fmt.Sprintf("rank %d: DATA mscclgoExecuteHost round 0 ok", rank),
			fmt.Sprintf("rank %d: DATA mscclgoExecuteHost round 1 ok", rank),
			fmt.Sprintf("rank %d: DATA mscclgoExecuteHost round 2 ok", rank),
		} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("rank %d: output lacks %q:\n%s", rank, s, r.stdout)
			}
		}
	}
}

// TestPeerLoss: rank 1 of two processes exits without ncclCommDestroy;
// rank 0's ncclCommGetAsyncError turns to ncclRemoteError naming it, and
// ncclCommAbort ends the communicator.
func TestPeerLoss(t *testing.T) {
	runs := runCheckProcs(t, 2, []string{"MSCCLGO_NCCL_FALLBACK=none"}, "lost")
	if t.Failed() {
		return
	}
	line := lineWith(runs[0].stdout, "rank 0: async error ")
	t.Log(line)
	if !strings.HasPrefix(line, "rank 0: async error 6: mscclgo: rank 0 of 2: rank 1 lost: ") {
		t.Errorf("after rank 1 died: %q, want ncclRemoteError (6) naming rank 1\n%s", line, runs[0].stdout)
	}
	if got := runs[0].results()["rank 0: ncclCommAbort"]; got != "0" {
		t.Errorf("ncclCommAbort -> %q, want 0", got)
	}
}

// TestCtypes loads the library from Python with ctypes (as Python
// frameworks load NCCL) and makes a communicator and an allreduce, with
// the stub as the fallback and with none.
func TestCtypes(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	dir := artifacts(t)
	for _, c := range []struct {
		name      string
		env       []string
		allreduce string
		texts     []string
	}{
		{"stub", []string{stubWith(dir)}, "0", []string{"version 22299", "user rank 0"}},
		{"none", []string{"MSCCLGO_NCCL_FALLBACK=none"}, "5", []string{"version 22203", "user rank 0",
			"ncclAllReduce error: mscclgo: ncclAllReduce: rank 0 of 1: no plan set installed",
			"error string 5: invalid usage"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stubLog := filepath.Join(t.TempDir(), "stub.log")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "ctypes_check.py"), filepath.Join(dir, "ours", "libnccl.so.2"))
			cmd.Env = append(append(cleanEnv(), "STUB_NCCL_LOG="+stubLog, "MSCCLGO_CACHE_DIR="+t.TempDir()), c.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ctypes_check.py: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "ncclAllReduce -> "+c.allreduce+"\n") {
				t.Errorf("want ncclAllReduce -> %s:\n%s", c.allreduce, out)
			}
			for _, s := range c.texts {
				if !strings.Contains(string(out), s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			if c.name == "stub" {
				checkOrdered(t, readLines(t, stubLog), []string{
					"ncclAllReduce 1:0/1 count=1024 dtype=7 op=0 inplace=1 stream=0x2000", "ncclCommDestroy 1:0/1"})
			}
		})
	}
}

func TestNoFallback(t *testing.T) {
	r := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none"}, "single")
	res := r.results()
	const none = "and there is no fallback NCCL: MSCCLGO_NCCL_FALLBACK=none turns the fallback off"
	for _, c := range []struct {
		call, code, err string
	}{
		{"ncclGetVersion", "0", ""},
		{"ncclCommInitRank", "0", ""},
		{"ncclCommCount", "0", ""},
		{"ncclAllReduce out-of-place", "5", "mscclgo: ncclAllReduce: rank 0 of 1: no plan set installed"},
		{"ncclAllReduce float64", "5", "ncclFloat64: plans compute float16, bfloat16, float32 and int32, and the built-in path (no plan) runs on host memory only, not on a device (mscclgoExecuteHost; MSCCLGO_NCCL_HOSTMEM=1 where device pointers are host memory), " + none},
		{"ncclAllReduce max", "5", "no plan set installed"},
		{"ncclBroadcast", "5", "mscclgo has no plans for ncclBroadcast, " + none},
		{"ncclSend", "5", "mscclgo has no plans for ncclSend, " + none},
		{"ncclGroupStart", "0", ""},
		{"ncclGroupEnd", "0", ""},
		{"ncclRedOpCreatePreMulSum", "5", "user-defined reductions are the fallback's, " + none},
		{"ncclCommRegister", "5", "buffer registration is the fallback's, " + none},
		{"ncclMemAlloc", "5", "mscclgo does not allocate device memory itself, " + none},
		{"ncclCommGetAsyncError", "0", ""},
		{"ncclCommFinalize", "0", ""},
		{"ncclCommDestroy", "0", ""},
	} {
		if got := res["rank 0: "+c.call]; got != c.code {
			t.Errorf("%s -> %q, want %s", c.call, got, c.code)
		}
		if c.err != "" && !strings.Contains(r.stdout, "rank 0: "+c.call+" error: ") {
			t.Errorf("%s: no ncclGetLastError text", c.call)
		} else if c.err != "" {
			line := lineWith(r.stdout, "rank 0: "+c.call+" error: ")
			if !strings.Contains(line, c.err) {
				t.Errorf("%s: ncclGetLastError gives %q, want it to contain %q", c.call, line, c.err)
			}
		}
	}
	if !strings.Contains(r.stdout, "rank 0: version 22203") {
		t.Errorf("ncclGetVersion without a fallback: want this header's 22203:\n%s", r.stdout)
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestFallbackSearch(t *testing.T) {
	dir := artifacts(t)
	_, systemNCCL := os.Stat("/usr/lib/x86_64-linux-gnu/libnccl.so.2")
	type searchCase struct {
		name string
		env  []string
		log  string // a line of the INFO log
		ver  string // ncclGetVersion's answer
	}
	cases := []searchCase{
		{"explicit stub", []string{stubWith(dir)}, "fallback NCCL: " + filepath.Join(dir, "stub", "libnccl.so.2") + " (MSCCLGO_NCCL_FALLBACK)", "22299"},
		{"stub in LD_LIBRARY_PATH after ours", []string{"LD_LIBRARY_PATH=" + filepath.Join(dir, "ours") + ":" + filepath.Join(dir, "stub")},
			"fallback NCCL: " + filepath.Join(dir, "stub", "libnccl.so.2") + " (LD_LIBRARY_PATH)", "22299"},
		{"itself", []string{"MSCCLGO_NCCL_FALLBACK=" + filepath.Join(dir, "ours", "libnccl.so.2")},
			"no fallback NCCL: MSCCLGO_NCCL_FALLBACK=" + filepath.Join(dir, "ours", "libnccl.so.2") + " cannot be used: " + filepath.Join(dir, "ours", "libnccl.so.2") + ": is mscclgo's own library", "22203"},
		{"a copy of itself", []string{"MSCCLGO_NCCL_FALLBACK=" + filepath.Join(dir, "copy", "libnccl.so.2")},
			filepath.Join(dir, "copy", "libnccl.so.2") + ": is mscclgo's own library", "22203"},
		{"missing file", []string{"MSCCLGO_NCCL_FALLBACK=" + filepath.Join(dir, "nowhere", "libnccl.so.2")},
			filepath.Join(dir, "nowhere", "libnccl.so.2") + ": No such file or directory", "22203"},
		{"not NCCL", []string{"MSCCLGO_NCCL_FALLBACK=libm.so.6"}, "libm.so.6: not an NCCL library", "22203"},
		{"off", []string{"MSCCLGO_NCCL_FALLBACK=off"}, "no fallback NCCL: MSCCLGO_NCCL_FALLBACK=off turns the fallback off", "22203"},
	}
	if systemNCCL != nil {
		cases = append(cases, searchCase{name: "only ours in LD_LIBRARY_PATH", env: []string{"LD_LIBRARY_PATH=" + filepath.Join(dir, "copy")},
			log: "no fallback NCCL: no fallback NCCL found (set MSCCLGO_NCCL_FALLBACK to the real libnccl.so.2); tried: " + filepath.Join(dir, "copy", "libnccl.so.2") + ": is mscclgo's own library", ver: "22203"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCheck(t, c.env, "single")
			if !strings.Contains(r.stderr, "mscclgo-nccl INFO "+c.log) && !strings.Contains(r.stderr, c.log) {
				t.Errorf("log lacks %q:\n%s", c.log, r.stderr)
			}
			if !strings.Contains(r.stdout, "rank 0: version "+c.ver+"\n") {
				t.Errorf("want version %s:\n%s", c.ver, lineWith(r.stdout, "rank 0: version"))
			}
		})
	}
}

func TestForwardedFailures(t *testing.T) {
	dir := artifacts(t)
	for _, c := range []struct {
		fail, call, code, err string
		exit                  int // the driver stops when the init fails
	}{
		{"ncclAllReduce", "ncclAllReduce out-of-place", "2", "stub: injected failure in ncclAllReduce", 0},
		{"ncclSend", "ncclSend", "2", "stub: injected failure in ncclSend", 0},
		{"ncclCommInitRankConfig", "ncclCommInitRank", "2", "stub: injected failure in ncclCommInitRankConfig", 1},
		{"ncclCommFinalize", "ncclCommFinalize", "2", "stub: injected failure in ncclCommFinalize", 0},
	} {
		t.Run(c.fail, func(t *testing.T) {
			r := runCheckExit(t, c.exit, []string{stubWith(dir), "STUB_NCCL_FAIL=" + c.fail}, "single")
			if got := r.results()["rank 0: "+c.call]; got != c.code {
				t.Errorf("%s -> %q, want %s\n%s", c.call, got, c.code, r.stdout)
			}
			if line := lineWith(r.stdout, "rank 0: "+c.call+" error: "); !strings.HasSuffix(line, c.err) {
				t.Errorf("ncclGetLastError after the fallback's failure: %q, want the fallback's %q", line, c.err)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		mode  string
		want  map[string]string // call -> code
		texts []string
	}{
		{"afterdestroy", map[string]string{
			"ncclCommDestroy":               "0",
			"ncclCommCount after destroy":   "5",
			"ncclAllReduce after destroy":   "5",
			"ncclCommDestroy after destroy": "5",
			"ncclAllReduce after finalize":  "5",
			"ncclCommAbort":                 "0",
			"ncclCommUserRank after abort":  "5",
		}, []string{
			"ncclCommCount after destroy error: mscclgo: ncclCommCount: communicator 0x",
			"(rank 0 of 1) was used after ncclCommDestroy",
			"ncclAllReduce after finalize error: mscclgo: ncclAllReduce: rank 0 of 1: used after ncclCommFinalize",
			"(rank 0 of 1) was used after ncclCommAbort",
		}},
		{"badargs", map[string]string{
			"ncclCommInitRank rank 2 of 2":      "4",
			"ncclCommInitRank 0 ranks":          "4",
			"ncclCommInitRank foreign id":       "4",
			"ncclCommInitRankConfig bad config": "4",
			"ncclGroupEnd without start":        "5",
			"ncclCommCount of NULL":             "4",
			"ncclCommInitAll 0":                 "4",
		}, []string{
			"rank 2 outside the 2 ranks of the communicator (0 to 1)",
			"nranks 0: must be at least 1",
			"was not made by this library's ncclGetUniqueId",
			"initialise it with NCCL_CONFIG_INITIALIZER",
			"ncclGroupEnd without a matching ncclGroupStart",
			"ncclCommCount: the communicator is NULL",
		}},
		// Ranks of one process: the second size is refused by the unique
		// id's record, and the rank already waiting learns it at once.
		{"mismatch", map[string]string{}, []string{
			"rank 0: ncclCommInitRank of 2 ranks -> 5",
			"rank 1: ncclCommInitRank of 3 ranks -> 5",
			"a unique id makes one communicator (make a new one with ncclGetUniqueId)",
		}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			r := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_TIMEOUT=5s"}, c.mode)
			res := r.results()
			for call, code := range c.want {
				if got := res["rank 0: "+call]; got != code {
					t.Errorf("%s -> %q, want %s", call, got, code)
				}
			}
			for _, s := range c.texts {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("output lacks %q:\n%s", s, r.stdout)
				}
			}
		})
	}
}

// TestPlanChoice runs two ranks with a plan directory holding one 2-rank
// in-place allgather plan: the in-place float32 allgather finds it, the
// out-of-place one finds it to run after a copy of the input (and, with
// no device backend in this build, both fall back naming it and the real
// reason); the allreduce finds none.
func TestPlanChoice(t *testing.T) {
	dir := artifacts(t)
	plans := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "tests", "ports", "single_node", "allgather.plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plans, "allgather.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCheck(t, []string{stubWith(dir), "MSCCLGO_PLAN_PATH=" + plans}, "threads", "2")
	for _, l := range []string{
		"rank 0 of 2: ncclAllGather count 1024 ncclFloat32 (in-place, 8192 bytes): fallback: plan allgather fits (allgather for 2 ranks (2 per node), Simple, in-place, message size 8192",
		"rank 1 of 2: ncclAllGather count 1024 ncclFloat32 (in-place, 8192 bytes): fallback: plan allgather fits",
		"but this build has no device backend to launch plans on the caller's device buffers (make nccl NCCL_BACKEND=cuda builds one; MSCCLGO_NCCL_HOSTMEM=1 runs plans on the CPU backend where device memory is host memory)",
		"rank 1 of 2: ncclAllGather count 1024 ncclFloat32 (out-of-place, 8192 bytes): fallback: no out-of-place plan fits; in-place plan allgather fits (allgather for 2 ranks (2 per node), Simple, in-place, message size 8192",
		"rank 0 of 2: ncclAllReduce count 1024 ncclFloat32 ncclSum (in-place, 4096 bytes): fallback: no plan for allreduce of 4096 bytes on 2 ranks (2 per node), in-place",
		"plan set of 1 plans in 1 directories",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
}

// pytorchImports are the NCCL functions beyond NCCL 2.22's API that
// PyTorch's source calls when it is built against NCCL 2.23 to 2.29
// (docs/integration.md, "What PyTorch imports").
var pytorchImports = []string{
	"ncclCommInitRankScalable", "ncclCommShrink", "ncclCommWindowRegister", "ncclCommWindowDeregister",
	"ncclDevCommCreate", "ncclDevCommDestroy", "ncclGetLsaMultimemDevicePointer", "ncclSignal", "ncclWaitSignal",
	"ncclCommSuspend", "ncclCommResume", "ncclCommMemStats", "ncclAlltoAll",
}

// TestSymbols checks the library's dynamic symbol table against
// include/nccl.h: every function the header declares is defined, every
// nccl function defined is declared, and the header declares each of
// PyTorch's later imports (as `nm -D` would show on the GPU machine).
func TestSymbols(t *testing.T) {
	dir := artifacts(t)
	header, err := os.ReadFile(filepath.Join("include", "nccl.h"))
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(?:ncclResult_t|const char \*|void)\s*(nccl\w+)\(`).FindAllStringSubmatch(string(header), -1) {
		declared[m[1]] = true
	}
	f, err := elf.Open(filepath.Join(dir, "ours", "libnccl.so.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC && strings.HasPrefix(s.Name, "nccl") {
			defined[s.Name] = true
		}
	}
	if len(declared) < 40 {
		t.Fatalf("include/nccl.h: %d functions found, want every one of NCCL's (the pattern no longer matches?)", len(declared))
	}
	for name := range declared {
		if !defined[name] {
			t.Errorf("include/nccl.h declares %s, but libnccl.so.2 does not define it", name)
		}
	}
	for name := range defined {
		if !declared[name] && !slices.Contains(deviceHostFunctions, name) {
			t.Errorf("libnccl.so.2 defines %s, which include/nccl.h does not declare", name)
		}
	}
	for _, name := range deviceHostFunctions {
		if !defined[name] {
			t.Errorf("libnccl.so.2 does not define %s, a host function of NCCL's nccl_device.h", name)
		}
	}
	for _, name := range pytorchImports {
		if !declared[name] {
			t.Errorf("PyTorch calls %s: include/nccl.h does not declare it", name)
		}
	}
}

// TestLaterAPI runs ncclcheck later: one rank made by
// ncclCommInitRankScalable, then each later release's function, with the
// stub as the fallback (forwarded, with the stub's communicator and the
// arguments), with none, and with a fallback that predates them; and
// ncclCommShrink, refused in every case.
func TestLaterAPI(t *testing.T) {
	dir := artifacts(t)
	forwarded := []string{"ncclCommWindowRegister", "ncclGetLsaMultimemDevicePointer", "ncclCommWindowDeregister",
		"ncclDevCommCreate", "ncclDevCommDestroy", "ncclSignal", "ncclWaitSignal", "ncclCommSuspend", "ncclCommMemStats",
		"ncclCommResume"}
	// The calls made without a fallback, and why each is refused.
	refused := map[string]string{
		"ncclCommWindowRegister": "memory windows are the fallback's", "ncclGetLsaMultimemDevicePointer": "memory windows are the fallback's",
		"ncclDevCommCreate": "NCCL's device API is the fallback's", "ncclSignal": "one-sided calls are the fallback's",
		"ncclWaitSignal": "one-sided calls are the fallback's", "ncclCommSuspend": "suspending a communicator's memory is the fallback's",
	}
	stub222 := filepath.Join(dir, "stub222", "libnccl.so.2")
	for _, c := range []struct {
		name string
		env  []string
		// why completes each refused call's reason; "" when the stub takes them.
		why func(fn string) string
	}{
		{"stub", []string{stubWith(dir)}, nil},
		{"none", []string{"MSCCLGO_NCCL_FALLBACK=none"}, func(string) string {
			return ", and there is no fallback NCCL: MSCCLGO_NCCL_FALLBACK=none turns the fallback off"
		}},
		{"older fallback", []string{"MSCCLGO_NCCL_FALLBACK=" + stub222}, func(fn string) string {
			return ", and the fallback NCCL " + stub222 + " lacks " + fn
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCheck(t, c.env, "later")
			res := r.results()
			want := map[string]string{
				"ncclCommInitRankScalable": "0", "ncclCommShrink": "5",
				"ncclCommInitRankScalable nId 0": "4", "ncclCommInitRankScalable nId 2 of 1 rank": "4",
				"ncclCommInitRankScalable commIds NULL": "4", "ncclCommInitRankScalable newcomm NULL": "4",
				"ncclCommDestroy": "0", "ncclCommWindowRegister after destroy": "5",
			}
			if c.why == nil {
				for _, fn := range forwarded {
					want[fn] = "0"
				}
			} else {
				for fn := range refused {
					want[fn] = "5"
				}
			}
			for call, code := range want {
				if got := res["rank 0: "+call]; got != code {
					t.Errorf("%s -> %q, want %s\n%s", call, got, code, r.stdout)
				}
			}
			errs := map[string]string{
				"ncclCommShrink":                           "mscclgo: ncclCommShrink: rank 0 of 1, 0 ranks excluded, flags 0x0: mscclgo cannot shrink a communicator",
				"ncclCommInitRankScalable nId 0":           "mscclgo: ncclCommInitRankScalable: nId 0: must be 1 to nranks (1)",
				"ncclCommInitRankScalable nId 2 of 1 rank": "nId 2: must be 1 to nranks (1)",
				"ncclCommInitRankScalable commIds NULL":    "mscclgo: ncclCommInitRankScalable: commIds is NULL (nId 1)",
				"ncclCommInitRankScalable newcomm NULL":    "mscclgo: ncclCommInitRankScalable: newcomm is NULL",
				"ncclCommWindowRegister after destroy":     "mscclgo: ncclCommWindowRegister: communicator 0x",
			}
			if c.why != nil {
				for fn, what := range refused {
					errs[fn] = "mscclgo: " + fn + ": " + what + c.why(fn)
				}
			}
			for call, text := range errs {
				if line := lineWith(r.stdout, "rank 0: "+call+" error: "); !strings.Contains(line, text) {
					t.Errorf("%s: ncclGetLastError gives %q, want it to contain %q", call, line, text)
				}
			}
			for _, s := range []string{"rank 0: count 1 user rank 0", "rank 0: shrink gave NULL",
				"ncclCommInitRankScalable with 1 unique ids: initialised from the first (rank 0's)"} {
				if !strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("output lacks %q:\n%s\n%s", s, r.stdout, r.stderr)
				}
			}
			for _, l := range r.stub {
				if strings.HasPrefix(l, "stub ncclCommShrink") {
					t.Errorf("ncclCommShrink reached the fallback: %q", l)
				}
			}
			if c.why != nil {
				return
			}
			for _, s := range []string{"rank 0: multimem pointer at window + 64", "rank 0: memory total 16384"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("output lacks %q (the stub's answer):\n%s", s, r.stdout)
				}
			}
			checkOrdered(t, r.stub, []string{
				"ncclCommWindowRegister 1:0/1 size=4096 flags=1",
				"ncclGetLsaMultimemDevicePointer offset=64",
				"ncclCommWindowDeregister 1:0/1 win=set",
				"ncclDevCommCreate 1:0/1 reqs=set out=set",
				"ncclDevCommDestroy 1:0/1 devcomm=set",
				"ncclSignal 1:0/1 peer=0 sig=1 ctx=2 flags=0 stream=0x3000",
				"ncclWaitSignal 1:0/1 n=1 first=1:0:1:2 stream=0x3000",
				"ncclCommSuspend 1:0/1 flags=1",
				"ncclCommMemStats 1:0/1 stat=3",
				"ncclCommResume 1:0/1",
				"ncclCommDestroy 1:0/1",
			})
		})
	}
}

// TestInitRankScalable: ranks as threads made by ncclCommInitRankScalable
// from one and from two unique ids are working communicators: with the
// stub, each has the fallback's communicator beside (made from one
// fallback id) and every call reaches it; without a fallback, mscclgo's
// bootstrap splits them.
func TestInitRankScalable(t *testing.T) {
	dir := artifacts(t)
	for _, c := range []struct {
		n, ids int
		stub   bool
	}{
		{4, 1, true},
		{4, 2, true},
		{4, 2, false},
		{3, 3, false},
	} {
		t.Run(fmt.Sprintf("%d ranks %d ids stub %v", c.n, c.ids, c.stub), func(t *testing.T) {
			env := []string{"MSCCLGO_NCCL_FALLBACK=none"}
			if c.stub {
				env = []string{stubWith(dir)}
			}
			r := runCheck(t, env, "scalable", fmt.Sprint(c.n), fmt.Sprint(c.ids))
			res := r.results()
			for rank := range c.n {
				if got := res[fmt.Sprintf("rank %d: ncclCommInitRankScalable", rank)]; got != "0" {
					t.Fatalf("rank %d: ncclCommInitRankScalable -> %q, want 0\n%s\n%s", rank, got, r.stdout, r.stderr)
				}
				for _, s := range []string{
					fmt.Sprintf("rank %d: count %d user rank %d", rank, c.n, rank),
					fmt.Sprintf("rank %d of %d: ncclCommInitRankScalable with %d unique ids: initialised from the first", rank, c.n, c.ids),
				} {
					if !strings.Contains(r.stdout+r.stderr, s) {
						t.Errorf("output lacks %q", s)
					}
				}
			}
			// The split runs over mscclgo's bootstrap: parity colors, the
			// last of more than two ranks without one.
			splits := map[int][]string{
				4: {"rank 0: split color 0: rank 0 of 2", "rank 2: split color 0: rank 1 of 2",
					"rank 1: split color 1: rank 0 of 1", "rank 3: split color -1: no communicator"},
				3: {"rank 0: split color 0: rank 0 of 1", "rank 1: split color 1: rank 0 of 1", "rank 2: split color -1: no communicator"},
			}
			for _, s := range splits[c.n] {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("output lacks %q:\n%s", s, r.stdout)
				}
			}
			if !c.stub {
				return
			}
			for call, code := range res {
				if code != "0" {
					t.Errorf("%s -> %s, want 0 (every call forwarded to the stub)", call, code)
				}
			}
			// One fallback id, rank 0's, and each rank's fallback
			// communicator made from it and used by its calls.
			var stubID string
			serial := map[int]string{}
			re := regexp.MustCompile(`^stub ncclCommInitRankConfig (\d+):(\d+)/` + fmt.Sprint(c.n) + ` id=(\S+) config=null$`)
			for _, l := range r.stub {
				if f := strings.Fields(l); len(f) > 2 && f[1] == "ncclGetUniqueId" {
					if stubID != "" {
						t.Errorf("the stub made a second unique id: %q", l)
					}
					stubID = f[2]
				}
				if m := re.FindStringSubmatch(l); m != nil {
					if m[3] != stubID {
						t.Errorf("%q: want the fallback id of rank 0, %s", l, stubID)
					}
					var rank int
					fmt.Sscan(m[2], &rank)
					serial[rank] = m[1]
				}
			}
			for rank := range c.n {
				s, ok := serial[rank]
				if !ok {
					t.Errorf("rank %d: no fallback communicator:\n%s", rank, strings.Join(r.stub, "\n"))
					continue
				}
				who := fmt.Sprintf("%s:%d/%d", s, rank, c.n)
				checkOrdered(t, r.stub, []string{
					fmt.Sprintf("ncclAllReduce %s count=1024 dtype=7 op=0 inplace=1 stream=0x%x", who, 0x1000+rank),
					fmt.Sprintf("ncclSend %s count=1024 dtype=7 peer=%d stream=0x%x", who, (rank+1)%c.n, 0x1000+rank),
					"ncclCommDestroy " + who,
				})
			}
		})
	}
}

// TestInitRankScalableProcs: one process per rank, each root process
// making its unique id and handing it over through a file, as PyTorch's
// roots do through the store. Every rank initialises from the first id,
// made by rank 0's process: an id of another root names a listener that
// only its own process can serve, so initialising from it fails (checked
// by hand: with commIds[nId-1] every rank's init failed at the timeout).
func TestInitRankScalableProcs(t *testing.T) {
	dir := artifacts(t)
	for _, c := range []struct {
		n, ids int
		stub   bool
	}{
		{2, 1, true},
		{2, 2, true},
		{4, 2, false},
	} {
		t.Run(fmt.Sprintf("%d ranks %d ids stub %v", c.n, c.ids, c.stub), func(t *testing.T) {
			idFile := filepath.Join(t.TempDir(), "id")
			stubLog := filepath.Join(t.TempDir(), "stub.log")
			fallback := "MSCCLGO_NCCL_FALLBACK=none"
			if c.stub {
				fallback = stubWith(dir)
			}
			var wg sync.WaitGroup
			runs := make([]run, c.n)
			for rank := range c.n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runs[rank] = runCheck(t, []string{fallback, fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", c.n),
						"NCCLCHECK_ID_FILE=" + idFile, fmt.Sprintf("NCCLCHECK_IDS=%d", c.ids), "STUB_NCCL_LOG=" + stubLog}, "scalableprocs")
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			roots := map[int]bool{0: true}
			if c.ids == 2 {
				roots[c.n/2] = true
			}
			for rank, r := range runs {
				res := r.results()
				if got := res[fmt.Sprintf("rank %d: ncclCommInitRankScalable", rank)]; got != "0" {
					t.Errorf("rank %d: ncclCommInitRankScalable -> %q, want 0\n%s", rank, got, r.stdout)
				}
				if _, made := res[fmt.Sprintf("rank %d: ncclGetUniqueId of root %d", rank, map[bool]int{true: 0, false: 1}[rank == 0])]; made != roots[rank] {
					t.Errorf("rank %d: made a unique id: %v, want %v\n%s", rank, made, roots[rank], r.stdout)
				}
				if c.stub {
					for call, code := range res {
						if code != "0" {
							t.Errorf("%s -> %s, want 0 (every call forwarded to the stub)", call, code)
						}
					}
				}
				if s := fmt.Sprintf("rank %d: count %d user rank %d", rank, c.n, rank); !strings.Contains(r.stdout, s) {
					t.Errorf("rank %d: output lacks %q:\n%s", rank, s, r.stdout)
				}
			}
			if c.n == 4 {
				for rank, s := range []string{"rank 0: split color 0: rank 0 of 2", "rank 1: split color 1: rank 0 of 1",
					"rank 2: split color 0: rank 1 of 2", "rank 3: split color -1: no communicator"} {
					if !strings.Contains(runs[rank].stdout, s) {
						t.Errorf("rank %d: output lacks %q:\n%s", rank, s, runs[rank].stdout)
					}
				}
			}
			if !c.stub {
				return
			}
			inits := 0
			for _, l := range readLines(t, stubLog) {
				if strings.HasPrefix(l, "stub ncclCommInitRankConfig ") {
					inits++
				}
			}
			if inits != c.n {
				t.Errorf("%d fallback communicators, want %d", inits, c.n)
			}
		})
	}
}
