package cli

// view.go holds `mscclgo view`: a self-contained HTML page of a plan
// (package view) with its timeline at one size and the cost model's
// busbw-versus-size curve.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/view"
)

func viewCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "view",
		Usage:     "draw a plan as a self-contained HTML page: where the chunks go, lanes, op boxes by time, channels, busbw curve",
		ArgsUsage: "PLAN.json|ALGO.star",
		Description: "Writes one HTML file (inline SVG and script; nothing is fetched) showing where the\n" +
			"chunks go (per step, a grid of ranks by chunks, each written chunk coloured by whose\n" +
			"data it holds), the plan as lanes per rank and thread block with a box per op sized\n" +
			"by its time at --size (from the cost model on --hw, or --from cpu for a CPU run's\n" +
			"logical steps), arrows from each\n" +
			"signal, packet store, semaphore release or barrier arrival to the op it released, the\n" +
			"channels between ranks, details on hover (op type, bytes, peer, channel, .star\n" +
			"position), and the cost model's predicted busbw from 1K to --curve-max on --hw.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the page to `FILE` (default: PLAN.html beside the plan, whose path is printed, when standard output is a terminal; else standard output)"},
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
	maxSize, err := bytesize.Parse(c.String("curve-max"))
	if err != nil {
		return usageErr("--curve-max: %v", err)
	}
	arg := c.Args().First()
	tl, inst, err := planTimeline(c, d, arg)
	var dl *executor.DeadlockError
	deadlock := errors.As(err, &dl) && tl != nil
	if err != nil && !deadlock {
		return err
	}
	p := view.Page{
		Title:    fmt.Sprintf("%s (%s, %d ranks)", filepath.Base(arg), tl.Collective, tl.Ranks),
		Meta:     fmt.Sprintf("size %s, %s: %.4g %s from the first op's start to the last op's end", bytesize.Format(tl.Size), tl.Source, tl.Total, tl.Clock),
		Timeline: tl,
		Channels: view.ChannelsOf(inst),
		Instance: inst,
	}
	if maxSize > 0 && !deadlock {
		hw, err := model.LoadProfile(c.String("hw"))
		if err != nil {
			return usageErr("--hw: %v", err)
		}
		dt, _ := executor.ParseDType(c.String("dtype"))
		sizes := harness.Sweep(1<<10, maxSize, 4)
		pts, skipped, err := model.Sweep(inst.Plan, sizes, dt, c.Bool("in-place"), hw, model.Options{NoTimeline: true})
		if err != nil {
			return namePlan(arg, err)
		}
		var skips []uint64
		for _, s := range sizes {
			if skipped[s] != nil {
				skips = append(skips, s)
			}
		}
		switch {
		case len(skips) == 1:
			fmt.Fprintf(d.stderr, "mscclgo: note: busbw curve: size %d skipped: %v\n", skips[0], skipped[skips[0]])
		case len(skips) > 1:
			// One line: the sizes a plan cannot run are usually a range
			// (above its max_message_size), with one reason.
			fmt.Fprintf(d.stderr, "mscclgo: note: busbw curve: %d sizes skipped, %s to %s; the first because %v\n",
				len(skips), bytesize.Format(skips[0]), bytesize.Format(skips[len(skips)-1]), skipped[skips[0]])
		}
		if len(pts) > 0 {
			s := view.Series{Name: fmt.Sprintf("%s on %s", filepath.Base(arg), hw.Name)}
			for _, pt := range pts {
				s.Points = append(s.Points, view.Point{Size: pt.Size, BusBW: pt.BusBW})
			}
			p.Curves = []view.Series{s}
		}
	}
	var report bytes.Buffer
	if deadlock {
		// The page leads with the diagnosis the terminal gets.
		reportDeadlock(&report, fmt.Sprintf("mscclgo: %s: size %d: ", arg, tl.Size), inst, dl, false)
		p.Diagnosis = report.String()
		p.Meta = fmt.Sprintf("size %s, %s: DEADLOCK after %.4g %s: %d thread block(s) blocked, marked in red", bytesize.Format(tl.Size), tl.Source, tl.Total, tl.Clock, len(tl.Blocked))
	}
	out := c.String("output")
	if out == "" && isCharDevice(d.stdout) {
		// A terminal gets the page's path, not 70 KB of HTML.
		out = besidePlan(arg)
	}
	if out != "" {
		err = atomicfile.WriteAll(c.Context, []string{out}, func(_ int, w io.Writer) error { return view.Write(w, p) })
		if err == nil && c.String("output") == "" {
			fmt.Fprintln(d.stdout, out)
		}
	} else {
		err = view.Write(d.stdout, p)
	}
	if err != nil || !deadlock {
		return err
	}
	// The page is written; the deadlock is the command's outcome.
	if _, err := d.stderr.Write(report.Bytes()); err != nil {
		return err
	}
	return &reportedError{code: ExitDeadlock}
}

// isCharDevice reports whether w is a terminal (or another character
// device, such as /dev/null): not a pipe or a file.
func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// besidePlan is the page's default file: PLAN.html beside PLAN.json or
// ALGO.star, or NAME.html in the current directory for a bundled
// algorithm's name.
func besidePlan(arg string) string {
	ext := filepath.Ext(arg)
	if ext != ".json" && ext != ".star" {
		return filepath.Base(arg) + ".html"
	}
	return strings.TrimSuffix(arg, ext) + ".html"
}
