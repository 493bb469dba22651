package executor

// Tests of the buffer layout of each collective (layout.go).

import (
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		collective string
		nranks     int
		size       uint64
		dt         ElemType
		inPlace    bool
		in, out    uint64
		err        string
		bus        float64
		slots      int
	}{
		{name: "allreduce", collective: "allreduce", nranks: 8, size: 1 << 20, dt: Float16, in: 1 << 20, out: 1 << 20, bus: 1.75, slots: 1},
		{name: "allgather", collective: "allgather", nranks: 4, size: 4096, dt: Float32, in: 1024, out: 4096, bus: 0.75, slots: 1},
		{name: "reducescatter", collective: "reducescatter", nranks: 4, size: 4096, dt: Float16, in: 4096, out: 1024, bus: 0.75, slots: 1},
		{name: "alltoall", collective: "alltoall", nranks: 2, size: 64, dt: Int32, in: 64, out: 64, bus: 0.5, slots: 1},
		{name: "sendrecv", collective: "sendrecv", nranks: 2, size: 64, dt: Int32, in: 64, out: 64, bus: 1, slots: 2},
		{name: "substring", collective: "my_allgather_v2", nranks: 2, size: 64, dt: Int32, in: 32, out: 64, bus: 0.5, slots: 1},
		{name: "test", collective: "test", nranks: 3, size: 96, dt: Float16, in: 96, out: 96, bus: 1, slots: 1},
		{name: "odd bytes", collective: "allreduce", nranks: 2, size: 3, dt: Float16, err: "not a whole number"},
		{name: "indivisible", collective: "allgather", nranks: 3, size: 64, dt: Float32, err: "do not divide among 3 ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := Layout(tt.collective, tt.nranks, tt.size, tt.dt, tt.inPlace)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Sizes != (Sizes{Input: tt.in, Output: tt.out}) || l.BusFactor() != tt.bus || l.Slots() != tt.slots {
				t.Errorf("sizes %+v bus %g slots %d, want {%d %d} %g %d", l.Sizes, l.BusFactor(), l.Slots(), tt.in, tt.out, tt.bus, tt.slots)
			}
		})
	}
}

func TestPlanLayout(t *testing.T) {
	t.Parallel()
	p := &plan.Plan{Collective: "test", GPUs: []plan.GPU{{InputChunks: 3, OutputChunks: 2}, {InputChunks: 3, OutputChunks: 2}}}
	l, err := PlanLayout(p, 3*64, Float32, false)
	if err != nil {
		t.Fatal(err)
	}
	if l.Sizes != (Sizes{Input: 192, Output: 128}) || l.Checked() {
		t.Errorf("test plan layout %+v checked %v", l.Sizes, l.Checked())
	}
	p.Collective = "allreduce"
	if l, _ := PlanLayout(p, 192, Float32, false); l.Sizes != (Sizes{Input: 192, Output: 192}) || !l.Checked() || !l.Reduces() {
		t.Errorf("allreduce plan layout %+v", l.Sizes)
	}
}

func TestAllocAliasing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		collective string
		inPlace    bool
		// alias gives rank r's offset of the input in the output (or,
		// negated, of the output in the input); nil for separate buffers.
		alias func(r int, in, out uint64) int64
	}{
		{"allreduce", true, func(int, uint64, uint64) int64 { return 0 }},
		{"allreduce", false, nil},
		{"alltoall", true, func(int, uint64, uint64) int64 { return 0 }},
		{"allgather", true, func(r int, in, _ uint64) int64 { return int64(uint64(r) * in) }},
		{"reducescatter", true, func(r int, _, out uint64) int64 { return -int64(uint64(r) * out) }},
		{"sendrecv", true, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/inplace=%v", tt.collective, tt.inPlace), func(t *testing.T) {
			t.Parallel()
			l, err := Layout(tt.collective, 4, 256, Float32, tt.inPlace)
			if err != nil {
				t.Fatal(err)
			}
			bufs := l.Alloc()
			for r, b := range bufs {
				if uint64(len(b.Input)) != l.Sizes.Input || uint64(len(b.Output)) != l.Sizes.Output {
					t.Fatalf("rank %d: %d/%d bytes, want %+v", r, len(b.Input), len(b.Output), l.Sizes)
				}
				// Write through the input, look for it in the output.
				for i := range b.Input {
					b.Input[i] = byte(i%251 + 1)
				}
				if tt.alias == nil {
					for _, x := range b.Output {
						if x != 0 {
							t.Fatalf("rank %d: output aliases input", r)
						}
					}
					continue
				}
				off := tt.alias(r, l.Sizes.Input, l.Sizes.Output)
				if tt.collective != "reducescatter" {
					if string(b.Output[off:off+int64(len(b.Input))]) != string(b.Input) {
						t.Fatalf("rank %d: input is not output[%d:]", r, off)
					}
				} else if &b.Output[0] != &b.Input[-off] {
					t.Fatalf("rank %d: output is not input[%d:]", r, -off)
				}
			}
		})
	}
}
