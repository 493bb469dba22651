package cli

// limits.go holds the flags that bound a script's evaluation (steps,
// wall-clock time, memory, ops) and their translation into
// starlib.Limits.

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/starlib"
)

// evalLimitFlags are the flags of the evaluation limits; withMemory adds
// --max-memory (run has its own, which bounds the run as well).
func evalLimitFlags(withMemory bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.Uint64Flag{Name: "max-steps", Usage: "stop the evaluation after `N` Starlark steps (0: the default, 1000000000)"},
		&cli.DurationFlag{Name: "max-time", Usage: "stop the evaluation after `D` of wall-clock time (0: the default, " + starlib.DefaultMaxTime.String() + ")"},
		&cli.IntFlag{Name: "max-ops", Usage: "refuse a program of more than `N` ops, instances included (0: the default, 4000000)"},
	}
	if withMemory {
		fs = append(fs, &cli.StringFlag{Name: "max-memory", Usage: "stop the evaluation when its heap grows by more than `SIZE` (default 4G)"})
	}
	return fs
}

// evalLimits reads the limit flags of c. It also sets the Go runtime's
// soft memory limit a little above the budget, so that the collector
// works harder as the budget nears instead of letting the process grow
// to twice its live heap.
func evalLimits(c *cli.Context) (starlib.Limits, error) {
	lim := starlib.Limits{
		MaxSteps: c.Uint64("max-steps"),
		MaxTime:  c.Duration("max-time"),
		MaxOps:   c.Int("max-ops"),
	}
	if c.Duration("max-time") < 0 {
		return lim, usageErr("--max-time %v: want a positive duration", c.Duration("max-time"))
	}
	if c.Int("max-ops") < 0 {
		return lim, usageErr("--max-ops %d: want a positive number", c.Int("max-ops"))
	}
	if s := c.String("max-memory"); s != "" {
		n, err := bytesize.Parse(s)
		if err != nil {
			return lim, usageErr("--max-memory %s: %v", s, err)
		}
		lim.MaxMemory = n
	}
	if lim.MaxMemory == 0 {
		// Computed here once, so that the soft limit below matches.
		lim.MaxMemory, lim.MemorySource = starlib.DefaultMemory()
	}
	budget := lim.MaxMemory
	if budget < math.MaxInt64/2 {
		debug.SetMemoryLimit(int64(budget + budget/4 + 256<<20))
	}
	return lim, nil
}

// evalGCPercent is the collector's GOGC during an evaluation. With the
// default 100 the collector took about a third of an eval's time (the
// evaluation allocates much short-lived garbage); 400 collects a quarter
// as often, and the soft memory limit evalLimits sets above the budget
// makes the collector work harder as the heap nears the budget, so the
// budget still holds.
const evalGCPercent = 400

// evalGC sets the collector for an evaluation, unless GOGC is set, and
// returns the function that restores it.
func evalGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(evalGCPercent)
	return func() { debug.SetGCPercent(prev) }
}
