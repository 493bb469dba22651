package cli

// trace.go holds `mscclgo trace`: a plan's timeline at one message size,
// predicted by the cost model or recorded on the CPU backend's logical
// clock, written in the Chrome Trace Event format; and planTimeline,
// which `mscclgo view` shares.

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
	"github.com/mscclgo/mscclgo/trace"
)

// timelineFlags are the flags of trace and view that choose the timeline.
func timelineFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "size", Aliases: []string{"s"}, Value: "1M", Usage: "message `SIZE` of the call (K, M, G suffixes; the output of allgather, the input otherwise)"},
		&cli.StringFlag{Name: "from", Value: "model", Usage: "where the times come from: `model` (the cost model's prediction) or cpu (a CPU backend run's logical steps)"},
		&cli.StringFlag{Name: "hw", Value: "h100-sxm", Usage: "hardware profile `NAME` (or a profile JSON file) of --from model"},
		&cli.StringFlag{Name: "dtype", Aliases: []string{"d"}, Value: "float16", Usage: "element `TYPE`: float16 (half), bfloat16, float32 (float), int32"},
		&cli.BoolFlag{Name: "in-place", Usage: "lay the call out in place (output = input)"},
	}, scriptFlags()...)
}

func traceCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "trace",
		Usage:     "write a plan's timeline at one size as a Chrome trace (Perfetto, chrome://tracing)",
		ArgsUsage: "PLAN.json|ALGO.star",
		Description: "Writes one call of the plan at --size in the Chrome Trace Event format: a process\n" +
			"per rank, a thread per thread block, a slice per op (or pipeline iteration) with its\n" +
			"bytes, peers, channels and .star position in args, and a flow arrow from every signal,\n" +
			"packet store, semaphore release and barrier arrival to the op it released. The times\n" +
			"are the cost model's prediction on --hw (--from model, µs) or the logical steps of a\n" +
			"CPU backend run (--from cpu: an op starts when its thread block's previous op and\n" +
			"whatever released it have ended, and takes one step, shown as 1 µs). Open the file in\n" +
			"ui.perfetto.dev or chrome://tracing.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the trace to `FILE` (default: standard output)"},
		}, timelineFlags()...),
		Action:       func(c *cli.Context) error { return interruptibleOutput(c, func() error { return runTrace(c, d) }) },
		OnUsageError: onUsageError,
	}
}

func runTrace(c *cli.Context, d *deps) error {
	if c.NArg() != 1 {
		return usageErr("trace: want one PLAN.json argument")
	}
	tl, _, err := planTimeline(c, d, c.Args().First())
	if err != nil {
		return err
	}
	if out := c.String("output"); out != "" {
		return atomicfile.WriteAll(c.Context, []string{out}, func(_ int, w io.Writer) error { return trace.Write(w, tl) })
	}
	return trace.Write(d.stdout, tl)
}

// planTimeline loads the plan argument and returns its timeline at
// --size (from --from) and its instance.
func planTimeline(c *cli.Context, d *deps, arg string) (*timeline.Timeline, *executor.Instance, error) {
	size, err := bytesize.Parse(c.String("size"))
	if err != nil {
		return nil, nil, usageErr("--size: %v", err)
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return nil, nil, usageErr("--dtype: %v", err)
	}
	from := c.String("from")
	var hw *model.Profile
	switch from {
	case "model":
		if hw, err = model.LoadProfile(c.String("hw")); err != nil {
			return nil, nil, usageErr("--hw: %v", err)
		}
	case "cpu":
	default:
		return nil, nil, usageErr("--from %q: want model or cpu", from)
	}
	in, err := readPlanInput(c, d, arg)
	if err != nil {
		return nil, nil, err
	}
	if in.note != "" {
		fmt.Fprintf(d.stderr, "mscclgo: note: %s\n", in.note)
	}
	p, err := in.load()
	if err != nil && !plan.IsWarning(err) {
		return nil, nil, namePlan(in.name, err)
	}
	layout, err := executor.PlanLayout(p, size, dt, c.Bool("in-place"))
	if err != nil {
		return nil, nil, atSize(in.name, size, err)
	}
	inst, err := executor.Instantiate(p, layout.Sizes)
	if err != nil {
		return nil, nil, atSize(in.name, size, err)
	}
	var tl *timeline.Timeline
	var dl *executor.DeadlockError
	if from == "model" {
		res, err := model.Predict(inst, hw, model.Options{})
		if errors.As(err, &dl) {
			// The cost model has no timeline of a deadlock: the CPU
			// backend's logical steps show the call up to it.
			fmt.Fprintf(d.stderr, "mscclgo: note: %s: the cost model finds a deadlock: the timeline is the CPU backend's, in logical steps, up to it\n", in.name)
			from = "cpu"
		} else if err != nil {
			return nil, nil, atSize(in.name, size, err)
		} else {
			tl = res.Timeline
		}
	}
	if from == "cpu" {
		if err := executor.CheckLaunch(inst, layout, false); err != nil {
			return nil, nil, atSize(in.name, size, err)
		}
		budget, err := runBudget("", false)
		if err != nil {
			return nil, nil, err
		}
		if err := checkBudget(in.name, size, harness.EstimateMemory(inst, layout, harness.MemoryOptions{Iters: 1}), budget); err != nil {
			return nil, nil, err
		}
		tl, err = cpu.Record(c.Context, inst, executor.Options{DType: dt}, layout.Alloc())
		if errors.As(err, &dl) && tl != nil {
			// A timeline up to the deadlock, and the deadlock: view draws
			// the first, trace reports the second.
			if tl.Plan == "" {
				tl.Plan = in.name
			}
			tl.Size = size
			return tl, inst, atSize(in.name, size, err)
		}
		if err != nil {
			return nil, nil, atSize(in.name, size, err)
		}
	}
	if tl.Plan == "" {
		tl.Plan = in.name
	}
	tl.Size = size
	return tl, inst, nil
}
