package starlib

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/mscclgo/mscclgo/plan"
)

// Collective is a collective value: AllGather(...), AllReduce(...), ...
// It fixes the plan's "collective" and "inplace" keys and the chunk count
// of every rank's input and output buffer.
type Collective struct {
	kind        string // the constructor name
	name        string // plan "collective"
	numRanks    int
	chunkFactor int
	inplace     bool
	inputSize   int // TestCollective only
	outputSize  int
}

var _ starlark.HasAttrs = (*Collective)(nil)

// String returns a constructor-like form.
func (c *Collective) String() string {
	if c.kind == "TestCollective" {
		return fmt.Sprintf("TestCollective(%d, %d, %d)", c.numRanks, c.inputSize, c.outputSize)
	}
	if c.kind == "AllToAllV" {
		return fmt.Sprintf("AllToAllV(%d, %d)", c.numRanks, c.chunkFactor)
	}
	return fmt.Sprintf("%s(%d, %d, %s)", c.kind, c.numRanks, c.chunkFactor, starlark.Bool(c.inplace))
}

// Type returns the constructor name.
func (c *Collective) Type() string { return c.kind }

// Freeze does nothing: collectives are immutable.
func (c *Collective) Freeze() {}

// Truth is true.
func (c *Collective) Truth() starlark.Bool { return starlark.True }

// Hash fails.
func (c *Collective) Hash() (uint32, error) { return noHash(c.kind) }

// Attr returns the collective's attributes.
func (c *Collective) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(c.name), nil
	case "num_ranks":
		return starlark.MakeInt(c.numRanks), nil
	case "chunk_factor":
		return starlark.MakeInt(c.chunkFactor), nil
	case "inplace":
		return starlark.Bool(c.inplace), nil
	}
	if c.kind == "TestCollective" {
		switch name {
		case "input_size":
			return starlark.MakeInt(c.inputSize), nil
		case "output_size":
			return starlark.MakeInt(c.outputSize), nil
		}
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (c *Collective) AttrNames() []string {
	if c.kind == "TestCollective" {
		return []string{"chunk_factor", "inplace", "input_size", "name", "num_ranks", "output_size"}
	}
	return []string{"chunk_factor", "inplace", "name", "num_ranks"}
}

// chunks returns the input and output chunk counts per rank.
func (c *Collective) chunks() (in, out int) {
	n, f := c.numRanks, c.chunkFactor
	switch c.kind {
	case "AllGather":
		return f, n * f
	case "AllReduce", "AllToAll", "AllToAllV":
		return n * f, n * f
	case "ReduceScatter":
		return n * f, f
	case "SendRecv":
		return f, f
	}
	return c.inputSize, c.outputSize
}

// collectiveBuiltin returns the constructor named kind, whose plan name is
// name.
func collectiveBuiltin(kind, name string) builtinFn {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var numRanks, factor int
		var inplace bool
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "num_ranks", &numRanks, "chunk_factor", &factor, "inplace", &inplace); err != nil {
			return nil, err
		}
		if numRanks < 1 {
			return nil, fmt.Errorf("%s: num_ranks must be positive, got %d", b.Name(), numRanks)
		}
		if numRanks > MaxRanks {
			return nil, fmt.Errorf("%s: num_ranks %d exceeds the limit of %d ranks", b.Name(), numRanks, MaxRanks)
		}
		if factor < 0 {
			return nil, fmt.Errorf("%s: chunk_factor must be non-negative, got %d", b.Name(), factor)
		}
		if factor > MaxChunks/numRanks {
			return nil, fmt.Errorf("%s: chunk_factor %d gives %d ranks × %d chunks, over the limit of %d chunks in a buffer", b.Name(), factor, numRanks, factor, MaxChunks)
		}
		return &Collective{kind: kind, name: name, numRanks: numRanks, chunkFactor: factor, inplace: inplace}, nil
	}
}

func testCollective(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var numRanks, in, out int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "num_ranks", &numRanks, "input_size", &in, "output_size", &out); err != nil {
		return nil, err
	}
	if numRanks < 1 {
		return nil, fmt.Errorf("%s: num_ranks must be positive, got %d", b.Name(), numRanks)
	}
	if numRanks > MaxRanks {
		return nil, fmt.Errorf("%s: num_ranks %d exceeds the limit of %d ranks", b.Name(), numRanks, MaxRanks)
	}
	if in < 0 || out < 0 {
		return nil, fmt.Errorf("%s: buffer sizes must be non-negative, got %d and %d", b.Name(), in, out)
	}
	if in > MaxChunks || out > MaxChunks {
		return nil, fmt.Errorf("%s: buffer sizes %d and %d: the limit is %d chunks in a buffer", b.Name(), in, out, MaxChunks)
	}
	return &Collective{kind: "TestCollective", name: plan.TestCollective, numRanks: numRanks, chunkFactor: 1, inputSize: in, outputSize: out}, nil
}

// allToAllVBuiltin implements AllToAllV(num_ranks, chunk_factor=1): the
// all-to-all whose per-peer block sizes are given per call (the counts
// and displacements of MPI_Alltoallv). Input chunk p*f+j is piece j of the
// block sent to rank p, output chunk p*f+j piece j of the block received
// from rank p; the executor sizes them per call (docs/language.md §5.1).
func allToAllVBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var numRanks int
	factor := 1
	inplace := false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "num_ranks", &numRanks, "chunk_factor?", &factor, "inplace?", &inplace); err != nil {
		return nil, err
	}
	if numRanks < 1 {
		return nil, fmt.Errorf("%s: num_ranks must be positive, got %d", b.Name(), numRanks)
	}
	if numRanks > MaxRanks {
		return nil, fmt.Errorf("%s: num_ranks %d exceeds the limit of %d ranks", b.Name(), numRanks, MaxRanks)
	}
	if factor < 1 {
		return nil, fmt.Errorf("%s: chunk_factor must be at least 1 (the pieces of each block), got %d", b.Name(), factor)
	}
	if factor > MaxChunks/numRanks {
		return nil, fmt.Errorf("%s: chunk_factor %d gives %d ranks × %d chunks, over the limit of %d chunks in a buffer", b.Name(), factor, numRanks, factor, MaxChunks)
	}
	if inplace {
		return nil, fmt.Errorf("%s: inplace must be False: in place, a block could be overwritten before it is sent, and its send and receive displacements differ", b.Name())
	}
	return &Collective{kind: "AllToAllV", name: plan.AllToAllVCollective, numRanks: numRanks, chunkFactor: factor}, nil
}
