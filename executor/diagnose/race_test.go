package diagnose

import (
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// TestRaceCauseAcrossLaunches: the cause of a race across the launch
// boundary says who may still be using the bytes, a peer or a proxy's
// transfer that nothing waits for, and the fix that fits.
func TestRaceCauseAcrossLaunches(t *testing.T) {
	t.Parallel()
	scratch := func(rank int) executor.Region {
		return executor.Region{Rank: rank, Buffer: plan.Scratch, Offset: 0, Size: 64, Switch: -1}
	}
	acc := func(rank int, typ plan.OpType, line string, write bool, launch int, proxy bool, owner int) executor.Access {
		return executor.Access{Rank: rank, TB: 0, Op: "op 0 " + typ.String(), Write: write, Region: scratch(owner), Launch: launch,
			Instr: &executor.OpInstance{Type: typ, Source: []string{line}}, Proxy: proxy}
	}
	for _, tt := range []struct {
		name string
		race executor.Race
		want string
	}{
		{"a peer's read", executor.Race{
			A: acc(1, plan.OpReduce, "x.star:17:3", false, 0, false, 1),
			B: acc(0, plan.OpPut, "x.star:12:3", true, 1, false, 1)},
			"the put at x.star:12:3 (rank 0 tb 0) writes rank 1 scratch[0:64] in launch 1 while the re at x.star:17:3 (rank 1 tb 0) may still read it in launch 0: nothing tells rank 0 that rank 1 is done with it (a handshake: a signal after the last use, a wait before the next launch's write;"},
		{"the rank's own proxy", executor.Race{
			A: acc(0, plan.OpCopy, "x.star:3:1", true, 1, false, 0),
			B: acc(0, plan.OpPutWithSignal, "x.star:5:1", false, 0, true, 0)},
			"the copy at x.star:3:1 (rank 0 tb 0) writes rank 0 scratch[0:64] in launch 1 while the pws at x.star:5:1 (rank 0 tb 0) may still read it in launch 0: nothing waits for rank 0's proxy to be done with it (flush the transfer"},
		{"a peer's proxy", executor.Race{
			A: acc(1, plan.OpPut, "x.star:9:1", false, 0, true, 1),
			B: acc(0, plan.OpPutWithSignal, "x.star:7:1", true, 1, true, 1)},
			"may still read it in launch 0: nothing tells rank 0 that rank 1's proxy is done with it (flush the transfer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Race(nil, tt.race)
			if !strings.Contains(c.Text, tt.want) {
				t.Errorf("cause\n%s\ndoes not say\n%s", c.Text, tt.want)
			}
			if c.Kind != ReuseAcrossLaunch || c.Evidence != 1 {
				t.Errorf("kind %v evidence %d, want %v, 1 (a buffer reused in the next launch)", c.Kind, c.Evidence, ReuseAcrossLaunch)
			}
		})
	}
}

// TestRacesMerge: pairs of the same two lines are one cause that counts
// them all, and a cause of stronger evidence leads at the same count.
func TestRacesMerge(t *testing.T) {
	t.Parallel()
	reg := executor.Region{Rank: 1, Buffer: plan.Scratch, Size: 64, Switch: -1}
	acc := func(rank int, line string, write bool, launch int) executor.Access {
		return executor.Access{Rank: rank, Write: write, Region: reg, Launch: launch,
			Instr: &executor.OpInstance{Type: plan.OpPut, Source: []string{line}}}
	}
	same := executor.Race{A: acc(0, "x.star:3:1", true, 0), B: acc(1, "x.star:4:1", false, 0)}
	reuse := executor.Race{A: acc(0, "x.star:3:1", true, 1), B: acc(1, "x.star:4:1", false, 0)}
	cs := Races(nil, []executor.Race{same, reuse, same})
	if len(cs) != 2 {
		t.Fatalf("%d causes, want 2: %+v", len(cs), cs)
	}
	// Two unordered pairs (evidence 2) weigh as much as one reuse
	// (evidence 1): the stronger evidence leads.
	if cs[0].Kind != ReuseAcrossLaunch || cs[0].Count != 1 || !strings.Contains(cs[0].Text, "in launch 1 while") {
		t.Errorf("first cause %v x%d %q, want the reuse across the launch boundary x1", cs[0].Kind, cs[0].Count, cs[0].Text)
	}
	if cs[1].Kind != Unordered || cs[1].Count != 2 {
		t.Errorf("second cause %v x%d, want unordered accesses x2", cs[1].Kind, cs[1].Count)
	}
}
