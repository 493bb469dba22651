package executor

// sourcemap.go attaches a plan's source map (package plan's SourceMap,
// written by `mscclgo eval --source-map` beside the plan as PLAN.json.map)
// to a loaded Plan, so that reports name the .star lines of an op.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/plan"
)

// LoadSourceMap reads the source map beside planPath, if there is one, and
// attaches it to p. It returns a note when a map is there but unusable
// (stale or malformed): the plan still loads, without positions.
func LoadSourceMap(p *plan.Plan, planPath string, data []byte) (note string) {
	m, note := ReadSourceMap(planPath, data)
	if m == nil {
		return note
	}
	if err := p.AttachSources(m, data); err != nil {
		return fmt.Sprintf("%s: %v; positions are not shown", plan.SourceMapPath(planPath), err)
	}
	return ""
}

// ReadSourceMap reads the source map beside planPath when there is one
// and it was written for these plan bytes. Otherwise it returns nil, and a
// note saying why a map that is there cannot be used.
func ReadSourceMap(planPath string, data []byte) (*plan.SourceMap, string) {
	path := plan.SourceMapPath(planPath)
	text, err := infile.Read(path, "a source map", MaxPlanBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ""
	case err != nil:
		return nil, fmt.Sprintf("%v; positions are not shown", err)
	}
	m, err := plan.ParseSourceMap(text)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s: %v; positions are not shown", path, err)
	case m.SHA256 != plan.Hash(data):
		return nil, fmt.Sprintf("%s: written for another version of the plan: positions are not shown (evaluate again with --source-map)", path)
	}
	return m, ""
}

// Describe names an op for reports: its position, type and, when the plan
// has a source map, where it was recorded: "op 7 wait (algo.star:12:5)".
func (op *OpInstance) Describe() string {
	p := op.Path
	if p == "" {
		p = fmt.Sprintf("op %d", op.Index)
	}
	s := p + " " + op.Type.String()
	if len(op.Source) > 0 {
		s += " (" + strings.Join(op.Source, ", ") + ")"
	}
	return s
}
