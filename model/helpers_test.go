// This file holds the test helpers of package model's external tests:
// bundled algorithms evaluated into plans, and the reference port plans.

package model_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// bundled evaluates the bundled algorithm name with defines into a plan.
func bundled(tb testing.TB, name string, defines map[string]string) *plan.Plan {
	tb.Helper()
	res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), name+".star", starlib.Options{Defines: defines})
	if err != nil {
		tb.Fatalf("eval %s: %v", name, err)
	}
	if len(res.Programs) != 1 {
		tb.Fatalf("eval %s: %d programs", name, len(res.Programs))
	}
	data, err := res.Programs[0].Plan()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Load(data)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// port loads a plan of ../tests/ports (the ports of MSCCL++'s reference
// programs, byte-identical to its plans).
func port(tb testing.TB, rel string) *plan.Plan {
	tb.Helper()
	p, err := executor.LoadFile(filepath.Join("..", "tests", "ports", filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// h100 is the bundled H100 profile.
func h100(tb testing.TB) *model.Profile {
	tb.Helper()
	hw, err := model.LoadProfile("h100-sxm")
	if err != nil {
		tb.Fatal(err)
	}
	return hw
}

// predict predicts plan at size in its own in-place mode, float16.
func predict(tb testing.TB, p *plan.Plan, size uint64, hw *model.Profile, opts model.Options) *model.Point {
	tb.Helper()
	pt, err := model.PredictSize(p, size, executor.Float16, p.Inplace, hw, opts)
	if err != nil {
		tb.Fatalf("%s at %d: %v", p.Name, size, err)
	}
	return pt
}

// writeFile writes data to a new file in a test directory.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
