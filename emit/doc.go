// Package emit lowers an ir.Program, after the passes, to the MSCCL++
// execution plan: Lower returns the plan document (*plan.Plan), which
// plan.Encode writes byte for byte as the MSCCL++ Python DSL prints it
// with print(json.dumps(plan, indent=2)); Write streams those bytes to an
// io.Writer and Marshal returns them. All three check the program first
// (ErrInvalid), so an invalid program writes nothing. Warnings lists what
// the DSL would accept but is likely a mistake; SourceMap relates each op
// of the plan to the .star line that recorded it (package plan's source
// map).
//
// It never iterates maps and never reorders: every list is lowered in the
// order the IR holds it. It does not modify the program. The format is
// described in docs/plan-format.md and lowering in docs/design.md §5.
package emit
