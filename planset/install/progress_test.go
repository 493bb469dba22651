package install

import (
	"testing"
)

// TestInstallProgressLine checks that install's progress line prints the
// sizes of a plan in one unit, the largest binary unit that divides them
// all (bytesize.List), and names each plan of a job with several.
func TestInstallProgressLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		plans []PlanStatus
		want  string
	}{
		{[]PlanStatus{{Name: "p", Sizes: []uint64{2050 << 10, 2052 << 10, 2054 << 10}}}, "validated at 2050, 2052, 2054 KiB"},
		{[]PlanStatus{{Name: "p", Sizes: []uint64{1049088, 1025 << 10}}}, "validated at 1049088, 1049600 bytes"},
		{[]PlanStatus{{Name: "p", Cached: true}}, "cached"},
		{[]PlanStatus{{Name: "a", Sizes: []uint64{1 << 20}}, {Name: "b", Cached: true}}, "a validated at 1 MiB; b cached"},
	} {
		ev := Event{Done: 1, Total: 2, Job: "allreduce_hier (world_size=32)", Finished: true, Plans: tc.plans}
		if got, want := ev.Line(), "install: [1/2] allreduce_hier (world_size=32): "+tc.want; got != want {
			t.Errorf("progress line %q, want %q", got, want)
		}
	}
}
