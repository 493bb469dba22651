package cli

import (
	"testing"

	"github.com/mscclgo/mscclgo/planset/install"
)

// TestInstallSizes checks that install's progress line prints the sizes
// of a plan in one unit, the largest that divides them all.
func TestInstallSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sizes []uint64
		want  string
	}{
		{[]uint64{1049088, 1025 << 10}, "1049088, 1049600 bytes"},
		{[]uint64{128, 16 << 10, 1 << 20}, "128, 16384, 1048576 bytes"},
		{[]uint64{1 << 10, 32 << 10, 1 << 20}, "1K, 32K, 1024K"},
		{[]uint64{2 << 20, 4 << 20}, "2M, 4M"},
		{[]uint64{1 << 30}, "1G"},
		{[]uint64{0, 1 << 10}, "0, 1024 bytes"},
	} {
		if got := installSizes(tc.sizes); got != tc.want {
			t.Errorf("installSizes(%v) = %q, want %q", tc.sizes, got, tc.want)
		}
	}
	ev := install.Event{Done: 1, Total: 2, Job: "allreduce_hier (world_size=32)", Finished: true,
		Plans: []install.PlanStatus{{Name: "p", Sizes: []uint64{2050 << 10, 2052 << 10, 2054 << 10}}}}
	if got, want := installProgressLine(ev), "install: [1/2] allreduce_hier (world_size=32): validated at 2050K, 2052K, 2054K"; got != want {
		t.Errorf("progress line %q, want %q", got, want)
	}
}
