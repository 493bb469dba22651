package install

// tune_test.go tests the size ranges set from predicted curves, and
// SelectBy's ranking by predicted time.

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/planset"
)

func TestTuneRanges(t *testing.T) {
	const top = ^uint64(0)
	curve := func(times ...float64) *planset.Prediction {
		p := &planset.Prediction{}
		for i, tm := range times {
			p.Sizes = append(p.Sizes, 1024<<i)
			p.TimesUS = append(p.TimesUS, tm)
		}
		return p
	}
	tests := []struct {
		name    string
		entries []planset.Entry
		want    [][2]uint64 // ranges of the kept entries
		drop    []int
	}{
		{
			"crossover between 2 KiB and 4 KiB",
			[]planset.Entry{{MaxMessageSize: top, Predicted: curve(1, 2, 9, 20)}, {MaxMessageSize: top, Predicted: curve(5, 6, 7, 8)}},
			[][2]uint64{{0, 4095}, {2049, top}}, nil,
		},
		{
			"a plan fastest nowhere is dropped",
			[]planset.Entry{{MaxMessageSize: top, Predicted: curve(1, 1, 1)}, {MaxMessageSize: top, Predicted: curve(2, 2, 2)}},
			[][2]uint64{{0, top}, {0, top}}, []int{1},
		},
		{
			"declared ranges bound the tuned ones",
			[]planset.Entry{{MinMessageSize: 512, MaxMessageSize: 2048, Predicted: curve(1, 1)}, {MinMessageSize: 1024, MaxMessageSize: top, Predicted: curve(3, 3, 3)}},
			[][2]uint64{{512, 2048}, {2049, top}}, nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members := []int{}
			for i := range tt.entries {
				members = append(members, i)
			}
			drop := map[int]bool{}
			tuneRanges(tt.entries, members, members, drop)
			var got [][2]uint64
			for _, e := range tt.entries {
				got = append(got, [2]uint64{e.MinMessageSize, e.MaxMessageSize})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
			var dropped []int
			for i := range tt.entries {
				if drop[i] {
					dropped = append(dropped, i)
				}
			}
			if diff := cmp.Diff(tt.drop, dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectBy(t *testing.T) {
	entry := func(name string, lo, hi uint64) planset.Entry {
		return planset.Entry{File: name + ".json", Name: name, Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, InPlace: true,
			MinMessageSize: lo, MaxMessageSize: hi, InputChunks: 1, OutputChunks: 1, BufferAlignment: 16}
	}
	src := []planset.Source{{Dir: "d", Index: &planset.Index{Plans: []planset.Entry{entry("narrow", 0, 1<<20), entry("wide", 0, 1<<30), entry("broken", 0, 1<<30)}}}}
	req := planset.Request{Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Size: 1 << 16, InPlace: true, ElementSize: 2}
	times := map[string]float64{"narrow": 9, "wide": 3}
	predict := func(dir string, e planset.Entry) (float64, error) {
		if tm, ok := times[e.Name]; ok {
			return tm, nil
		}
		return 0, errors.New("no model")
	}
	plain, err := planset.Select(src, req)
	if err != nil || plain.Entry.Name != "narrow" {
		t.Fatalf("Select: %v %v, want narrow (the narrowest range)", plain, err)
	}
	ch, err := planset.SelectBy(src, req, predict)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ch.Ranking {
		got = append(got, r.Entry.Name)
	}
	if diff := cmp.Diff([]string{"wide", "narrow"}, got); diff != "" {
		t.Errorf("ranking (-want +got):\n%s", diff)
	}
	reasons := map[string]string{}
	for _, r := range ch.Rejected {
		reasons[r.Entry.Name] = r.Reason
	}
	want := map[string]string{"narrow": "fits, but wide is predicted faster (3.00 µs against 9.00 µs)", "broken": "fits, but cannot be predicted: no model"}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("rejections (-want +got):\n%s", diff)
	}
}
