package harness

import (
	"fmt"
	"io"
)

// Sweep returns the sizes of an nccl-tests sweep by factor f (-b first -e
// last -f f): first, first·f, ... up to last, without overflowing; a
// first of 0 gives 0 alone. f must be at least 2.
func Sweep(first, last, f uint64) []uint64 {
	var sizes []uint64
	for s := first; s <= last; s *= f {
		sizes = append(sizes, s)
		if s == 0 || s > last/f {
			break
		}
	}
	return sizes
}

// StepSweep returns the sizes of an nccl-tests sweep by steps of step
// bytes (-b first -e last -i step): first, first+step, ... up to last,
// without overflowing. step must be positive.
func StepSweep(first, last, step uint64) []uint64 {
	var sizes []uint64
	for s := first; s <= last; s += step {
		sizes = append(sizes, s)
		if s > last-step {
			break
		}
	}
	return sizes
}

// WriteElements writes, for each rank of r with wrong data, its first
// wrong elements: byte offset, chunk (of chunkBytes; none when 0),
// expected and actual values, and the ops that write that byte (with
// their .star positions).
func (r *WrongReport) WriteElements(w io.Writer, chunkBytes uint64) {
	for _, rw := range r.Ranks {
		fmt.Fprintf(w, "  rank %d: %d wrong element(s)\n", rw.Rank, rw.Wrong)
		for _, e := range rw.Elements {
			chunk := ""
			if chunkBytes > 0 {
				chunk = fmt.Sprintf(", chunk %d", e.Offset/chunkBytes)
			}
			fmt.Fprintf(w, "    output[%d]%s: want %g, got %g\n", e.Offset, chunk, e.Want, e.Got)
			if len(e.Writers) == 0 {
				fmt.Fprintf(w, "      no op writes this byte (an op's chunk index or peer may be off)\n")
			}
			for _, s := range e.Writers {
				fmt.Fprintf(w, "      written by %s\n", s)
			}
		}
	}
}
