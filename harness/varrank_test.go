package harness

import (
	"errors"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

// TestCheckVarRank checks each rank's own output, as a rank process does,
// against CheckVar over every rank: the direct alltoallv passes on every
// rank, and a flipped byte (in a block, or outside every block) fails
// exactly that rank.
func TestCheckVarRank(t *testing.T) {
	c := executor.MatrixCounts(executor.RandomMatrix(4, 3, 50, 0))
	const elem, seq = 2, 5
	bufs := directVar(c, elem, seq)
	if n, err := CheckVar(bufs, c, elem, seq); n != 0 || err != nil {
		t.Fatalf("CheckVar of the direct alltoallv: %d wrong, %v", n, err)
	}
	for r := range bufs {
		mine := executor.RankBuffers{Input: make([]byte, len(bufs[r].Input)), Output: make([]byte, len(bufs[r].Output))}
		FillVarRank(mine, r, seq)
		if string(mine.Input) != string(bufs[r].Input) {
			t.Fatalf("rank %d: FillVarRank's input differs from FillVar's", r)
		}
		if n, err := CheckVarRank(bufs[r].Output, c, r, elem, seq); n != 0 || err != nil {
			t.Fatalf("rank %d: %d wrong, %v", r, n, err)
		}
		if len(bufs[r].Output) == 0 {
			continue
		}
		for _, off := range []int{0, len(bufs[r].Output) - 1} {
			bufs[r].Output[off] ^= 0x40
			n, err := CheckVarRank(bufs[r].Output, c, r, elem, seq)
			var m *VarMismatch
			if n != 1 || !errors.As(err, &m) || m.Rank != r || m.Offset != int64(off) {
				t.Errorf("rank %d, byte %d flipped: %d wrong, %v", r, off, n, err)
			}
			bufs[r].Output[off] ^= 0x40
		}
	}
}

// TestCheckVarRankFlips flips several bytes of each rank's output, in
// blocks and between them: CheckVarRank counts each and names the
// lowest; and fillVarAt makes any part of an input alone, as the whole
// is made.
func TestCheckVarRankFlips(t *testing.T) {
	c := executor.MatrixCounts(executor.RandomMatrix(5, 7, 300, 2))
	const elem, seq = 4, 3
	bufs := directVar(c, elem, seq)
	for r := range bufs {
		in := bufs[r].Input
		for _, part := range [][2]int{{0, len(in)}, {3, 17}, {8, 8}, {5, 1}, {len(in) / 3, len(in) / 2}} {
			lo, n := part[0], min(part[1], len(in)-part[0])
			if n <= 0 {
				continue
			}
			got := make([]byte, n)
			fillVarAt(got, r, seq, int64(lo))
			if string(got) != string(in[lo:lo+n]) {
				t.Errorf("rank %d: fillVarAt(%d bytes at %d) differs from the whole input's", r, n, lo)
			}
		}
		out := bufs[r].Output
		if len(out) < 10 {
			continue
		}
		offs := []int{len(out) - 1, len(out) / 2, len(out) / 3, 7, 1}
		for _, o := range offs {
			out[o] ^= 0x11
		}
		n, err := CheckVarRank(out, c, r, elem, seq)
		var m *VarMismatch
		if n != uint64(len(offs)) || !errors.As(err, &m) || m.Offset != 1 || m.Wrong != n {
			t.Errorf("rank %d, %d bytes flipped: %d wrong, %v", r, len(offs), n, err)
		}
		for _, o := range offs {
			out[o] ^= 0x11
		}
	}
}

// directVar returns every rank's buffers for counts c after the direct
// alltoallv of iteration seq's inputs.
func directVar(c *executor.Counts, elem, seq int) []executor.RankBuffers {
	bufs := VarBuffers(c, elem)
	FillVar(bufs, seq)
	inputs := make([][]byte, len(bufs))
	outputs := make([][]byte, len(bufs))
	for r := range bufs {
		inputs[r], outputs[r] = bufs[r].Input, bufs[r].Output
	}
	DirectAllToAllV(inputs, outputs, c, elem)
	return bufs
}
