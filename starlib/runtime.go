package starlib

// runtime.go tunes the Go runtime for an evaluation: the collector's
// pace, and a soft memory limit a little above the evaluation's budget.

import (
	"math"
	"os"
	"runtime/debug"
)

// SetSoftMemoryLimit sets the Go runtime's soft memory limit a little
// above l.MaxMemory, so that the collector works harder as the budget
// nears instead of letting the process grow to twice its live heap. The
// caller restores the limit it had (debug.SetMemoryLimit).
func (l Limits) SetSoftMemoryLimit() {
	if budget := l.MaxMemory; budget < math.MaxInt64/2 {
		debug.SetMemoryLimit(int64(budget + budget/4 + 256<<20))
	}
}

// EvalGCPercent is the collector's GOGC during an evaluation. With the
// default 100 the collector took about a third of an eval's time (the
// evaluation allocates much short-lived garbage); 400 collects a quarter
// as often, and the soft memory limit SetSoftMemoryLimit sets above the budget
// makes the collector work harder as the heap nears the budget, so the
// budget still holds.
const EvalGCPercent = 400

// EvalGC sets the collector for an evaluation, unless GOGC is set, and
// returns the function that restores it.
func EvalGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(EvalGCPercent)
	return func() { debug.SetGCPercent(prev) }
}
