// Package emit writes an ir.Program as an MSCCL++ JSON execution plan,
// byte for byte what the MSCCL++ Python DSL prints with
// print(json.dumps(plan, indent=2)) (see plan-format.md in the reference
// notes for the format).
//
// Contents:
//   - emit.go: Write, Marshal and MarshalNoNewline, the plan writer proper:
//     the fixed key order of the top-level, GPU, thread-block and op
//     objects, and the per-kind op layouts (which ops carry channel_ids,
//     channel_type, tbg_info, the switch-op operand shapes and the glres
//     destination-offset quirk).
//   - writer.go: the append-based encoder with Python's indent=2 layout and
//     AppendString, a JSON string writer with Python's ensure_ascii
//     escaping.
//   - check.go: the validation run before the first byte is written
//     (ErrInvalid).
//   - plan.go: Plan and its parts, Go structs mirroring the plan with the
//     reference key order, with Decode and Plan.Encode; an independent
//     formatter (encoding/json based) used to check that plans are a fixed
//     point of decode and encode, and a typed view of plan files.
//
// The writer never iterates maps and never reorders: every list is written
// in the order the IR holds it. It does not modify the program.
package emit
