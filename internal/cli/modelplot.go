package cli

// modelplot.go holds `mscclgo model --plot FILE.svg`: the predicted busbw
// of one or more plans against message size, drawn as one SVG chart
// (package view).

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/view"
)

// plotFlag is model's --plot.
func plotFlag() cli.Flag {
	return &cli.StringFlag{Name: "plot", Usage: "draw the predicted busbw of every PLAN argument against size into `FILE.svg` (sizes: --size, -b/-e/-f, or 1K to 1G)"}
}

// runModelPlot predicts every plan argument at the sizes of the flags
// (1K to 1G by factors of 2 when none is given), prints a line per plan
// and writes the chart to --plot.
func runModelPlot(c *cli.Context, d *deps) error {
	if c.NArg() == 0 {
		return usageErr("model --plot: want at least one PLAN.json argument")
	}
	if c.IsSet("fit") {
		return usageErr("--plot and --fit do not go together")
	}
	var sizes []uint64
	if c.IsSet("size") || c.IsSet("minbytes") || c.IsSet("maxbytes") {
		var err error
		if sizes, _, err = runSizes(c); err != nil {
			return err
		}
	} else {
		sizes = harness.Sweep(1<<10, 1<<30, 2)
	}
	var series []view.Series
	for _, arg := range c.Args().Slice() {
		in, err := readPlanInput(c, d, arg)
		if err != nil {
			return namePlan(arg, err)
		}
		plan, err := in.load()
		if err != nil {
			return namePlan(in.name, err)
		}
		o, err := parseModelFlags(c, plan)
		if err != nil {
			return err
		}
		opts := o.opts
		opts.NoTimeline = true
		pts, skipped, err := model.Sweep(plan, sizes, o.dtype, o.inPlace, o.hw, opts)
		if err != nil {
			return namePlan(in.name, err)
		}
		if len(pts) == 0 {
			return fmt.Errorf("%s: no size of the sweep suits the plan (%d sizes rejected)", in.name, len(skipped))
		}
		s := view.Series{Name: fmt.Sprintf("%s (%s)", filepath.Base(in.name), o.hw.Name)}
		peak := 0.0
		for _, pt := range pts {
			s.Points = append(s.Points, view.Point{Size: pt.Size, BusBW: pt.BusBW})
			peak = max(peak, pt.BusBW)
		}
		series = append(series, s)
		fmt.Fprintf(d.stdout, "%s: %d sizes on %s, %d skipped, peak busbw %.2f GB/s\n", in.name, len(pts), o.hw.Name, len(skipped), peak)
	}
	svg, err := view.Chart(series, view.ChartOptions{Title: "predicted busbw"})
	if err != nil {
		return err
	}
	return atomicfile.WriteAll(c.Context, []string{c.String("plot")}, func(_ int, w io.Writer) error {
		_, err := io.WriteString(w, svg)
		return err
	})
}
