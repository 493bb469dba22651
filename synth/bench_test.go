package synth

// bench_test.go is make bench-synth: the ratio table of issue 45 (no
// timed test: it prints, and fails only where synthesis fails).

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/topo"
)

// TestBenchSynth prints, for every bundled topology and collective, the
// modelled algbw of the synthesized program at 256 MiB against the cut
// bound, the worst ratio of its time to the best bundled plan's over the
// sizes, and how long synthesis took; then the synthesis time on 4 x 8
// and 32 x 8 GPUs.
func TestBenchSynth(t *testing.T) {
	if os.Getenv("MSCCLGO_SYNTH_BENCH") == "" {
		t.Skip("make bench-synth runs it (MSCCLGO_SYNTH_BENCH=1)")
	}
	var b strings.Builder
	row := func(format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", args...)
		fmt.Printf(format+"\n", args...)
	}
	t.Run("single", func(t *testing.T) { benchSingle(t, row) })
	t.Run("multi", func(t *testing.T) { benchMulti(t, row) })
}

// benchSingle is the table of the bundled single-node topologies.
func benchSingle(t *testing.T, row func(string, ...any)) {
	row("| topology | profile | collective | algbw at 256 MiB (GB/s) | cut bound (GB/s) | of bound | >= 0.9 | synthesized at 256 MiB, served or not: of bound (candidate) | worst synth/bundled time (size, plan) | sizes served | synthesis (s) |")
	row("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, tc := range [][2]string{{"dgx1-v100", "v100-sxm2"}, {"pcie-2socket", "a100-pcie"}, {"dgx-h100", "h100-sxm"}, {"dgx-h100-nv12", "h100-sxm"}} {
		if only := os.Getenv("MSCCLGO_SYNTH_TOPO"); only != "" && only != tc[0] {
			continue // MSCCLGO_SYNTH_TOPO=dgx1-v100: that topology's rows only
		}
		for _, c := range []Collective{AllGather, ReduceScatter, AllReduce} {
			tp := load(t, tc[0], tc[1], 1)
			res, err := Synthesize(context.Background(), Options{Collective: c, Topology: tp, TopoName: tc[0], HWName: tc[1], Command: "make bench-synth"})
			if err != nil {
				t.Errorf("%s %s: %v", tc[0], c, err)
				continue
			}
			var at Point
			for _, p := range res.Points {
				if p.Size <= 256<<20 {
					at = p
				}
			}
			sizes := make([]uint64, len(res.Points))
			for i, p := range res.Points {
				sizes[i] = p.Size
			}
			best, err := BestBundled(context.Background(), c, tp, sizes)
			if err != nil {
				t.Fatal(err)
			}
			worst, wat := 0.0, "none serves the call"
			for i, p := range res.Points {
				if best[i].Name == "" {
					continue
				}
				if r := p.TimeUS / best[i].TimeUS; r > worst {
					worst, wat = r, fmt.Sprintf("%s, %s", sizeName(p.Size), best[i].Name)
				}
			}
			ratio := at.BoundUS / at.TimeUS
			mark := "yes"
			if ratio < 0.9 {
				mark = "no"
			}
			ws := "-"
			if worst > 0 {
				ws = fmt.Sprintf("%.2f (%s)", worst, wat)
			}
			served := fmt.Sprintf("%s to %s", sizeName(res.Variants[0].Min), sizeName(res.Variants[len(res.Variants)-1].Max))
			lg := res.Largest
			row("| %s | %s | %s | %.1f | %.1f | %.3f | %s | %.3f (%s) | %s | %s | %.1f |", tc[0], tc[1], c, at.AlgBW, float64(at.Size)/1e3/at.BoundUS, ratio, mark, lg.BoundUS/lg.TimeUS, lg.Variant, ws, served, res.Elapsed.Seconds())
		}
	}
}

// benchMulti is the synthesis time on several nodes (hierarchical).
func benchMulti(t *testing.T, row func(string, ...any)) {
	row("")
	row("| machine | collective | GPUs | synthesis (s) | CPU time (s) | target (s) | algbw at 256 MiB of the bound |")
	row("|---|---|---|---|---|---|---|")
	for _, tc := range []struct {
		nodes  int
		coll   Collective
		target float64
	}{{4, AllGather, 10}, {4, ReduceScatter, 10}, {4, AllReduce, 10}, {32, AllGather, 60}} {
		if only := os.Getenv("MSCCLGO_SYNTH_NODES"); only != "" && only != fmt.Sprint(tc.nodes) {
			continue // MSCCLGO_SYNTH_NODES=4: the rows of 4 nodes only
		}
		hw, _ := topo.LoadHW("h100-sxm")
		tp, err := topo.Load("dgx-h100", hw)
		if err != nil {
			t.Fatal(err)
		}
		if tp, err = topo.Replicate(tp, tc.nodes); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(30*tc.target)*time.Second)
		start, cpu0 := time.Now(), cpuTime()
		res, err := Synthesize(ctx, Options{Collective: tc.coll, Topology: tp, TopoName: "dgx-h100", HWName: "h100-sxm", Command: "make bench-synth"})
		cancel()
		took, ratio := fmt.Sprintf("%.1f", time.Since(start).Seconds()), "-"
		cpu := fmt.Sprintf("%.1f", (cpuTime() - cpu0).Seconds())
		if err != nil {
			took = fmt.Sprintf("failed after %.1f: %v", time.Since(start).Seconds(), err)
		} else {
			p := res.Points[len(res.Points)-1]
			ratio = fmt.Sprintf("%.3f", p.BoundUS/p.TimeUS)
		}
		row("| %d x DGX H100 | %s | %d | %s | %s | %.0f | %s |", tc.nodes, tc.coll, tp.NumGPUs(), took, cpu, tc.target, ratio)
	}
}

func sizeName(s uint64) string {
	switch {
	case s == ^uint64(0):
		return "any"
	case s == 0:
		return "0"
	case s >= 1<<20 && s%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", s>>20)
	case s >= 1<<10 && s%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", s>>10)
	}
	return fmt.Sprintf("%d B", s)
}

// cpuTime is the CPU time this process has used, user and system: on a
// machine shared with other builds it says what a synthesis costs where
// the wall clock does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
