package cpu

import (
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

func TestSyncOps(t *testing.T) {
	t.Parallel()
	const N = 64
	put := func(ct plan.ChannelType, t plan.OpType, c int, src, dst executor.Region) executor.OpInstance {
		var chs []int
		if ct == prt {
			chs = ch(c)
		}
		return op(t, ct, chs, rs(src), rs(dst))
	}
	cases := []dataCase{}
	for _, kind := range []struct {
		name   string
		s, w   plan.OpType
		ct     plan.ChannelType
		putOp  plan.OpType
		signal bool // put needs a separate signal
	}{
		{"memory signal/wait", plan.OpSignal, plan.OpWait, mem, plan.OpPut, true},
		{"memory rlxsignal/rlxwait", plan.OpRelaxedSignal, plan.OpRelaxedWait, mem, plan.OpPut, true},
		{"port put/signal/wait", plan.OpSignal, plan.OpWait, prt, plan.OpPut, true},
		{"port rlxsignal/rlxwait", plan.OpRelaxedSignal, plan.OpRelaxedWait, prt, plan.OpPut, true},
		{"port pws", plan.OpSignal, plan.OpWait, prt, plan.OpPutWithSignal, false},
		{"port pwsf", plan.OpSignal, plan.OpWait, prt, plan.OpPutWithSignalAndFlush, false},
	} {
		kind := kind
		cases = append(cases, dataCase{
			name: kind.name + ": ring of 3 ranks, 2 rounds",
			build: func() *executor.Instance {
				b := newBuilder(3, 2*N)
				// Rank r sends its input to rank r+1's scratch, which
				// copies it to its output and forwards its own input…
				// two rounds so that counters go to 2.
				var send, recv [3]int
				for r := 0; r < 3; r++ {
					send[r], recv[(r+1)%3] = b.connect(kind.ct, r, (r+1)%3)
				}
				for r := 0; r < 3; r++ {
					var ops []executor.OpInstance
					for round := uint64(0); round < 2; round++ {
						ops = append(ops, put(kind.ct, kind.putOp, send[r], L(in, round*N/2, N/2), R((r+1)%3, scr, round*N, N/2)))
						if kind.signal {
							ops = append(ops, nop(), op(kind.s, kind.ct, ch(send[r]), nil, nil))
						}
						ops = append(ops, op(kind.w, kind.ct, ch(recv[r]), nil, nil), nop(),
							cp(L(scr, round*N, N/2), L(out, round*N/2, N/2)), nop())
					}
					b.tb(r, ops...)
				}
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				for r := 0; r < 3; r++ {
					eq(t, fmt.Sprintf("rank %d output", r), b[r].Output, b[(r+2)%3].Input)
				}
				for r, rs := range s.ranks {
					c := rs.mem
					if kind.ct == prt {
						c = rs.port
					}
					var in, ex uint64
					for i := range c {
						in, ex = in+c[i].inbound(), ex+c[i].expected
					}
					if in != 2 || ex != 2 {
						t.Errorf("rank %d: %d signals received, %d waits; want 2, 2", r, in, ex)
					}
				}
			},
		})
	}
	cases = append(cases,
		dataCase{
			name: "port put then flush: source reusable",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				b.connect(prt, 0, 1)
				b.tb(0,
					op(plan.OpPut, prt, ch(0), rs(L(in, 0, N)), rs(R(1, out, 0, N))),
					op(plan.OpFlush, prt, ch(0), nil, nil), nop(),
					cp(L(out, 0, N), L(in, 0, N)), nop(), // overwrite the source with zeros
					sig(prt, 0))
				b.tb(1, wt(prt, 0))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 1 output", b[1].Output, pattern(N, 0))
				eq(t, "rank 0 input", b[0].Input, make([]byte, N))
			},
		},
		dataCase{
			name: "port ppkt of local packets and rppkt over port",
			build: func() *executor.Instance {
				b := newBuilder(3, 4*N)
				b.connect(prt, 0, 1)
				b.connect(prt, 1, 2)
				b.tb(0, op(plan.OpCopyPacket, 0, nil, rs(L(in, 0, N)), rs(L(scr, N, N))), nop(),
					op(plan.OpPutPacket, prt, ch(0), rs(L(scr, N, N)), rs(R(1, scr, 0, N))))
				// rank 1: channel 0 from rank 0, channel 1 to rank 2.
				b.tb(1, op(plan.OpReadPutPacket, prt, ch(1), rs(L(scr, 0, N)), rs(R(2, scr, N, N))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				b.tb(2, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, N, N)), rs(L(out, 0, N))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 1 output", b[1].Output, pattern(N, 0))
				eq(t, "rank 2 output", b[2].Output, pattern(N, 0))
			},
		},
		dataCase{
			name: "semaphores order thread blocks",
			build: func() *executor.Instance {
				b := newBuilder(1, N)
				b.sems(0, 0, 1)
				// TB0 produces, TB1 consumes; semaphore 1 is a credit
				// the consumer hands back.
				b.tb(0, sem(plan.OpSemAcquire, 1), cp(L(in, 0, N), L(scr, 0, N)), nop(), sem(plan.OpSemRelease, 0))
				b.tb(0, sem(plan.OpSemAcquire, 0), nop(), cp(L(scr, 0, N), L(out, 0, N)), nop(), sem(plan.OpSemRelease, 1))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "output", b[0].Output, pattern(N, 0))
				if v := []int64{s.ranks[0].sems[0].v, s.ranks[0].sems[1].v}; v[0] != 0 || v[1] != 1 {
					t.Errorf("semaphores %v, want [0 1]", v)
				}
			},
		},
		dataCase{
			name: "barrier of three thread blocks, twice",
			build: func() *executor.Instance {
				b := newBuilder(1, 3*N)
				for i := uint64(0); i < 3; i++ {
					j := (i + 1) % 3
					b.tb(0, cp(L(in, 0, N), L(scr, i*N, N)), bar(3, 3),
						cp(L(scr, j*N, N), L(out, i*N, N)), bar(3, 3),
						cp(L(out, i*N, N), L(scr, i*N, N)), bar(3, 3))
				}
				return b.inst
			},
			inB: N, outB: 3 * N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				p := pattern(N, 0)
				eq(t, "output", b[0].Output, cat(p, p, p))
				if br := s.ranks[0].barriers[3]; br.gen != 3 || br.arrived != 0 {
					t.Errorf("barrier 3: generation %d, %d arrived; want 3, 0", br.gen, br.arrived)
				}
			},
		},
		dataCase{
			name: "barrier of one thread block is a no-op",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, bar(0, 1), cp(L(in, 0, N), L(out, 0, N)), bar(0, 0))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "output", b[0].Output, pattern(N, 0))
			},
		},
		dataCase{
			name: "signal and wait on switch channels do nothing",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				b.group(out, 0, 1)
				b.tb(0, op(plan.OpSignal, plan.Switch, ch(0), nil, nil), op(plan.OpWait, plan.Switch, ch(0), nil, nil))
				return b.inst
			},
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {},
		},
	)
	runCases(t, cases, opts())
}

func TestSwitchOps(t *testing.T) {
	t.Parallel()
	const N = 48
	cases := []dataCase{
		{
			name: "glres reduce-scatter then all members, in place",
			build: func() *executor.Instance {
				b := newBuilder(3, 0)
				b.group(out, 0, 2, 1) // members are summed in rank order
				for r := 0; r < 3; r++ {
					part := uint64(r) * N / 3
					b.tb(r, op(plan.OpMultiLoadReduceStore, 0, nil, rs(SW(0, out, part, N/3)), rs(SW(0, out, part, N/3))))
				}
				return b.inst
			},
			in: func(r int) []byte {
				if r == 0 {
					return floats(1<<24, 1<<24, 1<<24, 1<<24, 1, 2, 3, 4, 5, 6, 7, 8)
				}
				return fill(N/4, 1, 0)
			},
			inPlac: true,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				// Inputs are the outputs (in place): the sum of the
				// three original inputs, accumulated from rank 0.
				want := sum32(floats(1<<24, 1<<24, 1<<24, 1<<24, 1, 2, 3, 4, 5, 6, 7, 8), fill(N/4, 1, 0), fill(N/4, 1, 0))
				for r := 0; r < 3; r++ {
					eq(t, fmt.Sprintf("rank %d", r), b[r].Output, want)
				}
			},
		},
		{
			name: "gstore to every member",
			build: func() *executor.Instance {
				b := newBuilder(3, 0)
				b.group(out, 0, 1, 2)
				b.tb(1, op(plan.OpMultiStore, 0, nil, rs(L(in, 0, N)), rs(SW(0, out, N, N))))
				return b.inst
			},
			inB: N, outB: 2 * N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				for r := 0; r < 3; r++ {
					eq(t, fmt.Sprintf("rank %d", r), b[r].Output, cat(make([]byte, N), pattern(N, 1)))
				}
			},
		},
		{
			name: "gstorepkt then upkt on every member",
			build: func() *executor.Instance {
				b := newBuilder(2, 4*N)
				b.group(scr, 0, 1)
				b.tb(0, op(plan.OpCopyPacket, 0, nil, rs(L(in, 0, N)), rs(L(scr, 0, N))),
					op(plan.OpMultiStorePacket, 0, nil, rs(L(scr, 0, N)), rs(SW(0, scr, N, N))))
				for r := 0; r < 2; r++ {
					b.tb(r, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, N, N)), rs(L(out, 0, N))))
				}
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 0", b[0].Output, pattern(N, 0))
				eq(t, "rank 1", b[1].Output, pattern(N, 0))
			},
		},
	}
	runCases(t, cases, opts())
}
