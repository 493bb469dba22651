package harness

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

// kernelFill is the fill_data kernel of executor_test_verifier.cu written
// out literally: one loop per generator thread, arithmetic in T.
func kernelFill(dst []byte, dt executor.ElemType, rank, seq int, mode FillMode) {
	n := len(dst) / dt.Size()
	for g := 0; g < 65536; g++ {
		seed := uint32(g + rank + seq)
		for idx := g; idx < n; idx += 65536 {
			seed = seed*1664525 + 1013904223
			k := seed % 1024
			switch dt {
			case executor.Float16:
				binary.LittleEndian.PutUint16(dst[2*idx:], executor.F32ToF16(executor.F16ToF32(executor.F32ToF16(float32(k)))/executor.F16ToF32(executor.F32ToF16(1024))))
			case executor.BFloat16:
				binary.LittleEndian.PutUint16(dst[2*idx:], executor.F32ToBF16(executor.BF16ToF32(executor.F32ToBF16(float32(k)))/executor.BF16ToF32(executor.F32ToBF16(1024))))
			case executor.Float32:
				binary.LittleEndian.PutUint32(dst[4*idx:], math.Float32bits(float32(k)/float32(1024)))
			case executor.Int32:
				v := int32(k) / int32(1024)
				if mode == IntegerFill {
					v = int32(k)
				}
				binary.LittleEndian.PutUint32(dst[4*idx:], uint32(v))
			}
		}
	}
}

var allTypes = []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32}

func TestFillKnownValues(t *testing.T) {
	t.Parallel()
	// Seeds computed independently: rank 0, seq 0 gives 863, 364 for
	// threads 0 and 1 and 306, 475 for their second elements; rank 1,
	// seq 2 gives 390, 915, 416.
	b := make([]byte, 4*65538)
	Fill(b, executor.Float32, 0, 0)
	for i, k := range map[int]float32{0: 863, 1: 364, 65536: 306, 65537: 475} {
		if got := executor.Float32.Float64(b, i); got != float64(k/1024) {
			t.Errorf("rank 0 seq 0 element %d = %g, want %g", i, got, k/1024)
		}
	}
	b = make([]byte, 4*3)
	FillWith(b, executor.Int32, 1, 2, IntegerFill)
	for i, k := range []float64{390, 915, 416} {
		if got := executor.Int32.Float64(b, i); got != k {
			t.Errorf("int rank 1 seq 2 element %d = %g, want %g", i, got, k)
		}
	}
	Fill(b, executor.Int32, 1, 2)
	for i := 0; i < 3; i++ {
		if got := executor.Int32.Float64(b, i); got != 0 {
			t.Errorf("reference int32 fill element %d = %g, want 0", i, got)
		}
	}
}

func TestFillMatchesKernel(t *testing.T) {
	t.Parallel()
	for _, dt := range allTypes {
		for _, mode := range []FillMode{ReferenceFill, IntegerFill} {
			for _, n := range []int{1, 1000, 65536 + 3, 1<<20 + 5} {
				for _, rs := range [][2]int{{0, 0}, {3, 7}} {
					t.Run(fmt.Sprintf("%s/mode%d/n%d/rank%d/seq%d", dt, mode, n, rs[0], rs[1]), func(t *testing.T) {
						t.Parallel()
						got, want := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
						FillWith(got, dt, rs[0], rs[1], mode)
						kernelFill(want, dt, rs[0], rs[1], mode)
						for i := 0; i < n; i++ {
							if g, w := dt.Float64(got, i), dt.Float64(want, i); g != w {
								t.Fatalf("element %d = %g, want %g", i, g, w)
							}
						}
						if string(got) != string(want) {
							t.Fatal("fills differ in bits")
						}
					})
				}
			}
		}
	}
}

// The bf16 rule: k rounded to 8 significant bits before dividing.
func TestFillBFloat16Rounds(t *testing.T) {
	t.Parallel()
	b := make([]byte, 2*4096)
	Fill(b, executor.BFloat16, 0, 0)
	for i := 0; i < 4096; i++ {
		k := executor.BFloat16.Float64(b, i) * 1024
		if k != math.Trunc(k) || k > 1024 {
			t.Fatalf("element %d = %g·1024, not an integer", i, k)
		}
		if m := uint64(k); m >= 256 && m&^(0xff<<(bitsLen(m)-8)) != 0 {
			t.Fatalf("element %d: %d has more than 8 significant bits", i, m)
		}
	}
}

func bitsLen(m uint64) int {
	n := 0
	for ; m != 0; m >>= 1 {
		n++
	}
	return n
}

// simulate performs the collective directly on filled buffers, summing in
// reverse rank order so that float results differ from Check's order.
func simulate(l *Layout, bufs []executor.RankBuffers) {
	n := l.NRanks
	ins := make([][]byte, n)
	for r := range bufs {
		ins[r] = append([]byte(nil), bufs[r].Input...)
	}
	in, out := l.Sizes.Input, l.Sizes.Output
	switch l.Collective {
	case "allreduce", "reducescatter":
		acc := append([]byte(nil), ins[n-1]...)
		for r := n - 2; r >= 0; r-- {
			l.DType.Add(acc, acc, ins[r])
		}
		for me := range bufs {
			if l.Collective == "allreduce" {
				copy(bufs[me].Output, acc)
			} else {
				copy(bufs[me].Output, acc[uint64(me)*out:])
			}
		}
	case "allgather":
		for me := range bufs {
			for r := range ins {
				copy(bufs[me].Output[uint64(r)*in:], ins[r])
			}
		}
	case "alltoall":
		m := in / uint64(n)
		for me := range bufs {
			for r := range ins {
				copy(bufs[me].Output[uint64(r)*m:uint64(r+1)*m], ins[r][uint64(me)*m:])
			}
		}
	case "sendrecv":
		g := l.SplitMask + 1
		for me := range bufs {
			src := ((me/g-1+n/g)%(n/g))*g + me%g
			copy(bufs[me].Output, ins[src])
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	type corrupt struct {
		rank, elem int
		delta      float64
	}
	tests := []struct {
		collective string
		nranks     int
		dt         executor.ElemType
		inPlace    bool
		split      int
		mode       FillMode
		corrupt    []corrupt
		want       []uint64
	}{
		{collective: "allreduce", nranks: 8, dt: executor.Float16, want: make([]uint64, 8)},
		{collective: "allreduce", nranks: 8, dt: executor.BFloat16, inPlace: true, want: make([]uint64, 8)},
		{collective: "allreduce", nranks: 4, dt: executor.Float32, corrupt: []corrupt{{1, 5, 1e-3}, {1, 6, 1e-7}, {3, 0, -1}}, want: []uint64{0, 1, 0, 1}},
		{collective: "allreduce", nranks: 4, dt: executor.Int32, mode: IntegerFill, corrupt: []corrupt{{2, 9, 1}}, want: []uint64{0, 0, 1, 0}},
		{collective: "allreduce", nranks: 4, dt: executor.Float16, corrupt: []corrupt{{0, 3, 0.25}, {0, 4, 0.001}}, want: []uint64{1, 0, 0, 0}},
		{collective: "reducescatter", nranks: 4, dt: executor.Float16, inPlace: true, corrupt: []corrupt{{3, 1, 1}}, want: []uint64{0, 0, 0, 1}},
		{collective: "allgather", nranks: 4, dt: executor.Float32, inPlace: true, corrupt: []corrupt{{2, 700, 1e-6}, {2, 0, 1}}, want: []uint64{0, 0, 2, 0}},
		{collective: "allgather", nranks: 2, dt: executor.Float16, want: []uint64{0, 0}},
		{collective: "alltoall", nranks: 4, dt: executor.BFloat16, corrupt: []corrupt{{0, 1023, 1}}, want: []uint64{1, 0, 0, 0}},
		{collective: "sendrecv", nranks: 4, dt: executor.Float32, want: make([]uint64, 4)},
		{collective: "sendrecv", nranks: 4, dt: executor.Float32, split: 1, corrupt: []corrupt{{1, 2, 1}}, want: []uint64{0, 1, 0, 0}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s/%s", i, tt.collective, tt.dt), func(t *testing.T) {
			t.Parallel()
			l, err := NewLayout(tt.collective, tt.nranks, 4096*uint64(tt.dt.Size()), tt.dt, tt.inPlace)
			if err != nil {
				t.Fatal(err)
			}
			l.SplitMask, l.Fill = tt.split, tt.mode
			bufs := l.Alloc()
			for seq := 0; seq < 2; seq++ {
				l.FillInputs(bufs, seq)
				simulate(l, bufs)
				if seq == 1 {
					for _, c := range tt.corrupt {
						o := bufs[c.rank].Output
						l.DType.SetFloat64(o, c.elem, l.DType.Float64(o, c.elem)+c.delta)
					}
				}
				got, err := l.Check(bufs, seq)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if seq == 0 {
					want = make([]uint64, tt.nranks)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("seq %d: wrong = %v, want %v", seq, got, want)
				}
			}
			// Expected agrees with what simulate produced (bit-exactly
			// for data movement).
			if !l.Reduces() && tt.corrupt == nil {
				for r := range bufs {
					if string(l.Expected(r, 1)) != string(bufs[r].Output) {
						t.Errorf("Expected(%d) differs from the simulated output", r)
					}
				}
			}
		})
	}
}

func TestCheckNoResult(t *testing.T) {
	t.Parallel()
	l, err := NewLayout("test", 2, 64, executor.Float16, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Check(l.Alloc(), 0); !errors.Is(err, ErrNoCheck) {
		t.Errorf("Check of a test plan: %v, want ErrNoCheck", err)
	}
	if l.Expected(0, 0) != nil {
		t.Error("Expected of a test plan is not nil")
	}
}

// The reference sum is accumulated in T in rank order from 0: with fp16
// and eight ranks it is not the float64 sum rounded once.
func TestExpectedSumInT(t *testing.T) {
	t.Parallel()
	l, err := NewLayout("allreduce", 8, 2*65536, executor.Float16, false)
	if err != nil {
		t.Fatal(err)
	}
	e := l.Expected(0, 3)
	differs := 0
	fills := make([][]byte, 8)
	for r := range fills {
		fills[r] = make([]byte, 2*65536)
		Fill(fills[r], executor.Float16, r, 3)
	}
	for i := 0; i < 65536; i++ {
		acc := uint16(0)
		exact := 0.0
		for r := 0; r < 8; r++ {
			x := binary.LittleEndian.Uint16(fills[r][2*i:])
			acc = executor.F32ToF16(executor.F16ToF32(acc) + executor.F16ToF32(x))
			exact += float64(executor.F16ToF32(x))
		}
		if got := binary.LittleEndian.Uint16(e[2*i:]); got != acc {
			t.Fatalf("element %d = %#04x, want %#04x", i, got, acc)
		}
		if executor.F64ToF16(exact) != acc {
			differs++
		}
	}
	if differs == 0 {
		t.Error("no element where summing in fp16 differs from one rounding; the test is vacuous")
	}
}

func BenchmarkFill(b *testing.B) {
	for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
		b.Run(dt.Name(), func(b *testing.B) {
			buf := make([]byte, 64<<20)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				Fill(buf, dt, 1, 2)
			}
		})
	}
}

func BenchmarkCheckAllreduce(b *testing.B) {
	l, err := NewLayout("allreduce", 8, 16<<20, executor.Float16, true)
	if err != nil {
		b.Fatal(err)
	}
	bufs := l.Alloc()
	l.FillInputs(bufs, 0)
	simulate(l, bufs)
	b.SetBytes(int64(l.Size) * int64(l.NRanks))
	for b.Loop() {
		if _, err := l.Check(bufs, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckerExpected checks that the Checker's expected outputs and
// wrong elements, built from its tables, are the Layout's.
func TestCheckerExpected(t *testing.T) {
	t.Parallel()
	c := NewChecker()
	for _, tt := range []struct {
		collective string
		dt         executor.ElemType
		split      int
	}{
		{"allreduce", executor.Float16, 0},
		{"reducescatter", executor.BFloat16, 0},
		{"allgather", executor.Float32, 0},
		{"alltoall", executor.Int32, 0},
		{"sendrecv", executor.Float16, 1},
	} {
		l, err := NewLayout(tt.collective, 4, 4096*uint64(tt.dt.Size()), tt.dt, false)
		if err != nil {
			t.Fatal(err)
		}
		l.SplitMask, l.Fill = tt.split, IntegerFill
		for seq := range 3 {
			bufs := l.Alloc()
			for r := range bufs {
				copy(bufs[r].Output, l.Expected(r, seq))
				// Two wrong elements on rank r: the first and the last.
				bufs[r].Output[0] ^= 0x40
				bufs[r].Output[len(bufs[r].Output)-1] ^= 0x40
			}
			for r := range bufs {
				got, err := c.Expected(l, r, seq)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, l.Expected(r, seq)) {
					t.Errorf("%s seq %d rank %d: Checker.Expected differs from Layout.Expected", tt.collective, seq, r)
				}
				w, err := c.Wrong(l, bufs, seq, r, 3)
				if err != nil {
					t.Fatal(err)
				}
				// One rank's share, as a process of a run of one
				// process per rank fills and checks it.
				n, err := c.CheckRank(l, bufs[r].Output, r, seq)
				if err != nil {
					t.Fatal(err)
				}
				if ln, _ := l.CheckRank(bufs[r].Output, r, seq); n != 2 || ln != 2 {
					t.Errorf("%s seq %d rank %d: Checker.CheckRank = %d, Layout.CheckRank = %d, want 2", tt.collective, seq, r, n, ln)
				}
				in, ref := make([]byte, len(bufs[r].Input)), make([]byte, len(bufs[r].Input))
				if err := c.FillRank(l, in, r, seq); err != nil {
					t.Fatal(err)
				}
				l.FillRank(ref, r, seq)
				if !bytes.Equal(in, ref) {
					t.Errorf("%s seq %d rank %d: Checker.FillRank differs from Layout.FillRank", tt.collective, seq, r)
				}
				want := l.Wrong(bufs, seq, r, 3)
				if len(want) != 2 || !slices.EqualFunc(w, want, func(a, b WrongElement) bool { return a.Offset == b.Offset && a.Rank == b.Rank }) {
					t.Errorf("%s seq %d rank %d: Checker.Wrong = %+v, Layout.Wrong = %+v, want the first and last elements", tt.collective, seq, r, w, want)
				}
			}
		}
	}
	l, err := NewLayout("test", 2, 64, executor.Float16, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expected(l, 0, 0); !errors.Is(err, ErrNoCheck) {
		t.Errorf("Checker.Expected of a test collective: %v, want ErrNoCheck", err)
	}
}
