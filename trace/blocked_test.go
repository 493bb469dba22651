package trace

import (
	"bytes"
	"testing"

	"github.com/mscclgo/mscclgo/timeline"
)

// TestBlockedEvents checks that the blocked ops of a deadlocked timeline
// become valid instant events of category "blocked" with their wait and
// .star positions.
func TestBlockedEvents(t *testing.T) {
	t.Parallel()
	tl := &timeline.Timeline{Plan: "p", Clock: timeline.Steps, Ranks: 2, TBs: []int{1, 1}, Total: 1,
		Slices: []timeline.Slice{{Rank: 0, TB: 0, Op: "op 0", Name: "put", Iteration: -1, Start: 0, End: 1}},
		Blocked: []timeline.Blocked{
			{Rank: 0, TB: 0, Op: "op 1", Name: "wait", At: 1, Waiting: "memory channel 0 from rank 1 expects signal 1, has 0", Source: []string{"a.star:7:32"}},
			{Rank: 1, TB: 0, Op: "op 0", Name: "wait", At: 0, Waiting: "memory channel 0 from rank 0 expects signal 1, has 0"},
		}}
	f := Events(tl)
	var got []Event
	for _, e := range f.TraceEvents {
		if e.Cat == "blocked" {
			got = append(got, e)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d blocked events, want 2: %+v", len(got), got)
	}
	b := got[0]
	if b.Ph != "i" || b.Name != "wait" || *b.Ts != 1 || b.Pid != 0 || b.Args["waiting"] != tl.Blocked[0].Waiting || b.Args["source"].([]string)[0] != "a.star:7:32" {
		t.Errorf("blocked event %+v", b)
	}
	if _, ok := got[1].Args["source"]; ok {
		t.Errorf("a blocked op without positions has a source: %+v", got[1])
	}
	var buf bytes.Buffer
	if err := Write(&buf, tl); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(buf.Bytes()); err != nil {
		t.Errorf("the trace of a deadlocked timeline does not validate: %v", err)
	}
}
