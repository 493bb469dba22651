package emit

// sourcemap.go builds the source map of a compiled program (the format
// is plan.SourceMap's): the call sites of every op, walked in the
// order Write emits the ops.

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// SourceMap returns the source map of p, a program whose passes have run,
// for its plan bytes data. display turns a Starlark file name into the name
// the map records (nil keeps it).
func SourceMap(p *ir.Program, data []byte, display func(string) string) *plan.SourceMap {
	m := &plan.SourceMap{Version: plan.SourceMapVersion, Plan: p.Name, SHA256: plan.Hash(data),
		Files: []string{}, Ops: []plan.SourceOps{}}
	files := map[string]int{}
	// at is a position as [file, line, column].
	at := func(q syntax.Position) [3]int {
		name := q.Filename()
		if display != nil {
			name = display(name)
		}
		i, ok := files[name]
		if !ok {
			i = len(m.Files)
			files[name] = i
			m.Files = append(m.Files, name)
		}
		return [3]int{i, int(q.Line), int(q.Col)}
	}
	// pos lists op's call sites.
	pos := func(op *ir.Op) [][3]int {
		var out [][3]int
		for _, q := range append([]syntax.Position{op.Pos}, op.Fused...) {
			if !q.IsValid() {
				continue
			}
			if e := at(q); !slices.Contains(out, e) { // a loop fuses one line many times
				out = append(out, e)
			}
		}
		return out
	}
	stack := func(op *ir.Op) [][3]int {
		if !op.Pos.IsValid() {
			return nil
		}
		var out [][3]int
		for _, q := range op.Stack {
			if q.IsValid() {
				out = append(out, at(q))
			}
		}
		return out
	}
	for r, g := range p.GPUs {
		for t, tb := range g.ThreadBlocks {
			for k, op := range tb.Ops {
				if ps := pos(op); len(ps) > 0 {
					m.Ops = append(m.Ops, plan.SourceOps{Rank: r, TB: t, Op: itoa(k), Pos: ps, Stack: stack(op)})
				}
				for j, b := range op.Body {
					if ps := pos(b); len(ps) > 0 {
						m.Ops = append(m.Ops, plan.SourceOps{Rank: r, TB: t, Op: itoa(k) + "." + itoa(j), Pos: ps, Stack: stack(b)})
					}
				}
			}
		}
	}
	return m
}

// MarshalSourceMap is SourceMap as JSON, one op per line.
func MarshalSourceMap(p *ir.Program, data []byte, display func(string) string) ([]byte, error) {
	m := SourceMap(p, data, display)
	head, err := json.Marshal(struct {
		Version int      `json:"version"`
		Plan    string   `json:"plan"`
		SHA256  string   `json:"sha256"`
		Files   []string `json:"files"`
	}{m.Version, m.Plan, m.SHA256, m.Files})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"ops":[`)
	for i, o := range m.Ops {
		line, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n ")
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

func itoa(i int) string { return strconv.Itoa(i) }
