// This file reads the project's JSON form of a topology
// (docs/synthesis.md, "The JSON form").

package topo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// jsonTopo is the JSON form.
type jsonTopo struct {
	Name     string       `json:"name"`
	Vertices []jsonVertex `json:"vertices"`
	Links    []jsonLink   `json:"links"`
}

type jsonVertex struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

type jsonLink struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Type is nvlink, pcie, sys or nic; Count multiplies the profile's
	// rate of one such link (default 1); GBps, when set, is the data-sheet
	// rate itself.
	Type  string  `json:"type"`
	Count float64 `json:"count"`
	GBps  float64 `json:"gbps"`
	// Both adds the reverse direction too (default true).
	Both *bool `json:"both"`
}

// lineOf returns the line of byte offset off in data.
func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// fromJSON builds a topology from the JSON form.
func fromJSON(file string, data []byte, hw *HW) (*Topology, error) {
	var j jsonTopo
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		if se, ok := err.(*json.SyntaxError); ok {
			return nil, fmt.Errorf("%s:%d: %v", file, lineOf(data, se.Offset), err)
		}
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return nil, fmt.Errorf("%s:%d: %s: %v", file, lineOf(data, te.Offset), te.Field, err)
		}
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	// Positions of each entry, for errors: the n-th occurrence of "name"
	// and "from" keys.
	pos := func(key string, n int) string {
		idx, off := -1, 0
		for k := 0; k <= n; k++ {
			i := bytes.Index(data[off:], []byte(`"`+key+`"`))
			if i < 0 {
				return file
			}
			idx = off + i
			off = idx + 1
		}
		return fmt.Sprintf("%s:%d", file, lineOf(data, int64(idx)))
	}
	name := j.Name
	if name == "" {
		name = file
	}
	b := newBuilder(name, hw)
	kinds := map[string]VertexKind{}
	for i, k := range kindNames() {
		kinds[k] = VertexKind(i)
	}
	ngpu := 0
	for i, v := range j.Vertices {
		k, ok := kinds[v.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: vertex %q: kind %q, want one of %s", pos("name", i), v.Name, v.Kind, strings.Join(kindNames(), ", "))
		}
		if v.Name == "" {
			return nil, fmt.Errorf("%s: vertex %d: empty name", pos("name", i), i)
		}
		if _, dup := b.index[v.Name]; dup {
			return nil, fmt.Errorf("%s: vertex %q named twice", pos("name", i), v.Name)
		}
		if k == GPU {
			if v.Name != "gpu"+strconv.Itoa(ngpu) {
				return nil, fmt.Errorf("%s: GPU %q: GPUs are named gpu0, gpu1, ... in rank order (want gpu%d)", pos("name", i), v.Name, ngpu)
			}
			ngpu++
		}
		b.vertex(v.Name, k)
	}
	types := map[string]LinkKind{}
	for i, k := range linkNames() {
		types[k] = LinkKind(i)
	}
	for i, l := range j.Links {
		at := pos("from", i)
		from, ok1 := b.index[l.From]
		to, ok2 := b.index[l.To]
		if !ok1 || !ok2 {
			miss := l.From
			if ok1 {
				miss = l.To
			}
			return nil, fmt.Errorf("%s: link %s -> %s: no vertex %q", at, l.From, l.To, miss)
		}
		if from == to {
			return nil, fmt.Errorf("%s: link %s -> %s: a link to itself", at, l.From, l.To)
		}
		k, ok := types[l.Type]
		if !ok {
			return nil, fmt.Errorf("%s: link %s -> %s: type %q, want one of %s", at, l.From, l.To, l.Type, strings.Join(linkNames(), ", "))
		}
		if l.Count < 0 || l.GBps < 0 {
			return nil, fmt.Errorf("%s: link %s -> %s: negative count or gbps", at, l.From, l.To)
		}
		raw := l.GBps
		if raw == 0 {
			c := l.Count
			if c == 0 {
				c = 1
			}
			raw = hw.raw(k, c)
		}
		if raw <= 0 {
			return nil, fmt.Errorf("%s: link %s -> %s: no bandwidth (profile %s has no %s)", at, l.From, l.To, hw.Name, k)
		}
		both := l.Both == nil || *l.Both
		b.link(from, to, k, raw, both)
	}
	return b.finish()
}
