package passes

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
	"go.starlark.net/syntax"
)

const (
	none   = ir.SyncNone
	before = ir.SyncBefore
	after  = ir.SyncAfter
	both   = ir.SyncBoth
)

// waits records n waits on rank 1 for rank 0 over a fresh channel of kind,
// balancing the signals an example sends.
func (t *tprog) waits(kind ir.ChannelType, n int) {
	back := t.channel(kind, 0, 1)
	for i := 0; i < n; i++ {
		back.wait(0, none)
	}
}

// TestFuseExamples ports the fusion (F1–F19, docs/passes.md §4.2) examples.
func TestFuseExamples(t *testing.T) {
	t.Parallel()
	runExamples(t, []example{
		{name: "fu_put_mem", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.put(O(1, 3, 4), I(0, 0, 1), tb(0))
			b.put(I(1, 0, 1), I(0, 2, 3), tb(0))
		}, want: map[string]string{
			"0/0":     `put memory ch=[0,1] i[0:1],i[2:3] -> rb0[3:4],rb1[0:1]`,
			"0/0 hdr": "tb 0 ch.memory=[0,1] rb.memory=[0,1]",
		}},
		{name: "fu_put_size", build: func(t *tprog) {
			ch := t.mem(1, 0)
			ch.put(O(1, 2, 4), I(0, 0, 2), tb(0))
			ch.put(O(1, 0, 1), I(0, 2, 3), tb(0))
		}, want: map[string]string{"0/0": `
			put memory ch=[0] i[0:2] -> rb0[2:4]
			put memory ch=[0] i[2:3] -> rb0[0:1]`}},
		{name: "fu_put_port", build: func(t *tprog) {
			p0, p1, m := t.port(1, 0), t.port(1, 0), t.mem(1, 0)
			p0.put(O(1, 0, 1), I(0, 0, 1), tb(0))
			p1.put(O(1, 1, 2), I(0, 1, 2), tb(0))
			p0.put(O(1, 2, 3), I(0, 2, 3), tb(0))
			m.put(O(1, 3, 4), I(0, 3, 4), tb(0))
		}, want: map[string]string{"0/0": `
			put port ch=[0,1,0] i[0:1],i[1:2],i[2:3] -> rb0[0:1],rb0[1:2],rb0[2:3]
			put memory ch=[0] i[3:4] -> rb0[3:4]`}},
		{name: "fu_pws", build: func(t *tprog) {
			p := t.port(1, 0)
			p.pws(O(1, 0, 1), I(0, 0, 1), 0)
			p.pws(O(1, 1, 2), I(0, 1, 2), 0)
			p.pwsf(O(1, 2, 3), I(0, 2, 3), 0)
			p.pwsf(O(1, 3, 4), I(0, 3, 4), 0)
			p.put(O(1, 0, 1), I(0, 0, 1), tb(0))
			t.waits(ir.Port, 4)
		}, want: map[string]string{
			"0/0": `
				pws port ch=[0,0] i[0:1],i[1:2] -> rb0[0:1],rb0[1:2]
				pwsf port ch=[0,0] i[2:3],i[3:4] -> rb0[2:3],rb0[3:4]
				put port ch=[0] i[0:1] -> rb0[0:1]`,
			// Waits on one channel overlap: F13 needs disjoint sets.
			"1/0": `
				wait port ch={0} sync=none
				wait port ch={0} sync=none
				wait port ch={0} sync=none
				wait port ch={0} sync=none`,
		}},
		{name: "fu_ppkt", build: func(t *tprog) {
			t.buffer(1, 4)
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.putPackets(S(1, 0, 1), I(0, 0, 1), tb(0))
			b.putPackets(S(1, 1, 2), I(0, 1, 2), tb(0))
			a.put(O(1, 0, 1), I(0, 2, 3), tb(0))
		}, want: map[string]string{"0/0": `
			ppkt memory ch=[0,1] i[0:1],i[1:2] -> rb0[0:1],rb0[1:2]
			put memory ch=[0] i[2:3] -> rb1[0:1]`}},
		{name: "fu_rppkt", build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.readPutPackets(S(1, 0, 1), S(0, 0, 1), tb(0))
			b.readPutPackets(S(1, 2, 3), S(0, 0, 1), tb(0))
			a.readPutPackets(S(1, 3, 4), S(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			rppkt memory ch=[0,1] s[0:1] -> rb0[0:1],rb0[2:3]
			rppkt memory ch=[0] s[1:2] -> rb0[3:4]`}},
		{name: "fu_get", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.get(O(0, 0, 1), I(1, 0, 1), tb(0))
			b.get(O(0, 1, 2), I(1, 3, 4), tb(0))
			a.get(O(0, 2, 4), I(1, 0, 2), tb(0))
		}, want: map[string]string{"0/0": `
			get memory ch=[0,1] rb0[0:1],rb0[3:4] -> o[0:1],o[1:2]
			get memory ch=[0] rb0[0:2] -> o[2:4]`}},
		{name: "fu_get_same_dst", build: func(t *tprog) {
			a := t.mem(1, 0)
			a.get(I(0, 0, 1), I(1, 1, 2), tb(0))
			a.get(I(0, 0, 1), I(1, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `get memory ch=[0,0] rb0[1:2],rb0[1:2] -> i[0:1],i[0:1]`}},
		{name: "fu_reduce", build: func(t *tprog) {
			t.reduce(0, I(0, 0, 1), []ck{I(0, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum, false)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 2, 3), I(0, 3, 4)}, tb(0), O(0, 0, 1), ir.Sum, false)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 1, 2)}, tb(0), O(0, 1, 2), ir.Sum, false)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 2, 3)}, tb(0), O(0, 1, 2), ir.Max, false)
		}, want: map[string]string{"0/0": `
			re none sum src=i[0:1],i[1:2],i[2:3],i[3:4] dst=o[0:1]
			re none sum src=i[0:1],i[1:2] dst=o[1:2]
			nop
			re none max src=i[0:1],i[2:3] dst=o[1:2]`}},
		{name: "fu_rre", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.reduce(I(0, 0, 1), []ck{I(1, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum)
			b.reduce(I(0, 0, 1), []ck{O(1, 2, 3)}, tb(0), O(0, 0, 1), ir.Sum)
		}, want: map[string]string{"0/0": `rre memory sum ch=[0,1] src=i[0:1] rsrc=rb0[1:2],rb1[2:3] dst=o[0:1]`}},
		{name: "fu_repkt", build: func(t *tprog) {
			t.buffer(0, 4)
			t.reduce(0, I(0, 0, 1), []ck{S(0, 0, 1)}, tb(0), I(0, 0, 1), ir.Sum, true)
			t.reduce(0, I(0, 0, 1), []ck{S(0, 1, 2)}, tb(0), I(0, 0, 1), ir.Sum, true)
		}, want: map[string]string{"0/0": `repkt none sum src=i[0:1],s[0:1],s[1:2] dst=i[0:1] packet`}},
		{name: "fu_re_put", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum, false)
			a.put(O(1, 0, 1), O(0, 0, 1), tb(0))
			b.put(I(1, 0, 1), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `res memory sum putch=[0,1] src=i[0:1],i[1:2] dst=o[0:1] rdst=rb0[0:1],rb1[0:1]`}},
		{name: "fu_re_re_put", build: func(t *tprog) {
			a := t.mem(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum, false)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 2, 3)}, tb(0), O(0, 0, 1), ir.Sum, false)
			a.put(O(1, 0, 1), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `res memory sum putch=[0] src=i[0:1],i[1:2],i[2:3] dst=o[0:1] rdst=rb0[0:1]`}},
		{name: "fu_re_put_no", build: func(t *tprog) {
			a, p := t.mem(1, 0), t.port(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{I(0, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum, false)
			a.put(O(1, 0, 1), I(0, 0, 1), tb(0))
			t.reduce(0, I(0, 2, 3), []ck{I(0, 3, 4)}, tb(0), O(0, 2, 3), ir.Sum, false)
			p.put(O(1, 2, 3), O(0, 2, 3), tb(0))
		}, want: map[string]string{"0/0": `
			re none sum src=i[0:1],i[1:2] dst=o[0:1]
			put memory ch=[0] i[0:1] -> rb0[0:1]
			re none sum src=i[2:3],i[3:4] dst=o[2:3]
			nop
			put port ch=[0] o[2:3] -> rb0[2:3]`}},
		{name: "fu_rre_put", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.reduce(I(0, 0, 1), []ck{I(1, 1, 2)}, tb(0), O(0, 0, 1), ir.Sum)
			b.reduce(I(0, 0, 1), []ck{I(1, 2, 3)}, tb(0), O(0, 0, 1), ir.Sum)
			a.put(O(1, 0, 1), O(0, 0, 1), tb(0))
			b.put(O(1, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `rres memory sum ch=[0,1] putch=[0,1] src=i[0:1] rsrc=rb0[1:2],rb0[2:3] dst=o[0:1] rdst=rb1[0:1],rb1[1:2]`}},
		{name: "fu_repkt_ppkt", build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a, b := t.mem(1, 0), t.mem(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{S(0, 0, 1)}, tb(0), O(0, 0, 1), ir.Sum, true)
			a.putPackets(S(1, 0, 1), O(0, 0, 1), tb(0))
			b.putPackets(S(1, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `respkt memory sum putch=[0,1] src=i[0:1],s[0:1] dst=o[0:1] rdst=rb0[0:1],rb0[1:2] packet`}},
		{name: "fu_repkt_cpkt", build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a, b := t.mem(1, 0), t.mem(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{S(0, 0, 1)}, tb(0), O(0, 0, 1), ir.Sum, true)
			t.copyPackets(0, S(0, 2, 3), O(0, 0, 1), tb(0))
			b.readPutPackets(S(1, 1, 2), S(0, 2, 3), tb(0))
			a.putPackets(S(1, 0, 1), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `recspkt memory sum putch=[0,1] src=i[0:1],s[0:1] dst=o[0:1] pktdst=s[2:3] rdst=rb0[1:2],rb0[0:1] packet`}},
		{name: "fu_respkt_cpkt_no", build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a := t.mem(1, 0)
			t.reduce(0, I(0, 0, 1), []ck{S(0, 0, 1)}, tb(0), O(0, 0, 1), ir.Sum, true)
			a.putPackets(S(1, 0, 1), O(0, 0, 1), tb(0))
			t.copyPackets(0, S(0, 2, 3), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `
			respkt memory sum putch=[0] src=i[0:1],s[0:1] dst=o[0:1] rdst=rb0[0:1] packet
			nop
			cpkt o[0:1] -> s[2:3]`}},
		{name: "fu_copy", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			copy i[1:2] -> o[1:2]`}},
		{name: "fu_switch", build: func(t *tprog) {
			sw := t.sw([]int{0, 1}, ir.Input)
			sw.reduce(0, 0, 1, O(0, 0, 1).chunk(), 0, ir.Sum)
			sw.broadcast(0, O(0, 0, 1).chunk(), 2, 1, 0)
			sw.reduce(1, 1, 1, O(1, 1, 2).chunk(), 0, ir.Sum)
			sw.broadcast(1, O(1, 1, 2).chunk(), 1, 1, 0)
		}, want: map[string]string{
			// Q1: the plan prints srcidx as the dst index; the IR keeps both.
			"0/0": `glres switch sum ch=[0] buf=i size=1 srcidx=[0] dstidx=[2]`,
			"1/0": `glres switch sum ch=[0] buf=i size=1 srcidx=[1] dstidx=[1]`,
		}},
		{name: "fu_switch_nofuse", build: func(t *tprog) {
			sw := t.sw([]int{0, 1}, ir.Input)
			sw.reduce(0, 0, 1, O(0, 0, 1).chunk(), 0, ir.Sum)
			sw.broadcast(0, O(0, 1, 2).chunk(), 0, 1, 0)
		}, want: map[string]string{"0/0": `
			glre switch sum ch=[0] buf=i off=0 size=1 chunk=r0:o[0:1]
			gstore switch ch=[0] buf=i off=0 size=1 chunk=r0:o[1:2]`}},
		{name: "fu_sem", build: func(t *tprog) {
			s0, s1 := t.sem(0, 0), t.sem(0, 1)
			s0.acquire(0, before)
			s1.acquire(0, after)
			s0.acquire(0, none)
			s0.release(0, none)
			s1.release(0, none)
		}, want: map[string]string{"0/0": `
			nop
			sem_acquire sem=[0,1,0] sync=both
			nop
			sem_release sem=[0,1] sync=none`}},
		{name: "fu_signal", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.signal(0, after)
			b.signal(0, before)
			a.signal(0, none)
			t.waits(ir.Memory, 3)
		}, want: map[string]string{"0/0": `
			nop
			signal memory ch={0,1} sync=both
			nop
			signal memory ch={0} sync=none`}},
		{name: "fu_signal_kinds", build: func(t *tprog) {
			a, b, p := t.mem(1, 0), t.mem(1, 0), t.port(1, 0)
			a.rlxSignal(0, none)
			b.signal(0, none)
			p.signal(0, none)
			back, pback := t.mem(0, 1), t.port(0, 1)
			back.wait(0, none)
			back.wait(0, none)
			pback.wait(0, none)
		}, want: map[string]string{"0/0": `
			rlxsignal memory ch={0} sync=none
			signal memory ch={1} sync=none
			signal port ch={0} sync=none`}},
		{name: "fu_flush", build: func(t *tprog) {
			p0, p1 := t.port(1, 0), t.port(1, 0)
			p0.flush(0, none)
			p0.flush(0, none)
			p1.flush(0, after)
		}, want: map[string]string{"0/0": `
			flush port ch={0,1} sync=after
			nop`}},
		{name: "fu_tbg_put", build: func(t *tprog) {
			a := t.mem(1, 0)
			g1, g2 := []int{0, 1}, []int{1, 0}
			a.put(O(1, 0, 1), I(0, 0, 1), grp(g1...))
			a.put(O(1, 1, 2), I(0, 1, 2), grp(g1...))
			a.put(O(1, 2, 3), I(0, 2, 3), grp(g2...))
			a.put(O(1, 3, 4), I(0, 3, 4), tb(0))
		}, want: map[string]string{
			"0/0": `
				put memory ch=[0,0] i[0:1],i[1:2] -> rb0[0:1],rb0[1:2] tbg=0/2
				put memory ch=[0] i[2:3] -> rb0[2:3] tbg=1/2
				put memory ch=[0] i[3:4] -> rb0[3:4]`,
			"0/1": `
				put memory ch=[0,0] i[0:1],i[1:2] -> rb0[0:1],rb0[1:2] tbg=1/2
				put memory ch=[0] i[2:3] -> rb0[2:3] tbg=0/2`,
		}},
		{name: "fu_setorder", build: func(t *tprog) {
			var chs []*tch
			for i := 0; i < 10; i++ {
				chs = append(chs, t.mem(1, 0))
			}
			for _, c := range chs {
				c.signal(0, none)
			}
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			chs[2].signal(0, none)
			chs[9].signal(0, none)
			t.waits(ir.Memory, 12)
		}, want: map[string]string{"0/0": `
			signal memory ch={0,1,2,3,4,5,6,7,8,9} sync=none
			copy i[0:1] -> o[0:1]
			signal memory ch={9,2} sync=none`}},
		{name: "fu_setorder2", build: func(t *tprog) {
			var chs []*tch
			for i := 0; i < 20; i++ {
				chs = append(chs, t.mem(1, 0))
			}
			for _, c := range chs {
				c.signal(0, none)
			}
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			for _, i := range []int{3, 11, 19} {
				chs[i].signal(0, none)
			}
			t.waits(ir.Memory, 23)
		}, want: map[string]string{"0/0": `
			signal memory ch={0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19} sync=none
			copy i[0:1] -> o[0:1]
			signal memory ch={19,3,11} sync=none`}},
	})
}

// TestElisionExamples ports the sync-elision examples (docs/passes.md §4.4, §4.5).
func TestElisionExamples(t *testing.T) {
	t.Parallel()
	sigWait := func(sig, wait ir.SyncType) func(t *tprog) {
		return func(t *tprog) {
			for r := 0; r < 2; r++ {
				ch := t.mem(1-r, r)
				ch.signal(0, sig)
				ch.wait(0, wait)
			}
		}
	}
	usernop := func(t *tprog) {
		ch := t.mem(1, 0)
		ch.signal(0, both)
		t.barrier(0, 0)
		ch.signal(0, both)
		t.waits(ir.Memory, 2)
	}
	nopPipe := func(withNop bool) func(t *tprog) {
		return func(t *tprog) {
			s := t.sem(0, 0)
			a, b := t.mem(1, 0), t.mem(1, 0)
			if withNop {
				t.barrier(0, 0)
			}
			t.loopCtx(1024, 1, func() {
				s.acquire(0, both)
				a.signal(0, none)
				b.signal(0, none)
			})
			t.waits(ir.Memory, 2)
		}
	}
	runExamples(t, []example{
		{name: "el_sig_wait", build: sigWait(both, both), want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=before
			nop
			wait memory ch={0} sync=both
			nop`}},
		{name: "el_sig_wait_nofuse", opts: []option{noFusion}, build: sigWait(both, both), want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=both
			nop
			nop
			wait memory ch={0} sync=both
			nop`}},
		{name: "el_after_before", build: sigWait(after, before), want: map[string]string{"0/0": `
			signal memory ch={0} sync=none
			nop
			wait memory ch={0} sync=before`}},
		{name: "el_after_before_nofuse", opts: []option{noFusion}, build: sigWait(after, before), want: map[string]string{"0/0": `
			signal memory ch={0} sync=after
			nop
			nop
			wait memory ch={0} sync=before`}},
		{name: "el_wait_signal_same", build: func(t *tprog) {
			for r := 0; r < 2; r++ {
				ch := t.mem(1-r, r)
				ch.signal(0, both)
				ch.signal(0, both)
				ch.wait(0, both)
				ch.wait(0, both)
			}
		}, want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=before
			nop
			signal memory ch={0} sync=before
			nop
			wait memory ch={0} sync=before
			nop
			wait memory ch={0} sync=both
			nop`}},
		{name: "el_usernop", build: usernop, want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=before
			nop
			signal memory ch={0} sync=after
			nop`}},
		{name: "el_usernop_nofuse", opts: []option{noFusion}, build: usernop, want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=both
			nop
			nop
			nop
			signal memory ch={0} sync=both
			nop`}},
		{name: "el_barrier", build: func(t *tprog) {
			ch := t.mem(1, 0)
			ch.signal(0, both)
			t.barrier(0, 0, 1)
			ch.signal(0, both)
			t.waits(ir.Memory, 2)
		}, want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=before
			barrier #0 tbs=[0,1]
			signal memory ch={0} sync=after
			nop`,
			"0/1": `barrier #0 tbs=[0,1]`}},
		{name: "el_nops", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.barrier(0, 0)
			t.barrier(0, 0)
			t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
			t.barrier(0, 0)
			t.barrier(0, 0, 1)
			t.barrier(0, 0)
			t.copy(0, O(0, 2, 3), I(0, 2, 3), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			nop
			copy i[1:2] -> o[1:2]
			barrier #0 tbs=[0,1]
			copy i[2:3] -> o[2:3]`}},
		{name: "el_reintroduce", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			t.barrier(0, 0)
			a.signal(0, both)
			b.signal(0, both)
			t.waits(ir.Memory, 2)
		}, want: map[string]string{"0/0": `
			nop
			nop
			signal memory ch={0,1} sync=both
			nop`},
			fuseTwice: "Q4: the fused signal has before again, which the nop clears on a second run"},
		{name: "el_pipe_after", build: func(t *tprog) {
			s, ch := t.sem(0, 0), t.mem(1, 0)
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
				s.release(0, both)
			})
			ch.signal(0, both)
			t.waits(ir.Memory, 1)
		}, want: map[string]string{"0/0": `
			pipeline unit=4096 chunks=2 {
			  copy i[0:1] -> o[0:1]
			  nop
			  sem_release sem=[0] sync=both
			  nop
			}
			signal memory ch={0} sync=after
			nop`}},
		{name: "el_pipe_before", build: func(t *tprog) {
			s, ch := t.sem(0, 0), t.mem(1, 0)
			ch.signal(0, both)
			t.loopCtx(4096, 2, func() {
				s.acquire(0, both)
				t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			})
			t.waits(ir.Memory, 1)
		}, want: map[string]string{"0/0": `
			nop
			signal memory ch={0} sync=before
			pipeline unit=4096 chunks=2 {
			  nop
			  sem_acquire sem=[0] sync=both
			  nop
			  copy i[0:1] -> o[0:1]
			}`}},
		{name: "el_pipe_lastnop", build: func(t *tprog) {
			ch := t.mem(1, 0)
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
				t.barrier(0, 0)
			})
			ch.signal(0, both)
			t.waits(ir.Memory, 1)
		}, want: map[string]string{"0/0": `
			pipeline unit=4096 chunks=2 {
			  copy i[0:1] -> o[0:1]
			  nop
			}
			nop
			signal memory ch={0} sync=both
			nop`}},
		{name: "el_pipe_absorb_after", build: func(t *tprog) {
			s := t.sem(0, 0)
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
				s.release(0, after)
			})
			t.barrier(0, 0)
			t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			pipeline unit=4096 chunks=2 {
			  copy i[0:1] -> o[0:1]
			  sem_release sem=[0] sync=after
			  nop
			}
			copy i[1:2] -> o[1:2]`}},
		{name: "el_nop_pipe_quirk", build: nopPipe(true), want: map[string]string{"0/0": `
			pipeline unit=1024 chunks=1 {
			  nop
			  sem_acquire sem=[0] sync=both
			  nop
			  signal memory ch={0} sync=none
			  signal memory ch={1} sync=none
			}`},
			fuseTwice: "Q2: the absorbing pipeline's body is fused on a second run"},
		{name: "el_nop_pipe_control", build: nopPipe(false), want: map[string]string{"0/0": `
			pipeline unit=1024 chunks=1 {
			  nop
			  sem_acquire sem=[0] sync=both
			  nop
			  signal memory ch={0,1} sync=none
			}`}},
		{name: "el_pipe_unfused_rhs", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			a.signal(0, after)
			t.loopCtx(4096, 2, func() {
				a.signal(0, none)
				b.signal(0, before)
			})
			t.waits(ir.Memory, 3)
		}, want: map[string]string{"0/0": `
			signal memory ch={0} sync=after
			nop
			pipeline unit=4096 chunks=2 {
			  nop
			  signal memory ch={0,1} sync=before
			}`},
			fuseTwice: "Q3: on a second run the pipeline's fused body syncs before, clearing the signal's after"},
	})
}

// TestCombineNonFusions checks the explicit non-fusions of docs/passes.md §4.2 and that a
// failed combination of non-data-sync ops has no side effect.
func TestCombineNonFusions(t *testing.T) {
	t.Parallel()
	loc := func(b ir.BufferType, i int) []ir.Ref { return []ir.Ref{{Buffer: b, Index: i, Size: 1}} }
	rem := func(i int) []ir.Ref { return []ir.Ref{{Remote: true, Index: i, Size: 1}} }
	put := func(k plan.OpType, ct ir.ChannelType, src []ir.Ref) *ir.Op {
		return &ir.Op{Kind: k, Src: src, Dst: rem(0), ChannelIDs: []int{0}, ChannelType: ct}
	}
	re := func(k plan.OpType, dst []ir.Ref) *ir.Op {
		o := &ir.Op{Kind: k, LocalSrc: loc(ir.Input, 0), LocalDst: dst, Packet: k == plan.OpReducePacket || k == plan.OpReduceSendPacket}
		if k == plan.OpReduceSend || k == plan.OpReduceSendPacket {
			o.RemoteDst, o.ChannelType = rem(1), ir.Memory
		}
		if k == plan.OpReadReduceSend {
			o.RemoteSrc, o.RemoteDst, o.ChannelType = rem(2), rem(1), ir.Memory
		}
		return o
	}
	dst := loc(ir.Output, 0)
	chunk := &ir.Chunk{Buffer: ir.Output}
	sig := func(k plan.OpType, ct ir.ChannelType, id int) *ir.Op {
		return &ir.Op{Kind: k, IDSet: ir.NewSet(id), ChannelType: ct}
	}
	cases := []struct {
		name string
		l, r *ir.Op
	}{
		{"copy+copy", &ir.Op{Kind: plan.OpCopy, Src: dst, Dst: dst}, &ir.Op{Kind: plan.OpCopy, Src: dst, Dst: dst}},
		{"put+ppkt", put(plan.OpPut, ir.Memory, dst), put(plan.OpPutPacket, ir.Memory, dst)},
		{"pws+put", put(plan.OpPutWithSignal, ir.Port, dst), put(plan.OpPut, ir.Port, dst)},
		{"pws+pwsf", put(plan.OpPutWithSignal, ir.Port, dst), put(plan.OpPutWithSignalAndFlush, ir.Port, dst)},
		{"memory put+port put", put(plan.OpPut, ir.Memory, dst), put(plan.OpPut, ir.Port, dst)},
		{"re+port put", re(plan.OpReduce, dst), put(plan.OpPut, ir.Port, dst)},
		{"res+res", re(plan.OpReduceSend, dst), re(plan.OpReduceSend, dst)},
		{"rres+ppkt", re(plan.OpReadReduceSend, dst), put(plan.OpPutPacket, ir.Memory, dst)},
		{"respkt+cpkt", re(plan.OpReduceSendPacket, dst), &ir.Op{Kind: plan.OpCopyPacket, Src: dst, Dst: loc(ir.Scratch, 0)}},
		{"repkt+put", re(plan.OpReducePacket, dst), put(plan.OpPut, ir.Memory, dst)},
		{"repkt+port ppkt", re(plan.OpReducePacket, dst), put(plan.OpPutPacket, ir.Port, dst)},
		{"glre+gstorepkt",
			&ir.Op{Kind: plan.OpGroupLoadReduce, SwitchChunk: chunk, ChannelIDs: []int{0}, ChannelType: ir.Switch},
			&ir.Op{Kind: plan.OpMultiStorePacket, SwitchChunk: chunk, ChannelIDs: []int{0}, ChannelType: ir.Switch}},
		{"glres+gstore",
			&ir.Op{Kind: plan.OpMultiLoadReduceStore, SrcIndex: []int{0}, DstIndex: []int{0}, ChannelIDs: []int{0}, ChannelType: ir.Switch},
			&ir.Op{Kind: plan.OpMultiStore, SwitchChunk: chunk, ChannelIDs: []int{0}, ChannelType: ir.Switch}},
		{"barrier+barrier", &ir.Op{Kind: plan.OpBarrier}, &ir.Op{Kind: plan.OpBarrier}},
		{"pipeline+pipeline",
			&ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{{Kind: plan.OpNop}}}, &ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{{Kind: plan.OpNop}}}},
		{"barrier+pipeline", &ir.Op{Kind: plan.OpBarrier}, &ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{{Kind: plan.OpNop}}}},
		{"nop+pipeline without before", &ir.Op{Kind: plan.OpNop}, &ir.Op{Kind: plan.OpPipeline, Body: []*ir.Op{{Kind: plan.OpCopy}}}},
		{"signal+wait", sig(plan.OpSignal, ir.Memory, 0), sig(plan.OpWait, ir.Memory, 1)},
		{"acquire+release", &ir.Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0}}, &ir.Op{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}}},
		{"rlxsignal+signal", sig(plan.OpRelaxedSignal, ir.Memory, 0), sig(plan.OpSignal, ir.Memory, 1)},
		{"memory+port signal", sig(plan.OpSignal, ir.Memory, 0), sig(plan.OpSignal, ir.Port, 1)},
		{"overlapping waits", sig(plan.OpWait, ir.Memory, 3), sig(plan.OpWait, ir.Memory, 3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lBefore, rBefore := ir.FormatOp(c.l), ir.FormatOp(c.r)
			if got, _ := new(fuser).combine(c.l, c.r, false); got != nil {
				t.Fatalf("combine fused them into %s", ir.FormatOp(got))
			}
			if ir.FormatOp(c.l) != lBefore || ir.FormatOp(c.r) != rBefore {
				t.Errorf("failed combine changed its operands: %s, %s", ir.FormatOp(c.l), ir.FormatOp(c.r))
			}
		})
	}
}

// TestElisionTable checks every row of the side-effect table of docs/passes.md §4.4:
// the data_sync of L and R after a failed combination.
func TestElisionTable(t *testing.T) {
	t.Parallel()
	ds := func(s ir.SyncType) *ir.Op {
		return &ir.Op{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}, DataSync: s}
	}
	pipe := func(body ...*ir.Op) *ir.Op { return &ir.Op{Kind: plan.OpPipeline, Body: body} }
	cp := func() *ir.Op { return &ir.Op{Kind: plan.OpCopy} }
	bar := func() *ir.Op { return &ir.Op{Kind: plan.OpBarrier, Barrier: &ir.BarrierInfo{TBList: []int{0, 1}}} }
	nop := func() *ir.Op { return &ir.Op{Kind: plan.OpNop} }
	acq := func(s ir.SyncType) *ir.Op {
		return &ir.Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0}, DataSync: s}
	}
	cases := []struct {
		name         string
		l, r         *ir.Op
		wantL, wantR ir.SyncType // data_sync after; ignored for non-DS ops
	}{
		{"ds+ds(before)", ds(both), acq(before), before, before},
		{"ds+ds(none)", ds(both), acq(after), both, after},
		{"ds+pipeline(before)", ds(both), pipe(acq(both), cp()), before, 0},
		{"ds+pipeline(first nop)", ds(both), pipe(nop(), cp()), before, 0},
		{"ds+pipeline(last nop, Q5)", ds(both), pipe(cp(), nop()), before, 0},
		{"ds+pipeline(no before)", ds(both), pipe(cp(), acq(both)), both, 0},
		{"ds+nop", ds(both), nop(), before, 0},
		{"ds+barrier", ds(both), bar(), before, 0},
		{"ds+copy", ds(both), cp(), both, 0},
		{"nop+ds", nop(), ds(both), 0, after},
		{"barrier+ds", bar(), ds(both), 0, after},
		{"pipeline(after)+ds", pipe(cp(), acq(both)), ds(both), 0, after},
		{"pipeline(last nop)+ds", pipe(cp(), nop()), ds(both), 0, both},
		{"pipeline(no after)+ds", pipe(acq(both), cp()), ds(both), 0, both},
		{"copy+ds", cp(), ds(both), 0, both},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got, _ := new(fuser).combine(c.l, c.r, false); got != nil {
				t.Fatalf("combine fused them into %s", ir.FormatOp(got))
			}
			if c.l.Kind.IsDataSync() && c.l.DataSync != c.wantL {
				t.Errorf("L data_sync = %s, want %s", c.l.DataSync, c.wantL)
			}
			if c.r.Kind.IsDataSync() && c.r.DataSync != c.wantR {
				t.Errorf("R data_sync = %s, want %s", c.r.DataSync, c.wantR)
			}
		})
	}
}

// TestProfile checks profile() on the cases of docs/passes.md §4.5.
func TestProfile(t *testing.T) {
	t.Parallel()
	acq := func(s ir.SyncType) *ir.Op {
		return &ir.Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0}, DataSync: s}
	}
	cp := &ir.Op{Kind: plan.OpCopy}
	nop := &ir.Op{Kind: plan.OpNop}
	bar := &ir.Op{Kind: plan.OpBarrier}
	cases := []struct {
		name string
		body []*ir.Op
		want ir.SyncType
	}{
		{"copy only", []*ir.Op{cp}, none},
		{"first ds both", []*ir.Op{acq(both), cp}, before},
		{"first ds after", []*ir.Op{acq(after), cp}, none},
		{"last ds both", []*ir.Op{cp, acq(both)}, after},
		{"last ds before", []*ir.Op{cp, acq(before)}, none},
		{"single ds both", []*ir.Op{acq(both)}, both},
		{"first nop", []*ir.Op{nop, cp}, before},
		{"last barrier (Q5)", []*ir.Op{cp, bar}, before},
		{"nop and ds", []*ir.Op{nop, acq(after)}, both},
	}
	for _, c := range cases {
		if got := profile(&ir.Op{Kind: plan.OpPipeline, Body: c.body}); got != c.want {
			t.Errorf("%s: profile = %s, want %s", c.name, got, c.want)
		}
	}
}

// TestFuseResults checks fused ops structurally with go-cmp: fresh
// identities, merged fields, the parts' call sites, and operands left
// untouched.
func TestFuseResults(t *testing.T) {
	t.Parallel()
	file := "algo.star"
	at := func(line int32) syntax.Position { return syntax.MakePosition(&file, line, 5) }
	l := &ir.Op{Kind: plan.OpPut, Pos: at(10), Src: []ir.Ref{{Index: 0, Size: 1}}, Dst: []ir.Ref{{Remote: true, Index: 3, Size: 1}},
		ChannelIDs: []int{0}, ChannelType: ir.Memory}
	r := &ir.Op{Kind: plan.OpPut, Pos: at(11), Src: []ir.Ref{{Index: 2, Size: 1}}, Dst: []ir.Ref{{Remote: true, BufferID: 1, Size: 1}},
		ChannelIDs: []int{1}, ChannelType: ir.Memory}
	r2 := &ir.Op{Kind: plan.OpPut, Pos: at(12), Src: []ir.Ref{{Index: 3, Size: 1}}, Dst: []ir.Ref{{Remote: true, Index: 1, Size: 1}},
		ChannelIDs: []int{0}, ChannelType: ir.Memory}
	lCopy, rCopy := *l, *r
	got := Fuse([]*ir.Op{l, r, r2})
	want := []*ir.Op{{Kind: plan.OpPut, Pos: at(10), Fused: []syntax.Position{at(11), at(12)},
		Src:        []ir.Ref{{Index: 0, Size: 1}, {Index: 2, Size: 1}, {Index: 3, Size: 1}},
		Dst:        []ir.Ref{{Remote: true, Index: 3, Size: 1}, {Remote: true, BufferID: 1, Size: 1}, {Remote: true, Index: 1, Size: 1}},
		ChannelIDs: []int{0, 1, 0}, ChannelType: ir.Memory}}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("Fuse (-want +got):\n%s", diff)
	}
	if got[0] == l || got[0] == r {
		t.Error("fused op reuses an operand's identity")
	}
	if diff := cmp.Diff(lCopy, *l, cmpOpts...); diff != "" {
		t.Errorf("left operand changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(rCopy, *r, cmpOpts...); diff != "" {
		t.Errorf("right operand changed (-before +after):\n%s", diff)
	}
}

// cmpOpts compares ops by value, id sets by iteration order.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b *ir.Set) bool {
		if a == nil || b == nil {
			return a == b
		}
		return slices.Equal(a.Keys(), b.Keys())
	}),
	cmp.Comparer(func(a, b syntax.Position) bool { return a == b }),
}

// TestSetOrder checks the printed order of fused signal id sets after the
// pass-5 rebuild against Appendix A.
func TestSetOrder(t *testing.T) {
	t.Parallel()
	cases := []struct{ order, want []int }{
		{[]int{2, 9}, []int{9, 2}},
		{[]int{9, 2}, []int{9, 2}},
		{[]int{0, 8}, []int{0, 8}},
		{[]int{8, 0}, []int{8, 0}},
		{[]int{3, 11, 19}, []int{19, 3, 11}},
		{[]int{19, 11, 3}, []int{3, 19, 11}},
		{[]int{11, 3, 19}, []int{19, 11, 3}},
		{[]int{0, 8, 1, 9, 16}, []int{0, 1, 8, 9, 16}},
		{[]int{16, 9, 1, 8, 0}, []int{0, 1, 8, 9, 16}},
		{[]int{5, 13, 21, 29, 37, 45}, []int{5, 37, 45, 13, 21, 29}},
		{[]int{45, 37, 29, 21, 13, 5}, []int{37, 5, 45, 13, 21, 29}},
	}
	for _, c := range cases {
		var ops []*ir.Op
		for _, id := range c.order {
			ops = append(ops, &ir.Op{Kind: plan.OpSignal, IDSet: ir.NewSet(id), ChannelType: ir.Memory})
		}
		p := &ir.Program{Instances: 1, GPUs: []*ir.GPU{{ThreadBlocks: []*ir.ThreadBlock{{Ops: Fuse(ops)}}}}}
		if err := Replicate(p, p.GPUs[0]); err != nil {
			t.Fatal(err)
		}
		got := p.GPUs[0].ThreadBlocks[0].Ops
		if len(got) != 1 || !slices.Equal(got[0].IDSet.Keys(), c.want) {
			t.Errorf("fusion order %v: got %s, want ids %v", c.order, ir.SprintOps(got), c.want)
		}
	}
}

// TestIDSetChainMatchesLiteral compares fused signal and flush chains with
// the literal S.Union(R).Copy() of docs/passes.md §4.6 on random id sequences, including
// ids large enough to leave the identity-layout shortcut of idSetChain.
func TestIDSetChainMatchesLiteral(t *testing.T) {
	t.Parallel()
	// Chains whose last step has a key equal to copy's table size: just
	// outside the identity-layout case.
	fixed := [][]int{{16, 6, 11, 0, 2, 4}, {8, 0}, {0, 1, 2, 3, 4, 16}}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 3000; round++ {
		kind := plan.OpSignal
		if round%3 == 0 {
			kind = plan.OpFlush
		}
		var sets [][]int
		if round < len(fixed) {
			kind = plan.OpSignal
			for _, id := range fixed[round] {
				sets = append(sets, []int{id})
			}
		}
		limit := []int{8, 16, 40, 64, 300}[round%5]
		n := 1 + rng.IntN(70)
		// Mostly one id per op, as the builtins record; now and then two.
		for i := 0; i < n && round >= len(fixed); i++ {
			ids := []int{rng.IntN(limit)}
			if round%7 == 0 && rng.IntN(10) == 0 {
				ids = append(ids, rng.IntN(limit))
			}
			sets = append(sets, ids)
		}
		// The literal chains, as the reference builds them.
		var want []*ir.Set
		var cur *ir.Set
		for _, ids := range sets {
			r := ir.NewSet(ids...)
			switch {
			case cur == nil:
				cur = r
			case kind == plan.OpFlush || cur.Disjoint(r):
				cur = cur.Union(r).Copy()
			default:
				want = append(want, cur)
				cur = r
			}
		}
		want = append(want, cur)

		var ops []*ir.Op
		for _, ids := range sets {
			ops = append(ops, &ir.Op{Kind: kind, IDSet: ir.NewSet(ids...), ChannelType: ir.Port})
		}
		got := Fuse(ops)
		if len(got) != len(want) {
			t.Fatalf("ids %v: %d ops, want %d", sets, len(got), len(want))
		}
		for i, o := range got {
			if !sameSet(o.IDSet, want[i]) {
				t.Fatalf("ids %v, op %d: got %v, want %v", sets, i, o.IDSet.Keys(), want[i].Keys())
			}
		}
	}
}

// sameSet compares two sets by iteration order and by how they behave
// when copied and merged further (which exposes their table sizes).
func sameSet(a, b *ir.Set) bool {
	if !slices.Equal(a.Keys(), b.Keys()) || !slices.Equal(a.Rebuilt().Keys(), b.Rebuilt().Keys()) {
		return false
	}
	for _, k := range []int{0, 5, 8, 13, 64, 77, 129, 511} {
		x := ir.NewSet(k)
		if !slices.Equal(a.Union(x).Copy().Keys(), b.Union(x).Copy().Keys()) ||
			!slices.Equal(a.Copy().Keys(), b.Copy().Keys()) {
			return false
		}
	}
	return true
}
