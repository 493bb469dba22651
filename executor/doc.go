// Package executor loads MSCCL++ execution plans, lays them out for a
// message size and runs them on a backend. Load (or LoadFile) parses and
// validates any plan, made by mscclgo or by MSCCL++, into a Plan, naming
// every problem (Check lists them all, for mscclgo check); Instantiate
// resolves a Plan for the buffer sizes of a call into an Instance (byte
// regions, paired channels, pipeline iteration counts); a Backend opens a
// Session on an Instance and launches it on the caller's buffers, having
// checked them with Validate and CheckBuffers. The CPU
// reference backend is package executor/cpu; the GPU backend is package
// gpu.
//
//	plan, err := executor.LoadFile("allreduce.json")
//	...
//	err = executor.RunChecked(ctx, cpu.New(), plan, 1<<20, executor.Float16, true, 10)
//
// RunChecked is the shortest way to try a plan: it instantiates it for one
// message size, fills the inputs as MSCCL++'s executor_test.py does
// (Fill), launches it with race detection, and compares every launch's
// outputs with the expected results (BufferLayout.Expected). The
// semantics a backend implements are in docs/semantics.md; loading,
// instantiation and the backends are described in docs/executor.md.
package executor
