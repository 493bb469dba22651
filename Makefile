# mscclgo build targets. `make test` is the test command of README.md.

GO ?= go

.PHONY: build install test golden bench bench-synth bench-fabric test-fabric test-fabric-cuda fuzz check validate-modules gpu fakecuda gpu-sass gpu-test gpu-check gpu-hostaccess gpu-tsan gpu-bench device-prep device-check nccl nccl-bench

# -v: the first build compiles some 240 packages for a minute or more; it
# names each as it compiles it (a warm build names none).
build:
	$(GO) build -v -o bin/mscclgo .

# go install ., and beside it (in $(go env GOBIN), else $(go env
# GOPATH)/bin) the CUDA worker bin/mscclgo-cuda when `make gpu` built it,
# so that the installed mscclgo finds it as bin/mscclgo does.
install:
	$(GO) install .
	@dir=$$($(GO) env GOBIN); [ -n "$$dir" ] || dir=$$($(GO) env GOPATH)/bin; \
	if [ -f bin/mscclgo-cuda ]; then cp bin/mscclgo-cuda "$$dir/mscclgo-cuda" && echo "installed mscclgo and mscclgo-cuda into $$dir"; \
	else echo "installed mscclgo into $$dir (no bin/mscclgo-cuda: make gpu builds it, then make install again)"; fi

test:
	$(GO) test ./...

# Rewrite the project's golden plans (tests/**/*.plan.json).
golden:
	$(GO) test ./tests/... -run TestGoldenPlans -update

# The speed table of the CPU backend and the emulated device (issue 33,
# docs/gpu.md §12), measured in one run: memcpy bandwidth on one core and
# on every core, the busbw ceiling (docs/executor.md §10), the CPU
# backend's busbw at 64 MiB (float, half, bf16; as fractions of memcpy
# and of the ceiling) and time per launch, gpu-emu beside the CPU
# backend per launch (wall and CPU time); the CPU backend's reduce op of
# 64 MiB per type on one goroutine and split over every core, against
# memcpy the same two ways (issue 46); then the compiler's benchmarks.
bench:
	MSCCLGO_SPEED_TABLE=1 $(GO) test -count=1 -timeout 30m ./gpu/emu -run '^TestSpeedTable$$' -v
	MSCCLGO_SPEED_TABLE=1 $(GO) test -count=1 -timeout 10m ./executor/cpu -run '^TestReduceSpeedTable$$' -v
	$(GO) test ./tests/ -run XXX -bench . -benchmem

# The synthesis ratio table (issue 45, docs/synthesis.md): for every
# bundled topology and collective, the synthesized program's modelled
# algbw at 256 MiB against the cut bound, its worst time against the best
# bundled plan's, and the synthesis time on 4 x 8 and 32 x 8 GPUs. It
# prints; it times nothing it asserts.
bench-synth:
	MSCCLGO_SYNTH_BENCH=1 $(GO) test -count=1 -timeout 60m ./synth -run '^TestBenchSynth$$' -v

# Port channels between processes over libfabric (docs/fabric.md):
# bench-fabric prints the busbw of 2-host port-channel plans over the TCP
# wire and over libfabric's tcp provider side by side, and the 8-byte
# put+signal round trip; test-fabric runs the whole comparison matrix.
bench-fabric:
	MSCCLGO_FABRIC_BENCH=1 $(GO) test ./tests/multiproc -run 'TestFabricBench' -count=1 -v

test-fabric:
	MSCCLGO_FABRIC_FULL=1 $(GO) test ./executor/fabric ./tests/multiproc -run 'TestMessages|TestABI|TestFabric' -count=1 -v

# The GPU backend's proxy over the fabric on the fake driver (two fake
# devices per logical host).
test-fabric-cuda: gpu fakecuda
	MSCCLGO_FAKECUDA_DEVICES=2 LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		$(GO) test -count=1 -tags cuda ./tests/multiproc -run 'TestFabricMatchesTCP/gpu_fake' -v
	MSCCLGO_FAKECUDA_DEVICES=2 LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		$(GO) test -count=1 -tags cuda ./tests/multiproc -run 'TestAllToAllVProcesses/_gpu$$' -v

# The NCCL-compatible library (docs/integration.md): build/nccl/ holds
# libmscclgo_nccl.so (soname libnccl.so.2), a libnccl.so.2 link to it for
# LD_LIBRARY_PATH use, a libnccl.so link for the linker (-lnccl), nccl.h
# and mscclgo.h. Go decides what to rebuild.
# NCCL_BACKEND picks the device backend calls whose plan fits run on:
# empty (the default), none, so they fall back; cuda, the CUDA devices
# through gpu/cuda (needs make gpu's kernels; the library then links
# libcuda.so.1, the fake driver of build/fakecuda in CI).
NCCL_DIR := build/nccl
NCCL_BACKEND ?=
NCCL_TAGS := $(if $(filter cuda,$(NCCL_BACKEND)),-tags cuda,)

nccl: $(if $(filter cuda,$(NCCL_BACKEND)),check-nvcc $(KERNELS),)
	@mkdir -p $(NCCL_DIR)
	$(GO) build $(NCCL_TAGS) -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o $(NCCL_DIR)/libmscclgo_nccl.so ./nccl
	@rm -f $(NCCL_DIR)/libmscclgo_nccl.h
	ln -sf libmscclgo_nccl.so $(NCCL_DIR)/libnccl.so.2
	ln -sf libnccl.so.2 $(NCCL_DIR)/libnccl.so
	cp nccl/include/nccl.h nccl/include/mscclgo.h $(NCCL_DIR)/

# nccl-tests' default sweep (sum; float, half, bfloat16, int32; 2, 4 and 8
# ranks; 1 KiB to 64 MiB by 2; out of place then in place; every result
# checked) through the emulated-device build of the library with the
# default plan set and no fallback: every call must be served by a plan.
# One process per rank count and type (ncclcheck sweep, nccl/testdata).
# go test ./nccl -run TestSweepDevice runs a subset of the sizes.
NCCL_EMU_DIR := build/nccl-emu
SWEEP_RANKS ?= 2 4 8
SWEEP_TYPES ?= float half bfloat16 int32
SWEEP_MAX ?= 67108864

nccl-emu: build
	@mkdir -p $(NCCL_EMU_DIR)
	$(GO) build -tags mscclgo_emu -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o $(NCCL_EMU_DIR)/libnccl.so.2 ./nccl
	@rm -f $(NCCL_EMU_DIR)/libnccl.h
	$(CC) -std=c11 -O2 -Wall -Wextra -DMSCCLGO_NCCL_NO_CUDA_RUNTIME -Inccl/include -o $(NCCL_EMU_DIR)/ncclcheck nccl/testdata/ncclcheck.c \
		-L$(NCCL_EMU_DIR) -l:libnccl.so.2 -Wl,-rpath,$(CURDIR)/$(NCCL_EMU_DIR) -lpthread -ldl -rdynamic
	bin/mscclgo install --dir $(NCCL_EMU_DIR)/plans

nccl-sweep: nccl-emu
	@for n in $(SWEEP_RANKS); do for ty in $(SWEEP_TYPES); do \
		echo "make nccl-sweep: $$n ranks, $$ty, 1024 to $(SWEEP_MAX) bytes"; \
		NCCLCHECK_SWEEP_TYPES=$$ty MSCCLGO_NCCL_FALLBACK=none MSCCLGO_PLAN_PATH=$(CURDIR)/$(NCCL_EMU_DIR)/plans MSCCLGO_NCCL_TIMEOUT=300s \
			$(NCCL_EMU_DIR)/ncclcheck sweep $$n 1024 $(SWEEP_MAX) 2 > $(NCCL_EMU_DIR)/sweep.out 2>&1 || { cat $(NCCL_EMU_DIR)/sweep.out; exit 1; }; \
		grep -E 'SWEEP (cases|.*WRONG)|-> [1-9]|error' $(NCCL_EMU_DIR)/sweep.out; \
		if grep -qE 'WRONG|-> [1-9]|wrong [1-9]|failed [1-9]' $(NCCL_EMU_DIR)/sweep.out; then exit 1; fi; \
	done; done

.PHONY: nccl-emu nccl-sweep

# make nccl-bench: the NCCL library's host time per call, one command per
# row (issue 30). Host memory (MSCCLGO_NCCL_HOSTMEM=1, the CPU backend,
# synchronous: a call returns when its allreduce is done), ranks as
# threads and as processes: 128 B and 4 KiB allreduce, and a call that
# does nothing (ncclCommGetAsyncError), at 2 and 8 ranks. Then the Python
# package's all_reduce on CPU tensors against torch.distributed's gloo on
# the same tensors, under torchrun (skipped without a python3 that imports
# torch). NCCL_BENCH_ITERS calls per row.
NCCL_BENCH_DIR := build/nccl-bench
NCCL_BENCH_ITERS ?= 300
TORCH_PYTHON ?= /usr/bin/python3
NCCL_BENCH_HOST := MSCCLGO_NCCL_FALLBACK=none MSCCLGO_NCCL_HOSTMEM=1 MSCCLGO_PLAN_PATH=$(CURDIR)/$(NCCL_BENCH_DIR)/plans
NCCL_BENCH_TORCHRUN := MSCCLGO_LIBRARY=$(CURDIR)/$(NCCL_DIR)/libmscclgo_nccl.so PYTHONPATH=$(CURDIR)/python OMP_NUM_THREADS=1 \
	$(TORCH_PYTHON) -m torch.distributed.run --nnodes 1 --master_addr 127.0.0.1 --redirects 1 --tee 1
# A port nothing listens on, for torchrun's store.
FREE_PORT = $$($(TORCH_PYTHON) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

nccl-bench-prep: nccl build
	@mkdir -p $(NCCL_BENCH_DIR)
	$(CC) -std=c11 -O2 -Wall -Wextra -DMSCCLGO_NCCL_NO_CUDA_RUNTIME -Inccl/include -o $(NCCL_BENCH_DIR)/ncclcheck nccl/testdata/ncclcheck.c \
		-L$(NCCL_DIR) -l:libnccl.so.2 -Wl,-rpath,$(CURDIR)/$(NCCL_DIR) -lpthread -ldl -rdynamic
	bin/mscclgo install --dir $(NCCL_BENCH_DIR)/plans

# The library's host time per call until the call returns (issue 30),
# side by side in one run: one row per command below, each printing its
# own line (nccl/bench/ncclbench.c says what a row measures). The
# emulated-device build of the library (go build -tags mscclgo_emu) with
# 2- and 8-rank LL allreduce plans; "meet every call" is the baseline of
# every call meeting its peers over the bootstrap
# (MSCCLGO_NCCL_MEET_EVERY_CALL=1). Add rows as more lines.
NB := build/nccl-bench
NB_ENV := MSCCLGO_PLAN_PATH=$(NB)/emuplans MSCCLGO_NCCL_FALLBACK=none MSCCLGO_CACHE_DIR=$(NB)/cache
NB_ITERS ?= 300

nccl-bench: nccl-bench-prep
	@mkdir -p $(NB)/emu $(NB)/emuplans
	$(GO) build -tags mscclgo_emu -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libnccl.so.2 -o $(NB)/emu/libnccl.so.2 ./nccl
	@rm -f $(NB)/emu/libnccl.so.h
	gcc -std=c11 -Wall -Wextra -Werror -Inccl/include -o $(NB)/ncclbench-emu nccl/bench/ncclbench.c -L$(NB)/emu -l:libnccl.so.2 -Wl,-rpath,$(CURDIR)/$(NB)/emu -lpthread -ldl
	bin/mscclgo eval allreduce_packet -D world_size=2 -o $(NB)/emuplans/allreduce_packet_2.json
	bin/mscclgo eval allreduce_packet -D world_size=8 -o $(NB)/emuplans/allreduce_packet_8.json
	@echo "== host time per call until it returns (emulated device; median over calls, mean over ranks)"
	@$(NB)/ncclbench-emu header
	@$(NB_ENV) $(NB)/ncclbench-emu threads 2 128 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu threads 2 4096 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu threads 8 128 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu threads 8 4096 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu procs 2 128 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu procs 2 4096 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu procs 8 128 $(NB_ITERS)
	@$(NB_ENV) $(NB)/ncclbench-emu procs 8 4096 $(NB_ITERS)
	@$(NB_ENV) MSCCLGO_NCCL_MEET_EVERY_CALL=1 $(NB)/ncclbench-emu threads 2 128 $(NB_ITERS)
	@$(NB_ENV) MSCCLGO_NCCL_MEET_EVERY_CALL=1 $(NB)/ncclbench-emu threads 8 128 $(NB_ITERS)
	@$(NB_ENV) MSCCLGO_NCCL_MEET_EVERY_CALL=1 $(NB)/ncclbench-emu procs 2 128 $(NB_ITERS)
	@$(NB_ENV) MSCCLGO_NCCL_MEET_EVERY_CALL=1 $(NB)/ncclbench-emu procs 8 128 $(NB_ITERS)
	@echo "make nccl-bench: host time per call until it returns (rank 0's mean over $(NCCL_BENCH_ITERS) calls)"
	@$(NCCL_BENCH_HOST) NCCLCHECK_BENCH_LABEL="host memory, threads" $(NCCL_BENCH_DIR)/ncclcheck bench 2 $(NCCL_BENCH_ITERS) | grep BENCH
	@$(NCCL_BENCH_HOST) NCCLCHECK_BENCH_LABEL="host memory, threads" $(NCCL_BENCH_DIR)/ncclcheck bench 8 $(NCCL_BENCH_ITERS) | grep BENCH
	@$(NCCL_BENCH_HOST) NCCLCHECK_BENCH_LABEL="host memory, processes" nccl/testdata/procs.sh 2 $(NCCL_BENCH_DIR)/ncclcheck benchprocs $(NCCL_BENCH_ITERS) | grep BENCH
	@$(NCCL_BENCH_HOST) NCCLCHECK_BENCH_LABEL="host memory, processes" nccl/testdata/procs.sh 8 $(NCCL_BENCH_DIR)/ncclcheck benchprocs $(NCCL_BENCH_ITERS) | grep BENCH
	@if $(TORCH_PYTHON) -c 'import torch.distributed.run' 2>/dev/null; then \
		$(NCCL_BENCH_TORCHRUN) --master_port $(FREE_PORT) --nproc_per_node 2 python/tests/bench_torch.py $(CURDIR)/$(NCCL_BENCH_DIR)/plans $(NCCL_BENCH_ITERS) 2>&1 | grep -o 'BENCH.*'; \
		$(NCCL_BENCH_TORCHRUN) --master_port $(FREE_PORT) --nproc_per_node 8 python/tests/bench_torch.py $(CURDIR)/$(NCCL_BENCH_DIR)/plans $(NCCL_BENCH_ITERS) 2>&1 | grep -o 'BENCH.*'; \
	else echo "make nccl-bench: $(TORCH_PYTHON) cannot import torch: no Python rows"; fi

.PHONY: nccl-bench-prep nccl-bench

# make torch-bench: the torch.distributed backend "mscclgo" against gloo
# on CPU tensors (issue 43): all_reduce, all_gather (a list and one
# tensor) and reduce_scatter (gloo's row: an all_reduce and a copy), 4 KiB
# to 64 MiB, side by side in one torchrun job at each of
# TORCH_BENCH_PROCS processes (python/tests/backend_bench.py says how it
# times). The default plan set is installed into build/torch-bench/plans.
TORCH_BENCH_DIR := build/torch-bench
TORCH_BENCH_PROCS ?= 2 4 8
TORCH_BENCH_SIZES ?= 4096,65536,1048576,16777216,67108864

torch-bench: nccl build
	@mkdir -p $(TORCH_BENCH_DIR)
	@test -f $(TORCH_BENCH_DIR)/plans/index.json || bin/mscclgo install --dir $(TORCH_BENCH_DIR)/plans
	@$(TORCH_PYTHON) -c 'import torch.distributed.run' 2>/dev/null || { echo "make torch-bench: $(TORCH_PYTHON) cannot import torch (Debian: apt-get install python3-torch)"; exit 1; }
	@for n in $(TORCH_BENCH_PROCS); do \
		MSCCLGO_PLAN_PATH=$(CURDIR)/$(TORCH_BENCH_DIR)/plans $(NCCL_BENCH_TORCHRUN) --master_port $(FREE_PORT) --nproc_per_node $$n \
			python/tests/backend_bench.py $(TORCH_BENCH_SIZES) > $(TORCH_BENCH_DIR)/run-$$n.out 2>&1 || { cat $(TORCH_BENCH_DIR)/run-$$n.out; exit 1; }; \
		grep -a -o 'TORCHBENCH.*' $(TORCH_BENCH_DIR)/run-$$n.out | sed 's/^TORCHBENCH //'; echo; \
	done

.PHONY: torch-bench

# Fuzz every fuzz target of the project (each func FuzzXxx of a _test.go
# file: FuzzLoad in executor, FuzzEval in tests/fuzz) for FUZZTIME each,
# one after another: make fuzz FUZZTIME=30s. FUZZFLAGS are go test flags
# (add -parallel=1 on a small machine); the default caps the minimisation
# of each new input at 10 s instead of 60 s, which otherwise takes most of
# FuzzEval's time. A failing input is written to the package's
# testdata/fuzz/ and stops the run.
FUZZTIME ?= 10m
FUZZFLAGS ?= -fuzzminimizetime=10s

fuzz:
	@set -e; grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do \
		dir=$$(dirname "$$file"); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "make fuzz: $$name in $$dir for $(FUZZTIME)"; \
			$(GO) test "$$dir" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS); \
		done; \
	done

check: validate-modules
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

validate-modules:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

# ---------------------------------------------------------------------------
# The CUDA backend (gpu/cuda, build tag cuda). `gpu` needs the CUDA toolkit
# (nvcc, cuda.h, libcuda; ../shared/tools/install-cuda-toolkit installs
# Debian's 11.8) and installs nothing. It compiles the interpreter
# (csrc/interp.cu) into sm_80 and sm_90 cubins and a compute_90 PTX,
# writes ptxas's resource usage to build/ptxas-report.txt, copies the
# images to gpu/cuda/kernels/ (embedded by the package) and builds the
# cuda-tagged binary bin/mscclgo-cuda.

NVCC ?= nvcc
CC ?= cc
CXX ?= g++
NVCCFLAGS := -std=c++17 -O3 -I csrc -Xptxas -v
KERNEL_SRC := csrc/interp.cu $(wildcard csrc/mscclgo/*.h csrc/mscclgo/*.cuh)
KERNELS := gpu/cuda/kernels/interp_sm80.cubin gpu/cuda/kernels/interp_sm90.cubin gpu/cuda/kernels/interp_compute90.ptx
FAKECUDA := build/fakecuda

gpu: check-nvcc build/ptxas-report.txt $(KERNELS)
	$(GO) build -tags cuda -o bin/mscclgo-cuda .

check-nvcc:
	@command -v $(NVCC) >/dev/null 2>&1 || { \
		echo "make gpu: $(NVCC) not found. The CUDA backend needs the CUDA toolkit (nvcc, cuda.h, libcuda):" >&2; \
		echo "  run ../shared/tools/install-cuda-toolkit, or set NVCC=/path/to/nvcc." >&2; \
		echo "  Nothing was built. The rest of the project (make build, make test) needs no toolkit." >&2; \
		exit 1; }
	@test -f /usr/include/cuda.h -o -f /usr/local/cuda/include/cuda.h || { \
		echo "make gpu: cuda.h not found (in /usr/include or /usr/local/cuda/include): install the CUDA toolkit" >&2; exit 1; }

.PHONY: check-nvcc

# One cubin per architecture; nvcc writes ptxas's -v report to stderr,
# which goes to build/ptxas-ARCH.log (and the terminal).
build/interp_sm%.cubin build/ptxas-sm%.log: $(KERNEL_SRC) | check-nvcc
	@mkdir -p build
	$(NVCC) $(NVCCFLAGS) -gencode arch=compute_$*,code=sm_$* -cubin -o build/interp_sm$*.cubin csrc/interp.cu \
		2> build/ptxas-sm$*.log || { cat build/ptxas-sm$*.log >&2; exit 1; }
	@cat build/ptxas-sm$*.log

# PTX for the driver's JIT on devices newer than sm_90 (ptxas does not
# run). It holds the NVLS multimem path (-DMSCCLGO_MULTIMEM), which needs
# PTX ISA 8.1: CUDA 11.8 writes 7.8 and its ptxas cannot assemble
# multimem, so the header is raised for the driver's JIT.
build/interp_compute90.ptx: $(KERNEL_SRC) | check-nvcc
	@mkdir -p build
	$(NVCC) $(NVCCFLAGS) -DMSCCLGO_MULTIMEM -arch=compute_90 -ptx -o $@.tmp csrc/interp.cu
	sed -E 's/^\.version [0-7]\.[0-9]+$$/.version 8.1/' $@.tmp > $@ && rm -f $@.tmp
	@grep -q '^\.version 8\.1$$' $@ || { echo "make gpu: could not set PTX ISA 8.1 in $@" >&2; exit 1; }

gpu/cuda/kernels/%: build/%
	cp $< $@

# The report: one row per kernel and architecture, then ptxas's own lines.
define PTXAS_AWK
/Compiling entry function/ { split($$0, q, "'"); kernel = q[2]; arch = q[4]; stack = st = ld = 0 }
/bytes stack frame/ { stack = $$1; st = $$5; ld = $$9 }
/Used [0-9]+ registers/ {
  smem = 0
  for (i = 1; i <= NF; i++) if ($$i ~ /^smem/) smem = $$(i - 2)
  printf "%-8s %-16s %9s %7s %12s %11s %6s\n", arch, kernel, $$5, stack, st, ld, smem
}
endef
export PTXAS_AWK

build/ptxas-report.txt: build/ptxas-sm80.log build/ptxas-sm90.log
	@{ echo "# ptxas resource usage of csrc/interp.cu ($$($(NVCC) --version | tail -1))"; \
	  echo "# stack, spills and smem in bytes; smem is static shared memory (the interpreter's is dynamic)"; \
	  printf '%-8s %-16s %9s %7s %12s %11s %6s\n' arch kernel registers stack spill-stores spill-loads smem; \
	  awk "$$PTXAS_AWK" $^; echo; \
	  for f in $^; do echo "## $$f"; grep -v '^$$' $$f; done; } > $@.tmp
	@mv $@.tmp $@
	@cat $@

# The audit of the cubins' machine code (gpu/sass, docs/gpu.md §16): every
# loop of every entry, its loads and stores per 16 B moved (width, space,
# scope), instructions per 16 B, the spills of build/ptxas-sm*.log. It
# fails, naming entry, loop and instruction, on a spill, on a Simple-
# protocol data loop with an access narrower than 128 bits, a generic
# (not global) access or a strong store, and on a packet loop with a
# generic access (CI runs it so). REPORT=1 prints the same but exits 0;
# DOC=1 also rewrites the table in docs/gpu.md.
# The table is written to build/gpu-sass.md, the costs summary that the
# model of this kernel reads (docs/model.md) to build/gpu-sass-costs.tsv.
REPORT ?=
DOC ?=
GPU_SASS_CUBINS := build/interp_sm80.cubin build/interp_sm90.cubin

gpu-sass: build/ptxas-report.txt $(GPU_SASS_CUBINS)
	@$(GO) run ./gpu/sass/cmd/gpu-sass $(if $(filter 1,$(REPORT)),-report) -costs build/gpu-sass-costs.tsv \
		$(if $(filter 1,$(DOC)),-doc docs/gpu.md -note "Generated by \`make gpu-sass DOC=1\` on $$(date -u +%Y-%m-%d) with nvcc $$($(NVCC) --version | grep -o 'V[0-9.]*' | tail -1).") \
		$(GPU_SASS_CUBINS) > build/gpu-sass.md.tmp; st=$$?; cat build/gpu-sass.md.tmp; mv build/gpu-sass.md.tmp build/gpu-sass.md; exit $$st

# The fake libcuda.so.1 and the g++-built kernel it runs (gpu/cuda tests).
fakecuda: $(FAKECUDA)/libcuda.so.1 $(FAKECUDA)/libmscclgo_host.so

$(FAKECUDA)/libcuda.so.1: gpu/cuda/testdata/fakecuda/fakecuda.c
	@mkdir -p $(FAKECUDA)
	$(CC) -std=c11 -O2 -Wall -Wextra -fPIC -shared -Wl,-soname,libcuda.so.1 -I/usr/local/cuda/include -o $@ $< -ldl

$(FAKECUDA)/libmscclgo_host.so: csrc/host/kernel.cc csrc/host/launch.cc csrc/host/launch.h csrc/host/cuda_host.h $(KERNEL_SRC)
	@mkdir -p $(FAKECUDA)
	$(CXX) -std=c++20 -O2 -Wall -Wextra -pthread -fPIC -shared -I csrc -o $@ csrc/host/kernel.cc

# The cuda-tagged tests on the fake driver: the unchanged gorgonia.org/cu
# and gpu/cuda run the g++-built interpreter on host threads.
# Last, end to end: the default binary hands --backend gpu over to
# bin/mscclgo-cuda, which runs a plan (and an alltoallv plan with MoE
# counts) through cu and checks the results.
gpu-test: gpu fakecuda build
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		$(GO) test -count=1 -tags cuda ./gpu/cuda/...
	@# The NCCL library's cuda-tagged build: every collective's data checks
	@# through gpu/cuda on four fake devices, ranks as threads of one
	@# process and as 2 and 4 processes (buffers registered by IPC handle),
	@# and a call captured into a graph (global mode) and replayed; four
	@# processes on two pretend hosts (MSCCLGO_HOST), two fake devices each.
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		$(GO) test -count=1 -tags cuda ./nccl -run 'TestDevice(Runs|Procs|Capture|Sweep|Mixed|Sessions)CUDA|TestHostsCUDA'
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		bin/mscclgo run tests/ports/single_node/allreduce.plan.json --backend gpu --threads 4 -b 4K -e 64K -f 4 -n 2
	@# One process on a fake machine of four GPUs: rank r on device r mod 4,
	@# peer access between them; on eight with multicast, an NVLS plan's
	@# switch channels get multicast objects (the fake kernel falls back).
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so MSCCLGO_FAKECUDA_DEVICES=4 \
		bin/mscclgo run tests/ports/single_node/allreduce.plan.json --backend gpu --threads 4 -b 4K -e 16K -f 4 -n 2
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so MSCCLGO_FAKECUDA_DEVICES=8 \
		MSCCLGO_FAKECUDA_MULTICAST=1 bin/mscclgo run tests/ports/single_node/allreduce_nvls_zero_copy.plan.json --backend gpu \
		--threads 4 -b 16K -e 16K -n 2
	@# One process per rank on the CUDA backend (torchrun's variables), on a
	@# fake machine of two GPUs, one each: each opens its peer's buffers,
	@# scratch and counters with cuIpcOpenMemHandle (memory files of
	@# another process on the fake driver).
	@set -e; port=$$((20000 + $$$$ % 20000)); pids=; \
	for r in 0 1; do \
		RANK=$$r WORLD_SIZE=2 LOCAL_RANK=$$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$$port \
		MSCCLGO_FAKECUDA_DEVICES=2 \
		LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		bin/mscclgo run tests/ports/single_node/allgather.plan.json --backend gpu --threads 2 -d float -b 4K -e 64K -f 4 -n 2 \
			> $(FAKECUDA)/rank$$r.log 2>&1 & pids="$$pids $$!"; \
	done; st=0; for p in $$pids; do wait $$p || st=1; done; \
	cat $(FAKECUDA)/rank0.log; test $$st = 0 || { cat $(FAKECUDA)/rank1.log; exit 1; }
	@# Two processes on the one GPU of a fake machine: every rank refuses
	@# at set-up, with the reason, well within the join timeout.
	@set -e; port=$$((20000 + ($$$$ + 7) % 20000)); pids=; \
	for r in 0 1; do \
		RANK=$$r WORLD_SIZE=2 LOCAL_RANK=$$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$$port \
		LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		timeout 60 bin/mscclgo run tests/ports/single_node/allgather.plan.json --backend gpu --threads 2 -d float -b 4K -e 4K -n 1 \
			--join-timeout 20s > $(FAKECUDA)/shared$$r.log 2>&1 & pids="$$pids $$!"; \
	done; for p in $$pids; do if wait $$p; then echo "make gpu-test: two processes on one GPU ran instead of being refused" >&2; exit 1; fi; done; \
	for r in 0 1; do grep -q "different processes on the same GPU" $(FAKECUDA)/shared$$r.log || \
		{ echo "make gpu-test: rank $$r was not refused with the reason:" >&2; cat $(FAKECUDA)/shared$$r.log >&2; exit 1; }; done; \
	echo "two processes on one GPU: refused"; head -3 $(FAKECUDA)/shared0.log
	@# The differential over every 8th plan found (make gpu-check runs all).
	@LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so MSCCLGO_GPU_CHECK=8 \
		$(GO) test -count=1 -tags cuda ./gpu/cuda -run '^TestGPUCheck$$' -v > $(FAKECUDA)/gpu-check.log 2>&1; st=$$?; \
		grep -E '^gpu-check|^(ok|FAIL)|--- FAIL|^ +check_test' $(FAKECUDA)/gpu-check.log; exit $$st
	LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		bin/mscclgo run alltoallv -D world_size=4 --counts moe --backend gpu --threads 4 -n 2

# Every plan found (reference, project, default set) in three dtypes and
# LL16/LL8 against the CPU backend, one plan at a time, one line each and
# a summary (gpu/cuda/check_test.go). On a machine with a GPU: build the
# test binary here (go test -c -tags cuda ./gpu/cuda) and run it there
# with MSCCLGO_GPU_CHECK=all; without one it runs on the fake driver.
gpu-check: gpu fakecuda
	@LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so MSCCLGO_GPU_CHECK=all \
		$(GO) test -count=1 -timeout 60m -tags cuda ./gpu/cuda -run '^TestGPUCheck$$' -v > $(FAKECUDA)/gpu-check.log 2>&1; st=$$?; \
		grep -E '^gpu-check|^(ok|FAIL)|--- FAIL|^ +check_test' $(FAKECUDA)/gpu-check.log; exit $$st

# The host-mapped access bound of the emulated device (gpu/emu
# TestHostAccesses) for every plan at 1, 4, 32 and 1024 threads per
# block; go test ./... runs the wide block sizes on every 16th plan only.
# About four minutes on two cores.
gpu-hostaccess:
	MSCCLGO_HOSTACCESS=all $(GO) test -count=1 -timeout 30m ./gpu/emu -run '^TestHostAccesses$$'

# The differential test of the emulated device with the kernel, the
# runtime's C side and the proxy's copies built under ThreadSanitizer
# (optional; about ten minutes). Plans the CPU backend finds racy or
# deadlocked are skipped; any report fails the run.
gpu-tsan:
	MSCCLGO_TSAN=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
	CGO_CXXFLAGS="-fsanitize=thread -g -O1" CGO_LDFLAGS="-fsanitize=thread" \
		$(GO) test -count=1 -timeout 60m ./gpu/emu -run 'TestDifferential|TestUnseenPlans'

# The GPU benchmark, for a machine with a GPU: device copy bandwidth, the
# PyTorch equivalents, the kernel time of 8-rank allreduce and allgather
# plans at 1024/256/128/64 threads per block, back-to-back launches with
# and without a graph, then the cuda-tagged tests (gpu/bench/run.sh). Build
# bin/ where Go and the toolkit are (make build gpu, and
# go test -c -tags cuda -o bin/cuda.test ./gpu/cuda) and carry it.
gpu-bench:
	bash gpu/bench/run.sh

# One command for a lent GPU (docs/gpu.md §15). device-prep fills
# build/device/ with what scripts/device-check.sh runs there, built here
# (binaries xz-compressed, plans, the script): carry that folder with the
# device tool and run bash scripts/device-check.sh; the report and the logs
# go to $$OUT (else build/device-report). make device-check runs both here,
# for a machine with a GPU; DRY=1 runs the same script on the fake driver
# with small sizes and checks that report.md lists every step (CI).
DEVICE_STEPS := device bench gpu-check nccl torch nvls
DRY ?=

device-prep: build gpu fakecuda
	bash scripts/device-prep.sh build/device

device-check: device-prep
ifeq ($(DRY),1)
	@rm -rf build/device-report-dry
	DRY=1 OUT= LD_LIBRARY_PATH=$(CURDIR)/$(FAKECUDA) MSCCLGO_FAKE_KERNEL_LIB=$(CURDIR)/$(FAKECUDA)/libmscclgo_host.so \
		bash scripts/device-check.sh build/device-report-dry
	@for s in $(DEVICE_STEPS); do grep -q "^| $$s | " build/device-report-dry/report.md || \
		{ echo "make device-check DRY=1: report.md lists no step $$s" >&2; exit 1; }; done
	@n=$$(ls build/device-report-dry | wc -l); [ $$n -le 8 ] || { echo "make device-check DRY=1: $$n files written, want at most 8" >&2; exit 1; }
	@echo "make device-check DRY=1: report.md lists every step ($(DEVICE_STEPS))"
else
	bash scripts/device-check.sh
endif
