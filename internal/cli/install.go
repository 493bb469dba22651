package cli

// install.go is `mscclgo install`: its flags, progress output and the
// validation cache's location. SIGINT and SIGTERM stop it cleanly (see
// interrupt.go).

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/internal/termtext"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/planset"
	"github.com/mscclgo/mscclgo/planset/install"
	"github.com/mscclgo/mscclgo/synth"
	"github.com/mscclgo/mscclgo/topo"
)

func installCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "generate, validate and install the default plan set",
		Description: "Evaluates every bundled algorithm at every shape of the default set, checks each plan on the\n" +
			"CPU backend (correct results at three message sizes of its range, no deadlock, no race), and\n" +
			"only then replaces DIR with the plans and an index.json for plan selection, in one atomic step\n" +
			"(DIR is a symbolic link to .DIR.set-ID beside it). Plans run concurrently; a plan this build already\n" +
			"validated with the same settings (recorded in $MSCCLGO_CACHE_DIR/validated or\n" +
			"~/.cache/mscclgo/validated) is not run again unless --no-cache. SIGINT or SIGTERM stops it,\n" +
			"removes the partial set and leaves DIR as it was (exit status 130 or 143).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "install into `DIR` (default: $MSCCLGO_CACHE_DIR/default or ~/.cache/mscclgo/default)"},
			&cli.StringFlag{Name: "dtype", Value: "float16", Usage: "element `TYPE` of the validation runs"},
			&cli.StringFlag{Name: "max-check-size", Value: "1M", Usage: "validate at message sizes up to `SIZE` where the plan's range allows three"},
			&cli.StringFlag{Name: "backend", Usage: "validate on `NAME` (" + strings.Join(knownBackends, ", ") + "; default cpu, with race detection)"},
			&cli.IntFlag{Name: "threads", Usage: "threads per block of the gpu and gpu-emu backends (`N`)"},
			&cli.BoolFlag{Name: "no-cache", Usage: "validate every plan, even those the validation cache records as validated"},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, DefaultText: "the number of CPUs Go uses", Usage: "validate up to `N` plans at once"},
			&cli.StringFlag{Name: "hw", Usage: "predict every plan on hardware profile `NAME` (or a profile file), record the curves in the index and set each plan's size range where it is predicted fastest (docs/model.md)"},
			&cli.StringFlag{Name: "launch", Value: "graph", Usage: "with --hw: the launch overhead of the predictions, `graph` or kernel"},
			&cli.StringFlag{Name: "topo", Usage: "also install the programs mscclgo synth writes for the machine in `FILE` (allgather, reducescatter, allreduce); --hw then names its GPU profile, and the plans of its shape get their size ranges where the model on its links predicts them fastest (docs/synthesis.md)"},
			&cli.IntFlag{Name: "nodes", Value: 1, Usage: "with --topo: `N` copies of the machine on a rail network"},
		},
		Action:       func(c *cli.Context) error { return interruptible(c, func() error { return runInstall(c, d) }) },
		OnUsageError: onUsageError,
	}
}

func runInstall(c *cli.Context, d *deps) error {
	if c.NArg() != 0 {
		return usageErr("install takes no arguments, got %d", c.NArg())
	}
	dir := c.String("dir")
	if dir == "" {
		var err error
		if dir, err = planset.DefaultDir(); err != nil {
			return err
		}
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return usageErr("--dtype: %v", err)
	}
	maxCheck, err := bytesize.Parse(c.String("max-check-size"))
	if err != nil {
		return usageErr("--max-check-size: %v", err)
	}
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		return err
	}
	var algos fs.FS
	var tp *topo.Topology
	if c.IsSet("topo") {
		if !c.IsSet("hw") {
			return usageErr("--topo needs --hw, the machine's GPU profile (%s)", strings.Join(topo.HWNames(), ", "))
		}
		if tp, err = loadTopology(c); err != nil {
			return err
		}
		cmd := fmt.Sprintf("mscclgo install --topo %s --hw %s", c.String("topo"), c.String("hw"))
		var results []*synth.Result
		if algos, jobs, results, err = synth.InstallSet(c.Context, synth.Options{Topology: tp, TopoName: c.String("topo"), HWName: c.String("hw"), Command: cmd}); err != nil {
			return err
		}
		for _, r := range results {
			fmt.Fprintf(d.stderr, "mscclgo: synthesized %s: %d programs\n", r.Name, len(r.Programs))
		}
	} else if c.IsSet("nodes") {
		return usageErr("--nodes applies to --topo")
	}
	if c.Int("jobs") < 0 {
		return usageErr("--jobs: %d is negative", c.Int("jobs"))
	}
	opts := install.Options{
		Dir: dir, Context: c.Context, DType: dt, MaxCheckBytes: maxCheck,
		CacheDir: install.DefaultCacheDir(), NoCache: c.Bool("no-cache"), Workers: c.Int("jobs"),
		Note:       func(msg string) { fmt.Fprintf(d.stderr, "mscclgo: note: %s\n", msg) },
		Algorithms: algos,
	}
	if tp != nil {
		hw, err := synth.ModelProfile(tp.HW)
		if err != nil {
			return err
		}
		mo, err := launchOption(c.String("launch"))
		if err != nil {
			return err
		}
		mo.Network = synth.Network(tp)
		opts.Tune = &install.TuneOptions{Hardware: hw, Model: mo, DType: dt}
	} else if c.IsSet("hw") {
		hw, err := model.LoadProfile(c.String("hw"))
		if err != nil {
			return err
		}
		mo, err := launchOption(c.String("launch"))
		if err != nil {
			return err
		}
		opts.Tune = &install.TuneOptions{Hardware: hw, Model: mo, DType: dt}
	} else if c.IsSet("launch") {
		return usageErr("--launch applies to --hw")
	}
	if name := c.String("backend"); name != "" && name != "cpu" {
		if name == "gpu" && !builtIn("gpu") {
			return handOver(d)
		}
		b, err := pickBackend(name)
		if err != nil {
			return err
		}
		opts.Backend = b.new(oneProcess(c))
	}
	if f, ok := d.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(len(jobs),
			progressbar.OptionSetWriter(d.stderr),
			progressbar.OptionSetDescription("installing plans"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
		)
		// The description is what varies in width (long shape names):
		// the bar, the count and the rate take about 50 columns.
		descWidth := max(termtext.Width(d.stderr)-50, 10)
		opts.Progress = func(ev install.Event) {
			if !ev.Finished {
				bar.Describe(termtext.Fit(ev.Job, descWidth))
			}
			bar.Set(ev.Done)
		}
		defer bar.Finish()
	} else {
		opts.Progress = func(ev install.Event) {
			if ev.Finished {
				fmt.Fprintln(d.stderr, ev.Line())
			}
		}
	}
	idx, err := install.Install(jobs, opts)
	if err != nil {
		return fmt.Errorf("%w\nthe installed plan set in %s was left unchanged", err, dir)
	}
	fmt.Fprintf(d.stdout, "installed %d plans from %d algorithm shapes into %s\n", len(idx.Plans), len(jobs), dir)
	if opts.Tune != nil {
		fmt.Fprintf(d.stdout, "size ranges set where each plan is predicted fastest on %s (%s launch, %s)\n", opts.Tune.Hardware.Name, c.String("launch"), dt.Name())
	}
	return nil
}
