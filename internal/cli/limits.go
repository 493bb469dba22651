package cli

// limits.go holds the flags that bound a script's evaluation (steps,
// wall-clock time, memory, ops) and their translation into
// starlib.Limits.

import (
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

// evalLimits reads the limit flags of c, and sets the soft memory limit
// above the budget (starlib.Limits.SetSoftMemoryLimit).
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
	lim.SetSoftMemoryLimit()
	return lim, nil
}
