package algorithms

// alltoallv_gpu_test.go runs the alltoallv programs of varTestPlans over
// the counts matrices of varTestMatrices on the emulated GPU (the
// g++-built kernel, which resolves every operand from a per-call table)
// and on the CPU backend, and requires identical bytes in every buffer
// and the direct all-to-all-v's result; and benchmarks gpu-emu against
// the CPU backend.

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
	"github.com/mscclgo/mscclgo/harness"
)

// emuBackend is the emulated GPU with threads threads per block.
func emuBackend(threads int) executor.Backend {
	return gpu.New(gpu.Config{Name: "gpu-emu", Open: emu.Open, Threads: threads})
}

// varRun launches sess on fresh buffers of c (fill seq) and checks them
// against the direct all-to-all-v.
func varRun(sess executor.Session, c *executor.Counts, elem, seq int) ([]executor.RankBuffers, error) {
	bufs := harness.VarBuffers(c, elem)
	harness.FillVar(bufs, seq)
	if err := sess.Launch(context.Background(), bufs); err != nil {
		return nil, err
	}
	if _, err := harness.CheckVar(bufs, c, elem, seq); err != nil {
		return nil, err
	}
	return bufs, nil
}

// sameBuffers returns an error naming the first byte where a and b
// differ.
func sameBuffers(a, b []executor.RankBuffers) error {
	for r := range a {
		for _, p := range []struct {
			name string
			x, y []byte
		}{{"input", a[r].Input, b[r].Input}, {"output", a[r].Output, b[r].Output}} {
			if bytes.Equal(p.x, p.y) {
				continue
			}
			if len(p.x) != len(p.y) {
				return fmt.Errorf("rank %d %s: %d bytes vs %d", r, p.name, len(p.x), len(p.y))
			}
			for i := range p.x {
				if p.x[i] != p.y[i] {
					return fmt.Errorf("rank %d %s byte %d: gpu-emu %#02x, cpu %#02x", r, p.name, i, p.x[i], p.y[i])
				}
			}
		}
	}
	return nil
}

// TestAllToAllVGPUEmu runs every plan of varTestPlans with every matrix
// of varTestMatrices, in float16 and float32, on gpu-emu and on the CPU
// backend. The GPU session of a plan stays open across matrices (it is
// reopened only when a Bind grows the scratch), so each launch's regions
// and pipeline iterations come from the table written for that call.
func TestAllToAllVGPUEmu(t *testing.T) {
	if !emu.Available {
		t.Skip("gpu-emu is not in this build (cgo and g++ build it)")
	}
	t.Parallel()
	for _, pl := range varTestPlans() {
		for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
			t.Run(fmt.Sprintf("%s/%s", pl.name, dt.Name()), func(t *testing.T) {
				t.Parallel()
				plan := evalVarPlan(t, pl.file, pl.src, pl.defines)
				vp, err := executor.NewVarPlan(plan)
				if err != nil {
					t.Fatal(err)
				}
				opts := executor.Options{DType: dt}
				elem := dt.Size()
				var sess executor.Session
				var opened uint64
				defer func() {
					if sess != nil {
						sess.Close()
					}
				}()
				for seq, m := range varTestMatrices() {
					c := executor.MatrixCounts(m.m(len(plan.GPUs)))
					inst, err := vp.Bind(c, elem)
					if err != nil {
						t.Fatalf("%s: %v", m.name, err)
					}
					cs, err := cpu.New().Open(inst, opts)
					if err != nil {
						t.Fatalf("%s: %v", m.name, err)
					}
					want, err := varRun(cs, c, elem, seq)
					cs.Close()
					if err != nil {
						t.Fatalf("%s: cpu: %v", m.name, err)
					}
					if sess == nil || inst.ScratchBytes > opened {
						if sess != nil {
							sess.Close()
						}
						if sess, err = emuBackend(3).Open(inst, opts); err != nil {
							t.Fatalf("%s: %v", m.name, err)
						}
						opened = inst.ScratchBytes
					}
					got, err := varRun(sess, c, elem, seq)
					if err != nil {
						t.Fatalf("%s: gpu-emu: %v", m.name, err)
					}
					if err := sameBuffers(got, want); err != nil {
						t.Errorf("%s: %v", m.name, err)
					}
				}
			})
		}
	}
}

// BenchmarkAllToAllVGPUEmu compares, at 8 ranks and 4 MiB sent in all
// (float32, alltoallv.star), the emulated GPU (every CUDA thread a host
// thread, 8 per block, the buffers copied to and from its memory on every
// launch) against the CPU backend, with uniform and MoE counts: ratio =
// time of gpu-emu / cpu; and gpu-emu's alltoallv with uniform counts
// against the static alltoall plan of the same bytes on gpu-emu.
func BenchmarkAllToAllVGPUEmu(b *testing.B) {
	if !emu.Available {
		b.Skip("gpu-emu is not in this build (cgo and g++ build it)")
	}
	const n, total = 8, 4 << 20
	plan := evalVarPlan(b, "alltoallv.star", "", map[string]string{"world_size": "8"})
	moe, err := executor.CountsFor("moe:experts=16,topk=2,tokens=1024,hidden=64,seed=1", n)
	if err != nil {
		b.Fatal(err)
	}
	uniform := executor.MatrixCounts(executor.UniformMatrix(n, total/4/(n*n)))
	for _, c := range []struct {
		name   string
		counts *executor.Counts
	}{{"uniform", uniform}, {"moe", moe}} {
		b.Run("cpu/"+c.name, func(b *testing.B) { benchVarBackend(b, cpu.New(), plan, c.counts) })
		b.Run("gpu-emu/"+c.name, func(b *testing.B) { benchVarBackend(b, emuBackend(0), plan, c.counts) })
	}
	// The cost of the emulation itself: the static alltoall plan of the
	// same bytes on gpu-emu (ratio = alltoallv uniform / this).
	b.Run("gpu-emu/alltoall-static", func(b *testing.B) {
		static := evalVarPlan(b, "alltoall.star", "", map[string]string{"world_size": "8"})
		layout, err := executor.PlanLayout(static, total/n, executor.Float32, false)
		if err != nil {
			b.Fatal(err)
		}
		inst, err := executor.Instantiate(static, layout.Sizes)
		if err != nil {
			b.Fatal(err)
		}
		sess, err := emuBackend(0).Open(inst, executor.Options{DType: executor.Float32})
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		bufs := layout.Alloc()
		b.SetBytes(total)
		b.ResetTimer()
		for range b.N {
			if err := sess.Launch(context.Background(), bufs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
