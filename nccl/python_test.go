package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// torchPython is a python3 that imports torch (Debian's python3-torch is
// for /usr/bin/python3; python3 on PATH may be another), or "" for none;
// looked for once (importing torch takes seconds).
var torchPython = sync.OnceValue(findTorchPython)

func findTorchPython() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.CommandContext(ctx, path, "-c", "import torch.distributed.run").Run()
		cancel()
		if err == nil {
			return path
		}
	}
	return ""
}

// freePort is a TCP port nothing listens on now (torchrun's store port).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// torchrunArgs is python3's argv for torchrun (torch.distributed.run) of
// procs processes on this host, before the script and its arguments. The
// elastic agent looks at its workers every --monitor_interval seconds
// (default 5): at 0.5 a job ends about 8 s sooner after its workers
// have, which is most of a small job's time. torch 1.13 on Python 3.11
// needs both --redirects and --tee (a torch bug).
func torchrunArgs(t *testing.T, procs int) []string {
	return []string{"-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", strconv.Itoa(procs),
		"--master_addr", "127.0.0.1", "--master_port", freePort(t), "--monitor_interval", "0.5",
		"--redirects", "1", "--tee", "1"}
}

// pythonPlans are the plans python/tests/torchrun_check.py runs on n
// ranks: allreduce, allgather and reducescatter, in place and out of
// place.
func pythonPlans(t *testing.T, n int) string {
	ws := strconv.Itoa(n)
	defs := map[string]planDef{}
	for _, a := range []string{"allreduce_packet", "allgather", "reducescatter"} {
		defs[a+"_in.json"] = planDef{a, map[string]string{"world_size": ws}}
		defs[a+"_out.json"] = planDef{a, map[string]string{"world_size": ws, "inplace": "false"}}
	}
	return bundledPlans(t, defs)
}

// TestPythonTorchrun runs python/tests/torchrun_check.py under torchrun
// (python3 -m torch.distributed.run) with 2 and 4 processes: the
// package's Communicator() from torchrun's environment (rank 0's unique
// id through torchrun's store, or through a gloo process group), then
// all_reduce, all_gather and reduce_scatter on CPU tensors, float32 and
// float16, three sizes, in place and out of place, every value checked.
// No variable asks for host-memory runs: CPU tensors take them.
func TestPythonTorchrun(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	python := torchPython()
	if python == "" {
		t.Skip("no python3 with torch (Debian: apt-get install python3-torch)")
	}
	dir := artifacts(t)
	for _, c := range []struct {
		name  string
		procs int
		gloo  bool
	}{{"2 procs, torchrun's store", 2, false}, {"4 procs, torchrun's store", 4, false}, {"2 procs, gloo group", 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append(torchrunArgs(t, c.procs),
				filepath.Join("..", "python", "tests", "torchrun_check.py"), pythonPlans(t, c.procs))
			if c.gloo {
				args = append(args, "--gloo")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, args...)
			cmd.Env = append(cleanEnv(), "PYTHONPATH="+filepath.Join("..", "python"), "PYTHONDONTWRITEBYTECODE=1",
				"MSCCLGO_LIBRARY="+filepath.Join(dir, "ours", "libnccl.so.2"), "MSCCLGO_NCCL_TIMEOUT=30s",
				"MSCCLGO_CACHE_DIR="+t.TempDir(), "OMP_NUM_THREADS=1")
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("torchrun ran past 2 minutes:\n%s", out)
			}
			if err != nil {
				t.Fatalf("torchrun: %v\n%s", err, out)
			}
			const cases = 2*3*7 + 5 // dtypes × sizes × checks, and five of other reductions
			for rank := range c.procs {
				if want := "rank " + strconv.Itoa(rank) + ": done " + strconv.Itoa(cases) + " cases, 0 wrong"; !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// torchrun prefixes each write of a rank (print writes the
			// text and its newline apart), so two ranks' lines can share
			// one: "...in-place ok[default2]:rank 2: ...".
			if n := len(caseOK.FindAllIndex(out, -1)); n != cases*c.procs {
				t.Errorf("%d cases ok, want %d:\n%s", n, cases*c.procs, out)
			}
		})
	}
}

// caseOK matches one passed case of torchrun_check.py's output.
var caseOK = regexp.MustCompile(`rank \d+: [^\n]*? ok`)

// TestPythonExampleCPU runs python/examples/customized_comm_cpu.py as its
// docstring says (torchrun, the default plan set), with 2 processes. The
// plan select's rules give a 1 MiB allreduce of CPU tensors is the
// Simple reduce-scatter + all-gather, the cheapest on the CPU backend
// (planset.HostCostUS), not the LL packet plan of the GPU's size ranges.
func TestPythonExampleCPU(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	python := torchPython()
	if python == "" {
		t.Skip("no python3 with torch (Debian: apt-get install python3-torch)")
	}
	dir := artifacts(t)
	plans := defaultSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append(torchrunArgs(t, 2),
		filepath.Join("..", "python", "examples", "customized_comm_cpu.py"), plans)...)
	cmd.Env = append(cleanEnv(), "PYTHONPATH="+filepath.Join("..", "python"), "PYTHONDONTWRITEBYTECODE=1",
		"MSCCLGO_LIBRARY="+filepath.Join(dir, "ours", "libnccl.so.2"), "MSCCLGO_NCCL_TIMEOUT=30s",
		"MSCCLGO_CACHE_DIR="+t.TempDir(), "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torchrun customized_comm_cpu.py: %v\n%s", err, out)
	}
	for rank := range 2 {
		if want := fmt.Sprintf("rank %d: allreduce with plan allreduce_rsag_2gpu ok", rank); !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCustomMpirun: the custom mode of TestCustomFromEnv under a real
// mpirun (OpenMPI), two processes: mscclgoExecuteHost runs the plan on
// host memory across them, results checked. Skipped without mpirun.
func TestCustomMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin): the run under a real MPI launcher is skipped")
	}
	dir := artifacts(t)
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
		"-x", "NCCLCHECK_PLANS="+plans, "-x", "MSCCLGO_RENDEZVOUS_DIR="+t.TempDir(), "-x", "MSCCLGO_NCCL_TIMEOUT=30s",
		"-x", "MSCCLGO_CACHE_DIR="+t.TempDir(), filepath.Join(dir, "ncclcheck"), "custom")
	cmd.Env = append(cleanEnv(), "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun ran past 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	t.Logf("mpirun:\n%s", out)
	for rank := range 2 {
		for round := range 3 {
			if want := fmt.Sprintf("rank %d: DATA mscclgoExecuteHost round %d ok", rank, round); !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
}

// TestHostMemoryProcs runs the data checks of TestHostMemoryRuns with the
// ranks as four processes (ncclcheck hostprocs, the unique id through a
// file) on host memory with MSCCLGO_NCCL_HOSTMEM=1: each rank runs its
// part of the plan over the CPU backend's multi-process transport, the
// halves of a split too; every result is checked, no fallback.
func TestHostMemoryProcs(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	runs := runCheckProcs(t, 4, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}, "hostprocs")
	if t.Failed() {
		return
	}
	const cases = 7 // six on the four ranks, one on each half of a split
	for rank, r := range runs {
		r.succeeded(t)
		if got := strings.Count(r.stdout, " ok\n"); got != cases || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("rank %d: %d results right, want %d:\n%s", rank, got, cases, r.stdout)
		}
	}
	if l := "rank 3 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_oop_4gpu on host memory (CPU backend)"; !strings.Contains(runs[3].stderr, l) {
		t.Errorf("rank 3's log lacks %q:\n%s", l, runs[3].stderr)
	}
}

// TestTorchBackend runs python/tests/torch_backend_check.py under torchrun
// as a training job would use mscclgo: `import mscclgo` and
// init_process_group("mscclgo"), nothing else of mscclgo's API, with the
// default plan set installed. At 2 processes every part: every collective
// torch.distributed has at 1, 3, 17, 1000, 12345 and 262151 elements in
// every dtype and reduction (closed forms), the bad calls, async work
// overlapping a computation, and 20 DDP steps against gloo's; at 4
// processes the same at three of the sizes; at 3 processes, a world size
// no plan is made for (the library's built-in path), the collectives at
// two sizes.
func TestTorchBackend(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	python := torchPython()
	if python == "" {
		t.Skip("no python3 with torch (Debian: apt-get install python3-torch)")
	}
	dir := artifacts(t)
	plans := defaultSet(t)
	all := []string{"collectives", "errors", "async", "ddp"}
	for _, c := range []struct {
		procs int
		sizes string
		parts []string
	}{{2, "", all}, {4, "1,17,12345", all}, {3, "1,1000", []string{"collectives"}}} {
		t.Run(fmt.Sprintf("%d procs", c.procs), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, append(append(torchrunArgs(t, c.procs),
				filepath.Join("..", "python", "tests", "torch_backend_check.py")), c.parts...)...)
			cmd.Env = append(cleanEnv(), "PYTHONPATH="+filepath.Join("..", "python"), "PYTHONDONTWRITEBYTECODE=1",
				"MSCCLGO_LIBRARY="+filepath.Join(dir, "ours", "libnccl.so.2"),
				// The mismatch after matching calls waits this long once
				// (docs/integration.md, Bad calls).
				"MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_PLAN_PATH="+plans, "MSCCLGO_CACHE_DIR="+t.TempDir(), "OMP_NUM_THREADS=1")
			if c.sizes != "" {
				cmd.Env = append(cmd.Env, "MSCCLGO_TEST_SIZES="+c.sizes)
			}
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("torchrun ran past 5 minutes:\n%s", out)
			}
			if err != nil {
				t.Fatalf("torchrun: %v\n%s", err, tail(out, 200))
			}
			for _, part := range c.parts {
				for rank := range c.procs {
					re := regexp.MustCompile(fmt.Sprintf(`rank %d: %s done ([0-9]+) cases, 0 wrong`, rank, part))
					if m := re.FindSubmatch(out); m == nil || string(m[1]) == "0" {
						t.Errorf("rank %d: no clean %q part:\n%s", rank, part, tail(out, 200))
					}
				}
			}
			if bytes.Contains(out, []byte("WRONG")) {
				t.Errorf("wrong cases:\n%s", grepLines(out, "WRONG"))
			}
		})
	}
}

// tail is the last n lines of out.
func tail(out []byte, n int) []byte {
	lines := bytes.Split(out, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// grepLines is the lines of out that hold s.
func grepLines(out []byte, s string) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}
