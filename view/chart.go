package view

// chart.go draws busbw-versus-size curves as one SVG chart: a log2 x axis
// of message sizes, a linear y axis of GB/s, a legend.

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Point is one predicted call: message size in bytes, bus bandwidth in
// GB/s.
type Point struct {
	Size  uint64
	BusBW float64
}

// Series is one plan's curve.
type Series struct {
	Name   string
	Points []Point
}

// ChartOptions size and title a chart; zero sizes take 760×420.
type ChartOptions struct {
	Title         string
	Width, Height int
}

// palette colours the series in order.
var palette = [...]string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// Chart returns an SVG document with one curve per series. Every series
// needs a point; sizes must be positive and bandwidths finite and not
// negative.
func Chart(series []Series, o ChartOptions) (string, error) {
	if len(series) == 0 {
		return "", fmt.Errorf("chart: no series")
	}
	minS, maxS, maxY := uint64(math.MaxUint64), uint64(0), 0.0
	for i, s := range series {
		if len(s.Points) == 0 {
			return "", fmt.Errorf("chart: series %d (%q) has no points", i, s.Name)
		}
		for j, p := range s.Points {
			if p.Size == 0 {
				return "", fmt.Errorf("chart: series %q point %d: size 0 on a log axis", s.Name, j)
			}
			if math.IsNaN(p.BusBW) || math.IsInf(p.BusBW, 0) || p.BusBW < 0 {
				return "", fmt.Errorf("chart: series %q point %d (size %d): busbw %v", s.Name, j, p.Size, p.BusBW)
			}
			minS, maxS, maxY = min(minS, p.Size), max(maxS, p.Size), max(maxY, p.BusBW)
		}
	}
	w, h := o.Width, o.Height
	if w <= 0 {
		w = 760
	}
	if h <= 0 {
		h = 420
	}
	// The legend is as wide as its longest name (about 6.5 px a rune).
	legendW := 150
	for _, s := range series {
		legendW = max(legendW, 56+int(6.5*float64(len([]rune(s.Name)))))
	}
	w += max(0, legendW-190)
	const left, top, bottom = 64, 34, 48
	pw, ph := float64(w-left-legendW), float64(h-top-bottom)
	lo, hi := math.Log2(float64(minS)), math.Log2(float64(maxS))
	if hi-lo < 1 {
		lo, hi = lo-0.5, hi+0.5
	}
	yTop, yStep := niceTop(maxY)
	x := func(size uint64) float64 { return left + (math.Log2(float64(size))-lo)/(hi-lo)*pw }
	y := func(v float64) float64 { return top + ph - v/yTop*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>`+"\n", w, h)
	if o.Title != "" {
		fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(o.Title))
	}
	// Axes and grid.
	fmt.Fprintf(&b, `<g class="axes" stroke="#333"><line x1="%d" y1="%g" x2="%g" y2="%g"/><line x1="%d" y1="%d" x2="%d" y2="%g"/></g>`+"\n",
		left, top+ph, left+pw, top+ph, left, top, left, top+ph)
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line class="ygrid" x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y(v), left+pw, y(v), left-6, y(v)+4, trimFloat(v))
	}
	stepK := max(1, int(math.Ceil((math.Floor(hi)-math.Ceil(lo)+1)/10)))
	for k := int(math.Ceil(lo)); k <= int(math.Floor(hi)); k++ {
		if k%stepK != 0 {
			continue
		}
		sz := uint64(1) << uint(k)
		fmt.Fprintf(&b, `<line class="xtick" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#333"/><text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n",
			x(sz), top+ph, x(sz), top+ph+5, x(sz), top+ph+18, sizeLabel(sz))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%d" text-anchor="middle">message size (bytes, log scale)</text>`+"\n", left+pw/2, h-8)
	fmt.Fprintf(&b, `<text transform="translate(16 %g) rotate(-90)" text-anchor="middle">busbw (GB/s)</text>`+"\n", top+ph/2)
	// Curves and legend.
	for i, s := range series {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Size), y(p.BusBW)))
		}
		name := html.EscapeString(s.Name)
		fmt.Fprintf(&b, `<g class="series" data-name="%s"><polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, name, c, strings.Join(pts, " "))
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s: %s, %.2f GB/s</title></circle>`, x(p.Size), y(p.BusBW), c, name, sizeLabel(p.Size), p.BusBW)
		}
		b.WriteString("</g>\n")
		ly := top + 14 + 18*i
		fmt.Fprintf(&b, `<g class="legend"><line x1="%g" y1="%d" x2="%g" y2="%d" stroke="%s" stroke-width="2"/><text x="%g" y="%d">%s</text></g>`+"\n",
			left+pw+14, ly, left+pw+34, ly, c, left+pw+40, ly+4, name)
	}
	b.WriteString("</svg>\n")
	return b.String(), nil
}

// niceTop returns an axis top at or above v and a tick step: 1, 2 or 5
// times a power of ten, about five ticks.
func niceTop(v float64) (top, step float64) {
	if v <= 0 {
		return 1, 0.2
	}
	raw := v / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	return math.Ceil(v/step) * step, step
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// sizeLabel prints a power-of-two-ish size with a binary unit: 512, 4K,
// 1M, 2G.
func sizeLabel(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprint(n)
}
