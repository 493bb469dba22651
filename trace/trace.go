// Package trace writes a plan's timeline (package timeline) in the Chrome
// Trace Event format, which Perfetto (ui.perfetto.dev) and chrome://tracing
// open, and validates files of that format. A rank is a process, a thread
// block a thread, an op a complete ("X") event, an op a deadlock blocked
// an instant ("i") event of category "blocked", and every release (a
// signal, a packet store, a semaphore release, a barrier arrival) a flow
// arrow ("s" and "f" events with one id) from the op that released to the
// op it released.
package trace

// trace.go holds the writer: Events builds the event list of a timeline
// and Write encodes it.

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/timeline"
)

// File is a trace file: the JSON object form of the format.
type File struct {
	TraceEvents []Event `json:"traceEvents"`
	// DisplayTimeUnit is how the viewer prints times ("ms" or "ns").
	DisplayTimeUnit string `json:"displayTimeUnit,omitempty"`
	// OtherData is free-form metadata: the plan, size, clock and source.
	OtherData map[string]any `json:"otherData,omitempty"`
}

// Event is one trace event. Times are microseconds.
type Event struct {
	Name string `json:"name"`
	Cat  string `json:"cat,omitempty"`
	// Ph is the phase: "X" complete, "M" metadata, "s"/"f" flow start
	// and finish.
	Ph  string   `json:"ph"`
	Ts  *float64 `json:"ts,omitempty"`
	Dur *float64 `json:"dur,omitempty"`
	Pid int      `json:"pid"`
	Tid int      `json:"tid"`
	// ID pairs a flow's start and finish.
	ID *int `json:"id,omitempty"`
	// Bp "e" binds a flow event to the slice enclosing it.
	Bp string `json:"bp,omitempty"`
	// S is an instant event's scope ("t": its thread).
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

func num(v float64) *float64 { return &v }

// Events returns the trace of tl: metadata naming every rank and thread
// block, a complete event per slice (args: op, bytes, peers, channel,
// iteration, source) and a flow per release. One logical step of a CPU
// timeline is shown as one microsecond.
func Events(tl *timeline.Timeline) *File {
	f := &File{
		DisplayTimeUnit: "ns",
		OtherData: map[string]any{
			"plan": tl.Plan, "collective": tl.Collective, "size": tl.Size,
			"clock": string(tl.Clock), "source": tl.Source, "total": tl.Total,
		},
	}
	ev := &f.TraceEvents
	for r := 0; r < tl.Ranks; r++ {
		*ev = append(*ev,
			Event{Name: "process_name", Ph: "M", Pid: r, Args: map[string]any{"name": fmt.Sprintf("rank %d", r)}},
			Event{Name: "process_sort_index", Ph: "M", Pid: r, Args: map[string]any{"sort_index": r}})
		tbs := 0
		if r < len(tl.TBs) {
			tbs = tl.TBs[r]
		}
		for tb := 0; tb < tbs; tb++ {
			*ev = append(*ev,
				Event{Name: "thread_name", Ph: "M", Pid: r, Tid: tb, Args: map[string]any{"name": fmt.Sprintf("tb %d", tb)}},
				Event{Name: "thread_sort_index", Ph: "M", Pid: r, Tid: tb, Args: map[string]any{"sort_index": tb}})
		}
	}
	for _, s := range tl.Slices {
		args := map[string]any{"op": s.Op, "bytes": s.Bytes}
		if s.Iteration >= 0 {
			args["iteration"] = s.Iteration
		}
		if len(s.Peers) > 0 {
			args["peers"] = s.Peers
		}
		if s.Channel != "" {
			args["channel"] = s.Channel
		}
		if len(s.Source) > 0 {
			args["source"] = s.Source
		}
		*ev = append(*ev, Event{Name: s.Name, Cat: "op", Ph: "X", Ts: num(s.Start), Dur: num(s.End - s.Start), Pid: s.Rank, Tid: s.TB, Args: args})
	}
	for _, b := range tl.Blocked {
		// A blocked op: an instant event at the time its thread block
		// reached it (cat "blocked"), with what it waits for.
		args := map[string]any{"op": b.Op, "waiting": b.Waiting}
		if len(b.Source) > 0 {
			args["source"] = b.Source
		}
		name := b.Name
		if name == "" {
			name = b.Op
		}
		*ev = append(*ev, Event{Name: name, Cat: "blocked", Ph: "i", Ts: num(b.At), Pid: b.Rank, Tid: b.TB, S: "t", Args: args})
	}
	for i, fl := range tl.Flows {
		from, to := tl.Slices[fl.From], tl.Slices[fl.To]
		id := i + 1
		*ev = append(*ev,
			Event{Name: fl.Kind, Cat: "flow", Ph: "s", Ts: num(inside(from)), Pid: from.Rank, Tid: from.TB, ID: &id},
			Event{Name: fl.Kind, Cat: "flow", Ph: "f", Bp: "e", Ts: num(inside(to)), Pid: to.Rank, Tid: to.TB, ID: &id})
	}
	return f
}

// inside is a time inside s that no neighbouring slice of its thread
// shares: its middle (its start when it takes no time).
func inside(s timeline.Slice) float64 { return s.Start + (s.End-s.Start)/2 }

// Write writes tl's trace to w as JSON.
func Write(w io.Writer, tl *timeline.Timeline) error {
	enc := json.NewEncoder(w)
	return enc.Encode(Events(tl))
}
