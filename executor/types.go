package executor

import (
	"context"
	"fmt"
	"github.com/mscclgo/mscclgo/plan"
	"strings"
	"time"
)

// ---------------------------------------------------------------------------
// The instance: a plan resolved for one message size, ready to run.

// Sizes are the per-rank buffer sizes of one execution, in bytes.
type Sizes struct {
	Input, Output uint64
}

// Instance is a plan instantiated for one message size: every operand
// resolved to a byte region, every channel index to its paired end,
// pipelines to iteration counts (docs/semantics.md §1).
type Instance struct {
	Plan  *plan.Plan
	Sizes Sizes
	// ChunkBytes is the byte size of one chunk (docs/semantics.md §1.7).
	ChunkBytes uint64
	// ScratchBytes is the per-rank scratch size, including the LL and
	// double-buffer factors (docs/semantics.md §1.11).
	ScratchBytes uint64
	Ranks        []RankInstance
	// Var is, for an instance of a variable-size (alltoallv) plan, the
	// VarPlan that binds it to each call's counts (its operand terms and
	// the counts of the last Bind); nil for every other plan.
	Var *VarPlan
}

// RankInstance is the resolved state of one rank.
type RankInstance struct {
	Rank int
	TBs  []TBInstance
	// MemoryChannels and PortChannels are indexed by the rank-level
	// (global) channel index of their type.
	MemoryChannels []ChannelEnd
	PortChannels   []ChannelEnd
	// Switches are the rank's switch channels, by global switch index.
	Switches   []plan.SwitchGroup
	Semaphores []int64 // initial values
}

// ChannelEnd is one end of a memory or port channel.
type ChannelEnd struct {
	Peer int
	// PeerIndex is the global index of the paired channel on Peer, or -1
	// when Peer declares no matching channel (signals are lost, waits
	// never complete: a deadlock the CPU backend reports).
	PeerIndex int
}

// TBInstance is a thread block with its resolved ops.
type TBInstance struct {
	ID  int
	Ops []OpInstance
}

// Region is a resolved byte range. For local operands Rank is the
// executing rank; for remote operands it is the owner;
// for switch operands Switch is the global switch index of the executing
// rank and Rank is -1 (the region names the same offset in every member's
// bound buffer).
type Region struct {
	Rank   int
	Buffer plan.BufferType
	Offset uint64
	Size   uint64
	Switch int // -1 unless a switch operand
}

// OpInstance is a resolved op.
type OpInstance struct {
	Type        plan.OpType
	ChannelType plan.ChannelType
	// Index is the op's position in its thread block's JSON op list (for
	// pipeline bodies: in the body), and Path a readable position such as
	// "op 7" or "op 3.2" (pipeline 3, body op 2), used in reports.
	Index int
	Path  string
	// Channels are global channel indices of ChannelType, one per
	// channel_ids entry.
	Channels []int
	Src, Dst []Region
	// BarrierID and NumThreadBlocks for barrier.
	BarrierID, NumThreadBlocks int
	Semaphores                 []int
	// Pipeline: UnitSize bytes per iteration, Iterations, and Body.
	UnitSize   uint64
	Iterations int
	Body       []OpInstance
	// Source are the op's .star positions (Op.Source).
	Source []string
}

// ---------------------------------------------------------------------------
// Running.

// DType is an element type of a run: its size and the SUM reduction.
type DType interface {
	// Name is the nccl-tests style name: "half", "bfloat16", "float",
	// "int32".
	Name() string
	// Size is the element size in bytes.
	Size() int
	// Add stores a+b element-wise into dst (len(dst) == len(a) ==
	// len(b), a multiple of Size; dst may alias a or b), rounding as the
	// device does after every addition.
	Add(dst, a, b []byte)
}

// RankBuffers are the caller's buffers of one rank for one launch. Input
// and Output may alias (in-place collectives).
type RankBuffers struct {
	Input, Output []byte
}

// Options configure a backend session.
type Options struct {
	DType DType
	// Reduce is the reduction of every reduce op of the session's
	// launches (re, rre, the packet reduces, glres); the zero value is
	// ReduceSum. An op other than ReduceSum needs a DType that is a
	// Reducer (every ElemType is). The op belongs to the session, as the
	// element type does: a caller that keeps sessions per plan instance
	// keys them by the op too (gpu.CommCall.Reduce does so for a
	// communicator).
	Reduce ReduceOp
	// LL8 selects 8-byte LL packets instead of the default 16-byte ones.
	LL8 bool
	// Race enables happens-before race detection.
	Race bool
	// DeadlockTimeout bounds how long a run may make no progress before it
	// is reported as a deadlock; zero means one second.
	DeadlockTimeout time.Duration
	// Threads bounds the goroutines the CPU backend runs one large
	// reduce op on (its element range split in parts,
	// docs/executor.md §5.4); zero means GOMAXPROCS shared among the
	// ranks of the host, one keeps every op on its thread block's goroutine.
	Threads int
}

// Backend runs instances. The CPU backend is the reference; every other
// backend is checked against it.
type Backend interface {
	// Name is the --backend name.
	Name() string
	// Open prepares persistent per-instance state: scratch (zeroed),
	// channel counters, semaphores, barriers, the LL flag.
	Open(inst *Instance, opts Options) (Session, error)
}

// Session is an opened instance. Launches share persistent state, as
// successive execute() calls of MSCCL++ do.
type Session interface {
	// Launch runs one execute() on every rank at once. It returns a
	// *DeadlockError when no thread block can progress and a *RaceError
	// when race detection found conflicting accesses. After a deadlock, a
	// cancellation or an op error the session is unusable (as a hung GPU
	// would be); after a race report it goes on.
	Launch(ctx context.Context, bufs []RankBuffers) error
	// Close releases the session.
	Close() error
}

// BlockedTB describes a thread block that cannot progress.
type BlockedTB struct {
	Rank, TB int
	Op       string // e.g. "op 7 wait"
	// Waiting says what it waits for, e.g. "memory channel 2 from rank 0
	// expects signal 3, has 2".
	Waiting string
	// Packet is the LL packet slot it waits on, when it waits on one: the
	// same record from every backend (the CPU oracle, gpu-emu and the CUDA
	// watchdog's dump), so that a diagnosis needs no parsing of Waiting.
	Packet *PacketWait
}

// PacketWait is a wait on one LL packet slot: the slot at byte Offset of
// the waiting rank's Buffer carries flag Got where the launch wants Want.
type PacketWait struct {
	Buffer    plan.BufferType
	Offset    uint64
	Got, Want uint64
}

// String is the wait as a deadlock report prints it.
func (p PacketWait) String() string {
	return fmt.Sprintf("packet at %s[%d] has flag %d, want %d", p.Buffer.Name(), p.Offset, p.Got, p.Want)
}

// DeadlockError reports a launch in which no thread block could progress.
type DeadlockError struct {
	Blocked []BlockedTB
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deadlock: %d thread block(s) blocked", len(e.Blocked))
	for _, t := range e.Blocked {
		fmt.Fprintf(&b, "\n  rank %d tb %d %s: %s", t.Rank, t.TB, t.Op, t.Waiting)
	}
	return b.String()
}

// Access is one side of a race: an op's read or write of a byte range.
type Access struct {
	Rank, TB int
	Op       string // e.g. "op 3 rre"
	Write    bool
	Region   Region
	// Launch is the session's launch the access belongs to, counted from
	// 0 (warm-up launches included). The race detector keeps its history
	// across launches: a pair of accesses in different launches is a
	// race across the launch boundary (docs/executor.md §5).
	Launch int
	// Instr is the op, for its type and .star lines (nil when unknown).
	Instr *OpInstance
	// Proxy is set for an access by the rank's proxy on the op's behalf
	// (a port channel's transfer).
	Proxy bool
}

// Race is a pair of conflicting accesses with no happens-before order.
type Race struct {
	A, B Access
}

// RaceError reports the races found in a launch.
type RaceError struct {
	Races []Race
}

func (e *RaceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "race: %d conflicting access pair(s)", len(e.Races))
	if n := e.AcrossLaunches(); n > 0 {
		fmt.Fprintf(&b, ", %d across the launch boundary (a rank ran ahead into its next launch while a peer was still in this one: nothing in the plan orders the two accesses)", n)
	}
	for _, r := range e.Races {
		across := r.A.Launch != r.B.Launch
		fmt.Fprintf(&b, "\n  %s\n    vs %s", describeAccess(r.A, across), describeAccess(r.B, across))
	}
	return b.String()
}

// AcrossLaunches returns how many of e's races pair accesses of two
// different launches.
func (e *RaceError) AcrossLaunches() int {
	n := 0
	for _, r := range e.Races {
		if r.A.Launch != r.B.Launch {
			n++
		}
	}
	return n
}

func describeAccess(a Access, launch bool) string {
	kind := "read"
	if a.Write {
		kind = "write"
	}
	s := fmt.Sprintf("rank %d tb %d %s %s of rank %d %s[%d:%d]", a.Rank, a.TB, a.Op, kind,
		a.Region.Rank, a.Region.Buffer, a.Region.Offset, a.Region.Offset+a.Region.Size)
	if launch {
		s += fmt.Sprintf(" in launch %d", a.Launch)
	}
	return s
}
