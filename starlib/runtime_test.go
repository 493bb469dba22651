package starlib

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestRuntimeTuning: EvalGC sets the collector's pace and restores it
// (unless GOGC is set); SetSoftMemoryLimit sets the limit above the
// budget, and leaves it alone for a budget too large to raise. Not
// parallel: the settings are the process's.
func TestRuntimeTuning(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(-1)
	debug.SetGCPercent(before)
	restore := EvalGC()
	if got := debug.SetGCPercent(EvalGCPercent); got != EvalGCPercent {
		t.Errorf("during the evaluation GOGC = %d, want %d", got, EvalGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(before); got != before {
		t.Errorf("after the evaluation GOGC = %d, want %d", got, before)
	}
	limit := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(limit)
	Limits{MaxMemory: 1 << 30}.SetSoftMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != 1<<30+1<<28+256<<20 {
		t.Errorf("soft limit %d", got)
	}
	debug.SetMemoryLimit(12345 << 20)
	Limits{MaxMemory: math.MaxUint64}.SetSoftMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != 12345<<20 {
		t.Errorf("soft limit %d, want it left at %d", got, 12345<<20)
	}
}
