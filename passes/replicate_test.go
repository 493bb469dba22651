package passes

import (
	"testing"

	"github.com/mscclgo/mscclgo/ir"
)

// TestReplicateExamples ports the examples of docs/passes.md §7, §8 (thread block groups)
// and docs/passes.md §9 (pipelines).
func TestReplicateExamples(t *testing.T) {
	t.Parallel()
	runExamples(t, []example{
		{name: "rep_basic", opts: []option{instances(2)}, build: func(t *tprog) {
			t.buffer(0, 2)
			m, p := t.mem(1, 0), t.port(1, 0)
			back, pback := t.mem(0, 1), t.port(0, 1)
			sem := t.sem(0, 1)
			m.put(O(1, 1, 2), I(0, 0, 1), tb(0))
			m.signal(0, none)
			p.put(O(1, 2, 4), I(0, 2, 4), tb(1))
			p.signal(1, none)
			sem.release(1, none)
			t.barrier(0, 0, 1)
			t.copy(0, S(0, 0, 2), I(0, 0, 2), tb(0))
			back.wait(0, none)
			pback.wait(0, none)
		}, want: map[string]string{
			"gpu 0": `
				gpu 0 in=8 out=8 scratch=4
				  channels memory -> [1,1]
				  channels port -> [1,1]
				  remote 0 r1:o (memory,port)
				  semaphores [1,1]`,
			"0 tbs": "4",
			"0/0": `
				put memory ch=[0] i[0:1] -> rb0[2:3]
				signal memory ch={0} sync=none
				barrier #0 tbs=[0,1]
				copy i[0:2] -> s[0:2]`,
			"0/0 hdr": "tb 0 ch.memory=[0] rb.memory=[0]",
			"0/1": `
				put memory ch=[0] i[1:2] -> rb0[3:4]
				signal memory ch={0} sync=none
				barrier #1 tbs=[0,1]
				copy i[2:4] -> s[2:4]`,
			"0/1 hdr": "tb 1 ch.memory=[1] rb.memory=[0]",
			"0/2": `
				put port ch=[0] i[4:6] -> rb0[4:6]
				signal port ch={0} sync=none
				sem_release sem=[0] sync=none
				barrier #0 tbs=[0,1]`,
			"0/2 hdr": "tb 2 ch.port=[0] rb.port=[0]",
			"0/3": `
				put port ch=[0] i[6:8] -> rb0[6:8]
				signal port ch={0} sync=none
				sem_release sem=[1] sync=none
				barrier #1 tbs=[0,1]`,
			"0/3 hdr": "tb 3 ch.port=[1] rb.port=[0]",
		}},
		{name: "empty_tbs", opts: []option{instances(2)}, build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(2))
		}, want: map[string]string{
			"0 tbs": "6",
			"0/0":   "", "0/1": "", "0/2": "", "0/3": "",
			"0/4":     `copy i[0:1] -> o[0:1]`,
			"0/5":     `copy i[1:2] -> o[1:2]`,
			"0/5 hdr": "tb 5",
			"1 tbs":   "0",
		}},
		{name: "rep_none", opts: []option{policyNone}, build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
		}, err: ErrReplicationPolicy,
			errText: "t.star:1:1: replicate: replication_policy=none cannot replicate copy on rank 0 tb 0: " +
				"ops with buffer operands need the interleaved policy"},
		{name: "rep_none_pipeline", opts: []option{policyNone}, build: func(t *tprog) {
			s := t.sem(1, 0)
			s.release(0, none)
			t.loopCtx(1, 1, func() {
				s.acquire(0, none)
				t.copy(1, O(1, 0, 1), I(1, 0, 1), tb(0))
			})
		}, err: ErrReplicationPolicy,
			errText: "t.star:3:1: replicate: replication_policy=none cannot replicate copy on rank 1 tb 0: " +
				"ops with buffer operands need the interleaved policy"},
		{name: "rep_none_ok", opts: []option{policyNone, instances(2)}, build: func(t *tprog) {
			s := t.sem(0, 0)
			s.release(0, none)
		}, want: map[string]string{
			"0/0": `sem_release sem=[0] sync=none`,
			"0/1": `sem_release sem=[1] sync=none`,
		}},
		{name: "rep_pktdst", opts: []option{instances(2)}, build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a := t.mem(1, 0)
			t.reduce(0, I(0, 1, 2), []ck{S(0, 1, 2)}, tb(0), O(0, 1, 2), ir.Sum, true)
			t.copyPackets(0, S(0, 3, 4), O(0, 1, 2), tb(0))
			a.putPackets(S(1, 1, 2), O(0, 1, 2), tb(0))
		}, want: map[string]string{
			"0/0": `recspkt memory sum putch=[0] src=i[2:3],s[2:3] dst=o[2:3] pktdst=s[3:4] rdst=rb0[2:3] packet`,
			"0/1": `recspkt memory sum putch=[0] src=i[3:4],s[3:4] dst=o[3:4] pktdst=s[3:4] rdst=rb0[3:4] packet`,
		}},
		{name: "rep_switch_alias", opts: []option{instances(2), noFusion}, build: func(t *tprog) {
			sw := t.sw([]int{0, 1}, ir.Input)
			c := O(0, 1, 2).chunk()
			sw.reduce(0, 1, 1, c, 0, ir.Sum)
			sw.broadcast(0, c, 3, 1, 0)
		}, want: map[string]string{
			"gpu 0": `
				gpu 0 in=8 out=8 scratch=0
				  switch i [0,1]
				  switch i [0,1]`,
			"0/0": `
				glre switch sum ch=[0] buf=i off=2 size=1 chunk=r0:o[4:5]
				gstore switch ch=[0] buf=i off=6 size=1 chunk=r0:o[4:5]`,
			"0/0 hdr": "tb 0 ch.switch=[0]",
			"0/1": `
				glre switch sum ch=[0] buf=i off=3 size=1 chunk=r0:o[7:8]
				gstore switch ch=[0] buf=i off=7 size=1 chunk=r0:o[7:8]`,
			"0/1 hdr": "tb 1 ch.switch=[1]",
		}},
		{name: "rep_switch_alias_across_tbs", opts: []option{instances(2), noFusion}, build: func(t *tprog) {
			// One chunk object used on two blocks: each block's copies
			// shift their own copy once.
			sw := t.sw([]int{0, 1}, ir.Input)
			c := O(0, 1, 2).chunk()
			sw.reduce(0, 1, 1, c, 0, ir.Sum)
			sw.broadcast(0, c, 3, 1, 1)
		}, want: map[string]string{
			"0/0": `glre switch sum ch=[0] buf=i off=2 size=1 chunk=r0:o[2:3]`,
			"0/1": `glre switch sum ch=[0] buf=i off=3 size=1 chunk=r0:o[3:4]`,
			"0/2": `gstore switch ch=[0] buf=i off=6 size=1 chunk=r0:o[2:3]`,
			"0/3": `gstore switch ch=[0] buf=i off=7 size=1 chunk=r0:o[3:4]`,
		}},
		{name: "rep_glres", opts: []option{instances(3)}, build: func(t *tprog) {
			sw := t.sw([]int{0, 1}, ir.Input)
			sw.reduce(0, 1, 1, O(0, 0, 1).chunk(), 0, ir.Sum)
			sw.broadcast(0, O(0, 0, 1).chunk(), 2, 1, 0)
		}, want: map[string]string{
			"0/0": `glres switch sum ch=[0] buf=i size=1 srcidx=[3] dstidx=[6]`,
			"0/1": `glres switch sum ch=[0] buf=i size=1 srcidx=[4] dstidx=[7]`,
			"0/2": `glres switch sum ch=[0] buf=i size=1 srcidx=[5] dstidx=[8]`,
		}},
		{name: "rep_pipe_tbg", opts: []option{instances(2)}, build: func(t *tprog) {
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 0, 2), I(0, 0, 2), grp(0, 1))
			})
		}, want: map[string]string{
			"0/0": `
				pipeline unit=4096 chunks=2 {
				  copy i[0:2] -> o[0:2] tbg=0/2
				}`,
			"0/1": `
				pipeline unit=4096 chunks=2 {
				  copy i[2:4] -> o[2:4] tbg=0/2
				}`,
			"0/2": `
				pipeline unit=4096 chunks=2 {
				  copy i[0:2] -> o[0:2] tbg=1/2
				}`,
			"0/3": `
				pipeline unit=4096 chunks=2 {
				  copy i[2:4] -> o[2:4] tbg=1/2
				}`,
		}},
		{name: "rep_barrier_dup", opts: []option{instances(2)}, build: func(t *tprog) {
			t.barrier(0, 0, 1)
			t.barrier(0, 0, 0)
		}, want: map[string]string{
			"0/0": `
				barrier #0 tbs=[0,1]
				barrier #4 tbs=[0,0]
				barrier #4 tbs=[0,0]`,
			"0/1": `
				barrier #1 tbs=[0,1]
				barrier #7 tbs=[0,0]
				barrier #7 tbs=[0,0]`,
			"0/2": `barrier #0 tbs=[0,1]`,
			"0/3": `barrier #1 tbs=[0,1]`,
		}},
		{name: "barrier_ids", build: func(t *tprog) {
			t.barrier(0, 0, 1)
			t.barrier(0, 1, 0)
			t.barrier(0, 0, 1, 2)
			t.barrier(0, 0, 1)
			t.barrier(1, 2, 3)
		}, want: map[string]string{
			"0/0": `
				barrier #0 tbs=[0,1]
				barrier #1 tbs=[1,0]
				barrier #2 tbs=[0,1,2]
				barrier #0 tbs=[0,1]`,
			"0/2": `barrier #2 tbs=[0,1,2]`,
			"1/2": `barrier #0 tbs=[2,3]`,
		}},
		{name: "rep_sem_multi", opts: []option{instances(3)}, build: func(t *tprog) {
			s0, s1 := t.sem(0, 0), t.sem(0, 5)
			s0.acquire(0, none)
			s1.acquire(0, none)
		}, want: map[string]string{
			"gpu 0": `
				gpu 0 in=12 out=12 scratch=0
				  semaphores [0,0,0,5,5,5]`,
			"0/0": `sem_acquire sem=[0,3] sync=none`,
			"0/1": `sem_acquire sem=[1,4] sync=none`,
			"0/2": `sem_acquire sem=[2,5] sync=none`,
		}},
		{name: "tbg_copy", build: func(t *tprog) {
			t.copy(0, O(0, 0, 2), I(0, 0, 2), grp(2, 0))
		}, want: map[string]string{
			"0/0": `copy i[0:2] -> o[0:2] tbg=1/2`,
			"0/1": ``,
			"0/2": `copy i[0:2] -> o[0:2] tbg=0/2`,
		}},
		{name: "tbg_both", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tbInGrp(1, 3, 1))
		}, want: map[string]string{
			"0 tbs": "2",
			"0/0":   ``,
			"0/1":   `copy i[0:1] -> o[0:1] tbg=1/2`,
		}},
		{name: "pipe_basic", build: func(t *tprog) {
			a, b := t.mem(1, 0), t.mem(1, 0)
			s := t.sem(0, 0)
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 2, 3), I(0, 2, 3), tb(1))
				a.put(O(1, 0, 1), I(0, 0, 1), tb(0))
				b.put(O(1, 1, 2), I(0, 1, 2), tb(0))
				s.release(0, both)
				s.acquire(1, both)
				t.copy(0, I(0, 3, 4), O(0, 2, 3), tb(1))
			})
		}, want: map[string]string{
			"0/0": `
				copy i[0:1] -> o[0:1]
				pipeline unit=4096 chunks=2 {
				  put memory ch=[0,1] i[0:1],i[1:2] -> rb0[0:1],rb0[1:2]
				  nop
				  sem_release sem=[0] sync=both
				  nop
				}`,
			"0/0 hdr": "tb 0 ch.memory=[0,1] rb.memory=[0]",
			"0/1": `
				pipeline unit=4096 chunks=2 {
				  copy i[2:3] -> o[2:3]
				  nop
				  sem_acquire sem=[0] sync=both
				  nop
				  copy o[2:3] -> i[3:4]
				}`,
			"0/1 hdr": "tb 1",
		}},
		{name: "pipe_two", build: func(t *tprog) {
			s := t.sem(0, 0)
			t.loopCtx(4096, 2, func() {
				t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
				s.release(0, both)
			})
			t.loopCtx(4096, 2, func() {
				s.acquire(0, both)
				t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
			})
		}, want: map[string]string{"0/0": `
			pipeline unit=4096 chunks=2 {
			  copy i[0:1] -> o[0:1]
			  nop
			  sem_release sem=[0] sync=both
			  nop
			}
			pipeline unit=4096 chunks=2 {
			  nop
			  sem_acquire sem=[0] sync=both
			  nop
			  copy i[1:2] -> o[1:2]
			}`}},
	})
}

// TestReplicateKeepsOriginals checks that replication never writes through
// to objects shared with the recorded program: the user's switch chunk and
// a barrier shared by several blocks.
func TestReplicateKeepsOriginals(t *testing.T) {
	t.Parallel()
	tp := newProg(instances(2), noFusion)
	sw := tp.sw([]int{0, 1}, ir.Input)
	c := O(0, 1, 2).chunk()
	sw.reduce(0, 1, 1, c, 0, ir.Sum)
	sw.broadcast(0, c, 3, 1, 1)
	tp.barrier(0, 0, 1)
	bar := tp.p.GPUs[0].ThreadBlocks[0].Ops[1]
	if err := Run(tp.p, Config{Check: true}); err != nil {
		t.Fatal(err)
	}
	if *c != (ir.Chunk{Rank: 0, Buffer: ir.Output, Index: 1, Size: 1}) {
		t.Errorf("user chunk changed to %+v", *c)
	}
	if bar.Barrier.ID != 0 {
		t.Errorf("recorded barrier id changed to %d", bar.Barrier.ID)
	}
}
