//go:build cgo

package emu

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
)

// TestSteadyCallAllocatesNothing: a steady-state call (an in-place
// 128-byte LL allreduce, 2 ranks as goroutines, its buffers known) makes
// no allocation on the caller's side: no goroutine, channel, closure or
// record per call (the session's server, the launch records and the
// emulated stream's work are reused). The callers' streams are held by
// a piece of host work meanwhile, so that the gates and the servers,
// which run elsewhere, allocate nothing during the count (what they did
// before it is rounded away by AllocsPerRun's mean over 40 calls); as
// many launches were in flight once before, so that there are records
// to reuse.
func TestSteadyCallAllocatesNothing(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c, lay := smallLLCase(t)
	var measured sync.WaitGroup
	measured.Add(2)
	errs := withRanksConfig(t, ss, 2, func(*gpu.Config) {}, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		for range 3 {
			if err := cr.comm.Enqueue(context.Background(), call); err != nil {
				return err
			}
			if err := ss.Synchronize(cr.st, time.Minute); err != nil {
				return err
			}
		}
		// Calls while the stream is held by host work (release ends it),
		// then every launch served.
		var callErr error
		held := func(release chan struct{}, calls func()) error {
			if err := ss.Do(cr.st, func() { <-release }); err != nil {
				return err
			}
			calls()
			close(release)
			if err := ss.Synchronize(cr.st, time.Minute); err != nil {
				return err
			}
			return cr.comm.Quiet(time.Minute)
		}
		call1 := func() {
			if err := cr.comm.Enqueue(context.Background(), call); err != nil && callErr == nil {
				callErr = err
			}
		}
		// As many launches in flight as the count makes, once, so that
		// their records are there to be reused.
		if err := held(make(chan struct{}), func() {
			for range 41 {
				call1()
			}
		}); err != nil {
			return err
		}
		var allocs float64
		if err := held(make(chan struct{}), func() {
			allocs = testing.AllocsPerRun(40, call1)
			measured.Done()
			measured.Wait()
		}); err != nil {
			return err
		}
		if callErr != nil {
			return callErr
		}
		if allocs != 0 {
			return fmt.Errorf("a steady call allocates %v objects on the caller's side; want 0", allocs)
		}
		return cr.comm.AsyncError()
	})
	noErrors(t, errs)
}
