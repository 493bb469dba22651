package multiproc

// bench_test.go compares a 4-rank allreduce run as four processes (one
// rank each, torchrun variables) with the same run in one process, at
// 1 KiB (the LL all-pairs plan) and 64 MiB (reduce-scatter + all-gather),
// in the same benchmark run:
//
//	go test ./tests/multiproc -run XXX -bench Allreduce4 -benchtime 3x
//
// Each iteration is a whole `mscclgo run` of 20 launches after 2
// warm-ups; the metric us/launch is the time column of its table (the
// slowest rank's mean per launch for the multi-process run), so process
// start-up and connection set-up are not counted.

import (
	"context"
	"strconv"
	"testing"
)

func BenchmarkAllreduce4(b *testing.B) {
	dir := b.TempDir()
	// The LL all-pairs plan for small messages, RS+AG for large ones.
	plans := map[string]string{
		"1K":  evalPlan(b, dir, "allreduce_packet", "world_size=4"),
		"64M": evalPlan(b, dir, "allreduce_rsag", "world_size=4"),
	}
	for _, size := range []string{"1K", "64M"} {
		p := plans[size]
		args := []string{"run", p, "-d", "float", "--size", size, "-n", "20", "-w", "2", "--timeout", "30s"}
		for _, mode := range []string{"one-process", "four-processes"} {
			b.Run(size+"/"+mode, func(b *testing.B) {
				var sum float64
				for range b.N {
					var out string
					if mode == "one-process" {
						o, err := rankCmd(context.Background(), dir, nil, append(args, "--one-process")...).Output()
						if err != nil {
							b.Fatal(err)
						}
						out = string(o)
					} else {
						procs := startRanks(b, context.Background(), 4, nil, nil, args...).wait(b)
						for r, pr := range procs {
							if pr.code != 0 {
								b.Fatalf("rank %d: %s", r, pr.stderr)
							}
						}
						out = procs[0].stdout
					}
					rows := tableRows(out)
					if len(rows) != 1 {
						b.Fatalf("no table:\n%s", out)
					}
					us, err := strconv.ParseFloat(rows[0][5], 64)
					if err != nil {
						b.Fatal(err)
					}
					sum += us
				}
				b.ReportMetric(sum/float64(b.N), "us/launch")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
