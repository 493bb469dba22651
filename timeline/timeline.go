// Package timeline holds one execution of a plan as a timeline: a slice
// per op (or pipeline iteration) on each rank's thread blocks, and flows
// from each signal to the wait it releases. The cost model (package model)
// and the CPU backend's logical clock produce timelines; `mscclgo trace`
// writes them in the Chrome Trace Event format and `mscclgo view` draws
// them.
package timeline

// Clock names the unit of a timeline's times.
type Clock string

// The clocks a timeline can be measured in.
const (
	// Micros are predicted microseconds (the cost model).
	Micros Clock = "us"
	// Steps are logical steps of a CPU backend run: an op that starts
	// after another has completed has a later start; the durations say
	// nothing about speed.
	Steps Clock = "step"
)

// Timeline is one call of a plan at one message size.
type Timeline struct {
	// Plan is the plan's name and Collective its collective.
	Plan, Collective string
	// Size is the call's message size in bytes (the per-rank buffer of
	// the collective, as the run table's size column).
	Size uint64
	// Clock is the unit of Start, End and Total.
	Clock Clock
	// Source says where the times come from, e.g. "model h100-sxm" or
	// "cpu backend".
	Source string
	// Ranks is the plan's rank count; TBs[r] is rank r's thread-block
	// count.
	Ranks int
	TBs   []int
	// Total is the time from the first op's start to the last op's end.
	Total float64
	// Slices are the executed ops, in no particular order.
	Slices []Slice
	// Flows link the slice that signalled to the slice whose wait it
	// completed (indices into Slices).
	Flows []Flow
	// Blocked are the ops a deadlocked call stopped in, one per blocked
	// thread block; empty when the call completed. Slices then hold the
	// ops that completed before the deadlock.
	Blocked []Blocked
}

// Blocked is an op its thread block could not complete: a wait whose
// signal never came, a packet that never arrived, a barrier not everyone
// reached.
type Blocked struct {
	Rank, TB int
	// Op is the op's path ("op 7"), Name its type ("wait").
	Op, Name string
	// At is when the thread block reached the op, in the timeline's
	// Clock.
	At float64
	// Waiting says what the op waits for.
	Waiting string
	// Source are the op's .star positions when a source map is known.
	Source []string
}

// Slice is one op (or one pipeline iteration of a body op) executed by a
// thread block.
type Slice struct {
	Rank, TB int
	// Op is the op's path in its thread block ("op 7", "op 3.2" for body
	// op 2 of pipeline 3), as reports print it; Index is its position in
	// the thread block's op list.
	Op    string
	Index int
	// Name is the op type as the plan spells it ("put", "rre", ...).
	Name string
	// Iteration is the pipeline iteration, or -1 outside pipelines.
	Iteration int
	// Start and End are in the timeline's Clock.
	Start, End float64
	// Bytes are the bytes the op moves or reduces (its largest side).
	Bytes uint64
	// Peers are the remote ranks the op reaches (channels' peers,
	// switch group members); nil for a local op.
	Peers []int
	// Channel describes the channel(s) used, e.g. "memory 2" or "port
	// 0,1"; "" for a local op.
	Channel string
	// Source are the op's .star positions when a source map is known.
	Source []string
}

// Flow is a happens-before edge drawn as an arrow: the signal (or packet
// write, or barrier arrival) of slice From released slice To.
type Flow struct {
	From, To int
	// Kind is "signal", "packet", "semaphore" or "barrier".
	Kind string
}
