package executor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/plan"
)

// TestPrepare checks what Prepare resolves (the geometry, each rank's
// scratch slot and sorted switch members) against what an Operands made
// without it resolves, and that it refuses what Validate refuses.
func TestPrepare(t *testing.T) {
	t.Parallel()
	cpkt := `{"name": "cpkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "s", "index": 0, "size": 1}]}`
	tests := []struct {
		name    string
		plan    string
		opts    Options
		want    Geometry
		slot    bool // rank 0 has a scratch slot
		wantErr string
	}{
		{name: "LL16", plan: rankPlanJSON(`"protocol": "LL",`, 1, 1, 1, cpkt), opts: Options{DType: Float16},
			want: Geometry{Payload: 8, Packet: 16}},
		{name: "LL8", plan: rankPlanJSON(`"protocol": "LL",`, 1, 1, 1, cpkt), opts: Options{DType: Float16, LL8: true},
			want: Geometry{Payload: 4, Packet: 8}},
		{name: "double scratch", plan: rankPlanJSON(`"use_double_scratch_buffer": true, "protocol": "LL",`, 1, 1, 1, cpkt), opts: Options{DType: Float16},
			want: Geometry{Payload: 8, Packet: 16, Double: true}},
		{name: "reuse slot", plan: rankPlanJSON(`"reuse_resources": true,`, 1, 1, 64, pipeJSON(1024, reJSON)), opts: Options{DType: Float16},
			want: Geometry{Payload: 8, Packet: 16}, slot: true},
		{name: "no data type", plan: rankPlanJSON("", 1, 1, 0, reJSON), wantErr: "Options.DType is nil"},
		{name: "negative threads", plan: rankPlanJSON("", 1, 1, 0, reJSON), opts: Options{DType: Float16, Threads: -1}, wantErr: "Options.Threads is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := plan.Load([]byte(tt.plan))
			if err != nil {
				t.Fatal(err)
			}
			inst, err := Instantiate(p, Sizes{Input: 64 << 10, Output: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			prep, err := Prepare(inst, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Prepare: %v, want an error with %q", err, tt.wantErr)
				}
				if verr := Validate(inst, tt.opts); verr == nil || verr.Error() != err.Error() {
					t.Errorf("Prepare: %v; Validate: %v: want the same error", err, verr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Half = inst.ScratchBytes
			if want.Double {
				want.Half = inst.ScratchBytes / 2
			}
			if d := cmp.Diff(want, prep.Geometry); d != "" {
				t.Errorf("Geometry (-want +got):\n%s", d)
			}
			if got := prep.Ranks[0].Slot != 0; got != tt.slot {
				t.Errorf("rank 0 slot %d: want one: %v", prep.Ranks[0].Slot, tt.slot)
			}
			plain := NewOperands(inst, tt.opts, LaunchView{})
			for r := range inst.Ranks {
				ro := plain.Rank(r)
				got := prep.Ranks[r]
				if got.Slot != ro.slot || got.Slot != inst.ScratchSlot(r) {
					t.Errorf("rank %d: slot %d, want %d", r, got.Slot, ro.slot)
				}
				if d := cmp.Diff(ro.sorted, got.Members); d != "" {
					t.Errorf("rank %d: members (-want +got):\n%s", r, d)
				}
			}
			if _, err := prep.ForLayout(nil); err == nil {
				t.Error("ForLayout(nil) = nil, want an error")
			}
		})
	}
}
