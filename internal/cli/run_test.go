package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ports is the directory of the ported MSCCL++ plans, from this package.
const ports = "../../tests/ports"

// testPlan is a small hand-written plan: every rank copies its input chunk
// 0 to its output chunk 0 on each listed thread block.
type testPlan struct {
	name, collective string
	ranks            int
	copyTBs          int  // thread blocks per rank, each doing the copy
	deadlock         bool // rank 0 waits for a signal rank 1 never sends
	min, max         uint64
}

func (p testPlan) json() map[string]any {
	copyOp := map[string]any{"name": "copy",
		"src_buff": []any{map[string]any{"type": "i", "index": 0, "size": 1}},
		"dst_buff": []any{map[string]any{"type": "o", "index": 0, "size": 1}}}
	gpus := []any{}
	for r := 0; r < p.ranks; r++ {
		tbs := []any{}
		for i := 0; i < p.copyTBs; i++ {
			tbs = append(tbs, map[string]any{"id": i, "ops": []any{copyOp}, "channels": []any{}, "remote_buffer_refs": []any{}})
		}
		channels := []any{}
		if p.deadlock {
			var op map[string]any
			if r == 0 {
				op = map[string]any{"name": "wait", "channel_ids": []int{0}, "channel_type": "memory"}
			} else {
				op = map[string]any{"name": "nop"}
			}
			tbs = append(tbs, map[string]any{"id": len(tbs), "ops": []any{op},
				"channels": []any{map[string]any{"channel_type": "memory", "channel_ids": []int{0}}}, "remote_buffer_refs": []any{}})
			channels = append(channels, map[string]any{"channel_type": "memory", "connected_to": []int{1 - r}})
		}
		gpus = append(gpus, map[string]any{"id": r, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
			"threadblocks": tbs, "channels": channels, "remote_buffers": []any{}, "semaphores": []any{}})
	}
	max := p.max
	if max == 0 {
		max = 1<<64 - 1
	}
	return map[string]any{"name": p.name, "collective": p.collective, "protocol": "Simple", "inplace": false,
		"reuse_resources": false, "gpus": gpus, "num_threads_per_block": 1024, "use_double_scratch_buffer": false,
		"buffer_alignment": 16, "min_message_size": p.min, "max_message_size": max}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(data))
}

// withLimits copies a plan file with new message size limits.
func withLimits(t *testing.T, from, to string, min, max uint64) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var plan map[string]any
	if err := json.Unmarshal(data, &plan); err != nil {
		t.Fatal(err)
	}
	plan["min_message_size"], plan["max_message_size"] = min, max
	writeJSON(t, to, plan)
}

// TestRun is not parallel: urfave/cli writes its global help and version
// flags while parsing, a data race between concurrent runs.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	// "gpu not built" is about a checkout without the CUDA worker: after
	// `make gpu` the checkout's bin/ has one, which the CLI would find.
	t.Setenv("MSCCLGO_CUDA_WORKER", filepath.Join(dir, "no-mscclgo-cuda"))
	writeJSON(t, filepath.Join(dir, "wrong.json"), testPlan{name: "wrong", collective: "allreduce", ranks: 2, copyTBs: 1}.json())
	writeJSON(t, filepath.Join(dir, "deadlock.json"), testPlan{name: "deadlock", collective: "test", ranks: 2, deadlock: true}.json())
	withLimits(t, ports+"/single_node/allreduce_pipeline.plan.json", filepath.Join(dir, "limited.json"), 2048, 16384)
	ar := ports + "/single_node/allreduce.plan.json"
	ag := ports + "/single_node/allgather.plan.json"

	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    []string // regexps
		stderr    string   // substring
		notStderr string   // a substring stderr must not hold
	}{
		{name: "allreduce", args: []string{"run", ar, "--size", "64K"},
			stdout: []string{`(?m)^       65536         32768      half     sum      -1  [ .0-9]{7}  [ .0-9]{6}  [ .0-9]{6}      0$`,
				`# Out of bounds values : 0 OK`, `# Avg bus bandwidth    : [0-9.e+-]+`, `in-place true`}},
		{name: "header", args: []string{"run", ar, "--size", "16K", "--iters", "1"},
			stdout: []string{`(?m)^#       size         count      type   redop    root     time   algbw   busbw #wrong$`,
				`(?m)^#        \(B\)    \(elements\)                               \(us\)  \(GB/s\)  \(GB/s\)$`}},
		{name: "allreduce float32", args: []string{"run", "--dtype", "float32", ar, "-s", "64K", "-n", "2"},
			stdout: []string{`(?m)^       65536         16384     float     sum .*      0$`}},
		// The port writes its result into the input buffer: run out of
		// place, the outputs stay zero.
		{name: "in-place plan run out of place", args: []string{"run", "--in-place=false", ar, "-s", "64K", "-n", "2"}, code: ExitError,
			stdout: []string{`(?m)^       65536 .* 524288$`, `in-place false`}},
		{name: "alltoall out of place", args: []string{"run", ports + "/single_node/alltoall/alltoall_ring_oop.plan.json", "--size", "16K", "-n", "2"},
			stdout: []string{`(?m)^       16384          8192      half    none .*      0$`, `in-place false`}},
		{name: "allreduce bfloat16", args: []string{"run", ar, "--size", "32K", "--dtype", "bf16", "--iters", "2"},
			stdout: []string{`(?m)^       32768         16384  bfloat16     sum .*      0$`}},
		{name: "allreduce integer fill", args: []string{"run", ar, "--size", "32K", "--dtype", "int32", "--integer-fill", "--iters", "2"},
			stdout: []string{`(?m)^       32768          8192     int32     sum .*      0$`}},
		{name: "allgather sweep", args: []string{"run", ag, "-b", "1K", "-e", "16K", "-f", "4", "--iters", "2"},
			stdout: []string{`(?m)^        1024           512      half    none .*      0$`, `(?m)^        4096 `, `(?m)^       16384 `, `# Out of bounds values : 0 OK`}},
		{name: "allgather race detection", args: []string{"run", ag, "--size", "4K", "--race"},
			stdout: []string{`(?m)^        4096 .*      0$`, `race detection true`}},
		{name: "sweep skips sizes", args: []string{"run", "$DIR/limited.json", "-b", "1K", "-e", "64K", "-f", "4", "--iters", "1"},
			stdout: []string{`# skipped size 1024: .*below min_message_size 2048`, `(?m)^        4096 `, `(?m)^       16384 `,
				`# skipped size 65536: .*above max_message_size 16384`}},
		{name: "size outside the plan", args: []string{"run", "$DIR/limited.json", "--size", "1K"}, code: ExitError,
			stderr: "limited.json: message size 1024 (the input size): below min_message_size 2048"},
		{name: "size named once", args: []string{"run", "$DIR/limited.json", "--size", "1K"}, code: ExitError,
			notStderr: "size 1024: message size 1024"},
		{name: "step bytes", args: []string{"run", ar, "-b", "4K", "-e", "12K", "-i", "4K", "-n", "1"},
			stdout: []string{`(?m)^        4096 `, `(?m)^        8192 `, `(?m)^       12288 `}},
		{name: "warm-up", args: []string{"run", ar, "-s", "4K", "-w", "2", "-n", "1"}, stdout: []string{`(?m)^        4096 .*      0$`}},
		{name: "factor and step", args: []string{"run", ar, "-b", "4K", "-e", "12K", "-i", "4K", "-f", "2"}, code: ExitUsage, stderr: "give -f or -i, not both"},
		{name: "split mask on allreduce", args: []string{"run", ar, "-s", "4K", "--split-mask", "1"}, code: ExitUsage, stderr: "--split-mask applies to sendrecv plans"},
		{name: "no size fits", args: []string{"run", "$DIR/limited.json", "-b", "64K", "-e", "1M"}, code: ExitError, stderr: "no size of the sweep"},
		{name: "test plan", args: []string{"run", ports + "/unit_tests/copy_test.plan.json", "--size", "4K", "--race"},
			stdout: []string{`(?m)^        4096          2048      half    none .*      -$`, `# Out of bounds values : 0 OK`}},
		{name: "wrong results", args: []string{"run", "$DIR/wrong.json", "--size", "4K", "--iters", "1"}, code: ExitError,
			stdout: []string{`(?m)^        4096 .* [1-9][0-9]*$`, `# Out of bounds values : [1-9][0-9]* FAILED`}, stderr: "wrong element(s)"},
		{name: "deadlock", args: []string{"run", "$DIR/deadlock.json", "--size", "4K", "--timeout", "50ms"}, code: ExitDeadlock,
			stdout: []string{`# size 4096: deadlock`}, stderr: "deadlock: 1 thread block(s) blocked\n  most likely cause: the wait of rank 0 tb 0 op 0 waits on memory channel 0 from rank 1, which rank 1 never signals (rank 0 waits on it 1 time(s) per launch); it explains 1 of the 1 blocked thread blocks\n  rank 0 tb 0 op 0 wait"},
		{name: "gpu not built", args: []string{"run", ar, "--size", "4K", "--backend", "gpu"}, code: ExitError, stderr: "--backend gpu: not available in this build"},
		{name: "gpu-emu backend", args: []string{"run", ar, "--size", "16K", "--backend", "gpu-emu", "-n", "2", "--threads", "3"},
			stdout: []string{"backend gpu-emu", `(?m)^       16384          8192      half     sum .*      0$`, `# Out of bounds values : 0 OK`}},
		{name: "gpu-emu deadlock", args: []string{"run", "$DIR/deadlock.json", "--size", "4K", "--timeout", "200ms", "--backend", "gpu-emu"}, code: ExitDeadlock,
			stdout: []string{`# size 4096: deadlock`}, stderr: "deadlock: 1 thread block(s) blocked\n  most likely cause: the wait of rank 0 tb 0 op 0 waits on memory channel 0 from rank 1, which rank 1 never signals (rank 0 waits on it 1 time(s) per launch); it explains 1 of the 1 blocked thread blocks\n  rank 0 tb 0 op 0 wait"},
		{name: "race on gpu-emu", args: []string{"run", ar, "--size", "4K", "--backend", "gpu-emu", "--race", "-n", "1"}, stdout: []string{"race detection by the cpu backend's detector"}},
		{name: "bad threads", args: []string{"run", ar, "--size", "4K", "--backend", "gpu-emu", "--threads", "2048"}, code: ExitUsage, stderr: "--threads 2048"},
		{name: "cpu backend", args: []string{"run", ar, "--size", "4K", "--backend", "cpu", "-n", "1"}, stdout: []string{"backend cpu"}},
		{name: "unknown backend", args: []string{"run", ar, "--size", "4K", "--backend", "tpu"}, code: ExitUsage, stderr: "unknown backend"},
		{name: "no size", args: []string{"run", ar}, code: ExitUsage, stderr: "give a message size"},
		{name: "size and sweep", args: []string{"run", ar, "--size", "4K", "-b", "1K"}, code: ExitUsage, stderr: "not both"},
		{name: "bad size", args: []string{"run", ar, "--size", "4Q"}, code: ExitUsage, stderr: "--size"},
		{name: "bad factor", args: []string{"run", ar, "-b", "1K", "-e", "4K", "-f", "1"}, code: ExitUsage, stderr: "-f 1"},
		{name: "reversed sweep", args: []string{"run", ar, "-b", "4K", "-e", "1K"}, code: ExitUsage, stderr: "above -e"},
		{name: "bad dtype", args: []string{"run", ar, "--size", "4K", "--dtype", "fp8"}, code: ExitUsage, stderr: "unknown data type"},
		{name: "integer fill needs int32", args: []string{"run", ar, "--size", "4K", "--integer-fill"}, code: ExitUsage, stderr: "int32 only"},
		{name: "bad iters", args: []string{"run", ar, "--size", "4K", "--iters", "0"}, code: ExitUsage, stderr: "--iters 0"},
		{name: "indivisible size", args: []string{"run", ar, "--size", "1000"}, code: ExitError, stderr: "size 1000"},
		{name: "no plan", args: []string{"run", "--size", "4K"}, code: ExitUsage, stderr: "want exactly one PLAN.json"},
		{name: "missing plan", args: []string{"run", "$DIR/none.json", "--size", "4K"}, code: ExitError, stderr: "none.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, re := range tt.stdout {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("stdout does not match %q:\n%s", re, stdout)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
			if tt.notStderr != "" && strings.Contains(stderr, tt.notStderr) {
				t.Errorf("stderr %q contains %q", stderr, tt.notStderr)
			}
		})
	}
}

// TestRunHandOver checks that --backend gpu in a binary without the CUDA
// backend runs the same command line in the worker, with its exit status.
func TestRunHandOver(t *testing.T) {
	dir := t.TempDir()
	worker := filepath.Join(dir, "fake-worker")
	// The worker answers the version probe, then runs the command line.
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then echo 'mscclgo version 0'; exit 0; fi\necho \"worker $MSCCLGO_WORKER: $*\"\nexit 3\n"
	if err := os.WriteFile(worker, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MSCCLGO_CUDA_WORKER", worker)
	code, stdout, _ := run(t, dir, "run", "plan.json", "--backend", "gpu", "-s", "4K")
	if code != 3 || !strings.Contains(stdout, "worker 1: run plan.json --backend gpu -s 4K") {
		t.Errorf("got exit %d, stdout %q; want 3 and the worker's echo", code, stdout)
	}
	t.Setenv("MSCCLGO_WORKER", "1")
	code, _, stderr := run(t, dir, "run", "plan.json", "--backend", "gpu", "-s", "4K")
	if code != ExitError || !strings.Contains(stderr, "started as that worker") {
		t.Errorf("inside a worker: got exit %d, stderr %q", code, stderr)
	}
}

// sendrecvGroups sends every rank's input to the same position in the
// next group of `group` ranks: right only when run with --split-mask
// group-1, as executor_test.py checks it.
const sendrecvGroups = `n = param("num_gpus", 4, help = "ranks")
g = param("group", 2, help = "ranks per group (split mask + 1)")

CollectiveProgram("sendrecv_groups", SendRecv(n, 1, False), n, protocol = "Simple")
for r in range(n):
    dst = (r + g) % n
    ch = MemoryChannel(dst, r)
    ch.put(Rank(dst).get_output_buffer()[0:1], Rank(r).get_input_buffer()[0:1], tb = 0)
    ch.signal(tb = 0, data_sync = SyncType.before)
    MemoryChannel(r, dst).wait(tb = 0, data_sync = SyncType.after)
`

// TestRunSplitMask checks sendrecv plans against groups of split-mask+1
// ranks.
func TestRunSplitMask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sr.star"), sendrecvGroups)
	if code, stdout, stderr := run(t, dir, "run", "$DIR/sr.star", "-s", "4K", "-n", "2", "--split-mask", "1"); code != 0 {
		t.Errorf("--split-mask 1: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := run(t, dir, "run", "$DIR/sr.star", "-s", "4K", "-n", "2"); code != ExitError || !strings.Contains(stderr, "wrong data") {
		t.Errorf("without --split-mask: exit %d, stderr %q; want wrong data", code, stderr)
	}
	if code, _, stderr := run(t, dir, "run", "$DIR/sr.star", "-s", "4K", "--split-mask", "2"); code != ExitUsage || !strings.Contains(stderr, "groups of 3 do not divide 4 ranks") {
		t.Errorf("--split-mask 2: exit %d, stderr %q", code, stderr)
	}
}
