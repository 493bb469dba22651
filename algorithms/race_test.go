package algorithms

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// TestDefaultSetRaceFree runs every plan of the default set of up to 8
// ranks for three launches on the CPU backend with race detection, which
// keeps its history across launches (docs/executor.md §5): a bundled
// algorithm must be free of races, those across the launch boundary
// included, and compute its collective; mscclgo check's static
// launch-boundary check (executor.CheckReuse) must not warn of it. The
// plans of more ranks get the static check only.
func TestDefaultSetRaceFree(t *testing.T) {
	t.Parallel()
	jobs, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range jobs {
		n, _ := strconv.Atoi(job.Params["world_size"])
		launches := 3
		if n > 8 {
			launches = 0
		}
		t.Run(job.String(), func(t *testing.T) {
			t.Parallel()
			res, err := starlib.Eval(starlib.FSSource(FS, "algorithms"), job.Algorithm+".star", starlib.Options{Defines: job.Params})
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
				if p.AllToAllV != nil {
					continue // TestAllToAllVRuns
				}
				if err := raceRun(p, launches); err != nil {
					t.Errorf("program %q: %v", prog.Name(), err)
				}
			}
		})
	}
}

// raceRun checks p at its smallest message size against the static
// launch-boundary check, then runs it for launches launches (none: the
// static check only) with race detection and checks every output.
func raceRun(p *plan.Plan, launches int) error {
	sizes := harness.CheckSizes(p, executor.Float32, 1<<20, 1)
	if len(sizes) == 0 {
		return errors.New("no message size")
	}
	lay, err := harness.PlanLayout(p, sizes[0], executor.Float32, p.Inplace)
	if err != nil {
		return err
	}
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		return err
	}
	if rs := executor.CheckReuse(inst); len(rs) > 0 {
		return fmt.Errorf("size %d: mscclgo check warns of %d buffer(s) reused in the next launch with no handshake; the first: %v", sizes[0], len(rs), rs[0])
	}
	if launches == 0 {
		return nil
	}
	sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float32, Race: true, DeadlockTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer sess.Close()
	bufs := lay.Alloc()
	for seq := range launches {
		lay.FillInputs(bufs, seq)
		if err := sess.Launch(context.Background(), bufs); err != nil {
			return fmt.Errorf("size %d, launch %d: %w", sizes[0], seq, err)
		}
		wrong, err := lay.Check(bufs, seq)
		if err != nil {
			return err
		}
		for r, w := range wrong {
			if w > 0 {
				return fmt.Errorf("size %d, launch %d: rank %d has %d wrong elements", sizes[0], seq, r, w)
			}
		}
	}
	return nil
}
