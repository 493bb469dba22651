package view

// critical.go finds the critical path of a timeline: the chain of ops
// that ends last, each started by the one before it.

import "github.com/mscclgo/mscclgo/timeline"

// CriticalPath returns the indices into tl.Slices of the chain that
// decides the call's end, first op first: from the op that ends last,
// back through whichever held each op up the longest, the op before it
// on its thread block or an op whose signal (packet, barrier arrival)
// released it, to an op that nothing held up. Nil for an empty
// timeline.
func CriticalPath(tl *timeline.Timeline) []int {
	if tl == nil || len(tl.Slices) == 0 {
		return nil
	}
	type lane struct{ rank, tb int }
	byLane := map[lane][]int{}
	for i, s := range tl.Slices {
		byLane[lane{s.Rank, s.TB}] = append(byLane[lane{s.Rank, s.TB}], i)
	}
	released := map[int][]int{}
	for _, f := range tl.Flows {
		if f.From >= 0 && f.From < len(tl.Slices) && f.To >= 0 && f.To < len(tl.Slices) {
			released[f.To] = append(released[f.To], f.From)
		}
	}
	last := 0
	for i, s := range tl.Slices {
		if s.End > tl.Slices[last].End {
			last = i
		}
	}
	path := []int{last}
	seen := map[int]bool{last: true}
	for cur := last; ; {
		s := tl.Slices[cur]
		best := -1
		consider := func(j int) {
			t := tl.Slices[j]
			// A releasing op may start after the wait it releases (a
			// wait starts as soon as its thread block reaches it), but
			// it ends by the wait's end.
			if seen[j] || t.End > s.End {
				return
			}
			if best < 0 || t.End > tl.Slices[best].End {
				best = j
			}
		}
		// The op before it on its thread block: the latest that ends by
		// its start.
		for _, j := range byLane[lane{s.Rank, s.TB}] {
			if j != cur && tl.Slices[j].End <= s.Start {
				consider(j)
			}
		}
		for _, j := range released[cur] {
			consider(j)
		}
		if best < 0 {
			break
		}
		seen[best] = true
		path = append(path, best)
		cur = best
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}
