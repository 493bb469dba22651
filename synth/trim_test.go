package synth

import (
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/model"
)

// TestTrimRanges: the variants keep the longest run of sizes where no
// bundled plan is faster (the one of the largest size if it wins).
func TestTrimRanges(t *testing.T) {
	sizes := []uint64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10}
	const all = ^uint64(0)
	two := []Variant{{Suffix: "a", Min: 0, Max: 8191, Instances: 1, orig: 0}, {Suffix: "b", Min: 8192, Max: all, Instances: 2, orig: 0}}
	for _, tc := range []struct {
		name    string
		bundled []float64 // the best bundled plan's time at each size (0: none)
		want    string    // the kept variants: suffix [min, max]
	}{
		{"none faster", []float64{20, 20, 20, 20, 20}, "a[0,8191] b[8192,max]"},
		{"no bundled plan", []float64{0, 0, 0, 0, 0}, "a[0,8191] b[8192,max]"},
		{"faster at small sizes", []float64{5, 5, 20, 20, 20}, "b[8192,max]"},
		{"faster at the smallest", []float64{5, 20, 20, 20, 20}, "a[2048,8191] b[8192,max]"},
		{"faster at the largest", []float64{20, 20, 20, 20, 5}, "a[0,8191] b[8192,131071]"},
		{"faster in the middle", []float64{20, 20, 5, 20, 20}, "b[32768,max]"},
		{"faster everywhere", []float64{5, 5, 5, 5, 5}, "b[131072,max]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts := map[key][]model.Point{}
			best := make([]Bundled, len(sizes))
			for i, s := range sizes {
				pts[key{0, 1, 0}] = append(pts[key{0, 1, 0}], model.Point{Size: s, Time: 10})
				pts[key{0, 2, 0}] = append(pts[key{0, 2, 0}], model.Point{Size: s, Time: 10})
				best[i] = Bundled{Size: s}
				if tc.bundled[i] > 0 {
					best[i].Name, best[i].TimeUS = "bundled", tc.bundled[i]
				}
			}
			got := ""
			for _, v := range trimRanges(two, pts, sizes, best) {
				hi := fmt.Sprint(v.Max)
				if v.Max == all {
					hi = "max"
				}
				if got != "" {
					got += " "
				}
				got += fmt.Sprintf("%s[%d,%s]", v.Suffix, v.Min, hi)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
