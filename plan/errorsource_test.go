package plan

import (
	"fmt"
	"slices"
	"testing"
)

func TestPlanErrorOp(t *testing.T) {
	t.Parallel()
	op := IndexPath(IndexPath(KeyGPUs, 2)+"."+KeyThreadBlocks, 3) + "." + KeyOps
	for _, tc := range []struct {
		path string
		want OpRef
		ok   bool
	}{
		{IndexPath(op, 7), OpRef{2, 3, "7"}, true},
		{IndexPath(op, 7) + ".src_buff[0]", OpRef{2, 3, "7"}, true},
		{IndexPath(IndexPath(op, 7)+"."+KeyOps, 1), OpRef{2, 3, "7.1"}, true},
		{IndexPath(IndexPath(op, 7)+"."+KeyOps, 1) + ".dst_buff[2]", OpRef{2, 3, "7.1"}, true},
		{"gpus[12].threadblocks[0].ops[10]", OpRef{12, 0, "10"}, true},
		{"", OpRef{}, false},
		{"gpus[1]", OpRef{}, false},
		{"gpus[1].threadblocks[3]", OpRef{}, false},
		{"gpus[1].threadblocks[3].channels[0]", OpRef{}, false},
		{"gpus[1].channels[0]", OpRef{}, false},
		{"gpus[x].threadblocks[3].ops[1]", OpRef{}, false},
		{"gpus[].threadblocks[3].ops[1]", OpRef{}, false},
		{"gpus[-1].threadblocks[3].ops[1]", OpRef{}, false},
	} {
		got, ok := (&PlanError{Path: tc.path}).Op()
		if got != tc.want || ok != tc.ok {
			t.Errorf("Op of %q = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSourceIndexWhere(t *testing.T) {
	t.Parallel()
	m := &SourceMap{Files: []string{"a.star"}, Ops: []SourceOps{
		{Rank: 0, TB: 1, Op: "2", Pos: [][3]int{{0, 10, 5}}},
		{Rank: 0, TB: 1, Op: "3.0", Pos: [][3]int{{0, 12, 9}, {0, 13, 1}}},
	}}
	x := m.Index()
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&PlanError{Path: "gpus[0].threadblocks[1].ops[2].src_buff[0]"}, []string{"a.star:10:5"}},
		{fmt.Errorf("size 4: %w", &PlanError{Path: "gpus[0].threadblocks[1].ops[3].ops[0]"}), []string{"a.star:12:9", "a.star:13:1"}},
		{&PlanError{Path: "gpus[0].threadblocks[1].ops[3]"}, nil},
		{&PlanError{Path: "gpus[0].threadblocks[1]"}, nil},
		{fmt.Errorf("gpus[0].threadblocks[1].ops[2]: not a PlanError"), nil},
	} {
		if got := x.Where(tc.err); !slices.Equal(got, tc.want) {
			t.Errorf("Where(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
