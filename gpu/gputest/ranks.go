package gputest

// ranks.go runs a plan with one GPU rank session per rank (gpu.OpenRank),
// connected by package bootstrap over loopback TCP inside the test process:
// each rank has its own driver, device memory and IPC handles, as
// separate processes would. The drivers' tests compare the outputs with
// the CPU backend's single-process run byte for byte.

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// RankCase is one run of rank sessions.
type RankCase struct {
	Plan   *plan.Plan
	Layout *harness.Layout
	Opts   executor.Options
	// Hosts[r] numbers rank r's host (nil: one host).
	Hosts    []int
	Launches int
	// Dir is an empty directory for the rendezvous file.
	Dir string
	// Configs[r] is rank r's backend configuration (nil: RunRanks's cfg
	// for every rank), e.g. to place ranks on different devices.
	Configs []gpu.Config
}

// RunRanks runs c with one rank session of cfg per rank and returns each
// rank's output after the last launch, or the first error of each rank
// (a rank whose launch succeeded reports the first failed peer's).
func RunRanks(ctx context.Context, cfg gpu.Config, c RankCase) ([][]byte, []error) {
	n := len(c.Plan.GPUs)
	hosts := c.Hosts
	if hosts == nil {
		hosts = make([]int, n)
	}
	outs := make([][]byte, n)
	errs := make([]error, n)
	file := filepath.Join(c.Dir, "rank0.addr")
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				w := bootstrap.World{Rank: r, Size: n, RendezvousFile: file, RendezvousHost: "127.0.0.1", Host: fmt.Sprintf("host%d", hosts[r])}
				b, err := bootstrap.Connect(ctx, w, bootstrap.Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
				if err != nil {
					return fmt.Errorf("connect: %w", err)
				}
				defer b.Close()
				inst, err := executor.Instantiate(c.Plan, c.Layout.Sizes)
				if err != nil {
					return err
				}
				rcfg := cfg
				if c.Configs != nil {
					rcfg = c.Configs[r]
				}
				rs, err := gpu.OpenRank(ctx, rcfg, inst, c.Layout.BufferLayout, c.Opts, rankwire.World{Net: b, Host: hosts, Tag: 1000})
				if err != nil {
					return err
				}
				defer rs.Close()
				for seq := range max(c.Launches, 1) {
					c.Layout.FillRank(rs.Buffers().Input, r, seq)
					// Every rank finishes a launch before anyone refills,
					// and learns how the others' went.
					if err := exchange(ctx, b, rs.Launch(ctx)); err != nil {
						return err
					}
				}
				outs[r] = append([]byte(nil), rs.Buffers().Output...)
				return b.Barrier(ctx)
			}()
		}()
	}
	wg.Wait()
	return outs, errs
}

// exchange all-gathers each rank's launch result and returns this rank's
// error, else the first failure of another rank.
func exchange(ctx context.Context, b *bootstrap.Bootstrap, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	parts, gerr := b.AllGather(ctx, []byte(msg))
	if err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	for r, p := range parts {
		if len(p) > 0 {
			return fmt.Errorf("rank %d: %s", r, p)
		}
	}
	return nil
}

// SingleCPU runs c's plan on the CPU backend in one process and returns
// every rank's output after the last launch.
func SingleCPU(ctx context.Context, c RankCase) ([][]byte, error) {
	inst, err := executor.Instantiate(c.Plan, c.Layout.Sizes)
	if err != nil {
		return nil, err
	}
	sess, err := cpu.New().Open(inst, c.Opts)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	bufs := c.Layout.Alloc()
	for seq := range max(c.Launches, 1) {
		c.Layout.FillInputs(bufs, seq)
		if err := sess.Launch(ctx, bufs); err != nil {
			return nil, err
		}
	}
	outs := make([][]byte, len(bufs))
	for r, b := range bufs {
		outs[r] = b.Output
	}
	return outs, nil
}
