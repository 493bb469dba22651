package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/ir"
)

// Buffer is a rank's input or output buffer, or a scratch allocation made
// by Buffer(rank, size). Slicing it, buf[a:b], yields a Chunk.
type Buffer struct {
	prog   *Program
	rank   int
	btype  ir.BufferType
	offset int
	size   int // the end index, as in the reference (offset + length)
}

var _ starlark.HasAttrs = (*Buffer)(nil)

// String returns e.g. <Buffer rank=0 scratch [2:5]>.
func (b *Buffer) String() string {
	return fmt.Sprintf("<Buffer rank=%d %s [%d:%d]>", b.rank, b.btype.Name(), b.offset, b.size)
}

// Type returns "Buffer".
func (b *Buffer) Type() string { return "Buffer" }

// Freeze does nothing: a buffer is immutable.
func (b *Buffer) Freeze() {}

// Truth is true.
func (b *Buffer) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (b *Buffer) Hash() (uint32, error) { return noHash("Buffer") }

// Attr returns rank, buffer_type, offset or size.
func (b *Buffer) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rank":
		return starlark.MakeInt(b.rank), nil
	case "buffer_type":
		return bufferTypeEnum.members[b.btype], nil
	case "offset":
		return starlark.MakeInt(b.offset), nil
	case "size":
		return starlark.MakeInt(b.size), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (b *Buffer) AttrNames() []string { return []string{"buffer_type", "offset", "rank", "size"} }

// slice implements buf[lo:hi:step] with the reference's rules: no negative
// bounds, no clamping, step 1 only.
func (b *Buffer) slice(lo, hi, step starlark.Value) (starlark.Value, error) {
	length := b.size - b.offset
	if step != starlark.None {
		s, err := toInt("slice", "step", step)
		if err != nil {
			return nil, err
		}
		if s != 1 {
			return nil, fmt.Errorf("buffer slice: step must be 1, got %d", s)
		}
	}
	start, stop := 0, length
	var err error
	if lo != starlark.None {
		if start, err = toInt("buffer slice", "start", lo); err != nil {
			return nil, err
		}
	}
	if hi != starlark.None {
		if stop, err = toInt("buffer slice", "stop", hi); err != nil {
			return nil, err
		}
	}
	if start < 0 || stop < 0 {
		return nil, fmt.Errorf("buffer slice: negative bound in [%d:%d]", start, stop)
	}
	if start > stop {
		return nil, fmt.Errorf("buffer slice: start %d is greater than stop %d", start, stop)
	}
	if stop > length {
		return nil, fmt.Errorf("buffer slice: [%d:%d] out of bounds of %s of length %d", start, stop, b.btype.Name(), length)
	}
	return newChunk(b.prog, ir.Chunk{Rank: b.rank, Buffer: b.btype, Index: b.offset + start, Size: stop - start}), nil
}

// sliceBuiltin is the target of every slice expression: the loader rewrites
// x[a:b:c] into __slice__(x, a, b, c) so that buffer slices see their bounds
// before Starlark's normalisation. Other values slice as usual.
func sliceBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 4 || len(kwargs) != 0 {
		return nil, fmt.Errorf("internal error: bad slice call")
	}
	if buf, ok := args[0].(*Buffer); ok {
		return buf.slice(args[1], args[2], args[3])
	}
	return genericSlice(args[0], args[1], args[2], args[3])
}

// genericSlice slices a non-buffer value exactly as Starlark does.
func genericSlice(x, lo, hi, stepV starlark.Value) (starlark.Value, error) {
	s, ok := x.(starlark.Sliceable)
	if !ok {
		return nil, fmt.Errorf("invalid slice operand %s", x.Type())
	}
	n := s.Len()
	step := 1
	if stepV != starlark.None {
		var err error
		if step, err = starlark.AsInt32(stepV); err != nil {
			return nil, fmt.Errorf("invalid slice step: %s", err)
		}
		if step == 0 {
			return nil, fmt.Errorf("zero is not a valid slice step")
		}
	}
	index := func(v starlark.Value, def int) (int, error) {
		if v == starlark.None {
			return def, nil
		}
		i, err := starlark.AsInt32(v)
		if err != nil {
			return 0, err
		}
		if i < 0 {
			i += n
		}
		return i, nil
	}
	clamp := func(i, lo, hi int) int {
		if i < lo {
			return lo
		}
		if i > hi {
			return hi
		}
		return i
	}
	var start, end int
	var err error
	if step > 0 {
		if start, err = index(lo, 0); err != nil {
			return nil, fmt.Errorf("invalid start index: %s", err)
		}
		if end, err = index(hi, n); err != nil {
			return nil, fmt.Errorf("invalid end index: %s", err)
		}
		start, end = clamp(start, 0, n), clamp(end, 0, n)
		if end < start {
			end = start
		}
	} else {
		if start, err = index(lo, n-1); err != nil {
			return nil, fmt.Errorf("invalid start index: %s", err)
		}
		if start >= n {
			start = n - 1
		}
		if end, err = index(hi, -1); err != nil {
			return nil, fmt.Errorf("invalid end index: %s", err)
		}
		if end < -1 {
			end = -1
		}
		if start < end {
			start = end
		}
	}
	return s.Slice(start, end, step), nil
}

// Chunk is a slice of a buffer: (rank, buffer type, index, size).
type Chunk struct {
	prog *Program
	// c points at val. Switch ops keep c itself, as the reference keeps
	// the user's chunk object.
	c   *ir.Chunk
	val ir.Chunk
}

func newChunk(p *Program, v ir.Chunk) *Chunk {
	c := &Chunk{prog: p, val: v}
	c.c = &c.val
	return c
}

var (
	_ starlark.HasAttrs   = (*Chunk)(nil)
	_ starlark.Comparable = (*Chunk)(nil)
)

// String returns e.g. <Chunk rank=0 input[2:3]>.
func (c *Chunk) String() string {
	return fmt.Sprintf("<Chunk rank=%d %s[%d:%d]>", c.c.Rank, c.c.Buffer.Name(), c.c.Index, c.c.Index+c.c.Size)
}

// Type returns "Chunk".
func (c *Chunk) Type() string { return "Chunk" }

// Freeze does nothing.
func (c *Chunk) Freeze() {}

// Truth is true.
func (c *Chunk) Truth() starlark.Bool { return starlark.True }

// Hash hashes the fields.
func (c *Chunk) Hash() (uint32, error) {
	x := *c.c
	return uint32(x.Rank)*0x9e3779b1 ^ uint32(x.Buffer)<<24 ^ uint32(x.Index)*31 ^ uint32(x.Size), nil
}

// CompareSameType compares chunks field by field (== and != only).
func (c *Chunk) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	eq := *c.c == *y.(*Chunk).c
	switch op {
	case syntax.EQL:
		return eq, nil
	case syntax.NEQ:
		return !eq, nil
	}
	return false, fmt.Errorf("Chunk values are not ordered")
}

// Attr returns rank, buffer, index or size.
func (c *Chunk) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rank":
		return starlark.MakeInt(c.c.Rank), nil
	case "buffer":
		return bufferTypeEnum.members[c.c.Buffer], nil
	case "index":
		return starlark.MakeInt(c.c.Index), nil
	case "size":
		return starlark.MakeInt(c.c.Size), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (c *Chunk) AttrNames() []string { return []string{"buffer", "index", "rank", "size"} }

// local returns the chunk as a local operand.
func (c *Chunk) local() ir.Ref {
	return ir.Ref{Buffer: c.c.Buffer, Index: c.c.Index, Size: c.c.Size}
}

// toChunk converts argument v of fn to a chunk of program p.
func toChunk(fn, param string, v starlark.Value, p *Program) (*Chunk, error) {
	c, ok := v.(*Chunk)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter %s: got %s, want Chunk", fn, param, v.Type())
	}
	if err := sameProgram(fn, p, c.prog, c); err != nil {
		return nil, err
	}
	return c, nil
}

// twoChunks converts the dst_chunk and src_chunk arguments of fn.
func twoChunks(fn string, p *Program, dstV, srcV starlark.Value) (dst, src *Chunk, err error) {
	if dst, err = toChunk(fn, "dst_chunk", dstV, p); err != nil {
		return nil, nil, err
	}
	if src, err = toChunk(fn, "src_chunk", srcV, p); err != nil {
		return nil, nil, err
	}
	return dst, src, nil
}

// scratchBuffer implements Buffer(rank, size): a scratch allocation.
func scratchBuffer(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rankV, sizeV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rank", &rankV, "size", &sizeV); err != nil {
		return nil, err
	}
	p, err := currentProgram(thread, b.Name())
	if err != nil {
		return nil, err
	}
	rank, err := p.rankArg(b.Name(), "rank", rankV)
	if err != nil {
		return nil, err
	}
	size, err := toNonNeg(b.Name(), "size", sizeV)
	if err != nil {
		return nil, err
	}
	g := p.IR.GPUs[rank]
	if size > MaxChunks-g.ScratchChunks {
		return nil, fmt.Errorf("%s: size %d makes rank %d's scratch %d chunks, over the limit of %d chunks in a buffer", b.Name(), size, rank, g.ScratchChunks+size, MaxChunks)
	}
	buf := &Buffer{prog: p, rank: rank, btype: ir.Scratch, offset: g.ScratchChunks, size: g.ScratchChunks + size}
	g.ScratchChunks += size
	return buf, nil
}

// rankArg converts v to a rank of p, rejecting negatives and ranks out of
// range.
func (p *Program) rankArg(fn, param string, v starlark.Value) (int, error) {
	r, err := toInt(fn, param, v)
	if err != nil {
		return 0, err
	}
	if r < 0 || r >= p.IR.NumRanks {
		return 0, fmt.Errorf("%s: %s %d out of range [0:%d] of program %q", fn, param, r, p.IR.NumRanks, p.IR.Name)
	}
	return r, nil
}
