package cli

// view.go holds `mscclgo view`: a self-contained HTML page of a plan
// (package view) with its timeline at one size and the cost model's
// busbw-versus-size curve.

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/view"
)

func viewCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "view",
		Usage:     "draw a plan as a self-contained HTML page: lanes, op boxes by time, channels, busbw curve",
		ArgsUsage: "PLAN.json|ALGO.star",
		Description: "Writes one HTML file (inline SVG and script; nothing is fetched) showing the plan as\n" +
			"lanes per rank and thread block with a box per op sized by its time at --size (from\n" +
			"the cost model on --hw, or --from cpu for a CPU run's logical steps), arrows from each\n" +
			"signal, packet store, semaphore release or barrier arrival to the op it released, the\n" +
			"channels between ranks, details on hover (op type, bytes, peer, channel, .star\n" +
			"position), and the cost model's predicted busbw from 1K to --curve-max on --hw.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the page to `FILE` (default: standard output)"},
			&cli.StringFlag{Name: "curve-max", Value: "1G", Usage: "largest message `SIZE` of the busbw curve (powers of 4 from 1K; 0: no curve)"},
		}, timelineFlags()...),
		Action:       func(c *cli.Context) error { return interruptibleOutput(c, func() error { return runView(c, d) }) },
		OnUsageError: onUsageError,
	}
}

func runView(c *cli.Context, d *deps) error {
	if c.NArg() != 1 {
		return usageErr("view: want one PLAN.json argument")
	}
	maxSize, err := parseSize(c.String("curve-max"))
	if err != nil {
		return usageErr("--curve-max: %v", err)
	}
	arg := c.Args().First()
	tl, inst, err := planTimeline(c, d, arg)
	if err != nil {
		return err
	}
	p := view.Page{
		Title:    fmt.Sprintf("%s (%s, %d ranks)", filepath.Base(arg), tl.Collective, tl.Ranks),
		Meta:     fmt.Sprintf("size %s, %s: %.4g %s from the first op's start to the last op's end", executor.FormatBytes(tl.Size), tl.Source, tl.Total, tl.Clock),
		Timeline: tl,
		Channels: view.ChannelsOf(inst),
	}
	if maxSize > 0 {
		hw, err := model.LoadProfile(c.String("hw"))
		if err != nil {
			return usageErr("--hw: %v", err)
		}
		dt, _ := executor.ParseDType(c.String("dtype"))
		var sizes []uint64
		for s := uint64(1 << 10); s <= maxSize; s *= 4 {
			sizes = append(sizes, s)
		}
		pts, skipped, err := model.Sweep(inst.Plan, sizes, dt, c.Bool("in-place"), hw, model.Options{NoTimeline: true})
		if err != nil {
			return namePlan(arg, err)
		}
		for _, s := range sizes {
			if e := skipped[s]; e != nil {
				fmt.Fprintf(d.stderr, "mscclgo: note: busbw curve: size %d skipped: %v\n", s, e)
			}
		}
		if len(pts) > 0 {
			s := view.Series{Name: fmt.Sprintf("%s on %s", filepath.Base(arg), hw.Name)}
			for _, pt := range pts {
				s.Points = append(s.Points, view.Point{Size: pt.Size, BusBW: pt.BusBW})
			}
			p.Curves = []view.Series{s}
		}
	}
	if out := c.String("output"); out != "" {
		return writeAll(c.Context, []string{out}, func(_ int, w io.Writer) error { return view.Write(w, p) })
	}
	return view.Write(d.stdout, p)
}
