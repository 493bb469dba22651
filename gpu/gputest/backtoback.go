package gputest

// backtoback.go is the benchmark of back-to-back launches of one GPU
// session: the host path between launches (table updates, launch, wait).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/plan"
)

// BackToBack launches plan at size (float16, the plan's buffer mode) once
// on be, then b.N times back to back with gpu.Relauncher. ns/op is the
// wall time per launch; it also reports kernel-us, the mean kernel time,
// and wall-kernel-us, their difference (the host path's cost per call).
func BackToBack(b *testing.B, be executor.Backend, p *plan.Plan, size uint64) {
	l, err := executor.PlanLayout(p, size, executor.Float16, p.Inplace)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		b.Fatal(err)
	}
	s, err := be.Open(inst, executor.Options{DType: executor.Float16, DeadlockTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(context.Background(), l.Alloc()); err != nil {
		b.Fatal(err)
	}
	r, ok := s.(gpu.Relauncher)
	if !ok {
		b.Fatalf("%s: the session cannot relaunch", be.Name())
	}
	b.ResetTimer()
	wall, kernel, err := r.Relaunch(context.Background(), b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(kernel.Nanoseconds())/1e3, "kernel-us")
	b.ReportMetric(float64((wall-kernel).Nanoseconds())/1e3, "wall-kernel-us")
}

// BenchEnv reads the benchmark's plan, size and block size from
// MSCCLGO_BENCH_PLAN (a plan file), MSCCLGO_BENCH_SIZE (bytes) and
// MSCCLGO_BENCH_THREADS (0: the backend's default); ok is false when
// MSCCLGO_BENCH_PLAN is unset.
func BenchEnv() (p *plan.Plan, size uint64, threads int, ok bool, err error) {
	file := os.Getenv("MSCCLGO_BENCH_PLAN")
	if file == "" {
		return nil, 0, 0, false, nil
	}
	p, err = executor.LoadFile(file)
	if err != nil {
		return nil, 0, 0, true, err
	}
	size, err = strconv.ParseUint(os.Getenv("MSCCLGO_BENCH_SIZE"), 10, 64)
	if err != nil {
		return nil, 0, 0, true, fmt.Errorf("MSCCLGO_BENCH_SIZE: %w", err)
	}
	if t := os.Getenv("MSCCLGO_BENCH_THREADS"); t != "" {
		if threads, err = strconv.Atoi(t); err != nil {
			return nil, 0, 0, true, fmt.Errorf("MSCCLGO_BENCH_THREADS: %w", err)
		}
	}
	return p, size, threads, true, nil
}
