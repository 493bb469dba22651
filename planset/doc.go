// Package planset manages plan sets: directories of validated plans with
// an index, which `mscclgo install` writes and `mscclgo select` (or any
// runtime) reads to pick the plan for a collective call.
//
// Start with Install, which compiles a list of jobs (for the bundled set,
// algorithms.DefaultSet), validates every plan and swaps the new set in
// atomically; Select (or SelectBy, with a cost model's predictions) picks
// the plan for a Request from one or more installed sets, read with
// ReadIndex or indexed on the fly with ScanDir. Tune narrows each plan's
// size range to where a hardware profile predicts it fastest, and
// RecoverPlanSet cleans up after an interrupted install. DefaultDir and
// SearchPath are the one rule for where plan sets live. The plan set is
// described in docs/design.md §11.
package planset
