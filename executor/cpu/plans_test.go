package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// portPlans are the project's plans: the ports of MSCCL++'s DSL examples
// and unit tests, and the testdata programs.
func portPlans(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("../../tests", func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".plan.json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no plans under tests/")
	}
	return files
}

// instantiate picks the smallest of a few message sizes the plan accepts.
func instantiate(p *plan.Plan, dt executor.Numeric) (*harness.Layout, *executor.Instance, error) {
	var last error
	for _, size := range []uint64{1 << 14, 1 << 16, 1 << 18, 1 << 20, 3 << 20} {
		lay, err := harness.PlanLayout(p, size, dt, p.Inplace)
		if err != nil {
			last = err
			continue
		}
		inst, err := executor.Instantiate(p, lay.Sizes)
		if err != nil {
			last = err
			continue
		}
		return lay, inst, nil
	}
	return nil, nil, last
}

// TestPortPlans runs every plan of the project for three launches (flags
// 1-3, both double-scratch halves), with LL16 and LL8 packets, with and
// without race detection. Collectives with a defined result must be
// correct and race-free. Test plans without a result must run or end in a
// deadlock or race report (some unit-test plans read packets nobody
// writes, or race on purpose): any other error is a bug.
func TestPortPlans(t *testing.T) {
	t.Parallel()
	for _, file := range portPlans(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(file), "../../tests/"), ".plan.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := executor.LoadFile(file)
			if err != nil && !plan.IsWarning(err) {
				t.Skipf("not loadable: %v", err)
			}
			lay, inst, err := instantiate(p, executor.Float32)
			if err != nil {
				t.Skipf("no message size: %v", err)
			}
			for _, mode := range []struct {
				ll8, race bool
			}{{false, false}, {true, false}, {false, true}, {true, true}} {
				sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float32, LL8: mode.ll8, Race: mode.race, DeadlockTimeout: 10 * time.Second})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				bufs := lay.Alloc()
				for seq := 0; seq < 3; seq++ {
					lay.FillInputs(bufs, seq)
					err := sess.Launch(context.Background(), bufs)
					var de *executor.DeadlockError
					var re *executor.RaceError
					switch {
					case err == nil:
					case !lay.Checked() && errors.As(err, &de):
						t.Logf("LL8=%v race=%v: %v", mode.ll8, mode.race, err)
					case !lay.Checked() && errors.As(err, &re):
						t.Logf("LL8=%v race=%v: %v", mode.ll8, mode.race, err)
						continue
					default:
						t.Fatalf("LL8=%v race=%v launch %d: %v", mode.ll8, mode.race, seq, err)
					}
					if err != nil {
						break
					}
					if !lay.Checked() {
						continue
					}
					wrong, err := lay.Check(bufs, seq)
					if err != nil {
						t.Fatal(err)
					}
					for r, n := range wrong {
						if n != 0 {
							t.Errorf("LL8=%v race=%v launch %d: rank %d: %d wrong elements", mode.ll8, mode.race, seq, r, n)
						}
					}
				}
				sess.Close()
			}
		})
	}
}

// TestAllreduceTypes runs the allreduce ports with every data type.
func TestAllreduceTypes(t *testing.T) {
	t.Parallel()
	for _, file := range portPlans(t) {
		if !strings.Contains(file, "allreduce") {
			continue
		}
		for _, dt := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32} {
			t.Run(fmt.Sprintf("%s/%s", filepath.Base(file), dt), func(t *testing.T) {
				t.Parallel()
				p, err := executor.LoadFile(file)
				if err != nil && !plan.IsWarning(err) {
					t.Fatal(err)
				}
				lay, inst, err := instantiate(p, dt)
				if err != nil {
					t.Fatal(err)
				}
				sess, err := cpu.New().Open(inst, executor.Options{DType: dt})
				if err != nil {
					t.Fatal(err)
				}
				defer sess.Close()
				bufs := lay.Alloc()
				lay.FillInputs(bufs, 7)
				if err := sess.Launch(context.Background(), bufs); err != nil {
					t.Fatal(err)
				}
				wrong, err := lay.Check(bufs, 7)
				if err != nil {
					t.Fatal(err)
				}
				for r, n := range wrong {
					if n != 0 {
						t.Errorf("rank %d: %d wrong elements", r, n)
					}
				}
			})
		}
	}
}

// TestPutFuseRace: the put_fuse unit test swaps input chunks between two
// ranks after a relaxed handshake, so each rank's put reads its input
// while the peer's put overwrites it. The race detector must say so.
func TestPutFuseRace(t *testing.T) {
	t.Parallel()
	p, err := executor.LoadFile("../../tests/ports/unit_tests/put/put_fuse_test.plan.json")
	if err != nil && !plan.IsWarning(err) {
		t.Skipf("plan not available: %v", err)
	}
	lay, inst, err := instantiate(p, executor.Float32)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float32, Race: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	err = sess.Launch(context.Background(), lay.Alloc())
	var re *executor.RaceError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a RaceError", err)
	}
	for _, r := range re.Races {
		if r.A.Op != r.B.Op || !strings.HasSuffix(r.A.Op, " put") || r.A.Rank == r.B.Rank || r.A.Write == r.B.Write {
			t.Errorf("unexpected race %+v", r)
		}
	}
}
