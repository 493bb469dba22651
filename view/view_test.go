package view

// view_test.go tests the chart and the page: the page is loaded in a real
// browser (headless chromium) when one is installed, and its script's
// self-check is compared with the plan.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

func TestChart(t *testing.T) {
	t.Parallel()
	a := Series{Name: "allreduce <ring>", Points: []Point{{1 << 10, 0.5}, {1 << 20, 40}, {1 << 30, 180}}}
	b := Series{Name: "allpairs", Points: []Point{{1 << 10, 1}, {1 << 20, 60}}}
	cases := []struct {
		name    string
		series  []Series
		curves  int
		circles int
		err     string
	}{
		{"two plans", []Series{a, b}, 2, 5, ""},
		{"one point", []Series{{Name: "x", Points: []Point{{4096, 3}}}}, 1, 1, ""},
		{"no series", nil, 0, 0, "chart: no series"},
		{"empty series", []Series{{Name: "x"}}, 0, 0, `series 0 ("x") has no points`},
		{"zero size", []Series{{Name: "x", Points: []Point{{0, 1}}}}, 0, 0, "size 0 on a log axis"},
		{"negative busbw", []Series{{Name: "x", Points: []Point{{8, -1}}}}, 0, 0, "busbw -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := Chart(tc.series, ChartOptions{Title: "t"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [3]int{strings.Count(svg, "<polyline"), strings.Count(svg, "<circle"), strings.Count(svg, `class="legend"`)}
			if want := [3]int{tc.curves, tc.circles, tc.curves}; got != want {
				t.Errorf("polylines, circles, legend entries = %v, want %v", got, want)
			}
			for _, s := range tc.series {
				if !strings.Contains(svg, ">"+html.EscapeString(s.Name)+"</text>") {
					t.Errorf("legend lacks %q", s.Name)
				}
			}
			if strings.Contains(svg, "<ring>") {
				t.Error("a series name is not escaped")
			}
		})
	}
}

// TestChartAxis checks the log-x ticks: one per power of two in range
// (every other one past ten), labelled with binary units.
func TestChartAxis(t *testing.T) {
	t.Parallel()
	svg, err := Chart([]Series{{Name: "x", Points: []Point{{1 << 12, 1}, {1 << 16, 2}}}}, ChartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, m := range regexp.MustCompile(`class="xtick"[^>]*/><text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1) {
		labels = append(labels, m[1])
	}
	if d := cmp.Diff([]string{"4K", "8K", "16K", "32K", "64K"}, labels); d != "" {
		t.Errorf("x ticks (-want +got):\n%s", d)
	}
}

// page records the plan file on the CPU backend and returns its page and
// timeline.
func page(t *testing.T, file string, size uint64) ([]byte, *timeline.Timeline, *executor.Instance) {
	t.Helper()
	p, err := executor.LoadFile(file)
	if err != nil && !plan.IsWarning(err) {
		t.Fatal(err)
	}
	lay, err := executor.PlanLayout(p, size, executor.Float32, p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := cpu.Record(context.Background(), inst, executor.Options{DType: executor.Float32, DeadlockTimeout: 200 * time.Millisecond}, lay.Alloc())
	var dl *executor.DeadlockError
	if err != nil && !(errors.As(err, &dl) && tl != nil) {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	curve := []Series{{Name: "test curve", Points: []Point{{1 << 10, 1}, {1 << 20, 10}}}}
	if err := Write(&buf, Page{Title: filepath.Base(file), Meta: "test", Timeline: tl, Channels: ChannelsOf(inst), Curves: curve, Instance: inst}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tl, inst
}

// TestPageSelfContained checks that the page fetches nothing: no links,
// no src or href, no URL but the SVG namespace.
func TestPageSelfContained(t *testing.T) {
	t.Parallel()
	data, _, _ := page(t, "../tests/ports/single_node/allgather.plan.json", 1<<14)
	s := strings.ReplaceAll(string(data), "http://www.w3.org/2000/svg", "")
	for _, bad := range []string{"http://", "https://", "<link", " src=", "@import", "url(http"} {
		if strings.Contains(s, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="data">(.*?)</script>`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no data script")
	}
	var d pageData
	if err := json.Unmarshal(m[1], &d); err != nil {
		t.Fatalf("page data: %v", err)
	}
}

// selfCheck is what the page's script writes into #selfcheck.
type selfCheck struct {
	// Lanes are the thread-block lanes drawn (of TBLanes), RankLanes
	// the folded ranks; Arrows the arrows drawn, Bundles the bundles
	// the flows make; Critical the ops of the critical path's row.
	Lanes, RankLanes, TBLanes, Ops, Boxes, Flows, UnmatchedFlows, Bundles, Arrows, Critical, Channels int
	Errors                                                                                            []string
	// Blocked are the marks of blocked ops, BlockedLabels their texts;
	// Ticks are the time axis's ticks.
	Blocked       int
	BlockedLabels []string
	Ticks         int
}

// chromium returns the browser's path, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the page is not tested in a browser (Debian: apt-get install chromium; .ci/run installs it)")
	return ""
}

func browserArgs(profile string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + profile}
}

// TestPageInBrowser loads the page of small plans in headless chromium
// and compares the page's self-check (lanes, op boxes, flow arrows,
// channel arrows, script errors) with the timeline; it writes a
// screenshot to $MSCCLGO_ARTIFACTS (default: a temporary directory).
func TestPageInBrowser(t *testing.T) {
	bin := chromium(t)
	art := os.Getenv("MSCCLGO_ARTIFACTS")
	if art == "" {
		art = t.TempDir()
	} else if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		size uint64
		// blocked are the labels of the blocked ops, in the order of
		// the deadlock report; nil for a plan that completes.
		blocked []string
	}{
		{"../tests/ports/single_node/allgather.plan.json", 1 << 14, nil},
		{"../tests/ports/single_node/allreduce_pipeline.plan.json", 1 << 16, nil},
		// Each rank waits for the other's signal before it signals: the
		// page draws the ops done before the deadlock and marks both
		// waits with their .star line (from the plan's source map).
		{"testdata/deadlock.plan.json", 1 << 14, []string{
			"BLOCKED op 3 wait (deadlock.star:7:32): memory channel 2 from rank 1 expects signal 1, has 0",
			"BLOCKED op 0 wait (deadlock.star:7:32): memory channel 0 from rank 0 expects signal 1, has 0",
		}},
	} {
		name := strings.TrimSuffix(filepath.Base(tc.file), ".plan.json")
		t.Run(name, func(t *testing.T) {
			data, tl, inst := page(t, tc.file, tc.size)
			dir := t.TempDir()
			file := filepath.Join(dir, "plan.html")
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append(browserArgs(filepath.Join(dir, "profile")), "--dump-dom", "file://"+file)
			cmd := exec.CommandContext(ctx, bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			dom, err := cmd.Output()
			if err != nil {
				t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
			}
			m := regexp.MustCompile(`<pre id="selfcheck">([^<]*)</pre>`).FindSubmatch(dom)
			if m == nil {
				t.Fatalf("no self-check in the dumped DOM:\n%.2000s", dom)
			}
			var got selfCheck
			if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
				t.Fatalf("self-check %q: %v", m[1], err)
			}
			tbs := 0
			for _, ri := range inst.Ranks {
				tbs += len(ri.TBs)
			}
			if got.Ticks < 2 {
				t.Errorf("time axis: %d ticks, want at least 2", got.Ticks)
			}
			// Small plans: every thread block unfolded, every flow drawn
			// (or, above maxArrows, every bundle).
			arrows := len(tl.Flows)
			if arrows > maxArrows {
				arrows = bundles(tl)
			}
			want := selfCheck{Lanes: tbs, TBLanes: tbs, Ops: len(tl.Slices), Boxes: len(tl.Slices), Flows: len(tl.Flows), Channels: len(ChannelsOf(inst)),
				Bundles: bundles(tl), Arrows: arrows, Critical: len(CriticalPath(tl)),
				Blocked: len(tc.blocked), BlockedLabels: tc.blocked, Ticks: got.Ticks}
			if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("self-check (-want +got):\n%s", d)
			}
			shot := filepath.Join(art, name+".png")
			args = append(browserArgs(filepath.Join(dir, "profile2")), "--hide-scrollbars", "--window-size=1300,900", "--screenshot="+shot, "file://"+file)
			if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("chromium --screenshot: %v\n%s", err, out)
			}
			if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
				t.Fatalf("no screenshot at %s: %v", shot, err)
			}
			t.Logf("screenshot: %s", shot)
		})
	}
}

// TestChannelColors checks that the page's script draws every channel
// type Channel.Type can hold, by its plan spelling.
func TestChannelColors(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile(`var chanColors = \{([^}]*)\}`).FindStringSubmatch(pageJS)
	if m == nil {
		t.Fatal("page.js: no chanColors table")
	}
	for c := plan.NoChannel + 1; c < plan.NumChannelTypes; c++ {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(c.String()) + `:`).MatchString(m[1]) {
			t.Errorf("page.js: chanColors {%s} has no color for channel type %q", m[1], c)
		}
	}
}

// bundles counts the arrows the page bundles the flows of tl into: one
// per (rank, peer rank, releasing op type, released op type).
func bundles(tl *timeline.Timeline) int {
	type key struct {
		from, to int
		a, b     string
	}
	seen := map[key]bool{}
	for _, f := range tl.Flows {
		a, b := tl.Slices[f.From], tl.Slices[f.To]
		if a.Rank != b.Rank {
			seen[key{a.Rank, b.Rank, a.Name, b.Name}] = true
		}
	}
	return len(seen)
}

// maxArrows and maxLanes are the readable density: at most this many
// arrows drawn at once and thread-block lanes unfolded by default
// (page.js's MAX_ARROWS and MAX_LANES).
const maxArrows, maxLanes = 24, 16

// loadPage loads file (with its URL fragment) in headless chromium and
// returns the page's self-check.
func loadPage(t *testing.T, bin, dir, file, fragment string) selfCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(browserArgs(filepath.Join(dir, "profile-"+fmt.Sprint(len(fragment)))), "--dump-dom", "file://"+file+fragment)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`<pre id="selfcheck">([^<]*)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no self-check in the dumped DOM:\n%.2000s", dom)
	}
	var got selfCheck
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
		t.Fatalf("self-check %q: %v", m[1], err)
	}
	if len(got.Errors) > 0 {
		t.Errorf("%s: script errors: %v", fragment, got.Errors)
	}
	return got
}

// TestBigPlanReadable loads the page of the LL all-pairs allreduce at 4
// and 8 ranks (16 and 64 thread blocks) in headless chromium and checks
// that it stays readable: by default the ranks are folded (one lane
// each) when there are more than maxLanes thread blocks, and at most
// maxArrows arrows are drawn; unfolded with an op selected, every lane
// is drawn with the selected op's arrows only; with all arrows asked for,
// the bundles. With $MSCCLGO_ARTIFACTS set, it writes screenshots of
// each state there.
func TestBigPlanReadable(t *testing.T) {
	bin := chromium(t)
	art := os.Getenv("MSCCLGO_ARTIFACTS")
	if art != "" {
		if err := os.MkdirAll(art, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{4, 8} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			data, tl, inst := page(t, fmt.Sprintf("testdata/allreduce_packet_%dgpu.plan.json", n), 1<<16)
			dir := t.TempDir()
			file := filepath.Join(dir, "plan.html")
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			tbs := 0
			for _, ri := range inst.Ranks {
				tbs += len(ri.TBs)
			}
			got := loadPage(t, bin, dir, file, "")
			wantLanes, wantRanks := tbs, 0
			if tbs > maxLanes {
				wantLanes, wantRanks = 0, n
			}
			if got.Lanes != wantLanes || got.RankLanes != wantRanks || got.TBLanes != tbs || got.Lanes > maxLanes {
				t.Errorf("default: %d thread-block lanes and %d rank lanes of %d thread blocks, want %d and %d", got.Lanes, got.RankLanes, got.TBLanes, wantLanes, wantRanks)
			}
			if got.Arrows > maxArrows {
				t.Errorf("default: %d arrows drawn, want at most %d", got.Arrows, maxArrows)
			}
			if got.Ops != len(tl.Slices) || got.Flows != len(tl.Flows) || got.Critical != len(CriticalPath(tl)) || got.Critical == 0 {
				t.Errorf("default: %d ops, %d flows, critical path of %d; want %d, %d, %d", got.Ops, got.Flows, got.Critical, len(tl.Slices), len(tl.Flows), len(CriticalPath(tl)))
			}
			// The op released by the most flows, selected.
			in := map[int]int{}
			sel := 0
			for _, f := range tl.Flows {
				in[f.To]++
				if in[f.To] > in[sel] {
					sel = f.To
				}
			}
			mine := 0
			for _, f := range tl.Flows {
				if f.To == sel || f.From == sel {
					mine++
				}
			}
			frag := fmt.Sprintf("#unfold=all&select=%d", sel)
			got = loadPage(t, bin, dir, file, frag)
			if got.Lanes != tbs || got.RankLanes != 0 || got.Arrows != mine {
				t.Errorf("%s: %d lanes, %d rank lanes, %d arrows; want %d, 0, %d", frag, got.Lanes, got.RankLanes, got.Arrows, tbs, mine)
			}
			got = loadPage(t, bin, dir, file, "#arrows=all")
			if got.Arrows != bundles(tl) || got.Bundles != bundles(tl) {
				t.Errorf("#arrows=all: %d arrows of %d bundles, want %d", got.Arrows, got.Bundles, bundles(tl))
			}
			if art == "" {
				return
			}
			for i, fr := range []string{"", frag, "#arrows=all"} {
				shot := filepath.Join(art, fmt.Sprintf("allreduce_packet_%dgpu_%d.png", n, i))
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				args := append(browserArgs(filepath.Join(dir, "shot")), "--hide-scrollbars", "--window-size=1300,1000", "--screenshot="+shot, "file://"+file+fr)
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("chromium --screenshot: %v\n%s", err, out)
				}
				t.Logf("screenshot: %s", shot)
			}
		})
	}
}
