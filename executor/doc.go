// Package executor loads MSCCL++ execution plans, lays them out for a
// message size and runs them on a backend. Load (or LoadFile) parses and
// validates any plan, made by mscclgo or by MSCCL++, into a Plan, naming
// every problem (Check lists them all, for mscclgo check); Instantiate
// resolves a Plan for the buffer sizes of a call into an Instance (byte
// regions, paired channels, pipeline iteration counts); a Backend opens a
// Session on an Instance and launches it on the caller's buffers, having
// checked them with Validate and CheckBuffers. The CPU
// reference backend is package executor/cpu; the GPU backend is package
// gpu. BufferLayout lays out the buffers of a collective at one message size,
// as MSCCL++'s executor_test.py does.
//
//	plan, err := executor.LoadFile("allreduce.json")
//	...
//	l, err := executor.PlanLayout(plan, 1<<20, executor.Float16, plan.Inplace)
//	inst, err := executor.Instantiate(plan, l.Sizes)
//	sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float16})
//	err = sess.Launch(ctx, l.Alloc())
//
// Package harness fills the inputs, checks the outputs and runs plans at
// a sweep of sizes (harness.RunChecked is the shortest way to try a
// plan). The semantics a backend implements are in docs/semantics.md;
// loading, instantiation and the backends are described in
// docs/executor.md. The plan vocabulary the executor shares with the
// compiler (buffer, channel and op types, limits, source maps) is package
// plan's; the types are aliased here.
package executor
