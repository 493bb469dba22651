//go:build cgo

package emu

// sessions_test.go: a communicator keeps at most Config.MaxSessions plan
// instances open, closing the least recently called one on every rank,
// and an instance closed that way opens again at its next call.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

// sessionCalls makes rounds round-robin passes over sizes (bytes, each a
// plan instance of its own) of an in-place float sum allreduce on every
// rank, each size in a buffer of its own, and checks every value of every
// call. after runs after each call's check, with the rank. With ipc the
// sessions' memory is exportable (emu.OpenIPC: a mapping of its own per
// allocation), as the NCCL library's is.
func sessionCalls(t *testing.T, ss *Streams, ranks, maxSessions int, ipc bool, sizes []uint64, rounds int, after func(cr *commRank, call int) error) {
	t.Helper()
	p := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": fmt.Sprint(ranks)})
	lays := make([]*harness.Layout, len(sizes))
	for i, size := range sizes {
		lay, err := harness.PlanLayout(p, size, executor.Float32, true)
		if err != nil {
			t.Fatal(err)
		}
		lays[i] = lay
	}
	set := func(cfg *gpu.Config) {
		cfg.SetupTimeout = 20 * time.Second
		cfg.MaxSessions = maxSessions
		if ipc {
			cfg.Open = ss.OpenIPC
		}
	}
	errs := withRanksConfig(t, ss, ranks, set, func(cr *commRank) error {
		type bufs struct{ in, out gpu.DevPtr }
		placed := make([]bufs, len(sizes))
		for i, lay := range lays {
			if err := cr.place(lay.BufferLayout); err != nil {
				return err
			}
			placed[i] = bufs{cr.in, cr.out}
		}
		call := 0
		for round := range rounds {
			for i, size := range sizes {
				cr.in, cr.out = placed[i].in, placed[i].out
				n := int(size / 4)
				img := make([]byte, size)
				for j := range n {
					binary.LittleEndian.PutUint32(img[4*j:], math.Float32bits(float32(cr.rank+1+j%7+round)))
				}
				if err := cr.dev.HtoD(cr.in, img); err != nil {
					return err
				}
				c := commCase{name: "allreduce_packet", plan: p, size: size, dt: executor.Float32, inPlace: true}
				if err := cr.comm.Enqueue(context.Background(), c.call(lays[i], cr, executor.Options{DType: executor.Float32})); err != nil {
					return fmt.Errorf("round %d, %d bytes: %w", round, size, err)
				}
				if err := cr.drain(ss); err != nil {
					return err
				}
				if err := cr.comm.AsyncError(); err != nil {
					return fmt.Errorf("round %d, %d bytes: %w", round, size, err)
				}
				if err := cr.dev.DtoH(img, cr.out); err != nil {
					return err
				}
				sum := ranks * (ranks + 1) / 2
				for j := range n {
					want := float32(sum + ranks*(j%7+round))
					if got := math.Float32frombits(binary.LittleEndian.Uint32(img[4*j:])); got != want {
						return fmt.Errorf("round %d, %d bytes: element %d is %v, want %v", round, size, j, got, want)
					}
				}
				if err := after(cr, call); err != nil {
					return fmt.Errorf("round %d, %d bytes: %w", round, size, err)
				}
				call++
			}
		}
		return nil
	})
	noErrors(t, errs)
}

// TestCommSessionsBounded: with at most 4 sessions, ten sizes called
// round-robin twice (every call opens its instance again, the least
// recently called one closing on every rank) are all right, and no rank
// ever has more than 4 open.
func TestCommSessionsBounded(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	const k, ranks = 4, 4
	var sizes []uint64
	for i := range 10 {
		sizes = append(sizes, uint64(i+1)*1024)
	}
	sessionCalls(t, ss, ranks, k, false, sizes, 2, func(cr *commRank, call int) error {
		open, evicted := cr.comm.Sessions()
		if open > k {
			return fmt.Errorf("%d sessions open, more than %d", open, k)
		}
		if want := max(call+1-k, 0); evicted != want {
			return fmt.Errorf("%d sessions closed to make room after call %d, want %d", evicted, call, want)
		}
		return nil
	})
}

// TestCommSessionsMappings: a communicator that calls many plan
// instances no longer grows its process's memory mappings with each (at
// about 200 instances of 8 ranks that ran out of vm.max_map_count): with
// at most 2 sessions open, the mappings after 24 instances are those
// after 4, within a margin far below one session's.
func TestCommSessionsMappings(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	const ranks = 4
	var sizes []uint64
	for i := range 24 {
		sizes = append(sizes, uint64(i+1)*512)
	}
	var at4 int
	sessionCalls(t, ss, ranks, 2, true, sizes, 1, func(cr *commRank, call int) error {
		if cr.rank != 0 || (call != 3 && call != len(sizes)-1) {
			return nil
		}
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			return nil // no /proc: nothing to count
		}
		n := strings.Count(string(maps), "\n")
		if call == 3 {
			at4 = n
			return nil
		}
		t.Logf("memory mappings: %d after 4 instances, %d after %d", at4, n, len(sizes))
		if n-at4 > 4*ranks {
			return fmt.Errorf("the process's memory mappings grew from %d after 4 plan instances to %d after %d", at4, n, len(sizes))
		}
		return nil
	})
}

// TestCommSessionsMany: 300 plan instances of 8 ranks in one process,
// with the default bound (64 open): every value right, where keeping
// every session ran out of memory mappings (vm.max_map_count) at about
// 200.
func TestCommSessionsMany(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 300 plan instances")
	}
	ss := NewStreams()
	defer ss.Close()
	var sizes []uint64
	for i := range 300 {
		sizes = append(sizes, uint64(i+1)*256)
	}
	sessionCalls(t, ss, 8, 0, true, sizes, 1, func(cr *commRank, call int) error {
		if open, _ := cr.comm.Sessions(); open > gpu.DefaultMaxSessions {
			return fmt.Errorf("%d sessions open, more than %d", open, gpu.DefaultMaxSessions)
		}
		return nil
	})
}

// TestCommSessionsInFlight: with at most 2 sessions, six sizes called
// round-robin twice with no wait between calls: each eviction meets
// launches of the closing session still queued or running on the
// stream, waits for them on every rank, and the last values are right.
func TestCommSessionsInFlight(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	const ranks, rounds = 4, 2
	p := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": fmt.Sprint(ranks)})
	var sizes []uint64
	var lays []*harness.Layout
	for i := range 6 {
		size := uint64(i+1) * 1024
		lay, err := harness.PlanLayout(p, size, executor.Float32, true)
		if err != nil {
			t.Fatal(err)
		}
		sizes, lays = append(sizes, size), append(lays, lay)
	}
	set := func(cfg *gpu.Config) {
		cfg.SetupTimeout = 20 * time.Second
		cfg.MaxSessions = 2
	}
	errs := withRanksConfig(t, ss, ranks, set, func(cr *commRank) error {
		type bufs struct{ in, out gpu.DevPtr }
		placed := make([]bufs, len(sizes))
		for i, lay := range lays {
			if err := cr.place(lay.BufferLayout); err != nil {
				return err
			}
			placed[i] = bufs{cr.in, cr.out}
		}
		for round := range rounds {
			for i, size := range sizes {
				cr.in, cr.out = placed[i].in, placed[i].out
				img := make([]byte, size)
				for j := range int(size / 4) {
					binary.LittleEndian.PutUint32(img[4*j:], math.Float32bits(float32(cr.rank+1+j%7+round)))
				}
				// In stream order: the previous launch on it may still run.
				in := cr.in
				if err := ss.Do(cr.st, func() { _ = cr.dev.HtoD(in, img) }); err != nil {
					return err
				}
				c := commCase{name: "allreduce_packet", plan: p, size: size, dt: executor.Float32, inPlace: true}
				if err := cr.comm.Enqueue(context.Background(), c.call(lays[i], cr, executor.Options{DType: executor.Float32})); err != nil {
					return fmt.Errorf("round %d, %d bytes: %w", round, size, err)
				}
				if open, _ := cr.comm.Sessions(); open > 2 {
					return fmt.Errorf("%d sessions open, more than 2", open)
				}
			}
		}
		if err := cr.settled(ss); err != nil {
			return err
		}
		if _, evicted := cr.comm.Sessions(); evicted != rounds*len(sizes)-2 {
			return fmt.Errorf("%d sessions closed, want %d", evicted, rounds*len(sizes)-2)
		}
		for i, size := range sizes {
			img := make([]byte, size)
			if err := cr.dev.DtoH(img, placed[i].out); err != nil {
				return err
			}
			for j := range int(size / 4) {
				want := float32(ranks*(ranks+1)/2 + ranks*(j%7+rounds-1))
				if got := math.Float32frombits(binary.LittleEndian.Uint32(img[4*j:])); got != want {
					return fmt.Errorf("%d bytes: element %d is %v, want %v", size, j, got, want)
				}
			}
		}
		return nil
	})
	noErrors(t, errs)
}
