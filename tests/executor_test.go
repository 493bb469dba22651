package tests

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// TestReferencePlansRun runs every reference plan that the MSCCL++ loader
// accepts on the CPU backend at three message sizes of its range, with
// race detection: collectives must give correct results (or be reported as
// a race, with both positions); test plans, which have no defined result,
// must only run without panicking, and their deadlocks and races are
// logged.
func TestReferencePlansRun(t *testing.T) {
	t.Parallel()
	sharedAvailable(t)
	files, err := filepath.Glob(filepath.Join(sharedGolden, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := executor.LoadFile(file)
			if err != nil {
				if errors.Is(err, plan.ErrUnknownOp) && strings.Contains(err.Error(), "glre") {
					t.Skipf("rejected like the MSCCL++ loader: %v", err)
				}
				t.Fatal(err)
			}
			sizes := harness.CheckSizes(p, executor.Float16, 1<<20, 3)
			if len(sizes) == 0 {
				t.Fatalf("no valid message size in [%d, %d]", p.MinMessageSize, p.MaxMessageSize)
			}
			for _, size := range sizes {
				_, err := harness.Run(context.Background(), harness.Config{Backend: cpu.New(), Plan: p, Sizes: []uint64{size}, DType: executor.Float16, InPlace: p.Inplace, Iters: 2, Options: executor.Options{Race: true}, Strict: true})
				var race *executor.RaceError
				var dead *executor.DeadlockError
				switch {
				case err == nil:
				case errors.As(err, &race):
					if len(race.Races) == 0 || race.Races[0].A.Op == "" || race.Races[0].B.Op == "" {
						t.Errorf("size %d: race without both positions: %v", size, err)
					}
					t.Logf("size %d: %v", size, err)
				case p.Collective == "test" && errors.As(err, &dead):
					t.Logf("size %d (test plan, no defined result): %v", size, firstLine(err))
				default:
					t.Errorf("size %d: %v", size, err)
				}
			}
		})
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
