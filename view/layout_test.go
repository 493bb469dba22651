package view

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// box is an element's box in CSS pixels of the document.
type box struct {
	ID         string
	X, Y, W, H float64
}

func (a box) overlaps(b box) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

func (a box) inside(b box) bool {
	return a.X >= b.X && a.Y >= b.Y && a.X+a.W <= b.X+b.W && a.Y+a.H <= b.Y+b.H
}

// layoutCheck is the part of the page's self-check about layout: the
// boxes of its main parts and of the chunk flow's panels.
type layoutCheck struct {
	Layout        []box
	DocumentWidth float64
	ChunkSteps    int
	ChunkCells    int
	Panels        []struct {
		Step       int
		X, Y, W, H float64
		Cell, Top  float64
		Columns    map[string]float64
	}
	Errors []string
}

// TestPageLayout loads pages at 2, 8 and 16 ranks and a deadlock's page
// in headless chromium at 1300 by 1100 pixels and checks their layout:
// the main parts (title, diagnosis, chunk flow, lanes, channels, chart)
// are laid out in that order without overlapping or overflowing the
// window's width; the chunk flow has a panel per step, inside it and not
// overlapping each other, with cells of at least 8 pixels; and, in a
// screenshot, every cell a step writes is filled with the colour of the
// rank its data comes from (most of its pixels), and the diagnosis box
// is drawn in its red.
func TestPageLayout(t *testing.T) {
	bin := chromium(t)
	art := os.Getenv("MSCCLGO_ARTIFACTS")
	for _, tc := range []struct {
		file      string
		diagnosis string
	}{
		{"../tests/ports/single_node/allgather.plan.json", ""},
		{"testdata/allreduce_packet_8gpu.plan.json", ""},
		{"testdata/allgather_hier_2x8gpu.plan.json", ""},
		{"testdata/deadlock.plan.json", "mscclgo: deadlock.plan.json: size 16384: deadlock: 2 thread block(s) blocked\n  most likely: each rank waits before it signals (deadlock.star:7:32)\n"},
	} {
		name := strings.TrimSuffix(filepath.Base(tc.file), ".plan.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, tl, inst := page(t, tc.file, 1<<16)
			var buf bytes.Buffer
			if err := Write(&buf, Page{Title: name, Meta: "test", Timeline: tl, Channels: ChannelsOf(inst), Instance: inst, Diagnosis: tc.diagnosis,
				Curves: []Series{{Name: "test curve", Points: []Point{{1 << 10, 1}, {1 << 20, 10}}}}}); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "plan.html")
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			const winW, winH = 1300, 1100
			size := fmt.Sprintf("--window-size=%d,%d", winW, winH)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := append(browserArgs(filepath.Join(dir, "profile")), "--force-device-scale-factor=1", size, "--dump-dom", "file://"+file)
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stderr = &stderr
			dom, err := cmd.Output()
			if err != nil {
				t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
			}
			m := regexp.MustCompile(`<pre id="selfcheck">([^<]*)</pre>`).FindSubmatch(dom)
			if m == nil {
				t.Fatalf("no self-check in the dumped DOM:\n%.2000s", dom)
			}
			var got layoutCheck
			if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
				t.Fatalf("self-check %q: %v", m[1], err)
			}
			if len(got.Errors) > 0 {
				t.Fatalf("script errors: %v", got.Errors)
			}
			cf := ChunkFlowOf(tl, inst)

			// The main parts, in order, apart, within the width.
			order := []string{"title", "meta", "chunkflow", "legend", "lanes", "channels", "chart"}
			if tc.diagnosis != "" {
				order = append([]string{"title", "diagnosis"}, order[1:]...)
			}
			var ids []string
			boxes := map[string]box{}
			for _, b := range got.Layout {
				ids = append(ids, b.ID)
				boxes[b.ID] = b
				if b.W <= 0 || b.H <= 0 {
					t.Errorf("%s is not laid out: %+v", b.ID, b)
				}
				if b.X < 0 || b.X+b.W > winW {
					t.Errorf("%s overflows the window's width: %+v", b.ID, b)
				}
			}
			if strings.Join(ids, " ") != strings.Join(order, " ") {
				t.Errorf("main parts %v, want %v", ids, order)
			}
			for i := 1; i < len(got.Layout); i++ {
				if a, b := got.Layout[i-1], got.Layout[i]; b.Y < a.Y+a.H {
					t.Errorf("%s (%+v) is not below %s (%+v)", b.ID, b, a.ID, a)
				}
				for j := 0; j < i; j++ {
					if got.Layout[j].overlaps(got.Layout[i]) {
						t.Errorf("%s and %s overlap: %+v, %+v", got.Layout[j].ID, got.Layout[i].ID, got.Layout[j], got.Layout[i])
					}
				}
			}
			if got.DocumentWidth > winW {
				t.Errorf("the document is %v pixels wide, wider than the window's %d", got.DocumentWidth, winW)
			}

			// The chunk flow: a panel per step, inside it, apart.
			if got.ChunkSteps != cf.Steps || len(got.Panels) != cf.Steps || cf.Steps == 0 || got.ChunkCells != len(cf.Moves) {
				t.Fatalf("chunk flow: %d steps, %d panels, %d cells; want %d steps and panels (not 0), %d cells", got.ChunkSteps, len(got.Panels), got.ChunkCells, cf.Steps, len(cf.Moves))
			}
			for i, p := range got.Panels {
				pb := box{ID: fmt.Sprint("panel ", i), X: p.X, Y: p.Y, W: p.W, H: p.H}
				if !pb.inside(boxes["chunkflow"]) {
					t.Errorf("%s (%+v) is outside the chunk flow (%+v)", pb.ID, pb, boxes["chunkflow"])
				}
				if p.Cell < 8 {
					t.Errorf("%s: cells of %v pixels, want at least 8", pb.ID, p.Cell)
				}
				for _, q := range got.Panels[:i] {
					if pb.overlaps(box{X: q.X, Y: q.Y, W: q.W, H: q.H}) {
						t.Errorf("panels %d and %d overlap", q.Step, p.Step)
					}
				}
			}

			// The screenshot: the cells in their colours.
			shot := filepath.Join(dir, name+".png")
			if art != "" {
				if err := os.MkdirAll(art, 0o755); err != nil {
					t.Fatal(err)
				}
				shot = filepath.Join(art, "layout_"+name+".png")
			}
			args = append(browserArgs(filepath.Join(dir, "profile2")), "--force-device-scale-factor=1", "--hide-scrollbars", size, "--screenshot="+shot, "file://"+file)
			if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("chromium --screenshot: %v\n%s", err, out)
			}
			img := readPNG(t, shot)
			checked := 0
			for _, mv := range cf.Moves {
				p := got.Panels[mv.Step]
				x := p.X + p.Columns[mv.Dst.Buffer] + float64(mv.Dst.Chunk)*p.Cell
				y := p.Y + p.Top + float64(mv.Dst.Rank)*p.Cell
				if y+p.Cell > winH {
					continue
				}
				want := RankColor(mv.Color)
				if f := colorShare(img, int(x), int(y), int(p.Cell)-1, want); f < 0.4 {
					t.Errorf("step %d: the cell of %s[%d] of rank %d has %.0f%% of its pixels in rank %d's colour %s, want at least 40%%",
						mv.Step, mv.Dst.Buffer, mv.Dst.Chunk, mv.Dst.Rank, 100*f, mv.Color, want.Hex())
				}
				checked++
			}
			if checked < len(cf.Moves)/2 {
				t.Errorf("only %d of %d written cells are in the screenshot", checked, len(cf.Moves))
			}
			if d, ok := boxes["diagnosis"]; ok {
				// Its border is #b00.
				if f := colorShare(img, int(d.X), int(d.Y), 2, RGB{0xbb, 0, 0}); f < 0.5 {
					t.Errorf("the diagnosis box's corner is %.0f%% its red, want its border", 100*f)
				}
			}
		})
	}
}

func readPNG(t *testing.T, file string) image.Image {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return img
}

// colorShare is the share of the pixels of the n-by-n square at (x, y)
// of img within a small distance of c.
func colorShare(img image.Image, x, y, n int, c RGB) float64 {
	if n <= 0 {
		return 0
	}
	near := 0
	for j := y; j < y+n; j++ {
		for i := x; i < x+n; i++ {
			r, g, b, _ := img.At(i, j).RGBA()
			d := abs(int(r>>8)-int(c.R)) + abs(int(g>>8)-int(c.G)) + abs(int(b>>8)-int(c.B))
			if d <= 24 {
				near++
			}
		}
	}
	return float64(near) / float64(n*n)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
