package emit

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// ErrInvalid is wrapped by the errors of Lower, Write and Marshal when the
// program holds something the plan format cannot express (a nil GPU,
// thread block or op, an unknown op kind, a barrier without its
// BarrierInfo, a switch op without its chunk or channel index, a nil
// semaphore value, a header number or semaphore value that does not fit
// the plan's field, a negative index). The program is
// checked before the first byte is written, so an invalid program produces
// no output.
var ErrInvalid = errors.New("invalid program")

// Defaults written for nil header values, as the reference DSL's
// CollectiveProgram defaults them.
const (
	DefaultNumThreadsPerBlock = "1024"
	DefaultBufferAlignment    = "16"
	DefaultMinMessageSize     = "0"
	DefaultMaxMessageSize     = "18446744073709551615" // 2^64-1
)

// Write writes p to w as the MSCCL++ execution plan text followed by one
// newline: the bytes `print(JSON())` writes in the reference DSL, which
// are plan.Encode's of Lower(p), lowered and written one rank at a time
// (plan.EncodeEach). The output is streamed in 64 KiB pieces,
// so w needs no buffering of its own. p must be the program after the
// passes ran; Write does not modify it. An invalid program (see
// ErrInvalid) is reported before anything is written; a write error stops
// the output and is returned wrapped.
func Write(w io.Writer, p *ir.Program) error {
	head, gpu, err := lowerEach(p)
	if err != nil {
		return err
	}
	if err := plan.EncodeEach(w, head, len(p.GPUs), gpu); err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	return nil
}

// Marshal returns the plan text of p followed by one newline, the same
// bytes Write writes.
func Marshal(p *ir.Program) ([]byte, error) {
	var c collector
	if err := Write(&c, p); err != nil {
		return nil, err
	}
	return c.join(), nil
}

// MarshalNoNewline returns the plan text of p without the trailing
// newline: the string the DSL's JSON() builtin returns.
func MarshalNoNewline(p *ir.Program) ([]byte, error) {
	b, err := Marshal(p)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// collector keeps the pieces Write streams and joins them into one slice
// of the exact size, so that Marshal never regrows a large buffer.
type collector struct {
	pieces [][]byte
	n      int
}

// Write keeps a copy of b (the encoder reuses its buffer).
func (c *collector) Write(b []byte) (int, error) {
	c.pieces = append(c.pieces, bytes.Clone(b))
	c.n += len(b)
	return len(b), nil
}

// join returns the concatenated pieces.
func (c *collector) join() []byte {
	if len(c.pieces) == 1 {
		return c.pieces[0]
	}
	out := make([]byte, 0, c.n)
	for _, b := range c.pieces {
		out = append(out, b...)
	}
	return out
}
