package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Kind is what a cause says went wrong.
type Kind uint8

// The kinds of cause.
const (
	// NoPacketWriter: no op writes LL packets into the scratch that a
	// blocked op reads packets from.
	NoPacketWriter Kind = iota + 1
	// WrongSlotWrite: a packet writer (Op) wrote another slot of the
	// waiting rank's scratch than the one the blocked op (Other) reads,
	// and no op writes the slot read: the write most likely went astray.
	WrongSlotWrite
	// PartialWrite: packet writers (Op the nearest) write only parts of
	// the slot the blocked op (Other) reads; Place is the part no op
	// writes (a size or an offset off by part of a chunk).
	PartialWrite
	// WrongSlotRead: the blocked op (Op) reads a slot that no op writes,
	// beside the slot a packet writer (Other) wrote: the read is the
	// likelier mistake when another op reads the written slot as planned.
	WrongSlotRead
	// MissingSignal: a wait (Op) waits on a channel whose peer signals
	// it fewer times per launch (Signals) than the rank waits on it
	// (Waits); Other is the peer's last signal on it, if any.
	MissingSignal
	// UnpairedChannel: a wait (Op) waits on a channel whose peer declares
	// no channel paired with it, so no signal ever arrives.
	UnpairedChannel
	// CircularWait: blocked waits (Op the first, Other the signal it
	// needs) each need a signal that its peer's thread block sends only
	// after its own blocked wait: each waits before it signals.
	CircularWait
	// ReadBeforeWait: an op (Op) reads a place that a peer writes before
	// the wait (Other) that orders it after that write: the wait was
	// placed after the op it guards.
	ReadBeforeWait

	// The kinds of wrong data (executor/cpu's Prov.Causes, from the
	// movement log of a re-run; WrongSlotWrite and WrongSlotRead serve
	// there too, for a scratch slot written and never read beside one
	// read).

	// ReadUnwritten: an op (Op) reads a place (Place) that no op wrote
	// before it, with no guarding wait after it either.
	ReadUnwritten
	// WrongInput: an op (Op) reads an input element (Place) that the
	// result should not contain, or where another one is needed.
	WrongInput
	// WroteElsewhere: an op (Op) wrote a place (Wrote) beside the one
	// the result reads (Place), which no op wrote.
	WroteElsewhere
	// ReadButWroteElsewhere: an op (Op) read the place the result is
	// built from (Place) but wrote another (Wrote).
	ReadButWroteElsewhere
	// Overwritten: an op (Op) wrote over an input element (Place)
	// before any op read it.
	Overwritten
	// LastMover: an op (Op) moved a missing input element (Place) last,
	// to Wrote, and no op brought it further (weak evidence: it is
	// often a correct op the data never got past).
	LastMover

	// The kinds of race (a pair of accesses that nothing orders, from the
	// CPU backend's race detector: Races).

	// AccessBeforeWait: an access (Op) to the rank's own buffer comes
	// before the wait (Other) that would have ordered it after the peer's
	// access: the wait was placed after the op it guards.
	AccessBeforeWait
	// ReuseAcrossLaunch: an access (Op) in the next launch touches a
	// place (Place) that the other op (Other), or its proxy, may still
	// use in the launch before: no handshake across the boundary.
	ReuseAcrossLaunch
	// Unordered: two ops of one launch (Op and Other) access a place and
	// no signal and wait, semaphore or barrier orders them.
	Unordered
)

var kindNames = [...]string{
	NoPacketWriter:        "no packet writer",
	WrongSlotWrite:        "wrong slot written",
	WrongSlotRead:         "wrong slot read",
	PartialWrite:          "slot written in part",
	MissingSignal:         "missing signal",
	UnpairedChannel:       "unpaired channel",
	CircularWait:          "circular wait",
	ReadBeforeWait:        "read before its wait",
	ReadUnwritten:         "read of what no op wrote",
	WrongInput:            "wrong input read",
	WroteElsewhere:        "write beside the place read",
	ReadButWroteElsewhere: "read the result's place, wrote another",
	Overwritten:           "input overwritten before it was read",
	LastMover:             "last move of a missing input",
	AccessBeforeWait:      "access before its wait",
	ReuseAcrossLaunch:     "reuse across the launch boundary",
	Unordered:             "unordered accesses",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// OpRef is one op of the instance: the rank and thread block that run it
// and the op itself (nil when unknown).
type OpRef struct {
	Rank, TB int
	Op       *executor.OpInstance
}

// Name is "the put at x.star:9:28", or "the put of rank R tb T op K"
// for an op without .star lines. A fused op has the lines of the calls it
// was fused from, the reading part first.
func (r OpRef) Name() string { return r.name(false) }

// SendingName is Name with the sending part of a fused op (its last
// line) first: for an op blamed for what it wrote.
func (r OpRef) SendingName() string { return r.name(true) }

func (r OpRef) name(sending bool) string {
	if r.Op == nil {
		return fmt.Sprintf("an op of rank %d tb %d", r.Rank, r.TB)
	}
	if len(r.Op.Source) == 0 {
		return fmt.Sprintf("the %s of rank %d tb %d %s", r.Op.Type, r.Rank, r.TB, r.Op.Path)
	}
	src := r.Op.Source
	if sending && len(src) > 1 {
		src = slices.Clone(src)
		slices.Reverse(src)
	}
	return fmt.Sprintf("the %s at %s", r.Op.Type, strings.Join(src, ", "))
}

// Where is "rank 1 tb 0 op 3", the op's place in the plan.
func (r OpRef) Where() string {
	if r.Op == nil {
		return fmt.Sprintf("rank %d tb %d", r.Rank, r.TB)
	}
	return fmt.Sprintf("rank %d tb %d %s", r.Rank, r.TB, r.Op.Path)
}

// Line is the op's first .star position ("x.star:9:28"), or "".
func (r OpRef) Line() string {
	if r.Op == nil || len(r.Op.Source) == 0 {
		return ""
	}
	return r.Op.Source[0]
}

// Cause is one candidate cause of a failed launch.
type Cause struct {
	Kind Kind
	// Op is the op the cause blames; Other the op on the other side (see
	// each Kind).
	Op, Other OpRef
	// Place is the region waited for or read, in the waiting rank's
	// buffer (offsets in bytes within the buffer, data bytes for LL
	// scratch slots); Wrote, for the slot kinds, what the writer wrote.
	Place, Wrote executor.Region
	// Peer is the other rank of a channel cause (the rank that signals
	// too rarely or declares no pair) or of ReadBeforeWait (the rank
	// whose write the wait orders), else -1.
	Peer int
	// Waits and Signals, for MissingSignal: how often per launch the
	// rank waits on the channel and its peer signals it.
	Waits, Signals int
	// Text is the cause as a report prints it.
	Text string
	// Evidence orders the kinds of evidence, 0 the strongest; each step
	// halves a cause's weight.
	Evidence int
	// Count is how many blocked thread blocks (or wrong elements) the
	// cause explains.
	Count uint64
	// Key identifies the cause for Rank: causes with the same Key are
	// one (the same op, the same mistake).
	Key string
}

// Weight is how strongly c is the cause: what it explains, halved for
// each step of weaker evidence.
func (c *Cause) Weight() float64 {
	return float64(c.Count) / float64(uint64(1)<<c.Evidence)
}

// Rank merges causes with the same Key (adding their counts, keeping the
// strongest evidence) and orders them by weight, then by evidence,
// keeping the first-found order among equals: for causes found in an
// order of their own (a deadlock's, from the blocked thread blocks in
// plan order), the first found speaks for those merged with it.
func Rank(cs []Cause) []Cause { return rank(cs, false) }

// RankInPlanOrder is Rank for causes found in the order a run happened to
// produce them (a race detector's pairs, the wrong elements of a re-run):
// of the causes merged under one Key, the one whose ops come first in the
// plan (by rank and thread block) speaks for them all, so that the
// report does not vary with the schedule.
func RankInPlanOrder(cs []Cause) []Cause { return rank(cs, true) }

func rank(cs []Cause, byPlan bool) []Cause {
	var out []Cause
	at := map[string]int{}
	for _, c := range cs {
		if i, ok := at[c.Key]; ok {
			n, ev := out[i].Count+c.Count, min(out[i].Evidence, c.Evidence)
			if byPlan && planOrder(c, out[i]) < 0 {
				out[i] = c
			}
			out[i].Count, out[i].Evidence = n, ev
			continue
		}
		at[c.Key] = len(out)
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Cause) int {
		switch wa, wb := a.Weight(), b.Weight(); {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return a.Evidence - b.Evidence
	})
	return out
}

// planOrder compares two causes by their ops' places in the plan: Op's
// rank and thread block, then Other's.
func planOrder(a, b Cause) int {
	for _, d := range [...]int{a.Op.Rank - b.Op.Rank, a.Op.TB - b.Op.TB, a.Other.Rank - b.Other.Rank, a.Other.TB - b.Other.TB} {
		if d != 0 {
			return d
		}
	}
	return 0
}

// eachOp calls f on every op of ops, pipeline bodies included, with the
// number of times it runs per launch.
func eachOp(ops []executor.OpInstance, times int, f func(op *executor.OpInstance, times int)) {
	for i := range ops {
		f(&ops[i], times)
		if len(ops[i].Body) > 0 {
			eachOp(ops[i].Body, times*ops[i].Iterations, f)
		}
	}
}

// channels is rank ri's channel ends of type ct (nil for switches).
func channels(ri *executor.RankInstance, ct plan.ChannelType) []executor.ChannelEnd {
	switch ct {
	case plan.Memory:
		return ri.MemoryChannels
	case plan.Port:
		return ri.PortChannels
	}
	return nil
}
