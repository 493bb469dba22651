// Package install writes plan sets: Install compiles a list of jobs (for
// the bundled set, algorithms.DefaultSet), validates every plan on the CPU
// backend (or finds it in the validation cache) and swaps the new set in
// atomically; Tune narrows each plan's size range to where a hardware
// profile predicts it fastest; RecoverPlanSet cleans up after an
// interrupted install. Reading and selecting a set is package planset's,
// which this package imports and which imports nothing of the compiler.
// The plan set is described in docs/design.md §11.
package install
