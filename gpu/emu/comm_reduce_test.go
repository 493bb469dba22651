//go:build cgo

package emu

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu/gputest"
)

// TestCommReduce: calls of one plan instance (one Key) with different
// reductions (CommCall.Reduce) run in sessions of their own, each with
// its op, checked against the closed form after every call; a call whose
// Open gives another op fails naming both, and ranks calling with
// different ops fail with a mismatch naming the reductions' keys.
func TestCommReduce(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	ops := []executor.ReduceOp{executor.ReduceMax, executor.ReduceSum, executor.ReduceProd, executor.ReduceMax, executor.ReduceMin}
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		for seq, op := range ops {
			input := make([]byte, cr.inLen)
			lay.FillRank(input, cr.rank, seq)
			if err := cr.dev.HtoD(cr.in, input); err != nil {
				return err
			}
			call := c.call(lay, cr, executor.Options{DType: c.dt})
			call.Reduce = op
			if err := cr.comm.Enqueue(context.Background(), call); err != nil {
				return err
			}
			if err := cr.settled(ss); err != nil {
				return err
			}
			out := make([]byte, cr.outLen)
			if err := cr.dev.DtoH(out, cr.out); err != nil {
				return err
			}
			lay.Reduce = op
			if wrong, err := lay.CheckRank(out, cr.rank, seq); err != nil || wrong != 0 {
				return fmt.Errorf("call %d (%v): %d wrong elements (%v)", seq, op, wrong, err)
			}
		}
		if open, _ := cr.comm.Sessions(); open != 4 {
			return fmt.Errorf("%d sessions open after calls with 4 reductions, want 4", open)
		}
		// Open's options disagree with the call.
		call := c.call(lay, cr, executor.Options{DType: c.dt, Reduce: executor.ReduceMin})
		call.Key += "/other"
		call.Reduce = executor.ReduceMax
		err := cr.comm.Enqueue(context.Background(), call)
		if err == nil || !strings.Contains(err.Error(), "reduces with max, its Open's options with min") {
			return fmt.Errorf("a call of max whose Open says min: %v", err)
		}
		return nil
	})
	noErrors(t, errs)

	// Ranks that call with different reductions.
	errs = withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if cr.rank == 1 {
			call.Reduce = executor.ReduceMax
		}
		return cr.comm.Enqueue(context.Background(), call)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "for different plan instances or reductions") || !strings.Contains(err.Error(), `reduce=max"`) {
			t.Errorf("rank %d: %v, want the mismatch of the reductions named", r, err)
		}
	}
}
