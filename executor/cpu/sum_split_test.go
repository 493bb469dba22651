package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

func TestSplitParts(t *testing.T) {
	for _, c := range []struct {
		threads, active, n, want int
	}{
		{threads: 1, active: 1, n: 64 << 20, want: 1},
		{threads: 2, active: 1, n: 64 << 20, want: 2},
		{threads: 16, active: 1, n: 64 << 20, want: 16},
		{threads: 16, active: 4, n: 64 << 20, want: 4},
		{threads: 16, active: 3, n: 64 << 20, want: 5},
		{threads: 2, active: 8, n: 64 << 20, want: 1},
		{threads: 8, active: 1, n: 2 * splitPart, want: 2},
		{threads: 8, active: 1, n: 2*splitPart - 1, want: 1},
		{threads: 8, active: 1, n: 3*splitPart + 7, want: 3},
		{threads: 8, active: 0, n: 64 << 20, want: 8},
	} {
		if got := splitParts(c.threads, c.active, c.n); got != c.want {
			t.Errorf("splitParts(threads %d, active %d, %d bytes) = %d, want %d", c.threads, c.active, c.n, got, c.want)
		}
	}
}

func TestSplitRanges(t *testing.T) {
	for _, c := range []struct{ n, parts int }{
		{1, 1}, {reduceBlock, 2}, {2 * splitPart, 2}, {2*splitPart + 2, 2}, {64 << 20, 16}, {5*reduceBlock + 4, 3}, {3 * reduceBlock, 8},
	} {
		r := splitRanges(c.n, c.parts)
		if len(r) == 0 || len(r) > c.parts {
			t.Errorf("splitRanges(%d, %d) = %d ranges, want 1 to %d", c.n, c.parts, len(r), c.parts)
			continue
		}
		next := 0
		for i, lr := range r {
			if lr[0] != next || lr[1] <= lr[0] || (i < len(r)-1 && lr[1]%reduceBlock != 0) {
				t.Errorf("splitRanges(%d, %d) range %d = %v (after %d): want contiguous, not empty, ends at multiples of %d", c.n, c.parts, i, lr, next, reduceBlock)
			}
			next = lr[1]
		}
		if next != c.n {
			t.Errorf("splitRanges(%d, %d) covers [0, %d)", c.n, c.parts, next)
		}
	}
}

func TestHostShare(t *testing.T) {
	for _, c := range []struct {
		procs int
		host  []int
		rank  int
		want  int
	}{
		{procs: 16, host: []int{0, 0, 0, 0}, rank: 2, want: 4},
		{procs: 16, host: []int{0, 0, 1, 1, 1, 1}, rank: 0, want: 8},
		{procs: 16, host: []int{0, 0, 1, 1, 1, 1}, rank: 3, want: 4},
		{procs: 2, host: []int{0, 0, 0, 0, 0, 0, 0, 0}, rank: 7, want: 1},
		{procs: 3, host: []int{0, 0}, rank: 1, want: 1},
		{procs: 6, host: nil, rank: 0, want: 6},
	} {
		if got := hostShare(c.procs, c.host, c.rank); got != c.want {
			t.Errorf("hostShare(%d, %v, %d) = %d, want %d", c.procs, c.host, c.rank, got, c.want)
		}
	}
}

// TestSplitReduceMatches runs one reduce op of 3 sources of a little
// over 1 MiB on Threads 4 (split in parts) and on Threads 1 (one
// goroutine), from the same random bits (NaNs, subnormals and all), in
// every element type and reduction, apart, in place, into the second
// source, and with a destination overlapping
// a source at a shift (never split), and requires byte-identical
// buffers.
func TestSplitReduceMatches(t *testing.T) {
	const m = 1<<20 + 68 // bytes per operand: 4 parts, the last short
	layouts := []struct {
		name  string
		src   []executor.Region
		dst   []executor.Region
		split bool
	}{
		{"apart", rs(L(in, 0, m), L(in, m, m), L(in, 2*m, m)), rs(L(out, 0, m)), true},
		{"in place", rs(L(in, 0, m), L(in, m, m), L(in, 2*m, m)), rs(L(in, 0, m)), true},
		{"into src1", rs(L(in, 0, m), L(in, m, m), L(in, 2*m, m)), rs(L(in, m, m)), true},
		{"dst shifted over src2", rs(L(in, 0, m), L(in, m, m), L(in, 2*m, m)), rs(L(in, 2*m+4, m)), false},
	}
	types := []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32}
	rng := rand.New(rand.NewPCG(46, 1))
	input := make([]byte, 4*m)
	for i := range input {
		input[i] = byte(rng.Uint32())
	}
	for _, lay := range layouts {
		for _, dt := range types {
			for _, red := range benchOps {
				t.Run(fmt.Sprintf("%s/%s/%v", lay.name, dt, red), func(t *testing.T) {
					var got [2][]executor.RankBuffers
					for k, threads := range []int{1, 4} {
						b := newBuilder(1, 0)
						b.tb(0, op(plan.OpReduce, 0, nil, lay.src, lay.dst))
						s := openT(t, b.inst, executor.Options{DType: dt, Reduce: red, DeadlockTimeout: 5 * time.Second, Threads: threads}, schedule{})
						bb := []executor.RankBuffers{{Input: append([]byte(nil), input...), Output: make([]byte, m)}}
						if err := s.Launch(context.Background(), bb); err != nil {
							t.Fatal(err)
						}
						splits := s.split.splits.Load()
						if want := threads > 1 && lay.split; (splits > 0) != want {
							t.Fatalf("Threads %d: %d split ops, want split %v", threads, splits, want)
						}
						got[k] = bb
					}
					eq(t, "input", got[1][0].Input, got[0][0].Input)
					eq(t, "output", got[1][0].Output, got[0][0].Output)
				})
			}
		}
	}
}

// TestStreamReduceMatches: a reduce op from executor.StreamBytes on,
// which ends each block with streaming stores, split or not, apart or in
// place, gives the bytes of the chain of ElemType.Reduce over blocks
// below the streaming size.
func TestStreamReduceMatches(t *testing.T) {
	const m = executor.StreamBytes + 68
	rng := rand.New(rand.NewPCG(46, 2))
	input := make([]byte, 3*m)
	for i := range input {
		input[i] = byte(rng.Uint32())
	}
	for _, dt := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32} {
		for _, red := range []executor.ReduceOp{executor.ReduceSum, executor.ReduceMax} {
			want := make([]byte, m)
			for off := 0; off < m; off += reduceBlock {
				e := min(off+reduceBlock, m)
				dt.Reduce(red, want[off:e], input[off:e], input[m+off:m+e])
				dt.Reduce(red, want[off:e], want[off:e], input[2*m+off:2*m+e])
			}
			for _, inPlace := range []bool{false, true} {
				for _, threads := range []int{1, 2} {
					t.Run(fmt.Sprintf("%s/%v/inplace=%v/threads=%d", dt, red, inPlace, threads), func(t *testing.T) {
						dst := L(out, 0, m)
						if inPlace {
							dst = L(in, 0, m)
						}
						b := newBuilder(1, 0)
						b.tb(0, op(plan.OpReduce, 0, nil, rs(L(in, 0, m), L(in, m, m), L(in, 2*m, m)), rs(dst)))
						s := openT(t, b.inst, executor.Options{DType: dt, Reduce: red, DeadlockTimeout: 5 * time.Second, Threads: threads}, schedule{})
						bb := []executor.RankBuffers{{Input: append([]byte(nil), input...), Output: make([]byte, m)}}
						if err := s.Launch(context.Background(), bb); err != nil {
							t.Fatal(err)
						}
						got := bb[0].Output
						if inPlace {
							got = bb[0].Input[:m]
						}
						eq(t, "result", got, want)
					})
				}
			}
		}
	}
}

// TestSplitCopy: a copy of a little over 1 MiB splits on
// Threads 4, not on Threads 1, and copies the same bytes; a pair whose
// source and destination overlap (a memmove) is never split.
func TestSplitCopy(t *testing.T) {
	const m = 1<<20 + 6
	rng := rand.New(rand.NewPCG(46, 7))
	input := make([]byte, 3*m)
	for i := range input {
		input[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name  string
		op    executor.OpInstance
		split bool
	}{
		{"apart", cp(L(in, m, m), L(out, 0, m)), true},
		{"overlapping", cp(L(in, 0, m), L(in, 3, m)), false},
	} {
		var got [2]executor.RankBuffers
		for k, threads := range []int{1, 4} {
			b := newBuilder(1, 0)
			b.tb(0, c.op)
			s := openT(t, b.inst, executor.Options{DType: executor.Float16, DeadlockTimeout: 5 * time.Second, Threads: threads}, schedule{})
			bb := []executor.RankBuffers{{Input: append([]byte(nil), input...), Output: make([]byte, 2*m)}}
			if err := s.Launch(context.Background(), bb); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if splits := s.split.splits.Load(); (splits > 0) != (threads > 1 && c.split) {
				t.Fatalf("%s, Threads %d: %d split ops", c.name, threads, splits)
			}
			got[k] = bb[0]
		}
		eq(t, c.name+" input", got[1].Input, got[0].Input)
		eq(t, c.name+" output", got[1].Output, got[0].Output)
		if c.split {
			eq(t, "copied", got[1].Output[:m], input[m:2*m])
		}
	}
}

// TestRankSessionCopy: RankSession.Copy gives copy's bytes whole (one
// thread, a copy below two parts) and split over several goroutines, at
// lengths on and off the parts' boundaries.
func TestRankSessionCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 7))
	for _, c := range []struct{ threads, n int }{
		{1, 3 << 20}, {4, 3<<20 + 5}, {4, splitPart}, {3, 2*splitPart - 1}, {3, 2 * splitPart}, {8, 0}, {16, 5<<20 + 3},
	} {
		r := &RankSession{s: &session{}}
		r.s.split.threads = c.threads
		src, dst := make([]byte, c.n), make([]byte, c.n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		r.Copy(dst, src)
		for i := range dst {
			if dst[i] != src[i] {
				t.Fatalf("%d threads, %d bytes (%d parts): byte %d is %#x, want %#x", c.threads, c.n, splitParts(c.threads, 1, c.n), i, dst[i], src[i])
			}
		}
	}
}

// BenchmarkRankSessionCopy is RankSession.Copy of 16 MiB (a staging copy
// of a large host call) with a share of 1, 2 and 4 goroutines.
//
//	go test ./executor/cpu -run '^$' -bench RankSessionCopy -benchtime 20x
func BenchmarkRankSessionCopy(b *testing.B) {
	const n = 16 << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	for _, threads := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			r := &RankSession{s: &session{}}
			r.s.split.threads = threads
			b.SetBytes(n)
			for b.Loop() {
				r.Copy(dst, src)
			}
		})
	}
}
