package starlib

import (
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/mscclgo/mscclgo/ir"
)

// builtins is the single table of predeclared functions, name to
// implementation.
var builtins = map[string]builtinFn{
	"AllGather":            collectiveBuiltin("AllGather", "allgather"),
	"AllReduce":            collectiveBuiltin("AllReduce", "allreduce"),
	"ReduceScatter":        collectiveBuiltin("ReduceScatter", "reducescatter"),
	"AllToAll":             collectiveBuiltin("AllToAll", "alltoall"),
	"SendRecv":             collectiveBuiltin("SendRecv", "sendrecv"),
	"TestCollective":       testCollective,
	"AlgoSpec":             algoSpecBuiltin,
	"JSON":                 jsonBuiltin,
	"param":                paramBuiltin,
	"Rank":                 rankBuiltin,
	"Buffer":               scratchBuffer,
	"MemoryChannel":        channelBuiltin(ir.Memory),
	"PortChannel":          channelBuiltin(ir.Port),
	"SwitchChannel":        switchBuiltin,
	"Semaphore":            semaphoreBuiltin,
	"ThreadBlockGroup":     tbgBuiltin,
	"LoopIterationContext": loopIterationBuiltin,
	sliceFunc:              sliceBuiltin,
}

// Predeclared returns a fresh environment holding every DSL name, frozen.
func Predeclared() starlark.StringDict {
	env := starlark.StringDict{
		"CollectiveProgram":   programConstructor{},
		"SyncType":            syncTypeEnum,
		"BufferType":          bufferTypeEnum,
		"ReduceOperationType": reduceOpEnum,
		"ReplicationPolicy":   replicationPolicyEnum,
		"ChannelType":         channelTypeEnum,
		"Loop": starlarkstruct.FromStringDict(starlark.String("Loop"), starlark.StringDict{
			"iteration": starlark.NewBuiltin("Loop.iteration", loopIterationBuiltin),
		}),
	}
	for name, fn := range builtins {
		env[name] = starlark.NewBuiltin(name, fn)
	}
	env.Freeze()
	return env
}
