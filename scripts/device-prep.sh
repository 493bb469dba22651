#!/usr/bin/env bash
# device-prep.sh (make device-prep) fills one folder, build/device/ by
# default, with everything scripts/device-check.sh runs on a lent GPU
# machine, so that nothing is built there: the CUDA worker, the cuda-tagged
# test binary of gpu/cuda (gpu-check), the NCCL library's CUDA build and the
# nccl-tests-shaped client linked to it (ncclcheck), the copy reference
# (gpu/bench/copy.c), the plans (plans.tar.xz), the PyTorch check and the script itself.
# The large binaries are compressed with xz (the folder travels with the
# device tool, 64 MiB in all); device-check.sh unpacks them into a
# temporary folder. Run it after make gpu (the kernels and bin/mscclgo-cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/device}
GO=${GO:-go}
CC=${CC:-cc}
cudainc=/usr/local/cuda/include
[ -f "$cudainc/cuda.h" ] || cudainc=/usr/include
say() { echo "device-prep: $*" >&2; }

for b in bin/mscclgo bin/mscclgo-cuda; do [ -x "$b" ] || { say "$b not found: run make build gpu first"; exit 1; }; done
rm -rf "$dir"
stage=$(mktemp -d)
mkdir -p "$dir" "$stage/plans"
trap 'rm -rf "$stage"' EXIT

cp bin/mscclgo-cuda "$stage/mscclgo-cuda"
say "test binary of gpu/cuda (go test -c -tags cuda)"
$GO test -c -tags cuda -o "$stage/cuda.test" ./gpu/cuda
say "the NCCL library's CUDA build"
$GO build -tags cuda -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o "$stage/libnccl.so.2" ./nccl
rm -f "$stage/libnccl.so.h"
# ncclcheck finds the library beside it at run time (LD_LIBRARY_PATH is set
# by device-check.sh to the unpacked folder).
$CC -std=c11 -O2 -Wall -Wextra -DMSCCLGO_NCCL_NO_CUDA_RUNTIME -Inccl/include -o "$dir/ncclcheck" nccl/testdata/ncclcheck.c \
	-L"$stage" -l:libnccl.so.2 -lpthread -ldl -rdynamic
$CC -std=c11 -O2 -Wall -Wextra -I"$cudainc" -o "$dir/copy" gpu/bench/copy.c -ldl

say "plans"
w=bin/mscclgo
$w eval allreduce_packet -D world_size=8 -o "$stage/plans/allreduce_packet_8.json" > /dev/null
$w eval allreduce_rsag -D world_size=8 -D min_message_size=0 -o "$stage/plans/allreduce_rsag_8.json" > /dev/null
cp tests/ports/single_node/allreduce_nvls_zero_copy.plan.json "$stage/plans/allreduce_nvls_8.json"
# The default plan set for the library (mscclgo install; its validation
# cache makes a second prep fast).
$w install --dir "$stage/plans/default" > "$stage/install.log" 2>&1 || { cat "$stage/install.log" >&2; exit 1; }

# gpu-check's plans, where cuda.test looks for them from its folder
# gpu/cuda: the project's golden plans (../../tests) and the reference
# plans beside the checkout (../../../shared/golden), so that the device
# needs neither.
gc=$stage/plans/gpu-check
mkdir -p "$gc/repo/gpu/cuda" "$gc/shared"
find tests -name '*.plan.json' -exec cp --parents {} "$gc/repo/" \;
golden=${SHARED_GOLDEN:-../shared/golden}
if [ -d "$golden" ]; then
	cp -r "$golden" "$gc/shared/golden"
else
	say "$golden not found: gpu-check on the device will run without the reference plans"
fi

cp nccl/testdata/torch_check.py scripts/device-check.sh "$dir/"
say "compressing"
for f in mscclgo-cuda cuda.test libnccl.so.2; do
	xz -T2 -3 -c "$stage/$f" > "$dir/$f.xz"
done
# The plans as one archive, links followed (install's default is a link).
tar -C "$stage" -chf - --exclude='plans/.default*' plans | xz -T2 -6 -c > "$dir/plans.tar.xz"
du -sh "$dir" >&2
say "done: carry $dir with the device tool and run: bash scripts/device-check.sh (docs/gpu.md §15)"
