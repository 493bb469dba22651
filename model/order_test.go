// This file holds the checks of the model against what published
// figures say in general: plan orderings (LL all-pairs beats Simple
// RS+AG for small messages and loses for large ones), peak bus
// bandwidths of NVLink and NVLS plans on 8×H100, LL's fraction of peak,
// and the launch overhead floor.

package model_test

import (
	"testing"

	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
)

const maxSize = "18446744073709551615"

func TestOrderings(t *testing.T) {
	hw := h100(t)
	packet := bundled(t, "allreduce_packet", map[string]string{"world_size": "8", "max_message_size": maxSize})
	rsag := bundled(t, "allreduce_rsag", map[string]string{"world_size": "8", "min_message_size": "0"})
	refAllreduce := port(t, "single_node/allreduce.plan.json")
	refNVLS := port(t, "single_node/allreduce_nvls_zero_copy.plan.json")
	tests := []struct {
		name          string
		faster, other *plan.Plan
		size          uint64
	}{
		{"LL all-pairs beats RS+AG at 1 KiB", packet, rsag, 1 * kib},
		{"LL all-pairs beats RS+AG at 16 KiB", packet, rsag, 16 * kib},
		{"RS+AG beats LL all-pairs at 256 MiB", rsag, packet, 256 * mib},
		{"LL all-pairs beats the reference read-reduce allreduce at 1 KiB", packet, refAllreduce, 1 * kib},
		{"the reference read-reduce allreduce beats LL all-pairs at 256 MiB", refAllreduce, packet, 256 * mib},
		{"NVLS beats RS+AG at 256 MiB", refNVLS, rsag, 256 * mib},
		{"NVLS beats the reference read-reduce allreduce at 64 MiB", refNVLS, refAllreduce, 64 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := predict(t, tt.faster, tt.size, hw, model.Options{NoTimeline: true})
			b := predict(t, tt.other, tt.size, hw, model.Options{NoTimeline: true})
			if a.Time >= b.Time {
				t.Errorf("%s: %.2f µs, %s: %.2f µs; want the first faster", tt.faster.Name, a.Time, tt.other.Name, b.Time)
			}
		})
	}
}

func TestPeakBandwidths(t *testing.T) {
	hw := h100(t)
	tests := []struct {
		name   string
		plan   *plan.Plan
		size   uint64
		lo, hi float64 // busbw bounds, GB/s
	}{
		// NCCL reaches about 370 GB/s busbw on 8×H100 without NVLS and
		// about 480 GB/s with it (nccl-tests issues 212, 290).
		{"RS+AG near NCCL's NVLink busbw", bundled(t, "allreduce_rsag", map[string]string{"world_size": "8", "min_message_size": "0"}), 1 * gib, 330, 400},
		{"reference read-reduce allreduce", port(t, "single_node/allreduce.plan.json"), 1 * gib, 330, 400},
		{"NVLS near NCCL's NVLS busbw", port(t, "single_node/allreduce_nvls_zero_copy.plan.json"), 1 * gib, 440, 520},
		// LL moves twice the payload and is bounded by its blocks: 25-50%
		// of the NVLink peak ("Demystifying NCCL").
		{"LL all-pairs with enough blocks", bundled(t, "allreduce_packet", map[string]string{"world_size": "8", "instances": "8", "max_message_size": maxSize}), 64 * mib, 0.25 * 370, 0.5 * 370},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := predict(t, tt.plan, tt.size, hw, model.Options{NoTimeline: true})
			if pt.BusBW < tt.lo || pt.BusBW > tt.hi {
				t.Errorf("%s at %d: busbw %.1f GB/s, want %.0f to %.0f", tt.plan.Name, tt.size, pt.BusBW, tt.lo, tt.hi)
			}
		})
	}
}

func TestLatencyFloor(t *testing.T) {
	hw := h100(t)
	packet := bundled(t, "allreduce_packet", map[string]string{"world_size": "8"})
	for _, launch := range []struct {
		plain bool
		want  float64
	}{{false, hw.Params.GraphLaunchUS.Value}, {true, hw.Params.LaunchUS.Value}} {
		pt := predict(t, packet, 1*kib, hw, model.Options{PlainLaunch: launch.plain})
		// The launch, plus an LL hop each way (about 1 µs each): well
		// under 10 µs.
		if pt.Time < launch.want+1 || pt.Time > launch.want+5 {
			t.Errorf("plain launch %v: %.2f µs at 1 KiB, want the launch %.2f µs plus 1 to 5 µs", launch.plain, pt.Time, launch.want)
		}
		if pt.Result.Launch != launch.want {
			t.Errorf("plain launch %v: charged %.2f µs of launch, want %.2f", launch.plain, pt.Result.Launch, launch.want)
		}
	}
}

// TestHardware checks that the model follows the hardware: the NIC is
// slower than NVLink, A100 slower than H100.
func TestHardware(t *testing.T) {
	h := h100(t)
	a, err := model.LoadProfile("a100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	hier := bundled(t, "allreduce_hier", map[string]string{"world_size": "16", "ranks_per_node": "8", "min_message_size": "0"})
	rsag := bundled(t, "allreduce_rsag", map[string]string{"world_size": "8", "min_message_size": "0"})
	tests := []struct {
		name           string
		plan           *plan.Plan
		size           uint64
		fastHW, slowHW *model.Profile
		fast, slow     model.Options
	}{
		{"two nodes over NDR are slower than one NVLink domain", hier, 256 * mib, h, h, model.Options{RanksPerNode: 16}, model.Options{RanksPerNode: 8}},
		{"A100 is slower than H100 at 256 MiB", rsag, 256 * mib, h, a, model.Options{}, model.Options{}},
		{"A100's HDR is slower than H100's NDR", hier, 256 * mib, h, a, model.Options{}, model.Options{}},
		{"LL8 is slower than LL16", bundled(t, "allreduce_packet", map[string]string{"world_size": "8"}), 1 * mib, h, h, model.Options{}, model.Options{LL8: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fast.NoTimeline, tt.slow.NoTimeline = true, true
			f := predict(t, tt.plan, tt.size, tt.fastHW, tt.fast)
			s := predict(t, tt.plan, tt.size, tt.slowHW, tt.slow)
			if f.Time >= s.Time {
				t.Errorf("%.2f µs against %.2f µs: want the first faster", f.Time, s.Time)
			}
		})
	}
}
