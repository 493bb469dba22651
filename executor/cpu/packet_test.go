package cpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// wantPackets encodes payload as packets with flag, in the device layout.
func wantPackets(payload []byte, flag uint32, ll8 bool) []byte {
	var o []byte
	if ll8 {
		for i := 0; i+4 <= len(payload); i += 4 {
			o = binary.LittleEndian.AppendUint32(o, binary.LittleEndian.Uint32(payload[i:]))
			o = binary.LittleEndian.AppendUint32(o, flag)
		}
		return o
	}
	for i := 0; i+8 <= len(payload); i += 8 {
		o = binary.LittleEndian.AppendUint32(o, binary.LittleEndian.Uint32(payload[i:]))
		o = binary.LittleEndian.AppendUint32(o, flag)
		o = binary.LittleEndian.AppendUint32(o, binary.LittleEndian.Uint32(payload[i+4:]))
		o = binary.LittleEndian.AppendUint32(o, flag)
	}
	return o
}

func TestPacketOps(t *testing.T) {
	t.Parallel()
	const N = 64 // data bytes per operand; packets take 2N
	big := float32(1 << 24)
	cases := []dataCase{
		{
			name: "ppkt memory then upkt, exact layout",
			build: func() *executor.Instance {
				b := newBuilder(2, 4*N)
				b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, N, N))))
				b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, N, N)), rs(L(out, 0, N))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 1 output", b[1].Output, pattern(N, 0))
				eq(t, "rank 1 scratch packets", s.ranks[1].scratch[2*N:4*N], wantPackets(pattern(N, 0), 1, s.opts.LL8))
				eq(t, "rank 1 scratch head", s.ranks[1].scratch[:2*N], make([]byte, 2*N))
			},
		},
		{
			name: "ppkt with several destinations, each source its own buffer",
			build: func() *executor.Instance {
				b := newBuilder(3, 2*N)
				b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N), L(out, 0, N)), rs(R(1, scr, 0, N), R(2, scr, 0, N))))
				b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				b.tb(2, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 1 output", b[1].Output, pattern(N, 0))
				eq(t, "rank 2 output", b[2].Output, make([]byte, N)) // rank 0's output is zero
			},
		},
		{
			name: "cpkt then upkt locally",
			build: func() *executor.Instance {
				b := newBuilder(1, 2*N)
				b.tb(0, op(plan.OpCopyPacket, 0, nil, rs(L(in, 0, N)), rs(L(scr, 0, N))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "output", b[0].Output, pattern(N, 0))
				eq(t, "scratch", s.ranks[0].scratch, wantPackets(pattern(N, 0), 1, s.opts.LL8))
			},
		},
		{
			name: "rppkt forwards",
			build: func() *executor.Instance {
				b := newBuilder(3, 2*N)
				b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, 0, N))))
				b.tb(1, op(plan.OpReadPutPacket, mem, nil, rs(L(scr, 0, N)), rs(R(2, scr, 0, N), R(0, scr, 0, N))))
				b.tb(2, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				b.tb(0, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "rank 2 output", b[2].Output, pattern(N, 0))
				eq(t, "rank 0 output", b[0].Output, pattern(N, 0))
			},
		},
		{
			name: "repkt order: first packet, packets in operand order, raw source last",
			build: func() *executor.Instance {
				b := newBuilder(3, 4*N)
				b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, 0, N))))
				b.tb(2, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, N, N))))
				b.tb(1, op(plan.OpReducePacket, 0, nil, rs(L(in, 0, N), L(scr, 0, N), L(scr, N, N)), rs(L(out, 0, N))))
				return b.inst
			},
			in: func(r int) []byte {
				if r == 1 {
					return cat(floats(big, big, negZero, 5), fill(12, 1, 1))
				}
				return cat(floats(1, 1, negZero, 1), fill(12, 1, 1))
			},
			outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				// (1 + 1) + 2^24 = 2^24 + 2, where the non-packet order
				// would give 2^24; (-0 + -0) + -0 = -0: the accumulator
				// starts at the first packet, not at +0 (issue 43).
				want := cat(floats(big+2, big+2, negZero, 7), sum32(fill(12, 1, 1), fill(12, 1, 1), fill(12, 1, 1)))
				eq(t, "rank 1 output", b[1].Output, want)
			},
		},
		{
			name: "respkt recpkt recspkt",
			build: func() *executor.Instance {
				b := newBuilder(3, 8*N)
				// ranks 0 and 2 send packets of their input to rank 1.
				b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, 0, N))))
				b.tb(2, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, N, N))))
				// rank 1: respkt sends the sum to rank 0 scratch[2N];
				// recpkt keeps a packet copy at its scratch[2N];
				// recspkt does both (rank 2 scratch[3N]).
				b.tb(1,
					op(plan.OpReduceSendPacket, 0, nil, rs(L(in, 0, N), L(scr, 0, N), L(scr, N, N)), rs(L(out, 0, N), R(0, scr, 2*N, N))),
					op(plan.OpReduceCopyPacket, 0, nil, rs(L(in, 0, N), L(scr, 0, N)), rs(L(out, N, N), L(scr, 2*N, N))),
					op(plan.OpReduceCopySendPacket, 0, nil, rs(L(in, 0, N), L(scr, N, N)), rs(L(out, 2*N, N), L(scr, 3*N, N), R(2, scr, 3*N, N))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 2*N, N)), rs(L(out, 3*N, N))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 3*N, N)), rs(L(out, 4*N, N))))
				b.tb(0, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 2*N, N)), rs(L(out, 0, N))))
				b.tb(2, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 3*N, N)), rs(L(out, 0, N))))
				return b.inst
			},
			in:   func(r int) []byte { return fill(N/4, float32(r+1), 0.5) },
			outB: 5 * N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				zero := make([]byte, N)
				in := func(r int) []byte { return b[r].Input }
				all := sum32(zero, in(0), in(2), in(1))
				with0 := sum32(zero, in(0), in(1))
				with2 := sum32(zero, in(2), in(1))
				eq(t, "rank 1 output", b[1].Output, cat(all, with0, with2, with0, with2))
				eq(t, "rank 0 output", b[0].Output[:N], all)
				eq(t, "rank 2 output", b[2].Output[:N], with2)
			},
		},
		{
			name: "packets across pipeline iterations ignore the offset",
			build: func() *executor.Instance {
				b := newBuilder(1, 2*N)
				// The packet ops repeat with the same regions; the second
				// write of a slot carries the same flag and data.
				b.tb(0, pipe(16, 3,
					op(plan.OpCopyPacket, 0, nil, rs(L(in, 0, N)), rs(L(scr, 0, N))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N)))))
				return b.inst
			},
			inB: N, outB: N,
			check: func(t *testing.T, b []executor.RankBuffers, s *session) {
				eq(t, "output", b[0].Output, pattern(N, 0))
			},
		},
	}
	for _, ll8 := range []bool{false, true} {
		t.Run(fmt.Sprintf("LL8=%v", ll8), func(t *testing.T) {
			t.Parallel()
			o := opts()
			o.LL8 = ll8
			runCases(t, cases, o)
		})
	}
}

// TestDoubleScratch checks the half selection by flag parity (docs/semantics.md §3.4)
// across launches, and that stale packets of an earlier launch are never
// accepted.
func TestDoubleScratch(t *testing.T) {
	t.Parallel()
	const N = 32
	for _, ll8 := range []bool{false, true} {
		t.Run(fmt.Sprintf("LL8=%v", ll8), func(t *testing.T) {
			t.Parallel()
			b := newBuilder(2, 4*N) // two halves of 2N
			b.inst.Plan.UseDoubleScratch = true
			b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, 0, N))))
			b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, N)), rs(L(out, 0, N))))
			o := opts()
			o.LL8 = ll8
			s := openT(t, b.inst, o, schedule{})
			for launch := 1; launch <= 4; launch++ {
				bb := bufs(2, N, N)
				bb[0].Input = pattern(N, byte(launch))
				if err := s.Launch(context.Background(), bb); err != nil {
					t.Fatalf("launch %d: %v", launch, err)
				}
				eq(t, fmt.Sprintf("launch %d: rank 1 output", launch), bb[1].Output, pattern(N, byte(launch)))
				lo, hi := s.ranks[1].scratch[:2*N], s.ranks[1].scratch[2*N:]
				half := lo
				if launch%2 == 0 {
					half = hi
				}
				eq(t, fmt.Sprintf("launch %d: scratch half", launch), half, wantPackets(pattern(N, byte(launch)), uint32(launch), ll8))
			}
		})
	}
}

// TestStalePackets: packets of an earlier launch (flag 1) are never
// accepted by a later one (flag 2); the reader reports the stale flag.
func TestStalePackets(t *testing.T) {
	t.Parallel()
	for _, ll8 := range []bool{false, true} {
		t.Run(fmt.Sprintf("LL8=%v", ll8), func(t *testing.T) {
			t.Parallel()
			b := newBuilder(1, 64)
			b.tb(0, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, 32)), rs(L(out, 0, 32))))
			o := opts()
			o.LL8 = ll8
			s := openT(t, b.inst, o, schedule{})
			copy(s.ranks[0].scratch, wantPackets(pattern(32, 0), 1, ll8))
			s.flag = 1 // as if one launch had run
			err := s.Launch(context.Background(), bufs(1, 0, 32))
			var de *executor.DeadlockError
			if !errors.As(err, &de) || len(de.Blocked) != 1 || de.Blocked[0].Waiting != "packet at scratch[0] has flag 1, want 2" {
				t.Fatalf("got %v", err)
			}
		})
	}
}
