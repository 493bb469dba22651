// Package plan is the vocabulary of the MSCCL++ JSON execution plan that
// the compiler (package emit) writes and the executor (package executor)
// reads: the buffer types, channel types and op types with their plan
// spellings, the values of "collective", the MSCCL++ executor's limits,
// the "alltoallv" extension's constants, and the source map that relates
// a plan's ops to the .star lines that recorded them. It is the one place
// a spelling is defined; both sides use it, and it imports no other
// package of mscclgo.
//
// Spellings go both ways: String gives the plan's spelling and a Parse
// function reads it back.
//
//	bt, ok := plan.ParseBufferType("s") // plan.Scratch, true
//	op, ok := plan.ParseOpType("rres")  // plan.OpReadReduceSend, true
//	fmt.Println(bt, bt.Name(), op)      // s scratch rres
//
// The format is described in docs/plan-format.md, the source map in
// docs/executor.md.
package plan
