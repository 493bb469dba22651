package multiproc

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestRunParameterMismatch: ranks started with different plans or flags
// all refuse the job at set-up with the same error naming the parameter
// and both values, instead of hanging or ending with different statuses.
func TestRunParameterMismatch(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allgather", "world_size=2")
	other := evalPlan(t, dir, "allreduce_packet", "world_size=2")
	base := []string{"-d", "float", "--size", "64K"}
	cases := []struct {
		name  string
		rank1 []string // rank 1's command line; rank 0 runs p with base
		want  string
	}{
		{"iters", append([]string{"run", p, "-n", "5"}, base...), "--iters is 5 on rank 1 but 10 on rank 0"},
		{"sweep", []string{"run", p, "-d", "float", "-b", "1K", "-e", "64K"}, "the sizes (--size, -b/-e/-f/-i) is 1024 2048"},
		{"dtype", []string{"run", p, "-d", "half", "--size", "64K"}, "--dtype is half on rank 1 but float on rank 0"},
		{"plan", append([]string{"run", other}, base...), "the plan (SHA-256) is "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangBound)
			defer cancel()
			port := freePort(t)
			var outs []*bytes.Buffer
			var cmds = make([]interface{ Wait() error }, 2)
			for r := range 2 {
				args := append([]string{"run", p}, base...)
				if r == 1 {
					args = c.rank1
				}
				env := []string{fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2", fmt.Sprintf("LOCAL_RANK=%d", r),
					"LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port)}
				cmd := rankCmd(ctx, t.TempDir(), env, args...)
				var e bytes.Buffer
				cmd.Stderr = &e
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				outs = append(outs, &e)
				cmds[r] = cmd
			}
			for r, cmd := range cmds {
				err := cmd.Wait()
				if ctx.Err() != nil {
					t.Fatalf("rank %d still running after %v", r, hangBound)
				}
				if err == nil || !strings.Contains(err.Error(), "exit status 2") {
					t.Errorf("rank %d: %v, want exit status 2", r, err)
				}
				msg := outs[r].String()
				if !strings.Contains(msg, "the ranks were started with different run parameters") || !strings.Contains(msg, c.want) {
					t.Errorf("rank %d: stderr lacks %q:\n%s", r, c.want, msg)
				}
			}
		})
	}
}
