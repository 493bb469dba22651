package executor

// aliases.go: the plan vocabulary is package plan's. These aliases keep
// the names that the backends (executor/cpu, gpu), the model and the tools
// written against this package use; new code may name either.

import "github.com/mscclgo/mscclgo/plan"

// BufferType is one of a rank's three buffers (plan.BufferType).
type BufferType = plan.BufferType

// The buffer types.
const (
	Input   = plan.Input
	Output  = plan.Output
	Scratch = plan.Scratch
)

// ChannelType is the kind of a channel (plan.ChannelType).
type ChannelType = plan.ChannelType

// The channel kinds; NoChannel is an op without channel_type.
const (
	NoChannel = plan.NoChannel
	Memory    = plan.Memory
	Port      = plan.Port
	Switch    = plan.Switch
)

// OpType is an op of the plan format (plan.OpType).
type OpType = plan.OpType

// The op types the MSCCL++ loader accepts.
const (
	OpNop                   = plan.OpNop
	OpBarrier               = plan.OpBarrier
	OpSignal                = plan.OpSignal
	OpRelaxedSignal         = plan.OpRelaxedSignal
	OpWait                  = plan.OpWait
	OpRelaxedWait           = plan.OpRelaxedWait
	OpFlush                 = plan.OpFlush
	OpSemAcquire            = plan.OpSemAcquire
	OpSemRelease            = plan.OpSemRelease
	OpCopy                  = plan.OpCopy
	OpCopyPacket            = plan.OpCopyPacket
	OpUnpackPacket          = plan.OpUnpackPacket
	OpGet                   = plan.OpGet
	OpPut                   = plan.OpPut
	OpPutWithSignal         = plan.OpPutWithSignal
	OpPutWithSignalAndFlush = plan.OpPutWithSignalAndFlush
	OpPutPacket             = plan.OpPutPacket
	OpReadPutPacket         = plan.OpReadPutPacket
	OpReduce                = plan.OpReduce
	OpReduceSend            = plan.OpReduceSend
	OpReadReduce            = plan.OpReadReduce
	OpReadReduceSend        = plan.OpReadReduceSend
	OpReducePacket          = plan.OpReducePacket
	OpReduceSendPacket      = plan.OpReduceSendPacket
	OpReduceCopyPacket      = plan.OpReduceCopyPacket
	OpReduceCopySendPacket  = plan.OpReduceCopySendPacket
	OpMultiLoadReduceStore  = plan.OpMultiLoadReduceStore
	OpMultiStore            = plan.OpMultiStore
	OpMultiStorePacket      = plan.OpMultiStorePacket
	OpPipeline              = plan.OpPipeline
)

// The limits a plan must keep (package plan's).
const (
	MaxOpsPerTB          = plan.MaxOpsPerTB
	MaxChannelsPerTB     = plan.MaxChannelsPerTB
	MaxChannelIDsPerOp   = plan.MaxChannelIDsPerOp
	MaxOperandsPerSide   = plan.MaxOperandsPerSide
	MaxSemaphoreIDsPerOp = plan.MaxSemaphoreIDsPerOp
	MaxBarrierID         = plan.MaxBarrierID
	MaxThreadsPerBlock   = plan.MaxThreadsPerBlock
	MaxRanks             = plan.MaxRanks
	MaxThreadBlocks      = plan.MaxThreadBlocks
)
