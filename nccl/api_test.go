package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of NCCL's API as newer clients use it: testdata/apicheck.c
// (NCCL 2.28's collectives, the later functions, a nonblocking init, the
// current device of a driver-API program), linked against the library
// and against its emulated-device build, and testdata/halfcheck.cc (nccl.h
// with the CUDA toolkit's half-precision headers).

var (
	apiOnce sync.Once
	apiErr  error
)

// apiArtifacts builds apicheck beside the library of artifacts:
// DIR/apicheck (the library) and DIR/apicheck-emu (the emulated-device
// build).
func apiArtifacts(t *testing.T) string {
	t.Helper()
	dir := artifacts(t)
	apiOnce.Do(func() {
		for _, b := range []struct{ out, lib string }{{"apicheck", "ours"}, {"apicheck-emu", "emu"}} {
			lib := filepath.Join(dir, b.lib)
			args := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude",
				"-o", filepath.Join(dir, b.out), "testdata/apicheck.c",
				"-L" + lib, "-l:libnccl.so.2", "-Wl,-rpath," + lib, "-lpthread", "-ldl", "-rdynamic"}
			out, err := exec.Command("gcc", args...).CombinedOutput()
			if err != nil || len(out) > 0 {
				apiErr = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return dir
}

// runAPI runs apicheck (prog: "apicheck" or "apicheck-emu") with args
// and env, as runCheck runs ncclcheck.
func runAPI(t *testing.T, prog string, env []string, args ...string) run {
	t.Helper()
	dir := apiArtifacts(t)
	stubLog := filepath.Join(t.TempDir(), "stub.log")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, prog), args...)
	cmd.Env = append(cleanEnv(), "STUB_NCCL_LOG="+stubLog, "MSCCLGO_NCCL_DEBUG=INFO", "MSCCLGO_NCCL_TIMEOUT=20s",
		"MSCCLGO_CACHE_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String(), stub: readLines(t, stubLog)}
	if ctx.Err() != nil || err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", prog, args, err, r.stdout, r.stderr)
	}
	return r
}

// want checks that call of rank gave code.
func (r run) want(t *testing.T, rank int, call, code string) {
	t.Helper()
	if got := r.results()[fmt.Sprintf("rank %d: %s", rank, call)]; got != code {
		t.Errorf("rank %d: %s -> %q, want %s\n%s", rank, call, got, code, r.stdout)
	}
}

// has checks that the run's output (stdout, then stderr) holds each of s.
func (r run) has(t *testing.T, s ...string) {
	t.Helper()
	for _, x := range s {
		if !strings.Contains(r.stdout+r.stderr, x) {
			t.Errorf("output lacks %q\nstdout:\n%s\nstderr:\n%s", x, r.stdout, r.stderr)
		}
	}
}

// TestAlltoAllGatherScatter: NCCL 2.28's ncclAlltoAll, ncclGather and
// ncclScatter on 3 ranks as threads. Checked like the other collectives
// (root, data type, size, a destroyed communicator: ncclInvalidArgument
// or ncclInvalidUsage naming the value), decided (mscclgo runs no plan
// for them, and says so), then forwarded: to the fallback's own function
// (a 2.28 stub), or, on a fallback older than 2.28, as ncclSend and
// ncclRecv in a group of the fallback's, each rank's sends and receives
// where NCCL's definition puts them; refused with the reason without a
// fallback.
func TestAlltoAllGatherScatter(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	dir := artifacts(t)
	const n = 3
	calls := []string{"ncclAlltoAll", "ncclAlltoAll in-place", "ncclGather", "ncclGather in-place", "ncclScatter",
		"ncclScatter in-place", "ncclAlltoAll in a group"}
	checked := func(t *testing.T, r run) {
		t.Helper()
		for rank := range n {
			r.want(t, rank, "ncclGather root out of range", "4")
			r.want(t, rank, "ncclScatter data type 42", "4")
			r.want(t, rank, "ncclAlltoAll count too large", "4")
			r.want(t, rank, "ncclAlltoAll after destroy", "5")
			r.want(t, rank, "ncclCommDestroy", "0")
			for call, text := range map[string]string{
				"ncclGather root out of range": fmt.Sprintf("mscclgo: ncclGather: rank %d of 3: root 3 outside the 3 ranks of the communicator", rank),
				"ncclScatter data type 42":     "data type 42 is not an ncclDataType_t",
				"ncclAlltoAll count too large": "count 4611686018427387904 of ncclFloat32 (4 bytes each) overflows 64 bits",
				"ncclAlltoAll after destroy":   "was used after ncclCommDestroy",
			} {
				if line := lineWith(r.stdout, fmt.Sprintf("rank %d: %s error: ", rank, call)); !strings.Contains(line, text) {
					t.Errorf("rank %d: %s: error %q, want it to contain %q", rank, call, line, text)
				}
			}
		}
		r.has(t, "rank 1 of 3: ncclGather count 256 ncclFloat32 root 2: ",
			"rank 0 of 3: ncclAlltoAll count 256 ncclBfloat16 in a group: ")
	}
	t.Run("stub", func(t *testing.T) {
		r := runAPI(t, "apicheck", []string{stubWith(dir)}, "colls", fmt.Sprint(n))
		checked(t, r)
		for rank := range n {
			for _, c := range calls {
				r.want(t, rank, c, "0")
			}
			who := fmt.Sprintf(":%d/%d", rank, n)
			stream := fmt.Sprintf("stream=0x%x", 0x1000+rank)
			// The rank's calls after its init: "stub FN SERIAL:RANK/N ARGS".
			var got []string
			for _, l := range r.stub {
				f := strings.Fields(l)
				if len(f) >= 3 && strings.HasSuffix(f[2], who) && f[1] != "ncclCommInitRankConfig" {
					got = append(got, strings.Join(append([]string{f[1]}, f[3:]...), " "))
				}
			}
			want := []string{
				"ncclAlltoAll count=256 dtype=7 inplace=0 " + stream,
				"ncclAlltoAll count=256 dtype=7 inplace=1 " + stream,
				"ncclGather count=256 dtype=7 root=2 " + stream,
				"ncclGather count=256 dtype=7 root=2 " + stream,
				"ncclScatter count=256 dtype=2 root=0 " + stream,
				"ncclScatter count=256 dtype=2 root=0 " + stream,
				"ncclAlltoAll count=256 dtype=9 inplace=0 " + stream,
				"ncclCommDestroy",
			}
			if !slices.Equal(got, want) {
				t.Errorf("rank %d: the stub's calls\n%s\nwant\n%s", rank, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		r.has(t, "rank 0 of 3: ncclAlltoAll count 256 ncclFloat32: fallback: mscclgo has no plans for ncclAlltoAll")
	})
	t.Run("older fallback", func(t *testing.T) {
		stub222 := filepath.Join(dir, "stub222", "libnccl.so.2")
		r := runAPI(t, "apicheck", []string{"MSCCLGO_NCCL_FALLBACK=" + stub222}, "colls", fmt.Sprint(n))
		checked(t, r)
		for rank := range n {
			for _, c := range calls {
				r.want(t, rank, c, "0")
			}
		}
		// Each rank's sends and receives, by peer, in call order: the
		// stub's lines of one communicator (its serial is the rank's
		// order of init, so it is matched by rank/size).
		for rank := range n {
			who := fmt.Sprintf("%d/%d", rank, n)
			var got []string
			for _, l := range r.stub {
				f := strings.Fields(l)
				if len(f) >= 6 && (f[1] == "ncclSend" || f[1] == "ncclRecv") && strings.HasSuffix(f[2], ":"+who) {
					got = append(got, f[1][4:]+" "+strings.TrimPrefix(f[5], "peer=")+" "+strings.TrimPrefix(f[4], "dtype="))
				}
			}
			var want []string
			a2a := func(dtype int) {
				for p := range n {
					want = append(want, fmt.Sprintf("Send %d %d", p, dtype), fmt.Sprintf("Recv %d %d", p, dtype))
				}
			}
			a2a(7) // out of place
			a2a(7) // in place: NCCL moves every slice, the rank's own too
			gather := func(inPlace bool) {
				const root = n - 1
				if rank == root {
					for p := range n {
						if p != root || !inPlace {
							want = append(want, fmt.Sprintf("Recv %d 7", p))
						}
					}
				}
				if rank != root || !inPlace {
					want = append(want, fmt.Sprintf("Send %d 7", root))
				}
			}
			gather(false)
			gather(true)
			scatter := func(inPlace bool) {
				if rank == 0 {
					for p := range n {
						if p != 0 || !inPlace {
							want = append(want, fmt.Sprintf("Send %d 2", p))
						}
					}
				}
				if rank != 0 || !inPlace {
					want = append(want, "Recv 0 2")
				}
			}
			scatter(false)
			scatter(true)
			a2a(9) // in a group
			if !slices.Equal(got, want) {
				t.Errorf("rank %d: sends and receives\n%s\nwant\n%s", rank, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		for _, l := range r.stub {
			if strings.Contains(l, "ncclAlltoAll") || strings.Contains(l, "ncclGather") || strings.Contains(l, "ncclScatter") {
				t.Errorf("an NCCL 2.22 fallback was called a function it lacks: %q", l)
			}
		}
		r.has(t, "rank 2 of 3: ncclGather: the fallback NCCL "+stub222+" lacks ncclGather: made of ncclSend and ncclRecv in a group")
	})
	t.Run("none", func(t *testing.T) {
		r := runAPI(t, "apicheck", []string{"MSCCLGO_NCCL_FALLBACK=none"}, "colls", fmt.Sprint(n))
		checked(t, r)
		for rank := range n {
			for _, c := range calls {
				r.want(t, rank, c, "5")
			}
			fn := "ncclScatter"
			want := fmt.Sprintf("mscclgo: %s: rank %d of 3: mscclgo has no plans for %s, and there is no fallback NCCL: MSCCLGO_NCCL_FALLBACK=none turns the fallback off", fn, rank, fn)
			if line := lineWith(r.stdout, fmt.Sprintf("rank %d: %s error: ", rank, fn)); !strings.Contains(line, want) {
				t.Errorf("rank %d: %s: error %q, want it to contain %q", rank, fn, line, want)
			}
		}
	})
}

// TestLaterAPIRest: the later functions added with NCCL 2.28's
// collectives (2.24's ncclResetDebugInit, 2.28's ncclCommRevoke, 2.29's
// window pointers, properties, ncclPutSignal, grow): forwarded to the
// stub with its communicator and arguments, refused with the reason
// without a fallback or with one older than them; grow and its id
// refused in every case.
func TestLaterAPIRest(t *testing.T) {
	dir := artifacts(t)
	forwarded := []string{"ncclWinGetUserPtr", "ncclGetLsaDevicePointer", "ncclGetPeerDevicePointer", "ncclPutSignal",
		"ncclCommQueryProperties", "ncclCommRevoke"}
	refusedWhy := map[string]string{
		"ncclWinGetUserPtr": "memory windows are the fallback's", "ncclGetLsaDevicePointer": "memory windows are the fallback's",
		"ncclGetPeerDevicePointer": "memory windows are the fallback's", "ncclPutSignal": "one-sided calls are the fallback's",
		"ncclCommQueryProperties": "NCCL's device API is the fallback's",
		"ncclCommRevoke":          "revoking is the fallback's (mscclgo's own launches end with ncclCommAbort)",
	}
	stub222 := filepath.Join(dir, "stub222", "libnccl.so.2")
	for _, c := range []struct {
		name string
		env  []string
		why  func(fn string) string // nil: the stub takes them
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
			r := runAPI(t, "apicheck", c.env, "later")
			r.want(t, 0, "ncclCommRevoke flags 1", "4")
			r.want(t, 0, "ncclCommGetUniqueId", "5")
			r.want(t, 0, "ncclCommGrow", "5")
			r.want(t, 0, "ncclCommGrow new rank", "5")
			r.want(t, 0, "ncclCommDestroy", "0")
			r.has(t, "rank 0: grow gave NULL", "rank 0: ncclResetDebugInit returned",
				"mscclgo: ncclCommRevoke: revokeFlags 0x1: must be NCCL_REVOKE_DEFAULT (0)",
				"mscclgo: ncclCommGetUniqueId: rank 0 of 1: mscclgo cannot grow a communicator",
				"mscclgo: ncclCommGrow: rank 0 of 1, to 2 ranks: mscclgo cannot grow a communicator",
				"mscclgo: ncclCommGrow: a new rank 1 of 2: mscclgo cannot grow a communicator")
			if c.why == nil {
				for _, fn := range forwarded {
					r.want(t, 0, fn, "0")
				}
				r.has(t, "rank 0: user pointer is the buffer: 1", "rank 0: lsa pointer at window + 32", "rank 0: peer pointer at window + 48")
				checkOrdered(t, r.stub, []string{
					"ncclCommWindowRegister 1:0/1 size=4096 flags=0",
					"ncclWinGetUserPtr 1:0/1",
					"ncclGetLsaDevicePointer offset=32 rank=0",
					"ncclGetPeerDevicePointer offset=48 peer=0",
					"ncclPutSignal 1:0/1 count=16 dtype=7 peer=0 win=set offset=128 sig=1 ctx=2 flags=0 stream=0x3000",
					"ncclCommQueryProperties 1:0/1 props=set",
					"ncclCommRevoke 1:0/1 flags=0",
					"ncclResetDebugInit",
					"ncclCommDestroy 1:0/1",
				})
				return
			}
			for fn, what := range refusedWhy {
				r.want(t, 0, fn, "5")
				if line := lineWith(r.stdout, "rank 0: "+fn+" error: "); !strings.Contains(line, "mscclgo: "+fn+": "+what+c.why(fn)) {
					t.Errorf("%s: error %q, want %q", fn, line, "mscclgo: "+fn+": "+what+c.why(fn))
				}
			}
			for _, l := range r.stub {
				if strings.Contains(l, "Grow") || strings.Contains(l, "GetUniqueId 1:") {
					t.Errorf("a refused call reached the fallback: %q", l)
				}
			}
		})
	}
}

// deviceHostFunctions are the host functions of NCCL's nccl_device.h
// (2.28 to 2.29.7) that take or give its structures by value: the library
// defines them, nccl.h does not declare them (TestSymbols).
var deviceHostFunctions = []string{"ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail", "ncclTeamRankToWorld", "ncclTeamRankToLsa",
	"ncclLsaBarrierCreateRequirement", "ncclGinBarrierCreateRequirement", "ncclGetMultimemDevicePointer", "ncclLLA2ACalcSlots",
	"ncclLLA2ACreateRequirement"}

// TestDeviceHostAPI: nccl_device.h's host functions that take or give
// its structures by value (nccl-tests built against NCCL 2.28 or later
// imports ncclTeamLsa) reach the stub with the fallback's communicator
// and their arguments, teams passed by value both ways; without a
// fallback the teams are what mscclgo knows and the calls that can
// return a code are refused with the reason.
func TestDeviceHostAPI(t *testing.T) {
	dir := artifacts(t)
	t.Run("stub", func(t *testing.T) {
		r := runAPI(t, "apicheck", []string{stubWith(dir)}, "device")
		for _, fn := range []string{"ncclLsaBarrierCreateRequirement", "ncclGinBarrierCreateRequirement", "ncclGetMultimemDevicePointer",
			"ncclLLA2ACreateRequirement"} {
			r.want(t, 0, fn, "0")
		}
		r.has(t, "rank 0: world team 1:0:1", "rank 0: lsa team 1:0:2", "rank 0: rail team 1:0:3", "rank 0: rank to world 103",
			"rank 0: rank to lsa 203", "rank 0: multimem pointer at base + 16", "rank 0: lla2a slots 64")
		checkOrdered(t, r.stub, []string{
			"ncclTeamWorld 1:0/1", "ncclTeamLsa 1:0/1", "ncclTeamRail 1:0/1",
			"ncclTeamRankToWorld 1:0/1 team=4:1:2 rank=3", "ncclTeamRankToLsa 1:0/1 team=4:1:2 rank=3",
			"ncclLsaBarrierCreateRequirement team=4:1:2 n=5 handle=set req=set",
			"ncclGinBarrierCreateRequirement 1:0/1 team=4:1:2 n=6 handle=set req=set",
			"ncclGetMultimemDevicePointer offset=16", "ncclLLA2ACalcSlots 64 8",
			"ncclLLA2ACreateRequirement blocks=2 slots=3 handle=set req=set", "ncclCommDestroy 1:0/1",
		})
	})
	t.Run("none", func(t *testing.T) {
		r := runAPI(t, "apicheck", []string{"MSCCLGO_NCCL_FALLBACK=none"}, "device")
		for _, fn := range []string{"ncclLsaBarrierCreateRequirement", "ncclGinBarrierCreateRequirement", "ncclGetMultimemDevicePointer",
			"ncclLLA2ACreateRequirement"} {
			r.want(t, 0, fn, "5")
		}
		r.has(t, "rank 0: world team 1:0:1", "rank 0: lsa team 1:0:1", "rank 0: rail team 1:0:1", "rank 0: rank to world -1",
			"rank 0: rank to lsa -1", "rank 0: multimem pointer at base + -1", "rank 0: lla2a slots -1",
			"mscclgo: ncclGinBarrierCreateRequirement: NCCL's device API is the fallback's, and there is no fallback NCCL")
	})
}

// TestNonblockingInit: an init with ncclConfig_t blocking = 0 from one
// thread returns ncclInProgress at once (within 5 s, where a blocking
// one waits for the 20 s timeout), as NCCL's does, and the handle;
// ncclCommGetAsyncError gives ncclInProgress until the init is done
// (rank 0's cannot end before rank 1's init began, which this thread
// makes after), then ncclSuccess; meanwhile the queries answer and the
// other calls are refused by name. The fallback's communicator is made
// from a copy of the caller's config, blocking 0 too. A nonblocking init
// that fails (a peer that never comes) gives its error through
// ncclCommGetAsyncError and ncclGetLastError, and its handle is
// destroyed once; bad arguments are refused at the call. An abort
// during the init ends it at once (not at the set-up's timeout).
func TestNonblockingInit(t *testing.T) {
	dir := artifacts(t)
	for _, c := range []struct {
		name string
		env  []string
	}{{"none", []string{"MSCCLGO_NCCL_FALLBACK=none"}}, {"stub", []string{stubWith(dir)}}} {
		t.Run(c.name, func(t *testing.T) {
			r := runAPI(t, "apicheck", c.env, "nonblocking")
			for rank := range 2 {
				r.want(t, rank, "ncclCommInitRankConfig nonblocking", "7")
				r.want(t, rank, "ncclCommDestroy", "0")
				r.has(t, fmt.Sprintf("rank %d: returned within 5 s: 1", rank), fmt.Sprintf("rank %d: handle set: 1", rank),
					fmt.Sprintf("rank %d: state after the init 0", rank), fmt.Sprintf("rank %d: count 2 user rank %d", rank, rank))
			}
			r.want(t, 0, "ncclCommGetAsyncError while initialising", "0")
			r.want(t, 0, "ncclCommCount while initialising", "0")
			r.want(t, 0, "ncclCommCuDevice while initialising", "0")
			r.want(t, 0, "ncclAllReduce while initialising", "5")
			r.has(t, "rank 0: state while initialising 7", "rank 0: count while initialising 2",
				"was used before its nonblocking ncclCommInitRank finished (ncclCommGetAsyncError gives ncclInProgress until it has)",
				"rank 0 of 2: nonblocking ncclCommInitRank: ncclInProgress, communicator 0x")
			if c.name == "stub" {
				n := 0
				for _, l := range r.stub {
					if strings.HasPrefix(l, "stub ncclCommInitRankConfig ") && strings.HasSuffix(l, " config=set blocking=0") {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%d fallback communicators made with the caller's config (blocking 0), want 2:\n%s", n, strings.Join(r.stub, "\n"))
				}
			}
		})
	}
	t.Run("failing", func(t *testing.T) {
		r := runAPI(t, "apicheck", []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_TIMEOUT=1s"}, "nonblockfail")
		r.want(t, 0, "ncclCommInitRankConfig nonblocking", "7")
		r.want(t, 0, "ncclAllReduce after the failed init", "5")
		r.want(t, 0, "ncclCommDestroy", "0")
		r.want(t, 0, "ncclCommDestroy again", "5")
		r.want(t, 0, "ncclCommInitRankConfig nonblocking rank 2 of 2", "4")
		// Polled more than once: a blocking init would have ended first.
		r.has(t, "rank 0: polled more than once", "rank 0: bad init left the handle NULL: 1",
			"rank 2 outside the 2 ranks of the communicator (0 to 1)",
			"was used after its failed ncclCommInitRank", "was ended already by ncclCommDestroy")
		state := lineWith(r.stdout, "rank 0: state after the init ")
		if state == "rank 0: state after the init 0" || state == "rank 0: state after the init 7" || state == "" {
			t.Errorf("the failed init's async error: %q, want a failure's code", state)
		}
		if line := lineWith(r.stdout, "rank 0: last error: "); !strings.Contains(line, "mscclgo: ncclCommInitRank: rank 0 of 2: ") {
			t.Errorf("ncclGetLastError after the failed init: %q", line)
		}
	})
	t.Run("aborted", func(t *testing.T) {
		// The set-up would wait a minute for the peer; the abort ends it.
		r := runAPI(t, "apicheck", []string{stubWith(dir), "MSCCLGO_NCCL_TIMEOUT=60s"}, "nonblockabort")
		r.want(t, 0, "ncclCommInitRankConfig nonblocking", "7")
		r.want(t, 0, "ncclCommAbort", "0")
		r.want(t, 0, "ncclCommAbort again", "5")
		r.has(t, "rank 0: state before the abort 7", "rank 0: the abort took less than 10 s: 1",
			"rank 0 of 2: ncclCommAbort during its nonblocking init", "was ended already by ncclCommAbort")
	})
}

// TestDriverAPIDevice: in a program of the CUDA driver API alone (no
// cudaGetDevice in the process; apicheck's cuCtxGetDevice stands in for
// the driver's), each rank's device is its thread's current context's,
// as NCCL takes it, so two ranks as threads on devices 0 and 1 of the
// emulated-device build are not refused as a duplicate GPU, while two on
// device 0 are; no current context is device 0.
func TestDriverAPIDevice(t *testing.T) {
	for _, c := range []struct {
		d0, d1 string
		ok     bool
		devs   [2]int
	}{
		{"0", "1", true, [2]int{0, 1}},
		{"1", "0", true, [2]int{1, 0}},
		{"0", "0", false, [2]int{0, 0}},
		{"-1", "1", true, [2]int{0, 1}},
	} {
		t.Run(c.d0+"_"+c.d1, func(t *testing.T) {
			r := runAPI(t, "apicheck-emu", []string{"MSCCLGO_NCCL_FALLBACK=none"}, "ctxdevice", c.d0, c.d1)
			for rank := range 2 {
				if !c.ok {
					r.want(t, rank, "ncclCommInitRank", "5")
					continue
				}
				r.want(t, rank, "ncclCommInitRank", "0")
				r.has(t, fmt.Sprintf("rank %d: device %d", rank, c.devs[rank]),
					fmt.Sprintf("rank %d of 2: communicator 0x", rank))
			}
			if !c.ok {
				r.has(t, "ranks 0 and 1 of 2 are threads of one process on device 0: NCCL refuses a duplicate GPU")
			}
		})
	}
}

// TestHalfHeader compiles testdata/halfcheck.cc, which includes nccl.h
// alone and uses half and __nv_bfloat16 (as nccl-tests does), with the
// CUDA toolkit's headers where they are installed (g++, and nvcc where it
// is on PATH), runs it against the
// library with host-memory runs (an allreduce of each type on two ranks
// as threads), and checks that MSCCLGO_NCCL_NO_CUDA_RUNTIME still keeps
// the toolkit out.
func TestHalfHeader(t *testing.T) {
	t.Parallel() // slow (g++ and nvcc): runs beside the other slow tests, after the sequential ones
	inc := cudaInclude()
	if inc == "" {
		t.Skip("cuda_fp16.h not found (no CUDA toolkit headers: /usr/include, /usr/local/cuda/include, $CUDA_HOME/include): " +
			"the half-precision header test is skipped; ../shared/tools/install-cuda-toolkit installs them")
	}
	dir := artifacts(t)
	bin := filepath.Join(t.TempDir(), "halfcheck")
	lib := filepath.Join(dir, "ours")
	args := []string{"-std=c++14", "-Wall", "-Wextra", "-Werror", "-Iinclude", "-I" + inc, "-o", bin, "testdata/halfcheck.cc",
		"-L" + lib, "-l:libnccl.so.2", "-Wl,-rpath," + lib, "-lpthread"}
	if out, err := exec.Command("g++", args...).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("g++ %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// nvcc, as nccl-tests compiles its sources against nccl.h.
	if nvcc, err := exec.LookPath("nvcc"); err == nil {
		cu := []string{"-x", "cu", "-std=c++14", "-Iinclude", "-c", "-o", filepath.Join(t.TempDir(), "halfcheck.o"), "testdata/halfcheck.cc"}
		if out, err := exec.Command(nvcc, cu...).CombinedOutput(); err != nil {
			t.Errorf("nvcc %s: %v\n%s", strings.Join(cu, " "), err, out)
		}
	} else {
		t.Log("nvcc not found: halfcheck.cc compiled with g++ only")
	}
	// Without the runtime, half is not declared: the header stays CUDA-free.
	noCUDA := []string{"-std=c++14", "-fsyntax-only", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude", "-I" + inc, "testdata/halfcheck.cc"}
	if out, err := exec.Command("g++", noCUDA...).CombinedOutput(); err == nil || !strings.Contains(string(out), "half") {
		t.Errorf("g++ %s: %v, want it to fail on half (MSCCLGO_NCCL_NO_CUDA_RUNTIME includes no CUDA header)\n%s", strings.Join(noCUDA, " "), err, out)
	}
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(cleanEnv(), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH="+plans,
		"MSCCLGO_NCCL_DEBUG=INFO", "MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_CACHE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("halfcheck: %v\n%s", err, out)
	}
	for _, s := range []string{"rank 0: half ok", "rank 1: half ok", "rank 0: bfloat16 ok", "rank 1: bfloat16 ok",
		"ncclAllReduce count 1024 ncclFloat16 ncclSum (in-place, 2048 bytes): plan allreduce_packet_2gpu on host memory",
		"ncclAllReduce count 1024 ncclBfloat16 ncclSum (in-place, 2048 bytes): plan allreduce_packet_2gpu on host memory"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("halfcheck's output lacks %q:\n%s", s, out)
		}
	}
}

// cudaInclude is a directory holding the CUDA toolkit's cuda_fp16.h,
// or "".
func cudaInclude() string {
	dirs := []string{"/usr/include", "/usr/local/cuda/include"}
	if h := os.Getenv("CUDA_HOME"); h != "" {
		dirs = append([]string{filepath.Join(h, "include")}, dirs...)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "cuda_fp16.h")); err == nil {
			return d
		}
	}
	return ""
}
