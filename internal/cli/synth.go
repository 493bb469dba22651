package cli

// synth.go is `mscclgo synth`: a collective algorithm for a machine's
// topology (package synth), its link table (--links) and its report
// (--report). The work is synth's; this file parses and prints.

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/synth"
	"github.com/mscclgo/mscclgo/topo"
)

func synthCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "synth",
		Usage:     "write a verified, modelled .star algorithm for a machine's topology",
		ArgsUsage: "allgather|reducescatter|allreduce",
		Description: "Reads the machine of --topo (the text `nvidia-smi topo -m` prints, the JSON form of\n" +
			"docs/synthesis.md, or a bundled example: " + strings.Join(topo.Examples(), ", ") + ") with the link speeds\n" +
			"of the GPU profile --hw (" + strings.Join(topo.HWNames(), ", ") + ", or a file), packs spanning trees\n" +
			"for every rank's shard over its links and writes them as a .star program (-o OUT.star, else\n" +
			"standard output). Every program has been evaluated, checked, run on the CPU backend at several\n" +
			"sizes and modelled before it is written; a failure is reported and nothing is written.\n" +
			"--links prints the link table the tool uses (link SRC DST GBPS, achieved GB/s per direction)\n" +
			"and synthesizes nothing; --report prints, per size, the predicted time, the cut lower bound and\n" +
			"the best bundled plan's time for the same call on the same links.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "topo", Usage: "the machine: a `FILE` (nvidia-smi topo -m text or JSON) or a bundled example's name"},
			&cli.StringFlag{Name: "hw", Value: "h100-sxm", Usage: "GPU profile: a bundled `NAME` or a file (.json)"},
			&cli.IntFlag{Name: "nodes", Value: 1, Usage: "replicate the machine over `N` nodes, each GPU's NIC on a rail of a non-blocking network"},
			&cli.BoolFlag{Name: "links", Usage: "print the link table and synthesize nothing"},
			&cli.BoolFlag{Name: "report", Usage: "print predicted time, cut bound and best bundled plan per size"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the program to `OUT.star`"},
		},
		Action:       func(c *cli.Context) error { return interruptibleOutput(c, func() error { return runSynth(c, d) }) },
		OnUsageError: onUsageError,
	}
}

// loadTopology reads --topo, --hw and --nodes.
func loadTopology(c *cli.Context) (*topo.Topology, error) {
	if !c.IsSet("topo") {
		return nil, usageErr("--topo is required")
	}
	hw, err := topo.LoadHW(c.String("hw"))
	if err != nil {
		return nil, err
	}
	tp, err := topo.Load(c.String("topo"), hw)
	if err != nil {
		return nil, err
	}
	return topo.Replicate(tp, c.Int("nodes"))
}

func runSynth(c *cli.Context, d *deps) error {
	tp, err := loadTopology(c)
	if err != nil {
		return err
	}
	if c.Bool("links") {
		if c.NArg() > 1 {
			return usageErr("synth: want at most one collective, got %d arguments", c.NArg())
		}
		return tp.WriteLinks(d.stdout)
	}
	if c.NArg() != 1 {
		return usageErr("synth: want one collective (allgather, reducescatter or allreduce), got %d arguments", c.NArg())
	}
	coll, err := synth.ParseCollective(c.Args().First())
	if err != nil {
		return usageErr("%v", err)
	}
	cmd := []string{"mscclgo synth", coll.String(), "--topo", c.String("topo"), "--hw", c.String("hw")}
	if n := c.Int("nodes"); n > 1 {
		cmd = append(cmd, "--nodes", fmt.Sprint(n))
	}
	res, err := synth.Synthesize(c.Context, synth.Options{Collective: coll, Topology: tp, TopoName: c.String("topo"), HWName: c.String("hw"), Command: strings.Join(cmd, " ")})
	if err != nil {
		return err
	}
	out := c.String("output")
	if out == "" {
		if _, err := d.stdout.Write(res.Star); err != nil {
			return err
		}
	} else if err := atomicfile.WriteAll(c.Context, []string{out}, func(_ int, w io.Writer) error { _, err := w.Write(res.Star); return err }); err != nil {
		return err
	}
	last := res.Points[len(res.Points)-1]
	fmt.Fprintf(d.stderr, "mscclgo synth: %s: %d programs, verified on the CPU backend; at %d bytes %.1f GB/s algbw, %.1f%% of the cut bound (%.1f s)\n",
		res.Name, len(res.Programs), last.Size, last.AlgBW, 100*last.BoundUS/last.TimeUS, res.Elapsed.Seconds())
	if c.Bool("report") {
		return synthReport(c, d, coll, tp, res)
	}
	return nil
}

// synthReport prints the report table.
func synthReport(c *cli.Context, d *deps, coll synth.Collective, tp *topo.Topology, res *synth.Result) error {
	sizes := make([]uint64, len(res.Points))
	for i, p := range res.Points {
		sizes[i] = p.Size
	}
	best, err := synth.BestBundled(c.Context, coll, tp, sizes)
	if err != nil {
		return err
	}
	w := d.stdout
	if c.String("output") == "" {
		w = d.stderr // the program went to standard output
	}
	fmt.Fprintf(w, "# mscclgo synth %s on %s (%s): predicted time per call, float16, in place\n", coll, c.String("topo"), c.String("hw"))
	fmt.Fprintf(w, "# %12s %12s %12s %9s %12s  %s\n", "size (B)", "synth (us)", "bound (us)", "of bound", "bundled (us)", "bundled plan")
	for i, p := range res.Points {
		b := best[i]
		bt, bn := "-", "(none serves the call)"
		if b.Name != "" {
			bt, bn = fmt.Sprintf("%.2f", b.TimeUS), b.Name
		}
		fmt.Fprintf(w, "  %12d %12.2f %12.2f %8.1f%% %12s  %s\n", p.Size, p.TimeUS, p.BoundUS, 100*p.BoundUS/p.TimeUS, bt, bn)
	}
	if lg := res.Largest; lg.TimeUS > 0 && lg.Size > res.Points[len(res.Points)-1].Size {
		// The largest sizes go to a bundled plan: what the synthesized
		// program would do there.
		fmt.Fprintf(w, "# not served (a bundled plan is predicted faster): at %d bytes the fastest synthesized candidate, %s, takes %.2f us, %.1f%% of the bound\n",
			lg.Size, lg.Variant, lg.TimeUS, 100*lg.BoundUS/lg.TimeUS)
	}
	return nil
}
