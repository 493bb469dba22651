package harness

import (
	"encoding/binary"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
)

// This file holds the data side of alltoallv runs: buffers sized by the
// counts, a fill that makes every byte of every rank's input distinct, a
// direct all-to-all-v in Go, and the byte-by-byte check of a run against
// it.

// VarSentinel is the byte an alltoallv output is filled with before a
// launch: bytes outside every receive block must still hold it after.
const VarSentinel = 0xA5

// VarBuffers allocates every rank's input and output for counts c with
// elements of elem bytes (8-byte aligned, as LL packets need).
func VarBuffers(c *executor.Counts, elem int) []executor.RankBuffers {
	bufs := make([]executor.RankBuffers, c.Ranks())
	for r := range bufs {
		in, out := c.Extents(r)
		bufs[r] = executor.RankBuffers{Input: executor.AlignedBytes(uint64(in) * uint64(elem)), Output: executor.AlignedBytes(uint64(out) * uint64(elem))}
	}
	return bufs
}

// FillVar fills every rank's input for iteration seq with bytes that
// differ between ranks, offsets and iterations, and every output with
// VarSentinel.
func FillVar(bufs []executor.RankBuffers, seq int) {
	for r := range bufs {
		fillVarInput(bufs[r].Input, r, seq)
		out := bufs[r].Output
		for i := range out {
			out[i] = VarSentinel
		}
	}
}

func fillVarInput(b []byte, rank, seq int) { fillVarAt(b, rank, seq, 0) }

// fillVarAt writes bytes [off, off+len(b)) of rank's input for iteration
// seq into b: the input is the little-endian splitmix64 words of
// x+0, x+8, x+16, ... for x from rank and seq, so that any part of it
// can be made alone.
func fillVarAt(b []byte, rank, seq int, off int64) {
	x := uint64(rank)<<48 ^ uint64(seq)<<32 ^ 0x9e3779b97f4a7c15
	var w [8]byte
	for i := 0; i < len(b); {
		pos := off + int64(i)
		base := pos &^ 7
		if pos == base && i+8 <= len(b) {
			binary.LittleEndian.PutUint64(b[i:], mix(x+uint64(base)))
			i += 8
			continue
		}
		binary.LittleEndian.PutUint64(w[:], mix(x+uint64(base)))
		i += copy(b[i:], w[pos-base:])
	}
}

// mix is the splitmix64 finaliser.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// DirectAllToAllV computes the alltoallv of inputs into outputs in Go:
// rank r's block from p is rank p's block to r.
func DirectAllToAllV(inputs, outputs [][]byte, c *executor.Counts, elem int) {
	e := int64(elem)
	for r := range outputs {
		for p := range inputs {
			n := c.Recv[r][p] * e
			if n == 0 {
				continue
			}
			src := inputs[p][c.SendDispls[p][r]*e:][:n]
			copy(outputs[r][c.RecvDispls[r][p]*e:][:n], src)
		}
	}
}

// VarMismatch is the first wrong byte of an alltoallv check.
type VarMismatch struct {
	Rank   int
	Offset int64 // byte offset in the rank's output
	// Block is the sender whose block holds the byte, -1 outside every
	// block.
	Block     int
	Got, Want byte
	Wrong     uint64 // wrong bytes of this rank
}

func (m *VarMismatch) Error() string {
	where := "outside every receive block (must be left untouched)"
	if m.Block >= 0 {
		where = fmt.Sprintf("in the block from rank %d", m.Block)
	}
	return fmt.Sprintf("rank %d output byte %d %s: got %#02x, want %#02x (%d wrong bytes on this rank)", m.Rank, m.Offset, where, m.Got, m.Want, m.Wrong)
}

// CheckVar compares every byte of every rank's output with the direct
// alltoallv of the inputs (filled by FillVar for seq) and VarSentinel
// elsewhere. It returns the number of wrong bytes and the first mismatch.
func CheckVar(bufs []executor.RankBuffers, c *executor.Counts, elem, seq int) (uint64, error) {
	inputs := make([][]byte, len(bufs))
	want := make([][]byte, len(bufs))
	for r := range bufs {
		inputs[r] = make([]byte, len(bufs[r].Input))
		fillVarInput(inputs[r], r, seq)
		want[r] = make([]byte, len(bufs[r].Output))
		for i := range want[r] {
			want[r][i] = VarSentinel
		}
	}
	DirectAllToAllV(inputs, want, c, elem)
	var total uint64
	var first *VarMismatch
	for r := range bufs {
		got := bufs[r].Output
		var wrong uint64
		var firstR *VarMismatch
		for i := range got {
			if got[i] != want[r][i] {
				wrong++
				if firstR == nil {
					firstR = &VarMismatch{Rank: r, Offset: int64(i), Block: blockAt(c, r, int64(i), int64(elem)), Got: got[i], Want: want[r][i]}
				}
			}
		}
		if firstR != nil && first == nil {
			first = firstR
			first.Wrong = wrong
		}
		total += wrong
	}
	if first != nil {
		return total, first
	}
	return 0, nil
}

// blockAt returns the sender whose receive block of rank r holds byte
// off, or -1.
func blockAt(c *executor.Counts, r int, off, e int64) int {
	for p := range c.Recv[r] {
		lo := c.RecvDispls[r][p] * e
		if off >= lo && off < lo+c.Recv[r][p]*e {
			return p
		}
	}
	return -1
}
