package cli

// modelv.go holds `mscclgo model` for alltoallv plans (--counts): the
// plan is bound to the counts of a file or a generator and the call is
// predicted as any other (model.PredictCounts), printed as run --counts
// prints a run.

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
)

// runModelCounts predicts plan, an alltoallv plan read from path, for the
// counts of --counts.
func runModelCounts(c *cli.Context, d *deps, path string, p *plan.Plan, o *modelOptions) error {
	if p.AllToAllV == nil {
		return usageErr("%s: --counts applies to alltoallv plans; this one is %s", path, p.Collective)
	}
	spec := c.String("counts")
	if spec == "" {
		return usageErr("%s: an alltoallv plan has per-call block sizes: give --counts FILE or a generator (uniform, random, moe), not --size", path)
	}
	for _, f := range []string{"size", "minbytes", "maxbytes", "stepbytes", "in-place", "ll8", "fit", "params", "output"} {
		if c.IsSet(f) {
			return usageErr("--%s does not apply to an alltoallv prediction (the sizes come from --counts)", f)
		}
	}
	n := len(p.GPUs)
	counts, err := executor.CountsFor(spec, n)
	if err != nil {
		return err
	}
	if counts.Ranks() != n {
		return fmt.Errorf("--counts %s: a %d×%d matrix for a plan of %d ranks", spec, counts.Ranks(), counts.Ranks(), n)
	}
	opts := o.opts
	opts.NoTimeline = true
	pt, err := model.PredictCounts(p, counts, o.dtype, o.hw, opts)
	if err != nil {
		return fmt.Errorf("%s: --counts %s: %w", path, spec, err)
	}
	perNode := opts.RanksPerNode
	if perNode == 0 {
		perNode = o.hw.GPUsPerNode
	}
	launch := "graph"
	if opts.PlainLaunch {
		launch = "kernel"
	}
	w := d.stdout
	fmt.Fprintf(w, "# mscclgo model %s: plan %q, collective alltoallv, %d ranks (%d node(s) of %d), protocol %s\n", path, p.Name, n, (n+perNode-1)/perNode, perNode, p.Protocol)
	fmt.Fprintf(w, "# predicted on %s (%s), %s launch, dtype %s, counts %s\n", o.hw.Name, o.hw.Description, launch, o.dtype.Name(), spec)
	fmt.Fprintf(w, "# %d bytes sent in all, largest block %d bytes\n#\n", pt.Bytes, harness.LargestBlock(counts)*int64(o.dtype.Size()))
	fmt.Fprintf(w, "#%11s  %8s  %9s  %9s  %8s\n", "total (B)", "type", "time (us)", "algbw GB/s", "#wrong")
	fmt.Fprintf(w, "%12d  %8s  %9s  %9.2f  %8s\n", pt.Bytes, o.dtype.Name(), harness.FormatTime(pt.Time), pt.AlgBW, "-")
	return nil
}
