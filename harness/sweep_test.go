package harness

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, last, f, step uint64
		want                 []uint64
	}{
		{first: 1024, last: 8192, f: 2, want: []uint64{1024, 2048, 4096, 8192}},
		{first: 1024, last: 9000, f: 4, want: []uint64{1024, 4096}},
		{first: 0, last: 8192, f: 2, want: []uint64{0}},
		{first: 4096, last: 4096, f: 2, want: []uint64{4096}},
		{first: 1 << 62, last: math.MaxUint64, f: 2, want: []uint64{1 << 62, 1 << 63}},
		{first: 1000, last: 4000, step: 1000, want: []uint64{1000, 2000, 3000, 4000}},
		{first: 1000, last: 3500, step: 1000, want: []uint64{1000, 2000, 3000}},
		{first: math.MaxUint64 - 1, last: math.MaxUint64, step: 4, want: []uint64{math.MaxUint64 - 1}},
	} {
		var got []uint64
		if tc.step > 0 {
			got = StepSweep(tc.first, tc.last, tc.step)
		} else {
			got = Sweep(tc.first, tc.last, tc.f)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: got %v", tc, got)
		}
	}
}

func TestWriteElements(t *testing.T) {
	t.Parallel()
	r := &WrongReport{Ranks: []RankWrong{{Rank: 1, Wrong: 2, Elements: []WrongElement{
		{Offset: 4096, Want: 3, Got: 1, Writers: []string{"rank 0 tb 1 put (a.star:4:5)"}},
		{Offset: 4098, Want: 3, Got: 0},
	}}}}
	var b strings.Builder
	r.WriteElements(&b, 1024)
	want := "  rank 1: 2 wrong element(s)\n" +
		"    output[4096], chunk 4: want 3, got 1\n      written by rank 0 tb 1 put (a.star:4:5)\n" +
		"    output[4098], chunk 4: want 3, got 0\n      no op writes this byte (an op's chunk index or peer may be off)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDefaultBudget: a budget, never 0 (0 means no budget), that says
// where it comes from.
func TestDefaultBudget(t *testing.T) {
	t.Parallel()
	b, why := DefaultBudget()
	if b == 0 || why == "" {
		t.Errorf("DefaultBudget() = %d, %q", b, why)
	}
}
