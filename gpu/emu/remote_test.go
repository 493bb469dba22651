//go:build cgo

package emu

// remote_test.go covers the steady state of communicators whose ranks
// span hosts (gpu/remote.go): two pretend hosts of two ranks each, in
// this process, running the hierarchical packet allreduce (memory
// channels inside a host, port channels between hosts).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
)

// twoHosts is rank r's pretend host in the tests: ranks 0 and 1 on host
// 0, ranks 2 and 3 on host 1.
var twoHosts = []int{0, 0, 1, 1}

func twoHostCase(t testing.TB) commCase {
	return commCase{name: "allreduce_hier_packet",
		plan: gputest.AlgorithmPlan(t, "allreduce_hier_packet", map[string]string{"world_size": "4", "ranks_per_node": "2",
			"nblocks": "2", "instances": "1", "min_message_size": "0"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
}

// within runs f and returns its error, or says that it did not return
// within d (f then goes on in the background; done is closed when it
// returns, with its error in *ferr).
func within(d time.Duration, f func() error) (ferr *error, done chan struct{}, returned bool) {
	ferr = new(error)
	done = make(chan struct{})
	go func() {
		defer close(done)
		*ferr = f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return ferr, done, true
	case <-t.C:
		return ferr, done, false
	}
}

// TestCommRemoteSteady: once a plan instance is open, a call of a
// communicator spanning two hosts returns before the ranks of the other
// host have made it (it does not meet them), and the values are right
// after several calls.
func TestCommRemoteSteady(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := twoHostCase(t)
	c.launches = 4
	lay := c.layout(t)
	n := len(twoHosts)
	outs := make([][]byte, n)
	// host0Returned[seq] is done when both ranks of host 0 have returned
	// from call seq (or given up waiting for it).
	host0Returned := make([]sync.WaitGroup, c.launches)
	for i := range host0Returned {
		host0Returned[i].Add(2)
	}
	errs := withHosts(t, ss, twoHosts, func(cfg *gpu.Config) {}, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		opts := executor.Options{DType: c.dt}
		var errs []error
		for seq := range c.launches {
			input := make([]byte, cr.inLen)
			lay.FillRank(input, cr.rank, seq)
			if err := ss.Do(cr.st, func() { _ = cr.dev.HtoD(cr.in, input) }); err != nil {
				return err
			}
			call := c.call(lay, cr, opts)
			if twoHosts[cr.rank] == 1 && seq > 0 {
				// Host 1 calls once host 0's calls have returned.
				if _, done, ok := within(20*time.Second, func() error { host0Returned[seq].Wait(); return nil }); !ok {
					errs = append(errs, fmt.Errorf("call %d: host 0's ranks have not returned within 20 s before host 1's made the call (they meet them)", seq))
					_ = done
				}
			}
			ferr, done, ok := within(20*time.Second, func() error { return cr.comm.Enqueue(context.Background(), call) })
			if twoHosts[cr.rank] == 0 {
				host0Returned[seq].Done()
			}
			if !ok {
				<-done
			}
			if *ferr != nil {
				return fmt.Errorf("call %d: %w", seq, *ferr)
			}
			if seq == 0 {
				// The first call opens the session (a meeting).
				if err := ss.Synchronize(cr.st, time.Minute); err != nil {
					return err
				}
			}
		}
		if err := cr.settled(ss); err != nil {
			return err
		}
		out := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(out, cr.out); err != nil {
			return err
		}
		outs[cr.rank] = out
		// The port traffic's acknowledgements need every rank's
		// receivers until every launch has ended.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return errors.Join(append(errs, cr.boot.Barrier(ctx))...)
	})
	noErrors(t, errs)
	if t.Failed() {
		return
	}
	c.matchCPU(t, c.launches, outs, "")
}

// TestCommRemoteMismatch: a steady-state call that differs on a rank of
// the other host returns on every rank; the mismatch becomes every
// rank's asynchronous error naming both calls, and no output is
// written.
func TestCommRemoteMismatch(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := twoHostCase(t)
	lay := c.layout(t)
	want := "mismatched calls: rank 0 called allreduce_hier_packet of 4096 bytes float, rank 3 called ncclAllReduce count 7"
	// No rank closes its communicator (withHosts, after the body) before
	// every rank has read its error: a rank that finds the mismatch
	// needs the records of the other host, and a peer that closed its
	// bootstrap first ended that exchange (its error then named the
	// closed peer instead; seen once with the cores loaded 3 times over).
	var arrived sync.WaitGroup
	arrived.Add(len(twoHosts))
	errs := withHosts(t, ss, twoHosts, func(cfg *gpu.Config) {}, func(cr *commRank) error {
		defer func() {
			arrived.Done()
			within(time.Minute, func() error { arrived.Wait(); return nil })
		}()
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		first := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(first, cr.out); err != nil {
			return err
		}
		if cr.rank == 3 {
			call.Desc = "ncclAllReduce count 7"
		}
		ferr, done, ok := within(20*time.Second, func() error { return cr.comm.Enqueue(context.Background(), call) })
		if !ok {
			<-done
			return fmt.Errorf("call 1 did not return within 20 s (it met its peers): %v", *ferr)
		}
		if *ferr != nil {
			return fmt.Errorf("call 1 failed at once (it should return, its mismatch found later): %w", *ferr)
		}
		if err := cr.drain(ss); err != nil {
			return err
		}
		if aerr := cr.comm.AsyncError(); aerr == nil || !strings.Contains(aerr.Error(), want) {
			return fmt.Errorf("async error %v, want %q", aerr, want)
		}
		after := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(after, cr.out); err != nil {
			return err
		}
		if !bytes.Equal(first, after) {
			return errors.New("the mismatched launch wrote the output")
		}
		return nil
	})
	noErrors(t, errs)
}

// TestCommRemoteAbort: the steady-state call of host 0's ranks, whose
// peers on host 1 never make it, returns at once and waits on its
// stream for their records; Abort ends that wait long before the set-up
// timeout, and the stream drains.
func TestCommRemoteAbort(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := twoHostCase(t)
	lay := c.layout(t)
	var aborted sync.WaitGroup
	aborted.Add(2)
	errs := withHosts(t, ss, twoHosts, func(cfg *gpu.Config) { cfg.SetupTimeout = 10 * time.Minute }, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		if twoHosts[cr.rank] == 1 {
			// Host 1 stays (its connections open) until host 0 has
			// aborted, without making call 1.
			if _, _, ok := within(2*time.Minute, func() error { aborted.Wait(); return nil }); !ok {
				return errors.New("host 0's ranks have not aborted within 2 minutes")
			}
			return abortWithin(cr.comm, time.Minute)
		}
		defer aborted.Done()
		var errs []error
		ferr, done, ok := within(20*time.Second, func() error { return cr.comm.Enqueue(context.Background(), call) })
		if !ok {
			errs = append(errs, errors.New("call 1 did not return within 20 s (it meets its peers)"))
		}
		if err := abortWithin(cr.comm, time.Minute); err != nil {
			return errors.Join(append(errs, err)...)
		}
		<-done
		if ok && *ferr != nil {
			return fmt.Errorf("call 1 failed at once: %w", *ferr)
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if aerr := cr.comm.AsyncError(); ok && (aerr == nil || !strings.Contains(aerr.Error(), "canceled")) {
			errs = append(errs, fmt.Errorf("async error %v, want the cancelled launch", aerr))
		}
		return errors.Join(errs...)
	})
	noErrors(t, errs)
}

// BenchmarkCommRemote makes b.N steady-state calls of the two-host
// communicator, meeting every call (the way such communicators ran
// before remote.go: Config.MeetEveryCall) and not. It reports rank 0's
// host time per call until the call returns (the plan's port channels
// make each call wait for the previous launch, so this includes the
// emulated kernel). Under strace it counts socket system calls per call:
//
//	go test -c -o emu.test ./gpu/emu
//	strace -f -yy -e trace=read,write,readv,writev -o log ./emu.test \
//	    -test.run '^$' -test.bench 'CommRemote/steady' -test.benchtime 450x
func BenchmarkCommRemote(b *testing.B) {
	for _, meet := range []bool{true, false} {
		name := "steady"
		if meet {
			name = "meet"
		}
		b.Run(name, func(b *testing.B) {
			ss := NewStreams()
			defer ss.Close()
			c := twoHostCase(b)
			lay := c.layout(b)
			var ready sync.WaitGroup
			ready.Add(len(twoHosts))
			var took time.Duration
			errs := withHosts(b, ss, twoHosts, func(cfg *gpu.Config) { cfg.MeetEveryCall = meet }, func(cr *commRank) error {
				if err := cr.place(lay.BufferLayout); err != nil {
					return err
				}
				call := c.call(lay, cr, executor.Options{DType: c.dt})
				if err := cr.comm.Enqueue(context.Background(), call); err != nil {
					return err
				}
				if err := ss.Synchronize(cr.st, time.Minute); err != nil {
					return err
				}
				ready.Done()
				ready.Wait()
				if cr.rank == 0 {
					b.ResetTimer()
				}
				var in time.Duration
				for range b.N {
					start := time.Now()
					if err := cr.comm.Enqueue(context.Background(), call); err != nil {
						return err
					}
					in += time.Since(start)
				}
				if cr.rank == 0 {
					took = in
				}
				if err := cr.settled(ss); err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				return cr.boot.Barrier(ctx)
			})
			noErrors(b, errs)
			b.ReportMetric(float64(took.Microseconds())/float64(b.N), "us/call")
		})
	}
}

// TestCommRemotePeerGone: when the ranks of the other host close their
// communicators and bootstraps without making a call, the gates of the
// ranks that made it fail at once, naming the lost records, not after
// the set-up timeout.
func TestCommRemotePeerGone(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := twoHostCase(t)
	lay := c.layout(t)
	errs := withHosts(t, ss, twoHosts, func(cfg *gpu.Config) { cfg.SetupTimeout = 10 * time.Minute }, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := cr.drain(ss); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cr.boot.Barrier(ctx); err != nil {
			return err
		}
		if twoHosts[cr.rank] == 1 {
			return nil // closes its communicator and bootstrap
		}
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 1 failed at once: %w", err)
		}
		if err := cr.drain(ss); err != nil {
			return err
		}
		aerr := cr.comm.AsyncError()
		if aerr == nil || !strings.Contains(aerr.Error(), "call records") || !strings.Contains(aerr.Error(), "closed") {
			return fmt.Errorf("async error %v, want the closed peer's call records named", aerr)
		}
		return nil
	})
	noErrors(t, errs)
}
