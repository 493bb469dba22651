package executor

import (
	"github.com/mscclgo/mscclgo/plan"
	"testing"
)

// TestCheckBuffers: the checks a backend makes before a launch, with no
// scratch allocated: operands against the caller's buffers, packets
// aligned in memory, the rank count, Validate's checks of the options.
func TestCheckBuffers(t *testing.T) {
	t.Parallel()
	const copyOp = `{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 1, "size": 1}]}`
	const packOp = `{"name": "cpkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`
	tests := []struct {
		name string
		ops  string
		opts Options
		// bufs changes the layout's buffers of rank 0.
		bufs func(b *RankBuffers)
		want string // the error, "" for none
	}{
		{name: "fits", ops: copyOp, opts: Options{DType: Float32}},
		{name: "short output", ops: copyOp, opts: Options{DType: Float32},
			bufs: func(b *RankBuffers) { b.Output = b.Output[:96] },
			want: "rank 0 tb 0 op 0 copy: destination 0: output[64:128] of rank 0 out of range: the buffer has 96 bytes"},
		{name: "packets not aligned in memory", ops: packOp, opts: Options{DType: Float32},
			bufs: func(b *RankBuffers) { b.Output = make([]byte, len(b.Output)+4)[4:] },
			want: "rank 0 tb 0 op 0 cpkt: destination 0: packets at output[0] of rank 0 are not 8-byte aligned in memory"},
		{name: "no data type", ops: copyOp, want: "Options.DType is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := plan.Load([]byte(rankPlanJSON("", 2, 2, 0, tt.ops)))
			if err != nil {
				t.Fatal(err)
			}
			l, err := PlanLayout(p, 128, Float32, false)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := Instantiate(p, l.Sizes)
			if err != nil {
				t.Fatal(err)
			}
			bufs := l.Alloc()
			if tt.bufs != nil {
				tt.bufs(&bufs[0])
			}
			got := ""
			if err := CheckBuffers(inst, tt.opts, bufs); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckBuffers: got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("rank count", func(t *testing.T) {
		t.Parallel()
		p, err := plan.Load([]byte(rankPlanJSON("", 2, 2, 0, copyOp)))
		if err != nil {
			t.Fatal(err)
		}
		inst, err := Instantiate(p, Sizes{Input: 128, Output: 128})
		if err != nil {
			t.Fatal(err)
		}
		err = CheckBuffers(inst, Options{DType: Float32}, make([]RankBuffers, 2))
		if want := "launch: got buffers for 2 ranks, want 1"; err == nil || err.Error() != want {
			t.Errorf("CheckBuffers: got %v, want %q", err, want)
		}
	})
}
