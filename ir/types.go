package ir

import (
	"fmt"

	"github.com/mscclgo/mscclgo/plan"
)

// BufferType names one of a rank's three buffers. It is package plan's
// type, so a buffer type of the IR is the plan's without conversion.
type BufferType = plan.BufferType

// The buffer types, in the order MSCCL++ declares them.
const (
	Input   = plan.Input
	Output  = plan.Output
	Scratch = plan.Scratch

	numBufferTypes = plan.NumBufferTypes
)

// ChannelType is the kind of a channel (package plan's type): memory
// (NVLink load/store), port (proxy-driven), switch (NVLS multicast), or
// none for purely local ops.
type ChannelType = plan.ChannelType

// The channel kinds.
const (
	NoChannel = plan.NoChannel
	Memory    = plan.Memory
	Port      = plan.Port
	Switch    = plan.Switch

	numChannelTypes = plan.NumChannelTypes
)

// SyncType is the two-bit data_sync set of a data-sync op: which sides of the
// op need a __syncthreads (nop).
type SyncType uint8

// The SyncType members; the encoding is the bit set.
const (
	SyncNone   SyncType = 0
	SyncBefore SyncType = 1
	SyncAfter  SyncType = 2
	SyncBoth   SyncType = 3
)

// String returns the DSL member name.
func (s SyncType) String() string {
	switch s & 3 {
	case SyncNone:
		return "none"
	case SyncBefore:
		return "before"
	case SyncAfter:
		return "after"
	}
	return "both"
}

// Has reports whether every bit of t is set in s.
func (s SyncType) Has(t SyncType) bool { return s&t == t }

// ReduceOp is the reduction operator of a reduce-family op.
type ReduceOp uint8

// The reduction operators.
const (
	Sum ReduceOp = iota
	Min
	Max
)

// String returns the plan spelling.
func (r ReduceOp) String() string {
	switch r {
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(r))
}

// ReplicationPolicy selects the chunk-index formula of replication.
type ReplicationPolicy uint8

// The replication policies.
const (
	Interleaved ReplicationPolicy = iota
	NoReplication
)

// String returns the DSL member name.
func (p ReplicationPolicy) String() string {
	if p == Interleaved {
		return "interleaved"
	}
	return "none"
}
