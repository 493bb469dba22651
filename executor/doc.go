// Package executor instantiates MSCCL++ execution plans for the buffers
// of a call, and defines the backends that run them and the checks they
// share. LoadFile reads a plan file with the process's limits and parses
// it with plan.Load (the format, its reader and its validation are
// package plan's); Instantiate resolves a plan.Plan for the
// buffer sizes of a call into an Instance (byte regions, paired channels,
// pipeline iteration counts); a Backend opens a Session on an Instance and
// launches it on the caller's buffers. What every backend checks is here,
// once: Validate (the instance), Guard (a session's state before a
// launch), CheckBuffers and Operands (each op's operands as byte ranges of
// the buffers), CheckLaunch (what a launch would reject, from the buffer
// layout alone). The CPU reference backend is package executor/cpu, the
// GPU backend package gpu; executor/rankwire holds what they share to run
// one process per rank. BufferLayout lays out the buffers of a collective
// at one message size, as MSCCL++'s executor_test.py does.
//
//	p, err := executor.LoadFile("allreduce.json")
//	...
//	l, err := executor.PlanLayout(p, 1<<20, executor.Float16, p.Inplace)
//	inst, err := executor.Instantiate(p, l.Sizes)
//	sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float16})
//	err = sess.Launch(ctx, l.Alloc())
//
// Package harness fills the inputs, checks the outputs and runs plans at
// a sweep of sizes (harness.Run with Strict set is the shortest way to
// try a plan). The semantics a backend implements are in docs/semantics.md;
// loading, instantiation and the backends are described in
// docs/executor.md.
package executor
