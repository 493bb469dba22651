package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
)

// This file holds the per-call arguments of an alltoallv (the counts and
// displacements of MPI_Alltoallv / ncclAllToAllv), their validation, the
// counts file format and the generators of `mscclgo run --counts`.

// The classes of bad counts; a *CountsError wraps one of them.
var (
	// ErrCountsShape: a matrix or vector has the wrong number of entries.
	ErrCountsShape = errors.New("counts of the wrong shape")
	// ErrCountsNegative: a count or displacement is negative.
	ErrCountsNegative = errors.New("negative count or displacement")
	// ErrCountsMismatch: what a sender sends a receiver differs from what
	// the receiver expects from it.
	ErrCountsMismatch = errors.New("send and receive counts disagree")
	// ErrCountsOverlap: two receive blocks of a rank overlap.
	ErrCountsOverlap = errors.New("overlapping blocks")
	// ErrCountsBounds: a block runs past its buffer, or beyond what the
	// executor addresses.
	ErrCountsBounds = errors.New("block beyond its buffer")
	// ErrCountsSyntax: a counts file or generator spec does not parse.
	ErrCountsSyntax = errors.New("bad counts syntax")
)

// CountsError is a bad counts argument: the field (e.g.
// "recv_displs[2][5]"), what is wrong, and its class.
type CountsError struct {
	// Source names where the counts came from (a file, a generator spec)
	// when known.
	Source string
	Field  string
	Err    error
	Msg    string
}

func (e *CountsError) Error() string {
	s := "counts"
	if e.Source != "" {
		s = e.Source
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// Unwrap returns the class.
func (e *CountsError) Unwrap() error { return e.Err }

// Counts are the per-call arguments of an alltoallv on N ranks, in
// elements: Send[r][p] elements of rank r's input starting at element
// SendDispls[r][p] go to rank p, which receives Recv[p][r] elements at
// element RecvDispls[p][r] of its output. SendSize and RecvSize, when not
// nil, are the buffers' sizes in elements; nil means just large enough.
type Counts struct {
	Send, SendDispls, Recv, RecvDispls [][]int64
	SendSize, RecvSize                 []int64
}

// MatrixCounts returns the counts of the matrix m[src][dst] (elements)
// with packed displacements: blocks in peer order, no gaps.
func MatrixCounts(m [][]int64) *Counts {
	n := len(m)
	c := &Counts{Send: make([][]int64, n), SendDispls: make([][]int64, n), Recv: make([][]int64, n), RecvDispls: make([][]int64, n)}
	for r := range n {
		c.Send[r] = append([]int64{}, m[r]...)
		c.Recv[r] = make([]int64, n)
		for p := range n {
			if p < len(m) && r < len(m[p]) {
				c.Recv[r][p] = m[p][r]
			}
		}
		c.SendDispls[r] = prefix(c.Send[r])
		c.RecvDispls[r] = prefix(c.Recv[r])
	}
	return c
}

func prefix(xs []int64) []int64 {
	out := make([]int64, len(xs))
	var s int64
	for i, x := range xs {
		out[i] = s
		s += x
	}
	return out
}

// Ranks returns the number of ranks the counts are for.
func (c *Counts) Ranks() int { return len(c.Send) }

// Validate checks the counts for n ranks: shapes, no negative values,
// sender and receiver agreeing on every block, receive blocks that do not
// overlap, blocks inside their buffers, and byte offsets of at most
// 2^32-1 with elements of elem bytes (the executor's 32-bit offsets).
func (c *Counts) Validate(n, elem int) error {
	bad := func(class error, field, format string, args ...any) error {
		return &CountsError{Field: field, Err: class, Msg: fmt.Sprintf(format, args...)}
	}
	for _, m := range []struct {
		name string
		v    [][]int64
	}{{"send_counts", c.Send}, {"send_displs", c.SendDispls}, {"recv_counts", c.Recv}, {"recv_displs", c.RecvDispls}} {
		if len(m.v) != n {
			return bad(ErrCountsShape, m.name, "%d rows, want one per rank (%d)", len(m.v), n)
		}
		for r, row := range m.v {
			if len(row) != n {
				return bad(ErrCountsShape, fmt.Sprintf("%s[%d]", m.name, r), "%d entries, want one per peer (%d)", len(row), n)
			}
			for p, x := range row {
				if x < 0 {
					return bad(ErrCountsNegative, fmt.Sprintf("%s[%d][%d]", m.name, r, p), "%d is negative", x)
				}
			}
		}
	}
	for _, s := range []struct {
		name string
		v    []int64
	}{{"send_size", c.SendSize}, {"recv_size", c.RecvSize}} {
		if s.v == nil {
			continue
		}
		if len(s.v) != n {
			return bad(ErrCountsShape, s.name, "%d entries, want one per rank (%d)", len(s.v), n)
		}
		for r, x := range s.v {
			if x < 0 {
				return bad(ErrCountsNegative, fmt.Sprintf("%s[%d]", s.name, r), "%d is negative", x)
			}
		}
	}
	for r := range n {
		for p := range n {
			if c.Send[p][r] != c.Recv[r][p] {
				return bad(ErrCountsMismatch, fmt.Sprintf("recv_counts[%d][%d]", r, p), "rank %d expects %d elements from rank %d, which sends it %d (send_counts[%d][%d])", r, c.Recv[r][p], p, c.Send[p][r], p, r)
			}
		}
	}
	limit := int64(math.MaxUint32) / int64(max(elem, 1))
	for r := range n {
		for _, side := range []struct {
			what          string
			counts, displ []int64
			size          []int64
		}{{"send", c.Send[r], c.SendDispls[r], c.SendSize}, {"recv", c.Recv[r], c.RecvDispls[r], c.RecvSize}} {
			for p := range n {
				end := side.displ[p] + side.counts[p]
				field := fmt.Sprintf("%s_displs[%d][%d]", side.what, r, p)
				if end < side.displ[p] || end > limit {
					return bad(ErrCountsBounds, field, "block [%d, %d) of %d-byte elements ends beyond 2^32-1 bytes, the executor's 32-bit offsets", side.displ[p], end, elem)
				}
				if side.size != nil && end > side.size[r] {
					return bad(ErrCountsBounds, field, "block [%d, %d) runs past rank %d's %s buffer of %d elements", side.displ[p], end, r, side.what, side.size[r])
				}
			}
		}
		// Receive blocks are written: no two may overlap (MPI allows
		// send blocks to overlap, as they are only read).
		if p, q, ok := overlap(c.Recv[r], c.RecvDispls[r]); ok {
			return bad(ErrCountsOverlap, fmt.Sprintf("recv_displs[%d][%d]", r, q), "rank %d's receive block from rank %d, [%d, %d), overlaps its block from rank %d, [%d, %d)", r, q, c.RecvDispls[r][q], c.RecvDispls[r][q]+c.Recv[r][q], p, c.RecvDispls[r][p], c.RecvDispls[r][p]+c.Recv[r][p])
		}
	}
	return nil
}

// overlap finds two non-empty blocks that overlap.
func overlap(counts, displ []int64) (p, q int, ok bool) {
	for i := range counts {
		if counts[i] == 0 {
			continue
		}
		for j := i + 1; j < len(counts); j++ {
			if counts[j] == 0 {
				continue
			}
			if displ[i] < displ[j]+counts[j] && displ[j] < displ[i]+counts[i] {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// Extents returns, in elements, rank r's input and output sizes: SendSize
// and RecvSize where given, otherwise the end of its last block.
func (c *Counts) Extents(r int) (in, out int64) {
	for p := range c.Send[r] {
		in = max(in, c.SendDispls[r][p]+c.Send[r][p])
		out = max(out, c.RecvDispls[r][p]+c.Recv[r][p])
	}
	if c.SendSize != nil {
		in = c.SendSize[r]
	}
	if c.RecvSize != nil {
		out = c.RecvSize[r]
	}
	return in, out
}

// Total returns the number of elements all ranks send.
func (c *Counts) Total() int64 {
	var t int64
	for _, row := range c.Send {
		for _, x := range row {
			t += x
		}
	}
	return t
}

// countsFile is the JSON form of a counts file.
type countsFile struct {
	Counts     [][]int64 `json:"counts"`
	SendDispls [][]int64 `json:"send_displs"`
	RecvDispls [][]int64 `json:"recv_displs"`
	SendSize   []int64   `json:"send_size"`
	RecvSize   []int64   `json:"recv_size"`
}

// ParseCounts reads a counts file (docs/cli.md, run --counts): either a
// JSON object {"counts": [[...]], "send_displs": ..., "recv_displs": ...,
// "send_size": [...], "recv_size": [...]} (only counts required) or a
// whitespace matrix, one row per source rank, counts[src][dst] in
// elements, '#' starting a comment. name is used in errors.
func ParseCounts(name string, data []byte) (*Counts, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if key, ok := duplicateKey(trimmed); ok {
			return nil, &CountsError{Source: name, Field: key, Err: ErrCountsSyntax, Msg: "the key is given twice"}
		}
		var f countsFile
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, &CountsError{Source: name, Err: ErrCountsSyntax, Msg: err.Error()}
		}
		if f.Counts == nil {
			return nil, &CountsError{Source: name, Field: "counts", Err: ErrCountsSyntax, Msg: "missing: the object needs a \"counts\" matrix"}
		}
		for r, row := range f.Counts {
			if len(row) != len(f.Counts) {
				return nil, &CountsError{Source: name, Field: fmt.Sprintf("counts[%d]", r), Err: ErrCountsShape, Msg: fmt.Sprintf("%d entries, want %d (a square matrix)", len(row), len(f.Counts))}
			}
		}
		if err := checkSums(name, f.Counts); err != nil {
			return nil, err
		}
		c := MatrixCounts(f.Counts)
		if f.SendDispls != nil {
			c.SendDispls = f.SendDispls
		}
		if f.RecvDispls != nil {
			c.RecvDispls = f.RecvDispls
		}
		c.SendSize, c.RecvSize = f.SendSize, f.RecvSize
		return c, nil
	}
	var m [][]int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		row := make([]int64, len(fields))
		for i, f := range fields {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, &CountsError{Source: fmt.Sprintf("%s:%d", name, line), Field: fmt.Sprintf("column %d", i+1), Err: ErrCountsSyntax, Msg: fmt.Sprintf("%q is not an integer count", f)}
			}
			row[i] = v
		}
		if len(m) > 0 && len(row) != len(m[0]) {
			return nil, &CountsError{Source: fmt.Sprintf("%s:%d", name, line), Err: ErrCountsShape, Msg: fmt.Sprintf("%d entries, but the first row has %d", len(row), len(m[0]))}
		}
		m = append(m, row)
	}
	if err := sc.Err(); err != nil {
		return nil, &CountsError{Source: name, Err: ErrCountsSyntax, Msg: err.Error()}
	}
	if len(m) == 0 {
		return nil, &CountsError{Source: name, Err: ErrCountsShape, Msg: "no rows: want one row per source rank"}
	}
	if len(m) != len(m[0]) {
		return nil, &CountsError{Source: name, Err: ErrCountsShape, Msg: fmt.Sprintf("%d rows of %d entries: want a square matrix counts[src][dst]", len(m), len(m[0]))}
	}
	if err := checkSums(name, m); err != nil {
		return nil, err
	}
	return MatrixCounts(m), nil
}

// checkSums refuses a square matrix whose rows or columns sum past what
// an int64 holds: their packed displacements would overflow.
func checkSums(name string, m [][]int64) error {
	n := len(m)
	for r := range n {
		for _, col := range []bool{false, true} {
			var s int64
			for p := range n {
				x := m[r][p]
				if col {
					x = m[p][r]
				}
				if x < 0 {
					continue // Validate names it
				}
				if s > math.MaxInt64-x {
					field := fmt.Sprintf("counts[%d]", r)
					what := fmt.Sprintf("rank %d sends", r)
					if col {
						field = fmt.Sprintf("counts[*][%d]", r)
						what = fmt.Sprintf("rank %d receives", r)
					}
					return &CountsError{Source: name, Field: field, Err: ErrCountsBounds, Msg: fmt.Sprintf("%s more than 2^63-1 elements in all: the counts' sum overflows", what)}
				}
				s += x
			}
		}
	}
	return nil
}

// duplicateKey finds a key given twice in the JSON object data (which
// encoding/json would take the last value of). ok is false when there is
// none or data does not parse (the decoder then says why).
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := t.(string)
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// GeneratorNames are the counts generators of CountsFor.
func GeneratorNames() []string { return []string{"uniform", "random", "moe"} }

// IsGeneratorSpec reports whether spec names a generator ("uniform",
// "random:seed=3", ...) rather than a file.
func IsGeneratorSpec(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	for _, g := range GeneratorNames() {
		if name == g {
			return true
		}
	}
	return false
}

// MaxCountsBytes bounds the size of a counts file: a 4096-rank matrix
// of six-digit counts is about 117 MB.
const MaxCountsBytes = 256 << 20

// CountsFor returns the counts of spec for n ranks: a generator spec
// (IsGeneratorSpec) or the name of a counts file.
//
//   - uniform[:count=C]: C elements (default 1024) from every rank to
//     every rank;
//   - random[:seed=S,max=M,skew=K]: counts drawn uniformly from [0, M]
//     (default 4096) and scaled by (1+d)^-K for the d-th peer after the
//     sender (default skew 0: no skew);
//   - moe[:experts=E,topk=K,tokens=T,hidden=H,seed=S,skew=Z]: T tokens
//     per rank (default 1024), each routed to K distinct experts (default
//     2) of E (default 2n), chosen with popularity (1+e)^-Z (default 1);
//     expert e lives on rank e*n/E; every routed token sends H elements
//     (default 64).
func CountsFor(spec string, n int) (*Counts, error) {
	if !IsGeneratorSpec(spec) {
		data, err := infile.Read(spec, "a counts file", MaxCountsBytes)
		if errors.Is(err, infile.ErrNotRegular) || errors.Is(err, infile.ErrTooLarge) || errors.Is(err, infile.ErrLinkLoop) {
			return nil, err // it names the file and what is wrong
		}
		if err != nil {
			return nil, &CountsError{Source: spec, Err: ErrCountsSyntax, Msg: fmt.Sprintf("not a generator (%s) and not a readable file: %v", strings.Join(GeneratorNames(), ", "), err)}
		}
		return ParseCounts(spec, data)
	}
	name, args, _ := strings.Cut(spec, ":")
	kv := map[string]string{}
	if args != "" {
		for _, a := range strings.Split(args, ",") {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				return nil, &CountsError{Source: spec, Err: ErrCountsSyntax, Msg: fmt.Sprintf("%q: want key=value", a)}
			}
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	g := genArgs{spec: spec, kv: kv}
	var m [][]int64
	switch name {
	case "uniform":
		count := g.int("count", 1024)
		if g.err == nil {
			m = UniformMatrix(n, count)
		}
	case "random":
		seed, mx, skew := g.int("seed", 1), g.int("max", 4096), g.float("skew", 0)
		if g.err == nil {
			m = RandomMatrix(n, uint64(seed), mx, skew)
		}
	case "moe":
		e := MoE{Experts: int(g.int("experts", int64(2*n))), TopK: int(g.int("topk", 2)), Tokens: g.int("tokens", 1024),
			Hidden: g.int("hidden", 64), Seed: uint64(g.int("seed", 1)), Skew: g.float("skew", 1)}
		if g.err == nil {
			m, g.err = e.Matrix(n)
			if g.err != nil {
				g.err = &CountsError{Source: spec, Err: ErrCountsSyntax, Msg: g.err.Error()}
			}
		}
	}
	for k := range kv {
		if !g.used[k] && g.err == nil {
			g.err = &CountsError{Source: spec, Err: ErrCountsSyntax, Msg: fmt.Sprintf("unknown parameter %q of generator %s", k, name)}
		}
	}
	if g.err != nil {
		return nil, g.err
	}
	return MatrixCounts(m), nil
}

// genArgs reads a generator's key=value parameters.
type genArgs struct {
	spec string
	kv   map[string]string
	used map[string]bool
	err  error
}

func (g *genArgs) mark(k string) (string, bool) {
	if g.used == nil {
		g.used = map[string]bool{}
	}
	g.used[k] = true
	v, ok := g.kv[k]
	return v, ok
}

func (g *genArgs) int(k string, def int64) int64 {
	v, ok := g.mark(k)
	if !ok || g.err != nil {
		return def
	}
	x, err := strconv.ParseInt(v, 10, 64)
	if err != nil || x < 0 {
		g.err = &CountsError{Source: g.spec, Field: k, Err: ErrCountsSyntax, Msg: fmt.Sprintf("%q: want a non-negative integer", v)}
	}
	return x
}

func (g *genArgs) float(k string, def float64) float64 {
	v, ok := g.mark(k)
	if !ok || g.err != nil {
		return def
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		g.err = &CountsError{Source: g.spec, Field: k, Err: ErrCountsSyntax, Msg: fmt.Sprintf("%q: want a non-negative number", v)}
	}
	return x
}

// UniformMatrix is count elements between every pair of ranks.
func UniformMatrix(n int, count int64) [][]int64 {
	m := make([][]int64, n)
	for r := range m {
		m[r] = make([]int64, n)
		for p := range m[r] {
			m[r][p] = count
		}
	}
	return m
}

// RandomMatrix draws counts uniformly from [0, maxCount] with a seeded
// generator and scales the d-th peer after each sender by (1+d)^-skew.
func RandomMatrix(n int, seed uint64, maxCount int64, skew float64) [][]int64 {
	rng := rand.New(rand.NewPCG(seed, 0x616c6c746f616c6c))
	m := make([][]int64, n)
	for r := range m {
		m[r] = make([]int64, n)
		for p := range m[r] {
			d := (p - r + n) % n
			x := rng.Int64N(maxCount + 1)
			m[r][p] = int64(float64(x) * math.Pow(1+float64(d), -skew))
		}
	}
	return m
}

// MoE describes mixture-of-experts routing: every rank holds Tokens
// tokens, each routed to TopK distinct experts of Experts, expert e on
// rank e*n/Experts; a routed token sends Hidden elements. Expert e is
// chosen with weight (1+e)^-Skew, so low experts are popular.
type MoE struct {
	Experts, TopK  int
	Tokens, Hidden int64
	Seed           uint64
	Skew           float64
}

// Matrix returns the counts matrix of the routing on n ranks.
func (e MoE) Matrix(n int) ([][]int64, error) {
	switch {
	case e.Experts < 1:
		return nil, fmt.Errorf("experts = %d: want at least 1", e.Experts)
	case e.TopK < 1 || e.TopK > e.Experts:
		return nil, fmt.Errorf("topk = %d: want 1 to experts (%d)", e.TopK, e.Experts)
	case e.Tokens > 1<<24:
		return nil, fmt.Errorf("tokens = %d: at most %d per rank", e.Tokens, 1<<24)
	}
	weights := make([]float64, e.Experts)
	for i := range weights {
		weights[i] = math.Pow(1+float64(i), -e.Skew)
	}
	m := make([][]int64, n)
	picked := make([]bool, e.Experts)
	for r := range m {
		m[r] = make([]int64, n)
		rng := rand.New(rand.NewPCG(e.Seed, uint64(r)))
		for range e.Tokens {
			clear(picked)
			total := 0.0
			for _, w := range weights {
				total += w
			}
			left := total
			for range e.TopK {
				x := rng.Float64() * left
				pick := -1
				for i, w := range weights {
					if picked[i] {
						continue
					}
					pick = i
					if x < w {
						break
					}
					x -= w
				}
				picked[pick] = true
				left -= weights[pick]
				m[r][pick*n/e.Experts] += e.Hidden
			}
		}
	}
	return m, nil
}
