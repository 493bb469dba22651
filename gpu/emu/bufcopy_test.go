//go:build cgo

package emu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

// copyCounter is an emulated device that counts the bytes copied between
// the host and the device.
type copyCounter struct {
	gpu.Driver
	htod, dtoh *uint64
}

func (d copyCounter) HtoD(dst gpu.DevPtr, src []byte) error {
	*d.htod += uint64(len(src))
	return d.Driver.HtoD(dst, src)
}

func (d copyCounter) DtoH(dst []byte, src gpu.DevPtr) error {
	*d.dtoh += uint64(len(dst))
	return d.Driver.DtoH(dst, src)
}

// mappingCounter is a copyCounter that lets the kernel run on host
// memory in place, as the emulated device does.
type mappingCounter struct{ copyCounter }

func (d mappingCounter) HostAddr(b []byte) (gpu.DevPtr, bool) {
	return d.Driver.(gpu.HostMapper).HostAddr(b)
}

// TestLaunchCopiesWhatThePlanTouches: a steady launch copies to the
// device only the bytes the plan reads of the caller's buffers and back
// only those it writes (an allgather: its inputs in, its outputs out; an
// in-place one only each rank's own chunk in), and the results are
// right at every launch, with inputs that change between launches. A
// driver that runs the kernel on host memory in place (the emulated
// device itself) copies nothing.
func TestLaunchCopiesWhatThePlanTouches(t *testing.T) {
	const size = 64 << 10
	for _, c := range []struct {
		name    string
		params  map[string]string
		in, out func(l *harness.Layout) uint64 // bytes per rank per launch
	}{
		// In place: the input is the rank's chunk of the output, which
		// no op writes.
		{"allgather", map[string]string{"world_size": "8"},
			func(l *harness.Layout) uint64 { return l.Sizes.Output / 8 }, func(l *harness.Layout) uint64 { return l.Sizes.Output * 7 / 8 }},
		{"allgather", map[string]string{"world_size": "8", "inplace": "false"},
			func(l *harness.Layout) uint64 { return l.Sizes.Input }, func(l *harness.Layout) uint64 { return l.Sizes.Output }},
		{"allreduce_packet", map[string]string{"world_size": "8"},
			func(l *harness.Layout) uint64 { return l.Sizes.Input }, func(l *harness.Layout) uint64 { return l.Sizes.Output }},
	} {
		for _, mapped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s %v mapped=%v", c.name, c.params, mapped), func(t *testing.T) {
				p := gputest.AlgorithmPlan(t, c.name, c.params)
				l, err := harness.PlanLayout(p, size, executor.Float16, p.Inplace)
				if err != nil {
					t.Fatal(err)
				}
				inst, err := executor.Instantiate(p, l.Sizes)
				if err != nil {
					t.Fatal(err)
				}
				var htod, dtoh uint64
				open := func() (gpu.Driver, error) {
					d, err := Open()
					cc := copyCounter{Driver: d, htod: &htod, dtoh: &dtoh}
					if mapped {
						return mappingCounter{cc}, err
					}
					return cc, err
				}
				s, err := gpu.New(gpu.Config{Name: "gpu-emu", Open: open}).Open(inst, executor.Options{DType: executor.Float16, DeadlockTimeout: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				bufs := l.Alloc()
				for seq := range 3 {
					l.FillInputs(bufs, seq)
					htod, dtoh = 0, 0
					if err := s.Launch(context.Background(), bufs); err != nil {
						t.Fatal(err)
					}
					for r := range bufs {
						if bad, err := l.CheckRank(bufs[r].Output, r, seq); err != nil || bad != 0 {
							t.Fatalf("launch %d: rank %d: %d wrong elements (%v)", seq, r, bad, err)
						}
					}
					if seq == 0 {
						continue // the first launch also sets the session up
					}
					wantIn, wantOut := 8*c.in(l), 8*c.out(l)
					if mapped {
						wantIn, wantOut = 0, 0
					}
					if htod != wantIn || dtoh != wantOut {
						t.Errorf("launch %d copied %d bytes in and %d out, want %d and %d", seq, htod, dtoh, wantIn, wantOut)
					}
				}
			})
		}
	}
}
