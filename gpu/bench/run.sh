#!/usr/bin/env bash
# run.sh is the GPU benchmark of the CUDA backend (make gpu-bench), for a
# machine with an NVIDIA GPU. Build on a machine with Go and the CUDA
# toolkit first (make build gpu), carry bin/ and this tree, then run it
# there; it needs no Go, no network, only the driver and Python 3 with
# PyTorch or CuPy for the copy-bandwidth reference.
#
# It measures, in one run:
#  1. the device's own copy bandwidth: a 1 GiB device-to-device copy
#     (bytes copied per second, best of 20);
#  2. 8-rank allreduce and allgather plans from 1 KiB to 1 GiB through
#     `mscclgo-cuda run --backend gpu` (all ranks on this one device, the
#     kernel time without host copies), and prints, per size, the time, the
#     nccl-tests busbw, and the bytes moved per second (busbw times the
#     ranks: what the ranks together move through this device's memory)
#     as a ratio of the copy bandwidth. Targets: >= 0.80 at 256 MiB, and at
#     most 8 us for the LL plan at 1 KiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/bench}
mkdir -p "$out"
bin=bin/mscclgo
worker=bin/mscclgo-cuda
[ -x "$worker" ] || { echo "gpu-bench: $worker not found: run 'make build gpu' on a machine with the CUDA toolkit" >&2; exit 1; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt" || true

copy_gbs=$(python3 - <<'PY'
import time
n = 1 << 30
try:
    import torch
    a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    b.copy_(a); torch.cuda.synchronize()
    best = 1e9
    for _ in range(20):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); b.copy_(a); e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / 1e3)
except ImportError:
    import cupy
    a = cupy.empty(n, dtype=cupy.uint8); b = cupy.empty_like(a)
    cupy.copyto(b, a); cupy.cuda.Device().synchronize()
    best = 1e9
    for _ in range(20):
        s = cupy.cuda.Event(); e = cupy.cuda.Event()
        s.record(); cupy.copyto(b, a); e.record(); e.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(s, e) / 1e3)
print(f"{n / best / 1e9:.1f}")
PY
)
echo "device copy bandwidth: $copy_gbs GB/s (1 GiB device to device)" | tee "$out/copy.txt"

plans=()
if [ -d ../shared/golden ]; then
	plans+=(../shared/golden/allreduce__ngpus-8.json ../shared/golden/allgather_pkt__ngpus-8.json)
fi
"$bin" eval allreduce_packet -D world_size=8 -o "$out/allreduce_packet_8.json"
"$bin" eval allreduce_rsag -D world_size=8 -D min_message_size=0 -o "$out/allreduce_rsag_8.json"
"$bin" eval allgather -D world_size=8 -o "$out/allgather_8.json"
plans+=("$out/allreduce_packet_8.json" "$out/allreduce_rsag_8.json" "$out/allgather_8.json")

for p in "${plans[@]}"; do
	name=$(basename "$p" .json)
	echo "== $name"
	"$worker" run "$p" --backend gpu -b 1K -e 1G -f 4 -n 20 --timeout 120s > "$out/$name.txt" 2>&1 || true
	awk -v copy="$copy_gbs" -v ranks=8 '
		/^#/ { next }
		NF >= 9 { printf "%12s B  %10s us  busbw %8s GB/s  moved/copy %.2f\n", $1, $6, $8, ($8 * ranks) / copy }
	' "$out/$name.txt" | tee "$out/$name.ratio.txt"
done
