//go:build cgo

package emu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// reducePlan is one plan of each kind that reduces: the Simple reduce
// ops (re, rre), the LL packet reduces (repkt, respkt), a reducescatter,
// and an allreduce through a switch channel (glres, on the unicast path
// here).
type reducePlan struct {
	kind string
	p    *plan.Plan
	ll8  bool
}

func reducePlans(t *testing.T) []reducePlan {
	four := map[string]string{"world_size": "4"}
	small := func(kv ...string) map[string]string {
		m := map[string]string{"world_size": "4", "min_message_size": "0"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	return []reducePlan{
		{"simple-reduce", gputest.AlgorithmPlan(t, "allreduce_rsag", small("nblocks", "2")), false},
		{"ll-packet", gputest.AlgorithmPlan(t, "allreduce_packet", four), false},
		{"ll8-packet", gputest.AlgorithmPlan(t, "allreduce_packet", four), true},
		{"reducescatter", gputest.AlgorithmPlan(t, "reducescatter", small("nblocks", "2")), false},
		{"allreduce-nvls", gputest.AlgorithmPlan(t, "allreduce_nvls", small("instances", "2")), false},
	}
}

var elemTypes = []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32}

// TestReduceOps runs every reduction in every element type through a
// plan of each kind on the emulated kernel and on the CPU backend, with
// the integer fill (k, not k/1024, for int32; floats as the reference
// fill): the kernel's bytes must be the CPU backend's, and the CPU
// backend's outputs the closed form (the ranks' fills combined in rank
// order, within the reduction tolerance for sum and prod, exact for max
// and min), through both of the harness's references (Layout.Check and
// the Checker's tables).
func TestReduceOps(t *testing.T) {
	ctx := context.Background()
	be := backend(2)
	for _, rp := range reducePlans(t) {
		for _, dt := range elemTypes {
			// The smallest valid size (operands that are not whole 16-byte
			// vectors: the kernel's element loops) and one near 48 KiB
			// (its vector loops); for the Simple reduce, also 1 MiB, where
			// each thread block's reduce spans the unrolled rounds of
			// 1024 threads.
			sizes := harness.CheckSizes(rp.p, dt, 48<<10, 3)
			if len(sizes) == 0 {
				t.Fatalf("%s: no valid size for %s", rp.kind, dt)
			}
			sizes = []uint64{sizes[0], sizes[len(sizes)-1]}
			if rp.kind == "simple-reduce" && dt.Size() == 2 {
				big := harness.CheckSizes(rp.p, dt, 1<<20, 8)
				sizes = append(sizes, big[len(big)-1])
			}
			for op := executor.ReduceSum; op < executor.NumReduceOps; op++ {
				for _, size := range sizes {
					name := fmt.Sprintf("%s/%s/%v/%d", rp.kind, dt, op, size)
					t.Run(name, func(t *testing.T) {
						c := gputest.Case{Plan: rp.p, Size: size, DType: dt, InPlace: rp.p.Inplace, LL8: rp.ll8,
							Launches: 2, Timeout: 20 * time.Second, Reduce: op,
							Inputs: func(r, it int, in []byte) { harness.FillWith(in, dt, r, it, harness.IntegerFill) }}
						if out, err := gputest.Run(ctx, be, c); err != nil || out != gputest.Same {
							t.Fatalf("%v: gpu-emu against cpu: %v %v", c, out, err)
						}
						closedForm(t, rp, dt, op, size)
					})
				}
			}
		}
	}
}

// closedForm runs the plan on the CPU backend with op and checks every
// rank's output after each of two launches with Layout.Check and with a
// Checker.
func closedForm(t *testing.T, rp reducePlan, dt executor.ElemType, op executor.ReduceOp, size uint64) {
	t.Helper()
	l, err := harness.PlanLayout(rp.p, size, dt, rp.p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	l.Fill, l.Reduce = harness.IntegerFill, op
	inst, err := executor.Instantiate(rp.p, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cpu.New().Open(inst, executor.Options{DType: dt, Reduce: op, LL8: rp.ll8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bufs := l.Alloc()
	ch := harness.NewChecker()
	for it := range 2 {
		l.FillInputs(bufs, it)
		if err := s.Launch(context.Background(), bufs); err != nil {
			t.Fatal(err)
		}
		for _, check := range []func() ([]uint64, error){
			func() ([]uint64, error) { return l.Check(bufs, it) },
			func() ([]uint64, error) { return ch.Check(l, bufs, it) },
		} {
			wrong, err := check()
			if err != nil {
				t.Fatal(err)
			}
			for r, w := range wrong {
				if w != 0 {
					t.Fatalf("launch %d: rank %d has %d elements off the closed form; first: %+v", it, r, w, l.Wrong(bufs, it, r, 1))
				}
			}
		}
	}
}

// specials are the special values of each type, as bits: signed zeros,
// NaNs (canonical and with payloads), infinities, the largest finite
// values, a subnormal, and ordinary values.
func specials(dt executor.ElemType) []uint32 {
	switch dt {
	case executor.Float16:
		return []uint32{0x8000, 0, 0x7fff, 0x7e01, 0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x0001, 0x3c00, 0xc000, 0x3800}
	case executor.BFloat16:
		return []uint32{0x8000, 0, 0x7fff, 0xffc1, 0x7f80, 0xff80, 0x7f7f, 0xff7f, 0x0001, 0x3f80, 0xc000, 0x3f00}
	case executor.Float32:
		return []uint32{0x80000000, 0, 0x7fffffff, 0xffc00001, 0x7f800000, 0xff800000, 0x7f7fffff, 0xff7fffff, 1,
			0x3f800000, 0xc0000000, 0x3f000000}
	}
	return []uint32{0, 0, 0xffffffff, 0x7fffffff, 0x80000000, 0x10000, 0x7fffffff, 0xfffffff9, 0x12345, 3, 0xfffffffe, 5}
}

// specialInput is element i of rank r's input: every fourth element
// is −0 on every rank (−0 ⊕ −0 … = −0 for sum, max and min), then the
// largest finite value on every rank (a sum and a product overflow),
// then a NaN on one rank and ordinary values on the others (sum and
// product give NaN, max and min ignore it), then a mix of specials that
// differs by rank.
func specialInput(dt executor.ElemType, r, i int) uint32 {
	sp := specials(dt)
	switch i % 4 {
	case 0:
		return sp[0]
	case 1:
		return sp[6]
	case 2:
		if r == (i/4)%4 {
			return sp[3]
		}
		return sp[9+r%3]
	}
	return sp[(i/4+r*5)%len(sp)]
}

func getElem(dt executor.ElemType, b []byte, i int) uint32 {
	if dt.Size() == 2 {
		return uint32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return binary.LittleEndian.Uint32(b[4*i:])
}

func putElem(dt executor.ElemType, b []byte, i int, v uint32) {
	if dt.Size() == 2 {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	} else {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
}

// TestReduceSpecialValues runs the special inputs through a plan of each
// kind with every op and type: gpu-emu's bytes must be the CPU
// backend's, and the CPU backend's outputs the closed forms: an element
// that is −0 on every rank stays −0 for sum, max and min (and a product
// of four −0 is +0), overflow gives Inf, a NaN on one rank makes a sum
// or a product NaN and is ignored by max and min; max and min of the
// mixed elements are the rank-order fold, bit for bit.
func TestReduceSpecialValues(t *testing.T) {
	ctx := context.Background()
	be := backend(2)
	for _, rp := range reducePlans(t) {
		for _, dt := range elemTypes {
			sizes := harness.CheckSizes(rp.p, dt, 16<<10, 1)
			size := sizes[0]
			for op := executor.ReduceSum; op < executor.NumReduceOps; op++ {
				t.Run(fmt.Sprintf("%s/%s/%v", rp.kind, dt, op), func(t *testing.T) {
					inputs := func(r, it int, in []byte) {
						for i := range len(in) / dt.Size() {
							putElem(dt, in, i, specialInput(dt, r, i))
						}
					}
					c := gputest.Case{Plan: rp.p, Size: size, DType: dt, InPlace: rp.p.Inplace, LL8: rp.ll8,
						Launches: 1, Timeout: 20 * time.Second, Reduce: op, Inputs: inputs}
					if out, err := gputest.Run(ctx, be, c); err != nil || out != gputest.Same {
						t.Fatalf("%v: gpu-emu against cpu: %v %v", c, out, err)
					}
					checkSpecial(t, rp, dt, op, size, inputs)
				})
			}
		}
	}
}

func checkSpecial(t *testing.T, rp reducePlan, dt executor.ElemType, op executor.ReduceOp, size uint64, inputs func(r, it int, in []byte)) {
	t.Helper()
	l, err := harness.PlanLayout(rp.p, size, dt, rp.p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(rp.p, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cpu.New().Open(inst, executor.Options{DType: dt, Reduce: op, LL8: rp.ll8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bufs := l.Alloc()
	n := l.NRanks
	ins := make([][]byte, n)
	for r := range bufs {
		inputs(r, 0, bufs[r].Input)
		ins[r] = append([]byte(nil), bufs[r].Input...)
	}
	if err := s.Launch(context.Background(), bufs); err != nil {
		t.Fatal(err)
	}
	es := dt.Size()
	outE := int(l.Sizes.Output) / es
	a, b := make([]byte, es), make([]byte, es)
	for me := range n {
		base := 0
		if l.Kind() == executor.ReduceScatter {
			base = me * outE
		}
		for i := range outE {
			j := base + i
			// The rank-order fold.
			copy(a, ins[0][j*es:(j+1)*es])
			for r := 1; r < n; r++ {
				copy(b, ins[r][j*es:(j+1)*es])
				dt.Reduce(op, a, a, b)
			}
			want, got := getElem(dt, a, 0), getElem(dt, bufs[me].Output, i)
			if msg := specialMismatch(dt, op, j%4, want, got); msg != "" {
				t.Fatalf("rank %d output element %d (input element %d, class %d): got %#x, want %#x: %s", me, i, j, j%4, got, want, msg)
			}
		}
	}
}

// specialMismatch says why got is not the closed form want of an element
// of class cls (specialInput), or "".
func specialMismatch(dt executor.ElemType, op executor.ReduceOp, cls int, want, got uint32) string {
	if op == executor.ReduceMax || op == executor.ReduceMin || dt == executor.Int32 || cls != 3 {
		// Order-free: max, min, integers, and classes 0-2 (all −0, all
		// overflowing, a NaN among ordinary values) are exact.
		if dt == executor.Int32 && (op == executor.ReduceSum || op == executor.ReduceProd) {
			return eqOrMsg(want, got)
		}
		if cls == 2 && (op == executor.ReduceSum || op == executor.ReduceProd) {
			if !isNaN(dt, got) {
				return "a NaN operand must make the result NaN"
			}
			return eqOrMsg(canonNaN(dt), got)
		}
		return eqOrMsg(want, got)
	}
	// A sum or product of mixed specials depends on the order of the
	// operations (cancellation): the kernel's bytes were already the CPU
	// backend's; here only the class must agree when the fold is not
	// finite.
	if isNaN(dt, want) != isNaN(dt, got) {
		return "NaN-ness differs from the rank-order fold"
	}
	return ""
}

func eqOrMsg(want, got uint32) string {
	if want != got {
		return "not the closed form"
	}
	return ""
}

func isNaN(dt executor.ElemType, v uint32) bool {
	switch dt {
	case executor.Float16:
		return v&0x7fff > 0x7c00
	case executor.BFloat16:
		return v&0x7fff > 0x7f80
	case executor.Float32:
		return v&0x7fffffff > 0x7f800000
	}
	return false
}

func canonNaN(dt executor.ElemType) uint32 {
	if dt == executor.Float32 {
		return 0x7fffffff
	}
	return 0x7fff
}

// TestReduceNegativeZeroSum pins the issue-43 case: −0 on every rank
// sums to −0 through every kind of plan, the packet reduces included
// (whose accumulator once started at +0).
func TestReduceNegativeZeroSum(t *testing.T) {
	for _, rp := range reducePlans(t) {
		dt := executor.Float32
		size := harness.CheckSizes(rp.p, dt, 16<<10, 1)[0]
		l, err := harness.PlanLayout(rp.p, size, dt, rp.p.Inplace)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := executor.Instantiate(rp.p, l.Sizes)
		if err != nil {
			t.Fatal(err)
		}
		for _, be := range []executor.Backend{cpu.New(), backend(2)} {
			s, err := be.Open(inst, executor.Options{DType: dt, LL8: rp.ll8, DeadlockTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			bufs := l.Alloc()
			negZero := math.Float32bits(float32(math.Copysign(0, -1)))
			for r := range bufs {
				for i := 0; i < len(bufs[r].Input); i += 4 {
					binary.LittleEndian.PutUint32(bufs[r].Input[i:], negZero)
				}
			}
			if err := s.Launch(context.Background(), bufs); err != nil {
				t.Fatal(err)
			}
			s.Close()
			for r := range bufs {
				for i := 0; i < len(bufs[r].Output); i += 4 {
					if v := binary.LittleEndian.Uint32(bufs[r].Output[i:]); v != negZero {
						t.Fatalf("%s on %s: rank %d output byte %d is %#x, want -0 (%#x)", rp.kind, be.Name(), r, i, v, negZero)
					}
				}
			}
		}
	}
}

// BenchmarkReduceOps times one launch of an 8-rank Simple allreduce
// (allreduce_rsag, 4 MiB of fp16 and fp32) and of the LL allreduce
// (allreduce_packet, 64 KiB) on the emulated device with every
// reduction: what the kernel's per-op choice of loop costs the
// emulator (docs/gpu.md §3, "Reductions").
//
//	go test ./gpu/emu -run '^$' -bench ReduceOps -benchtime 10x
func BenchmarkReduceOps(b *testing.B) {
	shapes := []struct {
		name string
		p    *plan.Plan
		size uint64
	}{
		{"rsag-4MiB", gputest.AlgorithmPlan(b, "allreduce_rsag", map[string]string{"world_size": "8", "min_message_size": "0"}), 4 << 20},
		{"packet-64KiB", gputest.AlgorithmPlan(b, "allreduce_packet", map[string]string{"world_size": "8"}), 64 << 10},
	}
	emu := gpu.New(gpu.Config{Name: "gpu-emu", Open: Open})
	for _, sh := range shapes {
		for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
			l, err := executor.PlanLayout(sh.p, sh.size, dt, sh.p.Inplace)
			if err != nil {
				b.Fatal(err)
			}
			inst, err := executor.Instantiate(sh.p, l.Sizes)
			if err != nil {
				b.Fatal(err)
			}
			for op := executor.ReduceSum; op < executor.NumReduceOps; op++ {
				b.Run(fmt.Sprintf("%s/%s/%v", sh.name, dt, op), func(b *testing.B) {
					s, err := emu.Open(inst, executor.Options{DType: dt, Reduce: op})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					bufs := l.Alloc()
					b.SetBytes(int64(sh.size))
					b.ResetTimer()
					for range b.N {
						if err := s.Launch(context.Background(), bufs); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
