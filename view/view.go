// Package view draws execution plans: Write makes the self-contained HTML
// page of `mscclgo view` (inline SVG and script, nothing fetched: a
// deadlock's diagnosis first when there is one, where the chunks go step
// by step (ChunkFlowOf), lanes per rank and thread block, op boxes sized
// by their time, arrows from releases to what they released, the
// channels between ranks, details on hover, and the predicted bus
// bandwidth against message size), and Chart draws busbw-versus-size
// curves of several plans as one SVG chart.
package view

// view.go holds the page: its data (a Chrome trace of the timeline, the
// channels) and the html/template that embeds page.js.

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
	"github.com/mscclgo/mscclgo/trace"
)

//go:embed assets/page.html
var pageHTML string

//go:embed assets/page.js
var pageJS string

// Channel is one direction of the channels between two ranks: Count
// channels of Type (a plan.ChannelType's spelling: memory, port or
// switch) that rank From declares to rank To.
type Channel struct {
	From  int    `json:"from"`
	To    int    `json:"to"`
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// Page is what a view page shows.
type Page struct {
	// Title heads the page; Meta is the line under it.
	Title, Meta string
	// Timeline is the call the lanes show.
	Timeline *timeline.Timeline
	// Channels are drawn as arrows between ranks.
	Channels []Channel
	// Curves, when any, are drawn as the busbw-versus-size chart.
	Curves []Series
	// Diagnosis, when not empty, is a deadlock's or failure's report as
	// the terminal printed it; the page leads with it.
	Diagnosis string
	// Instance, when not nil, is the plan instance the timeline ran:
	// the page draws where its chunks go (ChunkFlowOf).
	Instance *executor.Instance
}

// pageData is the JSON the page's script reads.
type pageData struct {
	Trace    *trace.File `json:"trace"`
	Channels []Channel   `json:"channels"`
	Clock    string      `json:"clock"`
	// Flows are the timeline's flows as [from, to] indices of its
	// slices, which are the trace's complete ("X") events in order.
	Flows [][2]int `json:"flows"`
	// Critical is the critical path, as indices of slices.
	Critical []int `json:"critical"`
	// ChunkFlow is where the chunks go, with a colour per rank.
	ChunkFlow *chunkFlowData `json:"chunkflow,omitempty"`
}

// chunkFlowData is a chunk flow with the colours the page fills its
// cells with, one per rank (RankColor).
type chunkFlowData struct {
	ChunkFlow
	Colors []string `json:"colors"`
}

// ChannelsOf lists inst's channels by (rank, peer, type), the switch
// groups as a channel to every other member.
func ChannelsOf(inst *executor.Instance) []Channel {
	count := map[Channel]int{}
	for _, ri := range inst.Ranks {
		for _, c := range ri.MemoryChannels {
			count[Channel{From: ri.Rank, To: c.Peer, Type: plan.Memory.String()}]++
		}
		for _, c := range ri.PortChannels {
			count[Channel{From: ri.Rank, To: c.Peer, Type: plan.Port.String()}]++
		}
		for _, g := range ri.Switches {
			for _, m := range g.Ranks {
				if m != ri.Rank {
					count[Channel{From: ri.Rank, To: m, Type: plan.Switch.String()}]++
				}
			}
		}
	}
	out := make([]Channel, 0, len(count))
	for c, n := range count {
		c.Count = n
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.Type < b.Type
	})
	return out
}

// Write writes p as one HTML page.
func Write(w io.Writer, p Page) error {
	if p.Timeline == nil {
		return fmt.Errorf("view: no timeline")
	}
	tmpl, err := template.New("page").Parse(pageHTML)
	if err != nil {
		return fmt.Errorf("view: page template: %w", err)
	}
	var chart template.HTML
	if len(p.Curves) > 0 {
		svg, err := Chart(p.Curves, ChartOptions{Title: "predicted busbw"})
		if err != nil {
			return err
		}
		// Chart escapes every text it draws.
		chart = template.HTML(svg)
	}
	flows := make([][2]int, 0, len(p.Timeline.Flows))
	for _, f := range p.Timeline.Flows {
		flows = append(flows, [2]int{f.From, f.To})
	}
	data := pageData{Trace: trace.Events(p.Timeline), Channels: p.Channels, Clock: string(p.Timeline.Clock), Flows: flows, Critical: CriticalPath(p.Timeline)}
	if p.Instance != nil {
		cf := &chunkFlowData{ChunkFlow: ChunkFlowOf(p.Timeline, p.Instance)}
		for r := range cf.Ranks {
			cf.Colors = append(cf.Colors, RankColor(r).Hex())
		}
		data.ChunkFlow = cf
	}
	return tmpl.Execute(w, map[string]any{
		"Title":     p.Title,
		"Meta":      p.Meta,
		"Diagnosis": p.Diagnosis,
		"Chart":     chart,
		"Data":      data,
		"Script":    template.JS(pageJS),
	})
}
