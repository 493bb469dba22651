package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// mixedPlans is a plan set for four ranks with in-place and out-of-place
// plans of the three collectives: a rank's placement alone would choose
// a different plan from its peer's.
func mixedPlans(t *testing.T) string {
	return bundledPlans(t, map[string]planDef{
		"allreduce_in.json":      {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json":     {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather_in.json":      {"allgather", map[string]string{"world_size": "4"}},
		"allgather_out.json":     {"allgather", map[string]string{"world_size": "4", "inplace": "false"}},
		"reducescatter_in.json":  {"reducescatter", map[string]string{"world_size": "4"}},
		"reducescatter_out.json": {"reducescatter", map[string]string{"world_size": "4", "inplace": "false"}},
	})
}

// mixedCases is the number of checked results per rank of ncclcheck's
// mixed mode: six cases (three collectives, even or odd ranks in place),
// twice.
const mixedCases = 12

// TestMixedPlacementHostThreads: in one call of four ranks as threads on
// host memory, some ranks are in place and the others out of place
// (legal in NCCL, issue 31); every result is checked, no fallback.
func TestMixedPlacementHostThreads(t *testing.T) {
	r := runCheck(t, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + mixedPlans(t)}, "mixed", "4")
	r.succeeded(t)
	if n := strings.Count(r.stdout, " ok\n"); n != 4*mixedCases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*mixedCases, r.stdout, r.stderr)
	}
	if l := "the input is copied first (host copy)"; !strings.Contains(r.stderr, l) {
		t.Errorf("log lacks %q:\n%s", l, r.stderr)
	}
}

// TestMixedPlacementHostProcs is TestMixedPlacementHostThreads with the
// ranks as four processes.
func TestMixedPlacementHostProcs(t *testing.T) {
	plans := mixedPlans(t)
	runs := runCheckProcs(t, 4, []string{"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}, "mixedprocs")
	if t.Failed() {
		return
	}
	for rank, r := range runs {
		r.succeeded(t)
		if got := strings.Count(r.stdout, " ok\n"); got != mixedCases || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("rank %d: %d results right, want %d:\n%s\n%s", rank, got, mixedCases, r.stdout, r.stderr)
		}
	}
}

// TestMixedPlacementDevice: on the emulated device, in one call of four
// ranks some are in place and the others out of place (legal in NCCL,
// issue 31): every rank runs the plan of the collective's device
// placement (allreduce in place, allgather and reducescatter out of
// place), and a rank of the other placement copies its input first, to
// its receive buffer or to the communicator's staging buffer; every value
// is checked, no fallback. Ranks as threads, and as processes whose
// buffers are the emulated device's shared memory.
func TestMixedPlacementDevice(t *testing.T) {
	plans := mixedPlans(t)
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}
	logs := []string{
		"rank 1 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_4gpu is in-place and the call is not: the input is copied first (a device copy on the caller's stream)",
		"rank 0 of 4: ncclAllGather count 1024 ncclFloat32 (in-place, 16384 bytes): plan allgather_oop_4gpu is out-of-place and the call is not: the input is copied to the staging buffer first (a device copy on the caller's stream)",
		"rank 3 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, 16384 bytes): plan reducescatter_oop_4gpu is out-of-place and the call is not: the input is copied to the staging buffer first (a device copy on the caller's stream)",
	}
	t.Run("threads", func(t *testing.T) {
		r := runCheck(t, env, "mixed", "4")
		r.succeeded(t)
		if n := strings.Count(r.stdout, " ok\n"); n != 4*mixedCases || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*mixedCases, r.stdout, r.stderr)
		}
		for _, l := range logs {
			if !strings.Contains(r.stderr, l) {
				t.Errorf("log lacks %q:\n%s", l, r.stderr)
			}
		}
	})
	t.Run("processes", func(t *testing.T) {
		runs := runCheckProcs(t, 4, append(env, "NCCLCHECK_DEVICE=emu"), "mixedprocs")
		if t.Failed() {
			return
		}
		for rank, r := range runs {
			r.succeeded(t)
			if got := strings.Count(r.stdout, " ok\n"); got != mixedCases || strings.Contains(r.stdout, "WRONG") {
				t.Errorf("rank %d: %d results right, want %d:\n%s\n%s", rank, got, mixedCases, r.stdout, r.stderr)
			}
			for _, l := range logs {
				if strings.HasPrefix(l, fmt.Sprintf("rank %d ", rank)) && !strings.Contains(r.stderr, l) {
					t.Errorf("rank %d: log lacks %q:\n%s", rank, l, r.stderr)
				}
			}
		}
	})
}

// TestDeviceInPlaceViaCopy: on the emulated device, with in-place plans
// only, out-of-place calls run the in-place plan after a device copy of
// the input on the caller's stream (issue 30), logged: allreduce and
// allgather on the receive buffer, reducescatter on the communicator's
// staging buffer, its slice copied to the output after the launch. Every
// value is checked, no fallback.
func TestDeviceInPlaceViaCopy(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":     {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allgather_in.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter_in.json": {"reducescatter", map[string]string{"world_size": "4"}},
	})
	emuLib := "LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu")
	r := runCheck(t, []string{emuLib, "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, "oop", "4")
	r.succeeded(t)
	const cases = 6 // three collectives, twice
	if n := strings.Count(r.stdout, " ok\n"); n != 4*cases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*cases, r.stdout, r.stderr)
	}
	for _, l := range []string{
		"rank 1 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_4gpu is in-place and the call is not: the input is copied first (a device copy on the caller's stream)",
		"rank 2 of 4: ncclAllGather count 1024 ncclFloat32 (out-of-place, 16384 bytes): plan allgather_4gpu on gpu-emu, enqueued",
		"rank 3 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (out-of-place, 16384 bytes): plan reducescatter_4gpu is in-place and the call is not: the input is copied to the staging buffer, the plan runs there in place, and the rank's slice is copied to the output after it (device copies on the caller's stream)",
		"rank 0 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (out-of-place, 16384 bytes): plan reducescatter_4gpu on gpu-emu, enqueued",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "fallback") && strings.Contains(r.stderr, "refused") {
		t.Errorf("a call was refused:\n%s", r.stderr)
	}
}
