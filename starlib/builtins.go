package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// builtins is the single table of predeclared functions, name to
// implementation.
var builtins = map[string]builtinFn{
	"AllGather":            collectiveBuiltin("AllGather", plan.AllGatherCollective),
	"AllReduce":            collectiveBuiltin("AllReduce", plan.AllReduceCollective),
	"ReduceScatter":        collectiveBuiltin("ReduceScatter", plan.ReduceScatterCollective),
	"AllToAll":             collectiveBuiltin("AllToAll", plan.AllToAllCollective),
	"SendRecv":             collectiveBuiltin("SendRecv", plan.SendRecvCollective),
	"AllToAllV":            allToAllVBuiltin,
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
			"iteration": starlark.NewBuiltin("Loop.iteration", guard("Loop.iteration", loopIterationBuiltin)),
		}),
	}
	for name, fn := range builtins {
		env[name] = starlark.NewBuiltin(name, guard(name, fn))
	}
	for name, fn := range operatorBuiltins() {
		env[name] = starlark.NewBuiltin(name, guard(name, fn))
	}
	// The interpreter's own builtins panic on some arguments (list() of a
	// range of 2^62 elements asks for a slice that large) and iterate
	// without counting steps: shadow each with a guarded, metered copy, so
	// that a panic becomes an error at the call and a long range is counted
	// against the limits (guardops.go).
	for name, v := range starlark.Universe {
		if b, ok := v.(*starlark.Builtin); ok {
			env[name] = starlark.NewBuiltin(name, guard(name, universeBuiltin(b)))
		}
	}
	env.Freeze()
	return env
}

// guard returns fn with Go panics turned into errors: a builtin given
// arguments it cannot handle fails at the call, with the script's
// position and traceback, instead of crashing mscclgo with a Go stack.
func guard(name string, fn builtinFn) builtinFn {
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (v starlark.Value, err error) {
		defer func() {
			if r := recover(); r != nil {
				v, err = nil, fmt.Errorf("%s: %v", name, r)
			}
		}()
		return fn(th, b, args, kwargs)
	}
}
