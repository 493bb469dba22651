package ir

import "fmt"

// BufferType names one of a rank's three buffers.
type BufferType uint8

// The buffer types, in the order MSCCL++ declares them.
const (
	Input BufferType = iota
	Output
	Scratch

	numBufferTypes = 3
)

// String returns the plan spelling: "i", "o" or "s".
func (b BufferType) String() string {
	switch b {
	case Input:
		return "i"
	case Output:
		return "o"
	case Scratch:
		return "s"
	}
	return fmt.Sprintf("BufferType(%d)", uint8(b))
}

// Name returns the DSL attribute name: "input", "output" or "scratch".
func (b BufferType) Name() string {
	switch b {
	case Input:
		return "input"
	case Output:
		return "output"
	case Scratch:
		return "scratch"
	}
	return b.String()
}

// ChannelType is the kind of a channel: memory (NVLink load/store), port
// (proxy-driven), switch (NVLS multicast), or none for purely local ops.
type ChannelType uint8

// The channel kinds.
const (
	NoChannel ChannelType = iota
	Memory
	Port
	Switch

	numChannelTypes = 4
)

// String returns the plan spelling.
func (c ChannelType) String() string {
	switch c {
	case NoChannel:
		return "none"
	case Memory:
		return "memory"
	case Port:
		return "port"
	case Switch:
		return "switch"
	}
	return fmt.Sprintf("ChannelType(%d)", uint8(c))
}

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
