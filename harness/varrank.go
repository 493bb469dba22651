package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
)

// This file is Run bound to a counts matrix as one rank of a job of one
// process per rank (`mscclgo run --counts` under a launcher): the rank
// fills its own input as FillVar fills it in a run of one process,
// launches its rank of the plan over the rank wire, checks its own
// output byte by byte, and every rank learns every rank's outcome after
// each launch (runRank, rank.go).

// VarRankLayout is the buffer layout of a rank session of inst, an
// alltoallv plan bound to counts: every rank's region holds the largest
// input and output of any rank (inst.Sizes), out of place, so that every
// rank's region has the same size; a rank uses the first bytes of each,
// as VarRankBuffers cuts them.
func VarRankLayout(inst *executor.Instance, n int, dt executor.Numeric) (*executor.BufferLayout, error) {
	// Sized afterwards: the per-rank extents need not divide among the
	// ranks as an alltoall's message does.
	l, err := executor.Layout("alltoallv", n, 0, dt, false)
	if err != nil {
		return nil, err
	}
	l.Size, l.Sizes = inst.Sizes.Input, inst.Sizes
	return l, nil
}

// VarRankBuffers cuts a rank session's buffers to rank's own extents
// under c.
func VarRankBuffers(b executor.RankBuffers, c *executor.Counts, rank, elem int) (executor.RankBuffers, error) {
	in, out := c.Extents(rank)
	ib, ob := uint64(in)*uint64(elem), uint64(out)*uint64(elem)
	if uint64(len(b.Input)) < ib || uint64(len(b.Output)) < ob {
		return b, fmt.Errorf("rank %d's buffers hold %d and %d bytes, its counts need %d and %d", rank, len(b.Input), len(b.Output), ib, ob)
	}
	return executor.RankBuffers{Input: b.Input[:ib:ib], Output: b.Output[:ob:ob]}, nil
}

// FillVarRank fills rank's input for iteration seq as FillVar does, and
// its output with VarSentinel.
func FillVarRank(b executor.RankBuffers, rank, seq int) {
	fillVarInput(b.Input, rank, seq)
	for i := range b.Output {
		b.Output[i] = VarSentinel
	}
}

// CheckVarRank is CheckVar for rank's output alone. It makes only the
// blocks rank receives (each from its sender's input, at the sender's
// displacement), not whole inputs, and compares a block at once where it
// is right; the bytes outside every block must hold VarSentinel.
func CheckVarRank(out []byte, c *executor.Counts, rank, elem, seq int) (uint64, error) {
	e := int64(elem)
	var wrong uint64
	var first *VarMismatch
	note := func(off int64, got, want byte) {
		wrong++
		if first == nil { // offsets come in increasing order
			first = &VarMismatch{Rank: rank, Offset: off, Block: blockAt(c, rank, off, e), Got: got, Want: want}
		}
	}
	// sentinel checks out[lo:hi], outside every block.
	sentinel := func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			if out[i] != VarSentinel {
				note(i, out[i], VarSentinel)
			}
		}
	}
	var want []byte
	pos := int64(0) // the blocks are in sender order, at increasing offsets
	for p := range c.Ranks() {
		n := c.Recv[rank][p] * e
		if n == 0 {
			continue
		}
		lo := c.RecvDispls[rank][p] * e
		if lo < pos || lo+n > int64(len(out)) {
			return 0, fmt.Errorf("check: rank %d's block from rank %d at bytes [%d, %d) overlaps another or passes its %d-byte output", rank, p, lo, lo+n, len(out))
		}
		sentinel(pos, lo)
		if int64(cap(want)) < n {
			want = make([]byte, n)
		}
		want = want[:n]
		fillVarAt(want, p, seq, c.SendDispls[p][rank]*e)
		got := out[lo : lo+n]
		if !bytes.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					note(lo+int64(i), got[i], want[i])
				}
			}
		}
		pos = lo + n
	}
	sentinel(pos, int64(len(out)))
	if first != nil {
		first.Wrong = wrong
		return wrong, first
	}
	return 0, nil
}

// countsData is a rank's share of a run bound to counts.
type countsData struct {
	bufs       executor.RankBuffers
	counts     *executor.Counts
	rank, elem int
}

func (d countsData) fill(seq int) error {
	FillVarRank(d.bufs, d.rank, seq)
	return nil
}

func (d countsData) check(seq int) (uint64, *wireWrong, error) {
	n, err := CheckVarRank(d.bufs.Output, d.counts, d.rank, d.elem, seq)
	var vm *VarMismatch
	if !errors.As(err, &vm) {
		return n, nil, err
	}
	return n, &wireWrong{Wrong: n, Mismatch: vm}, nil
}

// runCountsRank opens this rank's session of a run bound to counts (on
// the layout of VarRankLayout) and runs it as runRank runs a size.
func (cfg *Config) runCountsRank(ctx context.Context, res SizeResult) (SizeResult, error) {
	elem := cfg.DType.Size()
	l, err := VarRankLayout(res.Instance, len(cfg.Plan.GPUs), cfg.DType)
	if err != nil {
		return res, err
	}
	rs, err := cfg.Rank.Open(ctx, 0, res.Instance, l)
	if err != nil {
		return res, err
	}
	defer rs.Close()
	bufs, err := VarRankBuffers(rs.Buffers(), cfg.Counts, cfg.Rank.Rank, elem)
	if err != nil {
		return res, err
	}
	cfg.opened(res)
	return cfg.runRank(ctx, rs, res, countsData{bufs: bufs, counts: cfg.Counts, rank: cfg.Rank.Rank, elem: elem})
}
