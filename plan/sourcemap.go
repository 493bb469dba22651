package plan

// sourcemap.go holds the source map of a plan: for every op, the places
// in the .star sources where it was recorded (several for a fused op).
// Plans stay byte-identical to MSCCL++'s, so the positions live beside the
// plan, in PLAN.json.map (`mscclgo eval --source-map`), which the executor
// reads back when it is there and belongs to the plan (its sha256).
//
// Format (JSON, version 1):
//
//	{
//	  "version": 1,
//	  "plan": "allreduce_packet",          // the plan's name
//	  "sha256": "9f2c…",                   // of the plan file's bytes
//	  "files": ["algo.star", "lib.star"],  // as the evaluation named them
//	  "ops": [
//	    {"rank": 0, "tb": 1, "op": "3", "pos": [[0, 12, 5]]},
//	    {"rank": 0, "tb": 1, "op": "4.2", "pos": [[0, 20, 9], [0, 21, 9]]}
//	  ]
//	}
//
// "op" is the op's index in its thread block's "ops", or PIPELINE.BODY for
// an op in a pipeline's body; "pos" lists [file index, line, column] of
// every recorded op fused into it, in recording order, each place once (a
// loop that fuses one call many times gives one entry); "stack", when the
// first of them is in a function, lists the calls that led to it,
// innermost first (at most 4). Ops inserted by the compiler (nops of
// synchronisation) have no entry.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SourceMapVersion is the format version written and read.
const SourceMapVersion = 1

// SourceMap relates a plan's ops to their source positions.
type SourceMap struct {
	Version int         `json:"version"`
	Plan    string      `json:"plan"`
	SHA256  string      `json:"sha256"`
	Files   []string    `json:"files"`
	Ops     []SourceOps `json:"ops"`
}

// SourceOps are the source positions of one op.
type SourceOps struct {
	Rank int `json:"rank"`
	TB   int `json:"tb"`
	// Op is "K" (the op's index in its thread block) or "K.J" (op J of
	// pipeline K's body).
	Op  string   `json:"op"`
	Pos [][3]int `json:"pos"`
	// Stack are the frames that called the function recording the first
	// position, innermost first; absent for a call at the top level.
	Stack [][3]int `json:"stack,omitempty"`
}

// Hash is the sha256 a source map records for plan bytes.
func Hash(plan []byte) string {
	h := sha256.Sum256(plan)
	return hex.EncodeToString(h[:])
}

// SourceMapPath is where a plan file's source map lives.
func SourceMapPath(planPath string) string { return planPath + ".map" }

// ParseSourceMap decodes and checks a source map.
func ParseSourceMap(data []byte) (*SourceMap, error) {
	var m SourceMap
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("source map: %w", err)
	}
	if m.Version != SourceMapVersion {
		return nil, fmt.Errorf("source map: version %d, this mscclgo reads version %d", m.Version, SourceMapVersion)
	}
	for i, o := range m.Ops {
		for _, p := range append(append([][3]int(nil), o.Pos...), o.Stack...) {
			if p[0] < 0 || p[0] >= len(m.Files) {
				return nil, fmt.Errorf("source map: ops[%d]: file index %d out of range (%d files)", i, p[0], len(m.Files))
			}
		}
	}
	return &m, nil
}

// Positions returns o's positions as reports show them: "FILE:LINE:COL"
// each, the first followed by " called from" and its call stack.
func (m *SourceMap) Positions(o *SourceOps) []string {
	var out []string
	for i, pos := range o.Pos {
		s := fmt.Sprintf("%s:%d:%d", m.Files[pos[0]], pos[1], pos[2])
		if i == 0 {
			for j, f := range o.Stack {
				sep := ", "
				if j == 0 {
					sep = " called from "
				}
				s += fmt.Sprintf("%s%s:%d:%d", sep, m.Files[f[0]], f[1], f[2])
			}
		}
		out = append(out, s)
	}
	return out
}

// AttachSources sets the Source of every op of p that m names. m must
// have been written for these plan bytes (its sha256) and for p's ranks,
// thread blocks and ops.
func (p *Plan) AttachSources(m *SourceMap, data []byte) error {
	if h := Hash(data); m.SHA256 != h {
		return fmt.Errorf("source map: written for another plan (sha256 %.12s…, the plan's is %.12s…): evaluate again", m.SHA256, h)
	}
	for i := range m.Ops {
		o := &m.Ops[i]
		op, err := p.opAt(o.Rank, o.TB, o.Op)
		if err != nil {
			return fmt.Errorf("source map: ops[%d]: %w", i, err)
		}
		op.Source = m.Positions(o)
	}
	return nil
}

// opAt finds the op of rank r, thread block tb (its position in the
// rank's list) and path "K" or "K.J".
func (p *Plan) opAt(r, tb int, path string) (*Op, error) {
	if r < 0 || r >= len(p.GPUs) || tb < 0 || tb >= len(p.GPUs[r].ThreadBlocks) {
		return nil, fmt.Errorf("no rank %d thread block %d", r, tb)
	}
	ops := p.GPUs[r].ThreadBlocks[tb].Ops
	var op *Op
	for _, part := range strings.Split(path, ".") {
		k, err := strconv.Atoi(part)
		if err != nil || k < 0 || k >= len(ops) {
			return nil, fmt.Errorf("rank %d tb %d has no op %s", r, tb, path)
		}
		op = &ops[k]
		ops = op.Ops
	}
	return op, nil
}
