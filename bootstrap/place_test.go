package bootstrap

import (
	"slices"
	"testing"
)

func TestPlaceRanks(t *testing.T) {
	t.Parallel()
	hosts := []Host{{Name: "a", Ranks: []int{0, 2}}, {Name: "b", Ranks: []int{3, 1}}}
	for _, tc := range []struct {
		rank, local int
	}{{0, 0}, {2, 1}, {3, 0}, {1, 1}} {
		hostOf, local := PlaceRanks(hosts, 4, tc.rank)
		if !slices.Equal(hostOf, []int{0, 1, 0, 1}) || local != tc.local {
			t.Errorf("rank %d: hosts %v, local %d; want [0 1 0 1], %d", tc.rank, hostOf, local, tc.local)
		}
	}
	if got := (World{}).LauncherName(); got != "MSCCLGO_* variables" {
		t.Errorf("LauncherName() = %q", got)
	}
	if got := (World{Launcher: "mpirun"}).LauncherName(); got != "mpirun" {
		t.Errorf("LauncherName() = %q", got)
	}
}
