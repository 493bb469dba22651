package gputest

import (
	"testing"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// AlgorithmPlan evaluates the bundled algorithm name (algorithms/NAME.star)
// with defines and loads the plan of its first program; any error fails tb.
func AlgorithmPlan(tb testing.TB, name string, defines map[string]string) *plan.Plan {
	tb.Helper()
	res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), name+".star", starlib.Options{Defines: defines})
	if err != nil {
		tb.Fatal(err)
	}
	text, err := res.Programs[0].Plan()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Load(text)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
