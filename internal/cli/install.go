package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
)

func installCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "generate, validate and install the default plan set",
		Description: "Evaluates every bundled algorithm at every shape of the default set, checks each plan on the\n" +
			"CPU backend (correct results at three message sizes of its range, no deadlock, no race), and\n" +
			"only then replaces DIR with the plans and an index.json for plan selection.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "install into `DIR` (default: $MSCCLGO_CACHE_DIR/default or ~/.cache/mscclgo/default)"},
			&cli.StringFlag{Name: "dtype", Value: "float16", Usage: "element `TYPE` of the validation runs"},
			&cli.StringFlag{Name: "max-check-size", Value: "1M", Usage: "largest message `SIZE` validated on the CPU backend"},
			&cli.StringFlag{Name: "backend", Usage: "validate on `NAME` (" + strings.Join(knownBackends, ", ") + "; default cpu, with race detection)"},
			&cli.IntFlag{Name: "threads", Usage: "threads per block of the gpu and gpu-emu backends (`N`)"},
		},
		Action:       func(c *cli.Context) error { return runInstall(c, d) },
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
		if dir, err = defaultPlanDir(); err != nil {
			return err
		}
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return usageErr("--dtype: %v", err)
	}
	maxCheck, err := parseSize(c.String("max-check-size"))
	if err != nil {
		return usageErr("--max-check-size: %v", err)
	}
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		return err
	}
	opts := algorithms.InstallOptions{Dir: dir, Context: c.Context, DType: dt, MaxCheckBytes: maxCheck}
	if name := c.String("backend"); name != "" && name != "cpu" {
		if name == "gpu" && !builtIn("gpu") {
			return handOver(d)
		}
		b, err := pickBackend(name)
		if err != nil {
			return err
		}
		opts.Backend = b.new(c.Int("threads"))
	}
	if f, ok := d.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(len(jobs),
			progressbar.OptionSetWriter(d.stderr),
			progressbar.OptionSetDescription("installing plans"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
		)
		opts.Progress = func(done, total int, job string) {
			bar.Describe(job)
			bar.Set(done)
		}
		defer bar.Finish()
	}
	idx, err := algorithms.Install(jobs, opts)
	if err != nil {
		return fmt.Errorf("%v\nthe installed plan set in %s was left unchanged", err, dir)
	}
	fmt.Fprintf(d.stdout, "installed %d plans from %d algorithm shapes into %s\n", len(idx.Plans), len(jobs), dir)
	return nil
}
