// Package executor loads MSCCL++ execution plans and runs them.
//
//   - types.go: the parsed Plan, the Instance a plan becomes for one
//     message size (byte regions, paired channels, pipeline iteration
//     counts), and the Backend/Session interfaces with the deadlock and
//     race reports.
//   - load.go: Load parses and validates any MSCCL++ plan (ours or one
//     made by MSCCL++) into a Plan, reporting every problem with a named
//     error; Check lists them all (mscclgo check).
//   - validate.go: the per-op rules (operand roles, channel types, the
//     executor's hard limits) and the cross-rank checks (barriers, channel
//     pairing, switch groups).
//   - instantiate.go: Instantiate resolves a Plan for a message size,
//     exactly as docs/semantics.md §1 describes.
//   - dtype.go, data.go: element types with device-exact SUM, the
//     executor_test.py fill generator and expected results.
//   - cpu/: the CPU reference backend, the oracle for every other backend.
package executor
