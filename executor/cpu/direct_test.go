package cpu_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
)

// TestLaunchDirect runs plans whose ranks keep their input, their output
// or both to themselves with those buffers in the caller's (private)
// memory, RankSession.LaunchDirect, and compares every rank's output
// with the single-process run's, byte for byte. A buffer another rank
// reaches is refused.
func TestLaunchDirect(t *testing.T) {
	for _, tc := range []struct {
		file    string
		in, out bool // what Direct must say on every rank
	}{
		{"single_node/allgather_pkt.plan.json", true, true},         // in place: both, aliased
		{"single_node/allreduce_pipeline.plan.json", true, true},    // in place
		{"unit_tests/reduce_send_test.plan.json", true, false},      // a peer writes the output
		{"unit_tests/switch_broadcast_test.plan.json", false, true}, // a switch group spans the input
		{"single_node/allreduce.plan.json", false, false},           // peers read the input, write the output
	} {
		t.Run(strings.TrimSuffix(filepath.Base(tc.file), ".plan.json"), func(t *testing.T) {
			p, err := executor.LoadFile(filepath.Join("../../tests/ports", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			dt := f32Type(t)
			lay, _, err := instantiate(p, dt)
			if err != nil {
				t.Fatal(err)
			}
			o := executor.Options{DType: dt}
			const launches = 3
			want := singleProcess(t, p, lay, o, launches)
			n := len(p.GPUs)
			bs := connectWorld(t, n)
			got, errs := eachRank(t, bs, p, lay, make([]int, n), o, 3000, func(ctx context.Context, r int, rs *cpu.RankSession) ([]byte, error) {
				in, out := rs.Direct()
				if in != tc.in || out != tc.out {
					t.Errorf("rank %d: Direct() = %v, %v, want %v, %v", r, in, out, tc.in, tc.out)
				}
				own := rs.Buffers()
				if !in {
					pin, pout := privatePair(own.Input, own.Output)
					if !p.Inplace {
						pout = nil
					}
					if err := rs.LaunchDirect(ctx, pin, pout); err == nil || !strings.Contains(err.Error(), "cannot be the caller's") {
						t.Errorf("rank %d: a direct input that a peer reaches: %v, want a refusal", r, err)
					}
				}
				if !in || !out {
					in, out = false, false // one buffer alone: only plans out of place take it
					if !p.Inplace {
						in, out = tc.in, tc.out
					}
				}
				myIn, myOut := own.Input, own.Output
				var argIn, argOut []byte
				if in || out {
					argIn, argOut = privatePair(own.Input, own.Output)
					if in {
						myIn = argIn
					} else {
						argIn = nil
					}
					if out {
						myOut = argOut
					} else {
						argOut = nil
					}
				}
				for seq := range launches {
					lay.FillRank(myIn, r, seq)
					if err := exchangeResult(ctx, bs[r], rs.LaunchDirect(ctx, argIn, argOut)); err != nil {
						return nil, err
					}
				}
				return append([]byte(nil), myOut...), nil
			})
			for r := range n {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d output differs from the single-process run (-want +got):\n%.2000s", r, diff)
				}
			}
		})
	}
}

// privatePair is a heap copy of the session's in and out, laid out as
// they are (the same distance apart, aliased where they are, at the same
// offset from a 64-byte boundary).
func privatePair(in, out []byte) (pin, pout []byte) {
	a, b := uintptr(unsafe.Pointer(unsafe.SliceData(in))), uintptr(unsafe.Pointer(unsafe.SliceData(out)))
	lo, hi := min(a, b), max(a+uintptr(len(in)), b+uintptr(len(out)))
	buf := make([]byte, hi-lo+128)
	start := (64 - uintptr(unsafe.Pointer(&buf[0]))%64 + lo%64) % 64
	buf = buf[start : start+hi-lo]
	return buf[a-lo : a-lo+uintptr(len(in))], buf[b-lo : b-lo+uintptr(len(out))]
}
