#!/usr/bin/env bash
# device-check.sh (make device-check): every measurement of a lent GPU in
# one command that builds nothing. It runs from the repository root on the
# device machine with the folder make device-prep filled (build/device/,
# carried by the device tool):
#
#   bash scripts/device-check.sh [OUTDIR]
#
# Steps, most important first, each under its own timeout (cut to what is
# left of a budget of BUDGET seconds, 450 by default, so the whole run ends
# within 8 minutes), each with its own log:
#   device     nvidia-smi's device and driver, and the unpacking of the
#              xz-compressed binaries into a temporary folder
#   bench      the kernel time (mscclgo-cuda run) of LL allreduce
#              (allreduce_packet) at 1 KiB on 8 ranks at THREADS threads per
#              block, and of allreduce_rsag at BIG_SIZES against the copy of
#              the same data movement (8 x the size, cuMemcpyAsync; copy.c)
#   gpu-check  the differential against the CPU backend (TestGPUCheck of
#              the cuda-tagged gpu/cuda tests), every plan (GPU_CHECK=all)
#   nccl       the nccl-tests-shaped client (ncclcheck sweep: every type,
#              allreduce, allgather and reducescatter, 1 KiB to NCCL_MAX,
#              out of place and in place, every result checked) through the
#              library's CUDA build, no fallback
#   torch      nccl/testdata/torch_check.py under torchrun with the library
#              in LD_PRELOAD, where PyTorch sees a CUDA device
#   nvls       the multicast/NVLS probe: an 8-rank NVLS allreduce plan
#              (switch channels get multicast objects where the driver and
#              devices have them, and fall back where not)
# It writes OUTDIR/report.md (device, driver, date, each step's result,
# time and figures) and one log per step: at most 8 files. Exit status: 0,
# 1 if a step failed, timed out or found no time left, 2 where no GPU was found (not DRY). OUTDIR is $OUT
# when set, else the argument, else build/device-report.
#
# DRY=1 (make device-check DRY=1) is the same run on the fake driver of
# build/fakecuda (the caller sets LD_LIBRARY_PATH and
# MSCCLGO_FAKE_KERNEL_LIB), with small sizes: it checks that the script
# works, and measures nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prep=${DEVICE_DIR:-build/device}
out=${OUT:-${1:-build/device-report}}
dry=${DRY:-0}
if [ "$dry" = 1 ]; then
	: "${THREADS:=4}" "${BIG_SIZES:=65536 262144}" "${GPU_CHECK:=16}" "${NCCL_MAX:=65536}" "${BUDGET:=170}" "${ITERS:=3}"
	export MSCCLGO_FAKECUDA_DEVICES=${MSCCLGO_FAKECUDA_DEVICES:-8}
	# The library's block size: each thread of the fake kernel is a fiber
	# with its own stack, too many at the default 1024.
	export MSCCLGO_NCCL_THREADS=${MSCCLGO_NCCL_THREADS:-4}
fi
threads_list=${THREADS:-1024 128}
big_sizes=${BIG_SIZES:-67108864 268435456}
gpu_check=${GPU_CHECK:-all}
nccl_max=${NCCL_MAX:-67108864}
budget=${BUDGET:-450}
iters=${ITERS:-20}
python=${PYTHON:-python3}
start=$SECONDS

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.log "$out/report.md"
say() { echo "device-check: $*" >&2; }
[ -d "$prep" ] || { say "$prep not found: run make device-prep where Go and the CUDA toolkit are, and carry $prep"; exit 1; }
prep=$(cd "$prep" && pwd)

# rows holds the report's table, one "| step | result | seconds | figures |"
# line per step; figures of a step are set by the step in fig.
rows=()
fig=
row() {
	local f=${4:--}
	case $2 in "skipped: no time"*) f=- ;; esac
	rows+=("| $1 | $2 | $3 | $f |")
}

# step NAME SECONDS CMD...: CMD under timeout (at most what is left of the
# budget), output appended to $out/NAME.log; sets res to ok, "failed
# (status N)", "timed out after Ns" or "skipped: no time left".
step() {
	local name=$1 secs=$2 left
	shift 2
	left=$((budget - (SECONDS - start)))
	[ "$secs" -gt "$left" ] && secs=$left
	left=$((cap_end - SECONDS))
	[ "$secs" -gt "$left" ] && secs=$left
	if [ "$secs" -lt 5 ]; then
		res="skipped: no time left of the ${budget}s budget (or of bench's share)"
		echo "$* : $res" >> "$out/$name.log"
		return 1
	fi
	echo "\$ $* (timeout ${secs}s)" >> "$out/$name.log"
	timeout -k 5 "$secs" "$@" >> "$out/$name.log" 2>&1
	local rc=$?
	case $rc in
	0) res=ok ;;
	124 | 137) res="timed out after ${secs}s" ;;
	*) res="failed (status $rc)" ;;
	esac
	[ "$rc" = 0 ] || say "$name: $* : $res (log: $out/$name.log)"
	return "$rc"
}

# cap_end: the end of the time the current step may take in all (bench
# has 55% of the budget, so that a hang there leaves time for the rest).
cap_end=$((start + budget))

# --- device: what machine, and the binaries.
t0=$SECONDS
device="no NVIDIA GPU found (nvidia-smi missing or lists none)"
driver=-
if [ "$dry" = 1 ]; then
	device="fake driver (DRY=1: build/fakecuda, ${MSCCLGO_FAKECUDA_DEVICES} devices; nothing here is a measurement)"
elif command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L >> "$out/device.log" 2>&1; then
	q=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>> "$out/device.log" | head -1)
	echo "$q" >> "$out/device.log"
	device="$(nvidia-smi -L | wc -l) x ${q%%,*}"
	driver=$(echo "$q" | cut -d, -f2 | tr -d ' ')
fi
date=$(date -u +"%Y-%m-%d %H:%M UTC")
work=$(mktemp -d "${TMPDIR:-/tmp}/mscclgo-device.XXXXXX")
trap 'rm -rf "$work"' EXIT
unpack() {
	local f
	for f in mscclgo-cuda cuda.test libnccl.so.2; do
		if command -v xz > /dev/null 2>&1; then
			xz -dc "$prep/$f.xz" > "$work/$f" || return 1
		else
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
				"$prep/$f.xz" "$work/$f" || return 1
		fi
		chmod +x "$work/$f"
	done
	if command -v xz > /dev/null 2>&1; then
		xz -dc "$prep/plans.tar.xz" | tar -C "$work" -xf - || return 1
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$prep/plans.tar.xz" "$work" || return 1
	fi
	cp "$prep/ncclcheck" "$prep/copy" "$work/"
}
export -f unpack
export prep work
if step device 60 bash -c unpack; then
	row device ok $((SECONDS - t0)) "$device; driver $driver"
else
	row device "$res" $((SECONDS - t0)) "$device"
	say "the prepared binaries could not be unpacked: nothing else runs"
fi
worker=$work/mscclgo-cuda
plans=$work/plans
nogpu=0
if [ "$dry" != 1 ] && ! { command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; }; then
	nogpu=1
fi
# skip NAME: the step is not run when the unpacking failed or there is no GPU.
skip() {
	if [ ! -x "$worker" ]; then
		row "$1" "skipped: the binaries were not unpacked (device.log)" 0
		return 0
	fi
	if [ "$nogpu" = 1 ]; then
		row "$1" "skipped: no NVIDIA GPU (nvidia-smi); DRY=1 runs on the fake driver" 0
		return 0
	fi
	return 1
}
# kernel_us LOG: the time column of the last data row of mscclgo-cuda run.
kernel_us() { awk '/^#/ { next } NF >= 9 { t = $6 } END { print t }' "$1" 2> /dev/null; }

# --- bench: LL allreduce at 1 KiB, then the large sizes against the copy.
if ! skip bench; then
	t0=$SECONDS
	cap_end=$((SECONDS + budget * 55 / 100))
	st=ok
	figs=()
	for t in $threads_list; do
		echo "## allreduce_packet 1024 B, 8 ranks, $t threads per block" >> "$out/bench.log"
		: > "$work/run.log"
		step bench 60 bash -c "\"\$0\" run \"\$1\" --backend gpu -s 1024 -n $iters -w 3 --threads $t --timeout 30s | tee \"\$2\"" \
			"$worker" "$plans/allreduce_packet_8.json" "$work/run.log" || st=$res
		figs+=("LL 1 KiB t=$t: $(kernel_us "$work/run.log" || true) us")
	done
	t=${threads_list%% *}
	for s in $big_sizes; do
		echo "## allreduce_rsag $s B, 8 ranks, $t threads per block" >> "$out/bench.log"
		: > "$work/run.log"
		step bench 120 bash -c "\"\$0\" run \"\$1\" --backend gpu -s $s -n $iters -w 3 --threads $t --timeout 60s | tee \"\$2\"" \
			"$worker" "$plans/allreduce_rsag_8.json" "$work/run.log" || st=$res
		k=$(kernel_us "$work/run.log")
		echo "## copy of 8 x $s B (the same data movement)" >> "$out/bench.log"
		step bench 60 bash -c "\"\$0\" $((8 * s)) $iters | tee \"\$1\"" "$work/copy" "$work/copy.log" || st=$res
		c=$(awk '$1 == "copy" { print $3 }' "$work/copy.log")
		r=-
		[ -n "$k" ] && [ -n "$c" ] && r=$(awk -v a="$k" -v b="$c" 'BEGIN { printf "%.2f", a / b }')
		figs+=("rsag $s B: ${k:--} us, copy ${c:--} us, ratio $r")
	done
	cap_end=$((start + budget))
	row bench "$st" $((SECONDS - t0)) "$(IFS=';'; echo "${figs[*]}" | sed 's/;/; /g')"
fi

# --- gpu-check: the differential against the CPU backend.
if ! skip gpu-check; then
	t0=$SECONDS
	# From the prepared gpu/cuda folder: the plans it finds relative to it
	# are in the prepared folder (device-prep.sh).
	(cd "$plans/gpu-check/repo/gpu/cuda" && MSCCLGO_GPU_CHECK=$gpu_check step gpu-check 240 "$work/cuda.test" -test.run '^TestGPUCheck$' -test.v -test.timeout 10m
		echo "$res" > "$work/res")
	res=$(cat "$work/res")
	sum=$(grep -E '^gpu-check:' "$out/gpu-check.log" | tail -1)
	if [ -z "$sum" ]; then
		sum="no summary line; $(grep -c '^gpu-check ok' "$out/gpu-check.log") plans identical before it stopped, $(grep -c '^gpu-check FAIL' "$out/gpu-check.log") failed"
	fi
	row gpu-check "$res" $((SECONDS - t0)) "$sum (GPU_CHECK=$gpu_check)"
fi

# --- nccl: the nccl-tests-shaped client through the library's CUDA build.
if ! skip nccl; then
	t0=$SECONDS
	n=2
	if [ "$dry" = 1 ]; then n=4; else
		g=$(nvidia-smi -L 2> /dev/null | wc -l)
		[ "$g" -gt 8 ] && g=8
		[ "$g" -gt 2 ] && n=$g
	fi
	LD_LIBRARY_PATH=$work:${LD_LIBRARY_PATH:-} MSCCLGO_NCCL_FALLBACK=none MSCCLGO_PLAN_PATH=$plans/default \
		MSCCLGO_CACHE_DIR=$work/cache MSCCLGO_NCCL_TIMEOUT=60s step nccl 150 "$work/ncclcheck" sweep "$n" 1024 "$nccl_max" 4
	sw=$(grep -E '^rank [0-9]+: SWEEP cases' "$out/nccl.log" | sed 's/^rank [0-9]*: SWEEP //' | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')
	row nccl "$res" $((SECONDS - t0)) "$n ranks as threads, 1 KiB to $nccl_max B by 4, ranks x (cases, wrong, failed): ${sw:-no SWEEP line}"
fi

# --- torch: PyTorch with the library in LD_PRELOAD, where torch sees CUDA.
why=$("$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' 2>&1)
trc=$?
case $trc in
0) why= ;;
3) why="$python's torch sees no CUDA device (torch.cuda.is_available() is False)" ;;
*) why="$python -c 'import torch' failed: $(echo "$why" | tail -1)" ;;
esac
[ -x "$worker" ] || why="the binaries were not unpacked (device.log)"
if [ -n "$why" ]; then
	echo "skipped: $why" >> "$out/torch.log"
	row torch "skipped: $why" 0
else
	t0=$SECONDS
	LD_PRELOAD=$work/libnccl.so.2 MSCCLGO_PLAN_PATH=$plans/default MSCCLGO_CACHE_DIR=$work/cache \
		step torch 150 "$python" -m torch.distributed.run --nproc-per-node 1 "$prep/torch_check.py"
	row torch "$res" $((SECONDS - t0)) "$(grep -c ' ok ' "$out/torch.log") ok, $(grep -c WRONG "$out/torch.log") wrong; $(grep -E 'us/(call|replay)' "$out/torch.log" | grep all_reduce | tail -n 2 | tr -s ' ' | tr '\n' ';')"
fi

# --- nvls: the multicast/NVLS probe.
if ! skip nvls; then
	t0=$SECONDS
	[ "$dry" = 1 ] && export MSCCLGO_FAKECUDA_MULTICAST=1
	: > "$work/run.log"
	step nvls 60 bash -c "\"\$0\" run \"\$1\" --backend gpu -s 16384 -n $iters -w 1 --threads ${threads_list%% *} --timeout 30s 2>&1 | tee \"\$2\"" \
		"$worker" "$plans/allreduce_nvls_8.json" "$work/run.log"
	mc=$(grep -i -m1 'multicast' "$work/run.log")
	row nvls "$res" $((SECONDS - t0)) "allreduce_nvls 16 KiB: $(kernel_us "$work/run.log") us${mc:+; $mc}"
fi

# --- the report.
{
	echo "# mscclgo device check"
	echo
	echo "- device: $device"
	echo "- driver: $driver"
	echo "- date: $date"
	echo "- commit: $(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
	echo "- budget: ${budget}s, used $((SECONDS - start))s; threads per block: $threads_list; iterations: $iters"
	[ "$dry" = 1 ] && echo "- DRY=1: the fake driver ran the g++-built kernel on host threads; no figure here is a device measurement"
	echo
	echo "Kernel times are mscclgo-cuda run's time column (mean of $iters launches), in us; copy is the best of $iters"
	echo "device-to-device copies of 8 x the size (the data an 8-rank allreduce on one device reads and writes)."
	echo
	echo "| step | result | seconds | figures |"
	echo "|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	echo "Logs: $(cd "$out" && ls *.log 2> /dev/null | tr '\n' ' ')"
} > "$out/report.md"
cat "$out/report.md"
for r in "${rows[@]}"; do
	case $r in *"| failed"* | *"| timed out"* | *"| skipped: no time"*) exit 1 ;; esac
done
if [ "$nogpu" = 1 ]; then
	say "no NVIDIA GPU found: nothing measured (report: $out/report.md)"
	exit 2
fi
exit 0
