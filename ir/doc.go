// Package ir is the intermediate representation of a collective program:
// what the starlib builtins record, what the passes rewrite, and what emit
// writes as an MSCCL++ execution plan.
//
// Contents:
//   - types.go: the enumerations (BufferType, ChannelType, SyncType,
//     ReduceOp, ReplicationPolicy) with their plan spellings.
//   - op.go: Kind, the op metadata table Ops, Ref, Chunk, TBGInfo,
//     BarrierInfo and Op.
//   - program.go: Program, GPU, ThreadBlock and the registration helpers
//     that the builtins use (channel, remote-buffer, semaphore, barrier and
//     thread-block tables).
//   - set.go: Set, an int set with CPython 3.11 iteration order, for the
//     channel ids of signal, wait and flush ops; FoldSet builds the set of
//     a fused chain.
//   - print.go: the deterministic text form of programs and ops, used by
//     tests and dumps.
//   - check.go: Check, the invariant checker run between passes.
//
// All sizes and indices are in chunks. See README.md for the model.
package ir
