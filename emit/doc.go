// Package emit writes an ir.Program, after the passes, as an MSCCL++ JSON
// execution plan, byte for byte what the MSCCL++ Python DSL prints with
// print(json.dumps(plan, indent=2)): Write streams it to an io.Writer and
// Marshal returns it. Both check the program first (ErrInvalid), so an
// invalid program writes nothing. SourceMap relates each op of the plan to
// the .star line that recorded it (package plan's source map). The JSON
// layout is package plan's writer (plan.Writer), the format's one encoder;
// emit decides what to write and in which order.
//
// It never iterates maps and never reorders: every list is written in the
// order the IR holds it. It does not modify the program. The format is
// described in docs/plan-format.md and the writer in docs/design.md §5.
package emit
