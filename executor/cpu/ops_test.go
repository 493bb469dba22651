package cpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Every row builds an instance, runs one launch on fresh buffers (inputs
// filled with pattern or with in), and checks outputs.
type dataCase struct {
	name   string
	build  func() *executor.Instance
	inB    int
	outB   int
	in     func(r int) []byte // optional input override
	inPlac bool               // output aliases input
	check  func(t *testing.T, b []executor.RankBuffers, s *session)
}

func runCases(t *testing.T, cases []dataCase, o executor.Options) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inst := c.build()
			b := bufs(len(inst.Ranks), c.inB, c.outB)
			for r := range b {
				if c.in != nil {
					b[r].Input = c.in(r)
				}
				if c.inPlac {
					b[r].Output = b[r].Input
				}
			}
			// Run each case with and without race detection: results
			// must agree and correct plans must be race-free.
			for _, race := range []bool{false, true} {
				bb := make([]executor.RankBuffers, len(b))
				for r := range b {
					bb[r].Input = append([]byte(nil), b[r].Input...)
					bb[r].Output = append([]byte(nil), b[r].Output...)
					if c.inPlac {
						bb[r].Output = bb[r].Input
					}
				}
				oo := o
				oo.Race = race
				s := mustRun(t, inst, oo, bb)
				c.check(t, bb, s)
			}
		})
	}
}

func TestDataOps(t *testing.T) {
	t.Parallel()
	const N = 64
	big := float32(1 << 24)
	cases := []dataCase{
		{
			name: "copy",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, cp(L(in, 16, 32), L(out, 64, 32)))
				return b.inst
			},
			inB: N, outB: 2 * N,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				want := make([]byte, 2*N)
				copy(want[64:96], pattern(N, 0)[16:48])
				eq(t, "output", b[0].Output, want)
			},
		},
		{
			name: "copy in place",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, cp(L(in, 0, 32), L(out, 32, 32)))
				return b.inst
			},
			inB: N, inPlac: true,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				p := pattern(N, 0)
				eq(t, "buffer", b[0].Input, cat(p[:32], p[:32]))
			},
		},
		{
			name: "copy through scratch",
			build: func() *executor.Instance {
				b := newBuilder(1, 256)
				b.tb(0, cp(L(in, 0, N), L(scr, 128, N)), nop(), cp(L(scr, 128, N), L(out, 0, N)))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "output", b[0].Output, pattern(N, 0))
				eq(t, "scratch", s.ranks[0].scratch[128:128+N], pattern(N, 0))
			},
		},
		{
			name: "put memory, each source its own buffer (Q6)",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, 32), L(out, 0, 32)), rs(R(1, out, 0, 32), R(1, out, 32, 32))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				eq(t, "rank 1 output", b[1].Output, cat(pattern(N, 0)[:32], make([]byte, 32)))
			},
		},
		{
			name: "pws and pwsf on memory channels are puts",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				b.tb(0, op(plan.OpPutWithSignal, mem, nil, rs(L(in, 0, 32)), rs(R(1, out, 0, 32))),
					op(plan.OpPutWithSignalAndFlush, mem, nil, rs(L(in, 32, 32)), rs(R(1, out, 32, 32))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				eq(t, "rank 1 output", b[1].Output, pattern(N, 0))
			},
		},
		{
			name: "get uses its own offsets (Q2)",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				b.tb(0, op(plan.OpGet, mem, nil, rs(R(1, in, 16, 32)), rs(L(out, 0, 32))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				eq(t, "rank 0 output", b[0].Output, cat(pattern(N, 1)[16:48], make([]byte, 32)))
			},
		},
		{
			name: "re accumulates left to right",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, op(plan.OpReduce, 0, nil, rs(L(in, 0, 16), L(in, 16, 16), L(in, 32, 16)), rs(L(out, 0, 16))))
				return b.inst
			},
			in: func(int) []byte {
				return cat(floats(big, 1, negZero, 3), floats(1, 2, negZero, 4), floats(1, 3, negZero, 5))
			},
			outB: 16,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				// (2^24 + 1) + 1 rounds to 2^24 twice; -0 + -0 + -0 = -0.
				eq(t, "output", b[0].Output, floats(big, 6, negZero, 12))
			},
		},
		{
			name: "re in place and with dst aliasing a later source",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0,
					op(plan.OpReduce, 0, nil, rs(L(in, 0, 16), L(in, 16, 16)), rs(L(in, 0, 16))),
					nop(),
					op(plan.OpReduce, 0, nil, rs(L(in, 32, 16), L(in, 48, 16), L(in, 64, 16)), rs(L(in, 64, 16))))
				return b.inst
			},
			in: func(int) []byte {
				return cat(floats(1, 2, 3, 4), floats(10, 20, 30, 40), floats(1, 1, 1, 1), floats(2, 2, 2, 2), floats(4, 4, 4, 4))
			},
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				eq(t, "input", b[0].Input, cat(floats(11, 22, 33, 44), floats(10, 20, 30, 40), floats(1, 1, 1, 1), floats(2, 2, 2, 2), floats(7, 7, 7, 7)))
			},
		},
		{
			name: "res rre rres",
			build: func() *executor.Instance {
				b := newBuilder(3, 0)
				// rank 0: res of its two input halves to its output
				// and rank 1's output[0:16].
				b.tb(0, op(plan.OpReduceSend, 0, nil, rs(L(in, 0, 16), L(in, 16, 16)), rs(L(out, 0, 16), R(1, out, 0, 16))))
				// rank 2: rre of its input with ranks 0 and 1 inputs.
				b.tb(2, op(plan.OpReadReduce, mem, nil, rs(L(in, 0, 16), R(0, in, 0, 16), R(1, in, 0, 16)), rs(L(out, 16, 16))),
					op(plan.OpReadReduceSend, mem, nil, rs(L(in, 16, 16), R(1, in, 16, 16)), rs(L(out, 32, 16), R(0, out, 32, 16), R(1, out, 32, 16))))
				return b.inst
			},
			in: func(r int) []byte {
				return cat(fill(4, float32(r), 1), fill(4, float32(100*r), 10))
			},
			outB: 48,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				in := func(r, h int) []byte { return b[r].Input[16*h : 16*h+16] }
				res := sum32(in(0, 0), in(0, 1))
				rre := sum32(in(2, 0), in(0, 0), in(1, 0))
				rres := sum32(in(2, 1), in(1, 1))
				eq(t, "rank 0 output", b[0].Output, cat(res, make([]byte, 16), rres))
				eq(t, "rank 1 output", b[1].Output, cat(res, make([]byte, 16), rres))
				eq(t, "rank 2 output", b[2].Output, cat(make([]byte, 16), rre, rres))
			},
		},
		{
			name: "pipeline offsets and clamping (Q9)",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				// 100 bytes in units of 32 over 5 iterations: 32, 32,
				// 32, 4, then 0 bytes (clamped, not a unit beyond).
				b.tb(0, pipe(32, 5, cp(L(in, 8, 100), L(out, 0, 100))))
				return b.inst
			},
			inB: 128, outB: 160,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				want := make([]byte, 160)
				copy(want, pattern(128, 0)[8:108])
				eq(t, "output", b[0].Output, want)
			},
		},
		{
			name: "pipeline across ranks with signal and wait",
			build: func() *executor.Instance {
				b := newBuilder(2, 128)
				c0, c1 := b.connect(mem, 0, 1)
				b.tb(0, pipe(32, 4,
					wt(mem, 0), nop(),
					op(plan.OpPut, mem, nil, rs(L(in, 0, 128)), rs(R(1, scr, 0, 128))), nop(),
					sig(mem, 0)))
				b.tb(1, pipe(32, 4,
					sig(mem, 0), wt(mem, 0), nop(),
					cp(L(scr, 0, 128), L(out, 0, 128)), nop()))
				_, _ = c0, c1
				return b.inst
			},
			inB: 128, outB: 128,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				// The put writes scratch at 0..128 stepping by the
				// pipeline offset; rank 1 copies each unit after the
				// signal.
				eq(t, "rank 1 output", b[1].Output, pattern(128, 0))
			},
		},
		{
			name: "thread-block-group regions as given",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, cp(L(in, 0, 48), L(out, 0, 48)))
				b.tb(0, cp(L(in, 48, 32), L(out, 48, 32)))
				b.tb(0, cp(L(in, 80, 48), L(out, 80, 48)))
				return b.inst
			},
			inB: 128, outB: 128,
			check: func(t *testing.T, b []executor.RankBuffers, _ *session) {
				eq(t, "output", b[0].Output, pattern(128, 0))
			},
		},
	}
	runCases(t, cases, opts())
}

// TestReuseScratchRing checks that pipelines of reuse_resources plans
// offset scratch operands modulo the scratch ring (docs/semantics.md §1.13).
func TestReuseScratchRing(t *testing.T) {
	t.Parallel()
	b := newBuilder(1, 256)
	b.inst.Plan.ReuseResources = true
	// 64 MiB / 2^20 chunks = a 64-byte ring.
	b.inst.Plan.GPUs[0].ScratchChunks = 1 << 20
	b.inst.Plan.GPUs[0].InputChunks = 1
	b.inst.Sizes = executor.Sizes{Input: 128, Output: 128}
	b.tb(0, pipe(32, 4,
		cp(L(in, 0, 128), L(scr, 0, 128)), nop(),
		cp(L(scr, 0, 128), L(out, 0, 128)), nop()))
	bb := bufs(1, 128, 128)
	s := mustRun(t, b.inst, opts(), bb)
	eq(t, "output", bb[0].Output, pattern(128, 0))
	// The ring holds the last two units.
	eq(t, "scratch ring", s.ranks[0].scratch[:64], pattern(128, 0)[64:128])
	eq(t, "scratch beyond the ring", s.ranks[0].scratch[64:128], make([]byte, 64))
}

func TestBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		op   executor.OpInstance
		want string
	}{
		{"local output", cp(L(in, 0, 64), L(out, 32, 64)), "rank 0 tb 0 op 0 copy: destination 0: output[32:96] of rank 0 out of range: the buffer has 64 bytes"},
		{"remote input", op(plan.OpGet, mem, nil, rs(R(1, in, 32, 64)), rs(L(out, 0, 64))), "source 0: input[32:96] of rank 1 out of range"},
		{"scratch packets", op(plan.OpPutPacket, mem, nil, rs(L(in, 0, 64)), rs(R(1, scr, 16, 64))), "scratch[32:160] of rank 1 out of range: the buffer has 128 bytes"},
		{"pipeline", pipe(16, 8, cp(L(in, 0, 128), L(out, 0, 128))), "rank 0 tb 0 op 0.0 copy: source 0: input[0:128] of rank 0 out of range"},
		{"reduce elements", op(plan.OpReduce, 0, nil, rs(L(in, 0, 6), L(in, 8, 6)), rs(L(out, 0, 6))), "6 bytes is not a whole number of float elements"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBuilder(2, 128)
			b.tb(0, c.op)
			s := openT(t, b.inst, opts(), schedule{})
			err := s.Launch(context.Background(), bufs(2, 64, 64))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			// The check other backends make before a launch gives the
			// same report, without the backend's name.
			if cerr := executor.CheckBuffers(b.inst, opts(), bufs(2, 64, 64)); cerr == nil || "cpu: "+cerr.Error() != err.Error() {
				t.Errorf("executor.CheckBuffers: got %v, want the launch's %q without its \"cpu: \"", cerr, err)
			}
			// Nothing ran: the session stays usable.
			if ready := s.guard.Ready(context.Background()); s.flag != 0 || ready != nil {
				t.Errorf("session changed by a failed precheck: flag %d, %v", s.flag, ready)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(b *builder)
		want  string
	}{
		{"channel index", func(b *builder) { b.tb(0, sig(mem, 3)) }, "rank 0 tb 0 op 0 signal: memory channel 3 out of range [0:0]"},
		{"semaphore", func(b *builder) { b.tb(0, sem(plan.OpSemAcquire, 0)) }, "semaphore 0 out of range"},
		{"barrier id", func(b *builder) { b.tb(0, bar(16, 2)) }, "barrier id 16 out of range"},
		{"operands", func(b *builder) { b.tb(0, op(plan.OpCopy, 0, nil, nil, rs(L(out, 0, 4)))) }, "0 source operand(s), want 1"},
		{"remote owner", func(b *builder) { b.tb(0, op(plan.OpGet, mem, nil, rs(R(5, in, 0, 4)), rs(L(out, 0, 4)))) }, "owner rank 5 out of range"},
		{"switch", func(b *builder) { b.tb(0, op(plan.OpMultiStore, 0, nil, rs(L(in, 0, 4)), rs(SW(0, out, 0, 4)))) }, "switch channel 0 out of range"},
		{"port channels", func(b *builder) {
			b.connect(prt, 0, 1)
			b.tb(0, op(plan.OpPut, prt, nil, rs(L(in, 0, 4)), rs(R(1, out, 0, 4))))
		}, "0 port channel(s) for 1 destination(s)"},
		{"nested pipeline", func(b *builder) { b.tb(0, pipe(16, 1, pipe(16, 1))) }, "nested pipeline"},
		{"pairing", func(b *builder) {
			b.connect(mem, 0, 1)
			b.inst.Ranks[1].MemoryChannels[0].PeerIndex = -1
		}, "pairs with rank 1 channel 0, which pairs with rank 0 channel -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBuilder(2, 64)
			c.build(b)
			_, err := New().Open(b.inst, opts())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if verr := executor.Validate(b.inst, opts()); verr == nil || "cpu: open: "+verr.Error() != err.Error() {
				t.Errorf("executor.Validate: got %v, want Open's %q without its \"cpu: open: \"", verr, err)
			}
		})
	}
	if _, err := New().Open(newBuilder(1, 0).inst, executor.Options{}); err == nil {
		t.Error("Open without a DType succeeded")
	}
}

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	b := newBuilder(1, 0)
	b.tb(0, cp(L(in, 0, 16), L(out, 0, 16)))
	be := New()
	if be.Name() != "cpu" {
		t.Errorf("Name() = %q", be.Name())
	}
	s, err := be.Open(b.inst, opts())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(context.Background(), bufs(2, 16, 16)); err == nil {
		t.Error("launch with buffers for 2 ranks of a 1-rank instance succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Launch(ctx, bufs(1, 16, 16)); !errors.Is(err, context.Canceled) {
		t.Errorf("launch with a canceled context: %v", err)
	}
	if err := s.Launch(context.Background(), bufs(1, 16, 16)); err != nil {
		t.Errorf("launch: %v", err)
	}
	s.Close()
	if err := s.Launch(context.Background(), bufs(1, 16, 16)); !errors.Is(err, executor.ErrClosed) {
		t.Errorf("launch after Close: %v", err)
	}
}
