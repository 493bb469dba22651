//go:build cgo

package emu

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/testnote"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// tsan is set by `make gpu-tsan`, which builds the kernel with
// ThreadSanitizer: plans the CPU backend finds racy are not run there.
var tsan = os.Getenv("MSCCLGO_TSAN") != ""

// sharedGolden holds the MSCCL++ reference plans, beside the checkout.
const sharedGolden = "../../../shared/golden"

// TestMain says, before any test runs, when the MSCCL++ reference plans
// are missing, so that TestDifferential's smaller corpus and TestQuick's
// skip are seen without -v.
func TestMain(m *testing.M) {
	flag.Parse()
	if g, _ := filepath.Glob(filepath.Join(sharedGolden, "*.json")); len(g) == 0 {
		testnote.Announce("gpu/emu: ../shared/golden not found: the MSCCL++ reference plans are not run through the emulated kernel (the project's golden plans are)")
	}
	os.Exit(testnote.Run(m, "gpu/emu"))
}

func backend(threads int) executor.Backend {
	return gpu.New(gpu.Config{Name: "gpu-emu", Open: Open, Threads: threads})
}

// planFiles returns the reference plans (when ../shared is there) and the
// project's golden plans.
func planFiles(t *testing.T) []string {
	var files []string
	if g, err := filepath.Glob(filepath.Join(sharedGolden, "*.json")); err == nil {
		files = append(files, g...)
	}
	if len(files) == 0 {
		t.Logf("no reference plans in %s: running the project's golden plans only", sharedGolden)
	}
	err := filepath.WalkDir("../../tests", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".plan.json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDifferential runs every reference plan and every project golden
// plan through the emulated device (the g++-built kernel) and through the
// CPU backend with the same inputs, and requires identical bytes in every
// rank's buffers after every launch: at three valid sizes in each of
// float16, bfloat16, float32 and int32; with LL16 and LL8 packets; in the
// plan's own buffer mode, and in the other where the plan allows it (see
// matrix: a plan run in a mode it was not written for aliases buffers it
// does not expect, and the races within a block that follow, which the
// CPU backend cannot see, have no defined result).
// Plans the CPU backend reports as deadlocked must end with the
// watchdog's report (after 250 ms of no progress: the CPU backend has
// already waited out the 2 s).
func TestDifferential(t *testing.T) {
	files := planFiles(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := executor.LoadFile(file)
			if err != nil {
				if errors.Is(err, plan.ErrUnknownOp) {
					t.Skipf("rejected like the MSCCL++ loader: %v", err)
				}
				if strings.Contains(err.Error(), "data after the plan's JSON object") {
					t.Skipf("several plans in one file: %v", err)
				}
				t.Fatal(err)
			}
			runMatrix(t, p)
		})
	}
}

// matrix lists the cases of one plan: three valid sizes in each of
// float16, bfloat16, float32 and int32 with LL16 packets, the same with
// LL8 when the plan has packet ops (otherwise LL8 once, at the smallest
// float16 size); under ThreadSanitizer one size per type. Then the other
// buffer mode (in place for an out-of-place plan and the reverse) at one
// size, when the CPU backend gives right results in it without races.
func matrix(p *plan.Plan) []gputest.Case {
	var cases []gputest.Case
	add := func(size uint64, dt executor.ElemType, ll8, inPlace bool) {
		cases = append(cases, gputest.Case{Plan: p, Size: size, DType: dt, InPlace: inPlace, LL8: ll8, Launches: 2,
			Timeout: 2 * time.Second, DeadlockTimeout: 250 * time.Millisecond, SkipRacy: tsan})
	}
	packets := usesPackets(p)
	nsizes := 3
	if tsan {
		nsizes = 1
	}
	for _, dt := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32} {
		for i, size := range harness.CheckSizes(p, dt, 1<<15, nsizes) {
			add(size, dt, false, p.Inplace)
			if packets || (dt == executor.Float16 && i == 0) {
				add(size, dt, true, p.Inplace)
			}
		}
	}
	// The other buffer mode, where the plan allows it: a collective whose
	// results are right in that mode on the CPU backend, without races.
	if sizes := harness.CheckSizes(p, executor.Float16, 1<<15, 1); len(sizes) > 0 && p.Collective != "test" && !tsan {
		_, err := harness.Run(context.Background(), harness.Config{Backend: cpu.New(), Plan: p, Sizes: []uint64{sizes[0]}, DType: executor.Float16, InPlace: !p.Inplace, Iters: 1, Options: executor.Options{Race: true}, Strict: true})
		if err == nil {
			add(sizes[0], executor.Float16, false, !p.Inplace)
		}
	}
	return cases
}

// usesPackets reports whether a plan has LL packet ops (whose layout
// LL8 changes).
func usesPackets(p *plan.Plan) bool {
	var walk func(ops []plan.Op) bool
	walk = func(ops []plan.Op) bool {
		for _, op := range ops {
			switch op.Type {
			case plan.OpCopyPacket, plan.OpUnpackPacket, plan.OpPutPacket, plan.OpReadPutPacket, plan.OpReducePacket, plan.OpReduceSendPacket, plan.OpReduceCopyPacket, plan.OpReduceCopySendPacket, plan.OpMultiStorePacket:
				return true
			}
			if walk(op.Ops) {
				return true
			}
		}
		return false
	}
	for _, g := range p.GPUs {
		for _, tb := range g.ThreadBlocks {
			if walk(tb.Ops) {
				return true
			}
		}
	}
	return false
}

func runMatrix(t *testing.T, p *plan.Plan) {
	threads := 1 + int(len(p.Name))%4 // 1 to 4 threads per block: every partitioning
	for _, c := range matrix(p) {
		out, err := gputest.Run(context.Background(), backend(threads), c)
		switch {
		case err != nil:
			t.Errorf("%s (%d threads): %v", c, threads, err)
		case out == gputest.Deadlock:
			if p.Collective != "test" {
				t.Errorf("%s: collective plan deadlocks on both backends", c)
			}
			t.Logf("%s: deadlock on both backends (watchdog report)", c)
			return
		case out == gputest.Racy:
			t.Logf("%s %s: racy plan (the CPU backend reports a race): outputs not compared", p.Name, c)
		}
	}
}

// TestQuick runs one plan (MG_PLAN, default allreduce__ngpus-2).
func TestQuick(t *testing.T) {
	name := os.Getenv("MG_PLAN")
	if name == "" {
		name = "allreduce__ngpus-2"
	}
	plan, err := executor.LoadFile(filepath.Join(sharedGolden, name+".json"))
	if err != nil {
		t.Skip(err)
	}
	runMatrix(t, plan)
}

// unseen are shapes of the bundled algorithms that no golden file holds:
// odd rank counts, other instance counts, small multi-node layouts. Their
// plans are compiled here and run through the kernel like the goldens.
var unseen = []algorithms.Job{
	{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "3", "instances": "2"}},
	{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "5"}},
	{Algorithm: "allreduce_rsag", Params: map[string]string{"world_size": "3", "nblocks": "3", "min_message_size": "0"}},
	{Algorithm: "allreduce_rsag", Params: map[string]string{"world_size": "6", "nblocks": "2", "instances": "2", "min_message_size": "0"}},
	{Algorithm: "allreduce_nvls", Params: map[string]string{"world_size": "3", "instances": "2", "min_message_size": "0"}},
	{Algorithm: "allgather", Params: map[string]string{"world_size": "5", "instances": "2"}},
	{Algorithm: "allgather", Params: map[string]string{"world_size": "3", "inplace": "false"}},
	{Algorithm: "reducescatter", Params: map[string]string{"world_size": "6", "nblocks": "3"}},
	{Algorithm: "alltoall", Params: map[string]string{"world_size": "5", "instances": "2"}},
	{Algorithm: "allreduce_hier", Params: map[string]string{"world_size": "6", "ranks_per_node": "3", "instances": "1", "min_message_size": "0"}},
	{Algorithm: "allreduce_hier_packet", Params: map[string]string{"world_size": "4", "ranks_per_node": "2", "min_message_size": "0"}},
	{Algorithm: "allgather_hier", Params: map[string]string{"world_size": "6", "ranks_per_node": "2"}},
	{Algorithm: "reducescatter_hier", Params: map[string]string{"world_size": "4", "ranks_per_node": "2", "instances": "2"}},
}

// TestUnseenPlans compiles the bundled algorithms at shapes outside every
// golden and default set and runs them through the kernel as
// TestDifferential runs the goldens.
func TestUnseenPlans(t *testing.T) {
	for _, job := range unseen {
		t.Run(job.String(), func(t *testing.T) {
			t.Parallel()
			res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), job.Algorithm+".star", starlib.Options{Defines: job.Params})
			if err != nil {
				t.Fatal(err)
			}
			for _, prog := range res.Programs {
				text, err := prog.Plan()
				if err != nil {
					t.Fatal(err)
				}
				p, err := plan.Load(text)
				if err != nil {
					t.Fatal(err)
				}
				runMatrix(t, p)
			}
		})
	}
}
