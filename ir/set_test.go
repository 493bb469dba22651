package ir

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fusedOrder models how fusion and the replication deep copy shape a
// signal's channel_ids: fold the ids left to right, then rebuild.
func fusedOrder(ids []int) []int {
	s := NewSet(ids[0])
	for _, x := range ids[1:] {
		s = s.Union(NewSet(x)).Copy()
	}
	return s.Rebuilt().Keys()
}

func TestSetOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []int
		want []int
	}{
		{"small", []int{2, 0, 1}, []int{0, 1, 2}},
		{"2-9", []int{2, 9}, []int{9, 2}},
		{"9-2", []int{9, 2}, []int{9, 2}},
		{"0-8", []int{0, 8}, []int{0, 8}},
		{"8-0", []int{8, 0}, []int{8, 0}},
		{"3-11-19", []int{3, 11, 19}, []int{19, 3, 11}},
		{"19-11-3", []int{19, 11, 3}, []int{3, 19, 11}},
		{"11-3-19", []int{11, 3, 19}, []int{19, 11, 3}},
		{"five", []int{0, 8, 1, 9, 16}, []int{0, 1, 8, 9, 16}},
		{"five-rev", []int{16, 9, 1, 8, 0}, []int{0, 1, 8, 9, 16}},
		{"six", []int{5, 13, 21, 29, 37, 45}, []int{5, 37, 45, 13, 21, 29}},
		{"six-rev", []int{45, 37, 29, 21, 13, 5}, []int{37, 5, 45, 13, 21, 29}},
		{"9-1", []int{9, 1}, []int{9, 1}},
		{"1-9", []int{1, 9}, []int{1, 9}},
		{"mixed", []int{9, 3, 1, 12, 5}, []int{1, 3, 5, 9, 12}},
		{"desc15", []int{14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, fusedOrder(tt.in)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFoldSetMatchesUnionCopy checks FoldSet against the step-by-step
// Union/Copy model on pseudo-random id sequences, with repeats (flush).
func TestFoldSetMatchesUnionCopy(t *testing.T) {
	t.Parallel()
	seed := uint32(12345)
	next := func(n int) int {
		seed = seed*1664525 + 1013904223
		return int(seed>>8) % n
	}
	for trial := 0; trial < 3000; trial++ {
		n := 1 + next(80)
		ids := make([]int, n)
		for i := range ids {
			ids[i] = next(1 + next(300))
		}
		s := NewSet(ids[0])
		for _, x := range ids[1:] {
			s = s.Union(NewSet(x)).Copy()
		}
		got := FoldSet(ids)
		if diff := cmp.Diff(s.Keys(), got.Keys()); diff != "" {
			t.Fatalf("ids %v (-want +got):\n%s", ids, diff)
		}
		if diff := cmp.Diff(s.Rebuilt().Keys(), got.Rebuilt().Keys()); diff != "" {
			t.Fatalf("rebuilt, ids %v (-want +got):\n%s", ids, diff)
		}
	}
}

// TestRebuiltMatchesLiteral checks Rebuilt's shortcut against rebuilding
// literally, for sets of many sizes and layouts.
func TestRebuiltMatchesLiteral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(300)
		limit := n + rng.IntN(3*n+1)
		keys := make([]int, n)
		for i := range keys {
			keys[i] = rng.IntN(limit)
		}
		var s *Set
		switch trial % 3 {
		case 0:
			s = NewSet(keys...)
		case 1:
			s = FoldSet(keys)
		default:
			s = NewSet(keys...).Copy()
		}
		want := NewSet(s.Keys()...)
		got := s.Rebuilt()
		if !slices.Equal(got.table, want.table) || got.fill != want.fill {
			t.Fatalf("keys %v: Rebuilt layout %v, want %v", keys, got.table, want.table)
		}
	}
}

// TestNewSetCopyMatchesLiteral checks NewSetCopy's shortcut against
// NewSet(keys...).Copy().
func TestNewSetCopyMatchesLiteral(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(300)
		keys := make([]int, n)
		for i := range keys {
			keys[i] = rng.IntN(n + rng.IntN(4*n+1))
		}
		want := NewSet(keys...).Copy()
		got := NewSetCopy(keys...)
		if !slices.Equal(got.table, want.table) || got.fill != want.fill {
			t.Fatalf("keys %v: layout %v, want %v", keys, got.table, want.table)
		}
	}
}
