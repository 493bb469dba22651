package view

import (
	"slices"
	"testing"

	"github.com/mscclgo/mscclgo/timeline"
)

// TestCriticalPath checks the walk back from the op that ends last: at
// each op, to whichever held it up the longest, the op before it on its
// thread block or the op that released it.
func TestCriticalPath(t *testing.T) {
	t.Parallel()
	s := func(rank, tb int, start, end float64) timeline.Slice {
		return timeline.Slice{Rank: rank, TB: tb, Start: start, End: end}
	}
	cases := []struct {
		name   string
		slices []timeline.Slice
		flows  []timeline.Flow
		want   []int
	}{
		{"empty", nil, nil, nil},
		{"one lane", []timeline.Slice{s(0, 0, 0, 1), s(0, 0, 1, 3), s(0, 0, 3, 4)}, nil, []int{0, 1, 2}},
		// Op 3 (rank 1) waits for op 1's signal, which ends later than
		// op 2 before it on its own lane.
		{"released by a peer", []timeline.Slice{s(0, 0, 0, 1), s(0, 0, 1, 5), s(1, 0, 0, 2), s(1, 0, 2, 7)},
			[]timeline.Flow{{From: 1, To: 3}}, []int{0, 1, 3}},
		// A wait from the start of its lane, released by a signal that
		// started later.
		{"wait released later", []timeline.Slice{s(0, 0, 0, 3), s(0, 0, 3, 4), s(1, 0, 0, 4.5), s(1, 0, 4.5, 6)},
			[]timeline.Flow{{From: 1, To: 2}}, []int{0, 1, 2, 3}},
		// The signal ends before the lane's previous op: the lane wins.
		{"held by its own lane", []timeline.Slice{s(0, 0, 0, 1), s(1, 0, 0, 4), s(1, 0, 4, 6)},
			[]timeline.Flow{{From: 0, To: 2}}, []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CriticalPath(&timeline.Timeline{Slices: tc.slices, Flows: tc.flows})
			if !slices.Equal(got, tc.want) {
				t.Errorf("CriticalPath = %v, want %v", got, tc.want)
			}
		})
	}
}
