// Package ir is the intermediate representation of a collective program:
// what the starlib builtins record, what the passes rewrite, and what emit
// writes as an MSCCL++ execution plan. A Program holds one GPU per rank,
// each with its chunk counts, channel, remote-buffer and semaphore tables
// and its thread blocks; a ThreadBlock holds its Ops in execution order.
// Programs are usually recorded by evaluating a script (package starlib),
// but may be built by hand; passes.Run then rewrites one into its final
// form, Check verifies its invariants, Sprint prints it for tests and
// dumps, and emit.Write writes its plan.
//
// All sizes and indices are in chunks. The model and the passes are
// described in docs/design.md §3 and §4, the ops' plan spellings in
// docs/plan-format.md. Buffer and channel types are package plan's, and
// the op table takes its names from there.
package ir
