package cli

// model.go holds `mscclgo model`: the predicted time of a plan on named
// hardware (package model), printed as run's nccl-tests table, and
// --fit, which fits a hardware profile to measured results.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"bytes"
	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/synth"
	"github.com/mscclgo/mscclgo/topo"
)

func modelCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "model",
		Usage:     "predict a plan's time on named hardware, or fit a hardware profile to measurements",
		ArgsUsage: "PLAN.json|ALGO.star",
		Description: "Predicts the time per call of PLAN.json on the hardware of --hw (a bundled profile: " + strings.Join(model.Profiles(), ", ") + ",\n" +
			"or a profile file) by simulating one call: thread blocks run their ops in order, waits wait for\n" +
			"the signals, packets, semaphores and barriers they need, and concurrent transfers share each GPU's\n" +
			"NVLink, HBM and NIC bandwidth (docs/model.md). Prints run's nccl-tests table: time per call,\n" +
			"algbw = size/time (GB/s), busbw = algbw times the collective's bus factor.\n" +
			"--kernel mscclpp (the default) charges MSCCL++'s kernel costs; --kernel mscclgo this project's\n" +
			"interpreter, from the audit of its machine code (make gpu-sass) at the profile's SM clock.\n" +
			"With --fit RESULTS (nccl-tests or mscclgo run output for this plan), fits the profile's parameters\n" +
			"to the measured times and prints the error per point before and after; -o writes the fitted profile.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "hw", Value: "h100-sxm", Usage: "hardware profile: a bundled `NAME` or a profile file (.json)"},
			&cli.StringFlag{Name: "size", Aliases: []string{"s"}, Usage: "message `SIZE` in bytes (1K, 64M): the output of allgather, the input otherwise"},
			&cli.StringFlag{Name: "minbytes", Aliases: []string{"b"}, Usage: "sweep from `SIZE` (nccl-tests -b)"},
			&cli.StringFlag{Name: "maxbytes", Aliases: []string{"e"}, Usage: "sweep up to `SIZE` (nccl-tests -e)"},
			&cli.Uint64Flag{Name: "stepfactor", Aliases: []string{"f"}, Value: 2, Usage: "multiply the size by `F` between sweep steps (nccl-tests -f)"},
			&cli.StringFlag{Name: "stepbytes", Aliases: []string{"i"}, Usage: "add `SIZE` between sweep steps instead of multiplying (nccl-tests -i)"},
			&cli.StringFlag{Name: "dtype", Aliases: []string{"d"}, Value: "float16", Usage: "element `TYPE`: float16 (half), bfloat16, float32 (float), int32"},
			&cli.BoolFlag{Name: "in-place", Usage: "lay the buffers out in place; --in-place=false out of place", DefaultText: "the plan's inplace field"},
			&cli.IntFlag{Name: "ranks-per-node", Usage: "place `N` consecutive ranks per node (default: the profile's gpus_per_node)"},
			&cli.StringFlag{Name: "topo", Usage: "predict on the links of the machine in `FILE` (nvidia-smi topo -m text, JSON, or a bundled example; docs/synthesis.md): transfers share every link of their route; --hw then names a GPU profile (" + strings.Join(topo.HWNames(), ", ") + ")"},
			&cli.IntFlag{Name: "nodes", Value: 1, Usage: "with --topo: `N` copies of the machine on a rail network"},
			&cli.BoolFlag{Name: "ll8", Usage: "use 8-byte LL packets instead of 16-byte ones"},
			&cli.StringFlag{Name: "kernel", Value: model.KernelMSCCLPP, Usage: "charge the per-op costs of `KERNEL`: mscclpp (MSCCL++'s kernel, from the profile) or mscclgo (this project's interpreter, from the audit of its machine code; docs/model.md)"},
			&cli.BoolFlag{Name: "one-device", Usage: "place every rank on one GPU (as make device-check runs 8 ranks on a machine of one): all accesses to its HBM, no NVLink"},
			&cli.StringFlag{Name: "launch", Value: "graph", Usage: "launch overhead charged per call: `graph` (replayed from a CUDA graph) or kernel (a plain launch)"},
			&cli.StringFlag{Name: "fit", Usage: "fit the profile to the measured `RESULTS` file (nccl-tests or mscclgo run output of this plan)"},
			&cli.StringFlag{Name: "params", Usage: "with --fit: the `LIST` of parameters to fit, comma-separated (default: launch, latency and efficiency terms; the cross-node terms for a multi-node plan)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "with --fit: write the fitted profile to `FILE`"},
			plotFlag(),
			countsFlag(), // alltoallv plans: modelv.go
		}, scriptFlags()...),
		Action:       func(c *cli.Context) error { return runModel(c, d) },
		OnUsageError: onUsageError,
	}
}

// modelOptions are the parsed flags of mscclgo model.
type modelOptions struct {
	hw      *model.Profile
	opts    model.Options
	dtype   executor.ElemType
	inPlace bool
	topo    string // --topo, or ""
}

func parseModelFlags(c *cli.Context, p *plan.Plan) (*modelOptions, error) {
	o := &modelOptions{inPlace: p.Inplace}
	if c.IsSet("in-place") {
		o.inPlace = c.Bool("in-place")
	}
	var err error
	if o.dtype, err = executor.ParseDType(c.String("dtype")); err != nil {
		return nil, usageErr("--dtype: %v", err)
	}
	if o.opts, err = launchOption(c.String("launch")); err != nil {
		return nil, err
	}
	if n := c.Int("ranks-per-node"); n < 0 {
		return nil, usageErr("--ranks-per-node %d: want at least 1", n)
	}
	o.opts.RanksPerNode = c.Int("ranks-per-node")
	o.opts.LL8 = c.Bool("ll8")
	if o.opts.Kernel, err = model.ParseKernel(c.String("kernel")); err != nil {
		return nil, usageErr("--kernel: %v", err)
	}
	o.opts.OneDevice = c.Bool("one-device")
	if o.opts.OneDevice && (c.IsSet("topo") || c.IsSet("ranks-per-node")) {
		return nil, usageErr("--one-device places the ranks: no --topo or --ranks-per-node")
	}
	if c.IsSet("topo") {
		if c.IsSet("ranks-per-node") {
			return nil, usageErr("--ranks-per-node and --topo: the topology places the ranks")
		}
		tp, err := loadTopology(c)
		if err != nil {
			return nil, err
		}
		if o.hw, err = synth.ModelProfile(tp.HW); err != nil {
			return nil, err
		}
		o.opts.Network = synth.Network(tp)
		o.opts.RanksPerNode = tp.GPUsPerNode
		o.topo = c.String("topo")
		return o, nil
	}
	if c.IsSet("nodes") {
		return nil, usageErr("--nodes applies to --topo")
	}
	if o.hw, err = model.LoadProfile(c.String("hw")); err != nil {
		return nil, err
	}
	return o, nil
}

func runModel(c *cli.Context, d *deps) error {
	if c.IsSet("plot") {
		return runModelPlot(c, d)
	}
	if c.NArg() != 1 {
		return usageErr("model: want exactly one PLAN.json argument, got %d", c.NArg())
	}
	in, err := readPlanInput(c, d, c.Args().First())
	if err != nil {
		return namePlan(c.Args().First(), err)
	}
	path := in.name
	plan, err := in.load()
	if err != nil {
		return namePlan(path, err)
	}
	if in.note != "" {
		fmt.Fprintf(d.stderr, "mscclgo: note: %s\n", in.note)
	}
	o, err := parseModelFlags(c, plan)
	if err != nil {
		return err
	}
	if o.opts.Kernel != model.KernelMSCCLPP {
		if _, err := model.DescribeKernel(o.hw, o.dtype.Name(), o.opts.LL8, plan.NumThreadsPerBlock); err != nil {
			return err
		}
	}
	if plan.AllToAllV != nil || c.IsSet("counts") {
		return runModelCounts(c, d, path, plan, o) // modelv.go
	}
	if c.IsSet("fit") {
		return runFit(c, d, path, plan, o)
	}
	if c.IsSet("output") || c.IsSet("params") {
		return usageErr("-o and --params apply to --fit")
	}
	sizes, sweep, err := runSizes(c)
	if err != nil {
		return err
	}
	w := d.stdout
	perNode := o.opts.RanksPerNode
	if perNode == 0 {
		perNode = o.hw.GPUsPerNode
	}
	nodes := (len(plan.GPUs) + perNode - 1) / perNode
	launch := "graph"
	if o.opts.PlainLaunch {
		launch = "kernel"
	}
	fmt.Fprintf(w, "# mscclgo model %s: plan %q, collective %s, %d ranks (%d node(s) of %d), protocol %s\n", path, plan.Name, plan.Collective, len(plan.GPUs), nodes, perNode, plan.Protocol)
	fmt.Fprintf(w, "# predicted on %s (%s), %s launch, dtype %s, in-place %v, LL%d\n", o.hw.Name, o.hw.Description, launch, o.dtype.Name(), o.inPlace, map[bool]int{false: 16, true: 8}[o.opts.LL8])
	if o.topo != "" {
		fmt.Fprintf(w, "# on the links of topology %s (transfers share every link of their route)\n", o.topo)
	}
	if o.opts.Kernel != model.KernelMSCCLPP {
		fmt.Fprintf(w, "# kernel %s: per-op costs of entry %s from the audit of its machine code (docs/model.md)\n", o.opts.Kernel, model.EntryName(o.dtype.Name(), o.opts.LL8))
	}
	if o.opts.OneDevice {
		fmt.Fprintf(w, "# every rank on one GPU: accesses to its HBM, no NVLink\n")
	}
	fmt.Fprintf(w, "#\n")
	// run's table; #wrong is "-", as for a run whose results are not
	// checked.
	table := harness.NewTable(w, o.dtype)
	opts := o.opts
	opts.NoTimeline = true
	ran := 0
	for _, size := range sizes {
		layout, err := executor.PlanLayout(plan, size, o.dtype, o.inPlace)
		var pt *model.Point
		if err == nil {
			pt, err = model.PredictSize(plan, size, o.dtype, o.inPlace, o.hw, opts)
		}
		if err != nil {
			if sweep && !isDeadlock(err) {
				fmt.Fprintf(w, "# skipped size %d: %v\n", size, err)
				continue
			}
			return atSize(path, size, in.locate(err))
		}
		ran++
		table.Row(layout, harness.Row{TimeUS: pt.Time})
	}
	table.EndBandwidth()
	if ran == 0 {
		return fmt.Errorf("%s: no size of the sweep suits the plan", path)
	}
	return nil
}

// launchOption parses --launch.
func launchOption(s string) (model.Options, error) {
	switch s {
	case "graph":
		return model.Options{}, nil
	case "kernel":
		return model.Options{PlainLaunch: true}, nil
	}
	return model.Options{}, usageErr("--launch %q: want graph or kernel", s)
}

// isDeadlock reports whether err is a deadlock of the simulation.
func isDeadlock(err error) bool {
	var dl *executor.DeadlockError
	return errors.As(err, &dl)
}

// maxResultsBytes bounds the size of a --fit results file.
const maxResultsBytes = 64 << 20

// runFit is mscclgo model --fit.
func runFit(c *cli.Context, d *deps, path string, pl *plan.Plan, o *modelOptions) error {
	if c.IsSet("size") || c.IsSet("minbytes") || c.IsSet("maxbytes") {
		return usageErr("--fit takes its sizes from the results file: no --size or -b/-e")
	}
	rpath := c.String("fit")
	results, err := infile.Read(rpath, "a results file", maxResultsBytes)
	if err != nil {
		return fmt.Errorf("--fit: %w", err)
	}
	meas, err := model.ParseResults(rpath, bytes.NewReader(results), o.inPlace)
	if err != nil {
		return err
	}
	fo := model.FitOptions{DType: o.dtype, InPlace: o.inPlace, Source: rpath}
	if s := c.String("params"); s != "" {
		for _, p := range strings.Split(s, ",") {
			fo.Params = append(fo.Params, strings.TrimSpace(p))
		}
	}
	res, err := model.Fit(pl, meas, o.hw, o.opts, fo)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(d.stdout, "# mscclgo model --fit %s: plan %q on %s, %d points; fitted %s\n", rpath, pl.Name, o.hw.Name, len(meas), strings.Join(res.Params, ", "))
	res.WriteReport(d.stdout, o.hw)
	out := c.String("output")
	if out == "" {
		return nil
	}
	data, err := res.Profile.Marshal()
	if err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return atomicfile.WriteAll(ctx, []string{out}, func(_ int, w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
