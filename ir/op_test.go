package ir

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/plan"
)

// setByKeys compares sets by their layout (table and fill), not by the
// unused storage behind a grown table.
var setByKeys = cmp.Comparer(func(a, b *Set) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.fill == b.fill && cmp.Equal(a.table, b.table)
})

func TestOpCloneIsDeep(t *testing.T) {
	var buf1, buf2 OpBuf
	tests := []struct {
		name string
		op   *Op
	}{
		{"sync", buf1.Sync(plan.OpSignal, 5, Memory, SyncBoth)},
		{"transfer", buf2.Transfer(plan.OpPut, Ref{Buffer: Input, Index: 1, Size: 1}, Ref{Remote: true, BufferID: 2, Index: 3, Size: 1}, Memory, 4)},
		{"reduce", &Op{Kind: plan.OpReadReduceSend, LocalSrc: []Ref{{Index: 1}}, LocalDst: []Ref{{Index: 2}},
			RemoteSrc: []Ref{{Remote: true, Index: 3}, {Remote: true, Index: 4}}, RemoteDst: []Ref{{Remote: true, Index: 5}},
			ChannelIDs: []int{0, 1}, PutChannelIDs: []int{2}, ChannelType: Memory}},
		{"semaphore", &Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{3, 4}, DataSync: SyncAfter}},
		{"empty lists", &Op{Kind: plan.OpPut, Src: []Ref{}, ChannelIDs: []int{}}},
		{"big set", &Op{Kind: plan.OpWait, IDSet: FoldSet([]int{40, 3, 17, 9, 22, 1, 8, 30}), ChannelType: Port}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.op.Clone()
			if diff := cmp.Diff(tt.op, c, setByKeys, cmpopts.EquateComparable(syntax.Position{})); diff != "" {
				t.Fatalf("clone differs (-op +clone):\n%s", diff)
			}
			before := *c
			beforeSet := []int(nil)
			if c.IDSet != nil {
				beforeSet = append(beforeSet, c.IDSet.table...)
			}
			// Overwrite everything the original owns; the clone must not change.
			for _, refs := range [][]Ref{tt.op.Src, tt.op.Dst, tt.op.LocalSrc, tt.op.LocalDst, tt.op.RemoteSrc, tt.op.RemoteDst} {
				for i := range refs {
					refs[i].Index = -1
				}
			}
			for _, ids := range [][]int{tt.op.ChannelIDs, tt.op.PutChannelIDs, tt.op.SemaphoreIDs} {
				for i := range ids {
					ids[i] = -7
				}
			}
			if tt.op.IDSet != nil {
				tt.op.IDSet.Add(63)
			}
			for _, refs := range [][]Ref{c.Src, c.Dst, c.LocalSrc, c.LocalDst, c.RemoteSrc, c.RemoteDst} {
				for _, r := range refs {
					if r.Index == -1 {
						t.Fatalf("clone shares a ref list with the original")
					}
				}
			}
			for _, ids := range [][]int{c.ChannelIDs, c.PutChannelIDs, c.SemaphoreIDs} {
				for _, id := range ids {
					if id == -7 {
						t.Fatalf("clone shares an id list with the original")
					}
				}
			}
			if c.IDSet != nil && !cmp.Equal(beforeSet, c.IDSet.table) {
				t.Fatalf("clone shares its id set with the original")
			}
			// Appending to one list of the clone must not spill into another.
			c.Src = append(c.Src, Ref{Index: 42})
			if !cmp.Equal(before.Dst, c.Dst) {
				t.Fatalf("appending to Src changed Dst: %v", c.Dst)
			}
			if (tt.op.Src == nil) != (before.Src == nil) {
				t.Fatalf("clone turned a nil list into a non-nil one or back")
			}
		})
	}
}

func TestSetCloneKeepsLayout(t *testing.T) {
	for _, keys := range [][]int{{5}, {9, 1, 17, 25}, {40, 3, 17, 9, 22, 1, 8, 30, 64, 100}} {
		s := FoldSet(keys)
		c := s.Clone()
		if !cmp.Equal(s.Keys(), c.Keys()) || len(s.table) != len(c.table) || s.fill != c.fill {
			t.Errorf("Clone of %v: keys %v, want %v", keys, c.Keys(), s.Keys())
		}
		c.Add(1000)
		if s.Has(1000) {
			t.Errorf("Clone of %v shares its table", keys)
		}
	}
}
