#!/usr/bin/env bash
# run.sh is the GPU benchmark of the CUDA backend (make gpu-bench), for a
# machine with an NVIDIA GPU. Build on a machine with Go and the CUDA
# toolkit first:
#   make build gpu && go test -c -tags cuda -o bin/cuda.test ./gpu/cuda
# carry bin/ and this tree, then run it there; it needs no Go, no network,
# only the driver and Python 3 with PyTorch (or CuPy, for the copy
# bandwidth only).
#
# It measures, in one run, all ranks of 8-rank plans on the one device:
#  1. the device's copy bandwidth: a 1 GiB device-to-device copy;
#  2. the PyTorch equivalents of the collectives' data movement: for
#     allreduce, the sum of 8 inputs written to 8 outputs; for allgather,
#     8 copies of the gathered buffer (CUDA events, best of 20);
#  3. the kernel time (`mscclgo-cuda run`'s time column) of
#     allreduce_packet at 1 KiB and 64 KiB, allreduce_rsag at 4, 64 and
#     256 MiB, allgather at 64 MiB, at 1024, 256, 128 and 64 threads per
#     block;
#  4. back-to-back launches of one session (bin/cuda.test
#     BenchmarkBackToBack): wall time per call, with and without a CUDA
#     graph, at the plan's block size;
#  5. the cuda-tagged tests (differential against the CPU backend) and,
#     with SWEEP=1, the older sweep from 1 KiB to 1 GiB.
# and prints the table of docs/gpu.md §8. Every step runs under timeout
# with its own log in $OUT (default build/bench). Targets (issue 19): LL
# allreduce at 1 KiB <= 10 us; rsag and allgather at 64/256 MiB <= 1.25x
# PyTorch; 1024 threads no slower than 128; wall per call <= kernel + 10 us.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-build/bench}
mkdir -p "$out"
bin=bin/mscclgo
worker=bin/mscclgo-cuda
tests=bin/cuda.test
threads_list=${THREADS:-"1024 256 128 64"}
iters=${ITERS:-20}

say() { echo "gpu-bench: $*" >&2; }

for b in "$bin" "$worker"; do
	[ -x "$b" ] || { say "$b not found: run 'make build gpu' on a machine with Go and the CUDA toolkit, and carry bin/"; exit 1; }
done
[ -x "$tests" ] || say "$tests not found (go test -c -tags cuda -o $tests ./gpu/cuda): back-to-back and differential steps skipped"

# step NAME SECONDS CMD...: runs CMD under timeout, output to $out/NAME.log.
step() {
	local name=$1 secs=$2
	shift 2
	if timeout "$secs" "$@" > "$out/$name.log" 2>&1; then
		return 0
	fi
	local rc=$?
	if [ "$rc" = 124 ]; then
		say "$name: timed out after ${secs}s (log: $out/$name.log)"
	else
		say "$name: failed with status $rc (log: $out/$name.log)"
	fi
	return "$rc"
}

# The plans (no GPU needed).
step eval-allreduce_packet 60 "$bin" eval allreduce_packet -D world_size=8 -o "$out/allreduce_packet_8.json" || exit 1
step eval-allreduce_rsag 60 "$bin" eval allreduce_rsag -D world_size=8 -D min_message_size=0 -o "$out/allreduce_rsag_8.json" || exit 1
step eval-allgather 60 "$bin" eval allgather -D world_size=8 -o "$out/allgather_8.json" || exit 1

# The GPU.
if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > "$out/device.log" 2>&1; then
	say "no NVIDIA GPU found (nvidia-smi is missing or lists no device; see $out/device.log):" \
		"nothing measured. Run this script on a machine with a GPU."
	exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
date -u +"%Y-%m-%d %H:%M UTC" > "$out/date.txt"

# Copy bandwidth and the PyTorch equivalents: one line per measurement,
# "NAME SIZE MICROSECONDS".
cat > "$out/reference.py" <<'PY'
import sys
try:
    import torch
except ImportError:
    torch = None

def best(fn, reps=20):
    fn(); torch.cuda.synchronize()
    t = 1e30
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        t = min(t, s.elapsed_time(e) * 1e3)
    return t

if torch is None:
    import cupy
    n = 1 << 30
    a = cupy.empty(n, dtype=cupy.uint8); b = cupy.empty_like(a)
    cupy.copyto(b, a); cupy.cuda.Device().synchronize()
    t = 1e30
    for _ in range(20):
        s = cupy.cuda.Event(); e = cupy.cuda.Event()
        s.record(); cupy.copyto(b, a); e.record(); e.synchronize()
        t = min(t, cupy.cuda.get_elapsed_time(s, e) * 1e3)
    print(f"copy {n} {t:.1f}")
    sys.exit(0)

n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
print(f"copy {n} {best(lambda: b.copy_(a)):.1f}", flush=True)
del a, b
ranks = 8
for size in [1 << 10, 64 << 10, 4 << 20, 64 << 20, 256 << 20]:
    n = size // 2
    ins = [torch.ones(n, dtype=torch.float16, device="cuda") for _ in range(ranks)]
    outs = [torch.empty_like(ins[0]) for _ in range(ranks)]
    def allreduce():
        s = torch.stack(ins).sum(0)
        for o in outs:
            o.copy_(s)
    print(f"allreduce {size} {best(allreduce):.1f}", flush=True)
    del ins, outs
for size in [64 << 20]:
    g = torch.empty(size // 2, dtype=torch.float16, device="cuda")
    outs = [torch.empty_like(g) for _ in range(ranks)]
    def allgather():
        for o in outs:
            o.copy_(g)
    print(f"allgather {size} {best(allgather):.1f}", flush=True)
    del g, outs
PY
step reference 600 python3 "$out/reference.py" || say "reference measurements incomplete"
cp "$out/reference.log" "$out/reference.txt" 2> /dev/null
ref() { awk -v k="$1" -v s="$2" '$1 == k && $2 == s { print $3 }' "$out/reference.txt" 2> /dev/null; }
copy_us=$(ref copy 1073741824)
[ -n "$copy_us" ] && echo "device copy: 1 GiB in $copy_us us" | tee "$out/copy.txt"

# Kernel time per plan, size and block size.
cases=(
	"allreduce_packet allreduce 1024"
	"allreduce_packet allreduce 65536"
	"allreduce_rsag allreduce 4194304"
	"allreduce_rsag allreduce 67108864"
	"allreduce_rsag allreduce 268435456"
	"allgather allgather 67108864"
)
kernel_us() { # log file -> the time column of the last data row
	awk '/^#/ { next } NF >= 9 { t = $6 } END { print t }' "$1" 2> /dev/null
}
for c in "${cases[@]}"; do
	read -r name coll size <<< "$c"
	for t in $threads_list; do
		step "run-$name-$size-t$t" 300 "$worker" run "$out/${name}_8.json" --backend gpu -s "$size" -n "$iters" -w 5 \
			--threads "$t" --timeout 60s || true
	done
done

# Back to back, at the plan's block size.
if [ -x "$tests" ]; then
	for c in "${cases[@]}"; do
		read -r name coll size <<< "$c"
		(cd gpu/cuda && MSCCLGO_BENCH_PLAN="$root/$out/${name}_8.json" MSCCLGO_BENCH_SIZE="$size" \
			timeout 300 "$root/$tests" -test.run '^$' -test.bench 'BenchmarkBackToBack' -test.benchtime 200x) \
			> "$out/b2b-$name-$size.log" 2>&1 || say "b2b-$name-$size: failed (log: $out/b2b-$name-$size.log)"
	done
fi
b2b() { # log, graph -> "wall-us kernel-us"
	awk -v g="graph=$2" '$1 ~ g && /ns\/op/ {
		for (i = 1; i <= NF; i++) { if ($i == "ns/op") w = $(i-1) / 1e3; if ($i == "kernel-us") k = $(i-1) }
		printf "%.1f %.1f\n", w, k }' "$1" 2> /dev/null
}

# The table.
{
	echo "# $(cat "$out/device.txt" 2> /dev/null), $(cat "$out/date.txt")"
	echo "# kernel time in us (mscclgo-cuda run, mean of $iters launches) at threads per block; PyTorch: the same data movement"
	echo "# b2b: back-to-back wall time per call / kernel time in us, plan's block size, without / with a CUDA graph"
	printf '%-17s %10s' plan size
	for t in $threads_list; do printf ' %9s' "t=$t"; done
	printf ' %9s %9s %17s %17s\n' pytorch best/pt b2b b2b-graph
	for c in "${cases[@]}"; do
		read -r name coll size <<< "$c"
		printf '%-17s %10s' "$name" "$size"
		bestk=
		for t in $threads_list; do
			k=$(kernel_us "$out/run-$name-$size-t$t.log")
			printf ' %9s' "${k:--}"
			if [ -n "$k" ] && { [ -z "$bestk" ] || awk -v a="$k" -v b="$bestk" 'BEGIN { exit !(a < b) }'; }; then bestk=$k; fi
		done
		pt=$(ref "$coll" "$size")
		ratio=-
		[ -n "$pt" ] && [ -n "$bestk" ] && ratio=$(awk -v a="$bestk" -v b="$pt" 'BEGIN { printf "%.2f", a / b }')
		w0=$(b2b "$out/b2b-$name-$size.log" false)
		w1=$(b2b "$out/b2b-$name-$size.log" true)
		printf ' %9s %9s %17s %17s\n' "${pt:--}" "$ratio" "${w0:--}" "${w1:--}"
	done
} | tee "$out/table.txt"

# The differential on this GPU (the cuda-tagged tests), then the sweep.
if [ -x "$tests" ]; then
	(cd gpu/cuda && timeout 1800 "$root/$tests" -test.v -test.timeout 30m) > "$out/cuda-tests.log" 2>&1 &&
		echo "cuda-tagged tests: PASS" || say "cuda-tagged tests failed (log: $out/cuda-tests.log)"
fi
if [ "${SWEEP:-0}" = 1 ]; then
	for name in allreduce_packet allreduce_rsag allgather; do
		step "sweep-$name" 1200 "$worker" run "$out/${name}_8.json" --backend gpu -b 1K -e 1G -f 4 -n 20 --timeout 120s || true
	done
fi
