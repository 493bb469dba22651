package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
)

// This file runs an alltoallv plan as one rank of a job of one process
// per rank (`mscclgo run --counts` under a launcher): the rank fills its
// own input as FillVar fills it in a run of one process, launches its
// rank of the plan over the rank wire, checks its own output byte by
// byte, and every rank learns every rank's outcome after each launch.

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

// VarRankConfig is one rank's share of an alltoallv run of one process
// per rank.
type VarRankConfig struct {
	Session RankSession
	Counts  *executor.Counts
	Rank    int
	Elem    int
	Group   Group
	// Iters launches are timed and checked after Warmup launches that
	// are neither.
	Iters, Warmup int
}

// VarRankResult is what every rank of the job learns of the run: the
// slowest rank's time per launch summed over the timed launches, every
// rank's wrong bytes, the first mismatch (of the lowest rank with any at
// the first launch that had any) as text, and the launches that failed
// (the run stops at the first).
type VarRankResult struct {
	Elapsed    time.Duration
	Wrong      uint64
	FirstWrong string
	Failures   []RankFailure
}

// RunVarRank runs cfg's launches; after each, every rank learns every
// rank's outcome, so every rank stops at the same launch. The error is
// this rank's own (its buffers, or an exchange that failed).
func RunVarRank(ctx context.Context, cfg VarRankConfig) (VarRankResult, error) {
	var res VarRankResult
	if cfg.Session == nil || cfg.Group == nil || cfg.Counts == nil {
		return res, errors.New("harness: an alltoallv rank run needs a session, a group and counts")
	}
	bufs, err := VarRankBuffers(cfg.Session.Buffers(), cfg.Counts, cfg.Rank, cfg.Elem)
	if err != nil {
		return res, err
	}
	// As RunRank does: each launch's input is filled before the
	// exchange that lets every rank start it together.
	FillVarRank(bufs, cfg.Rank, 0)
	if err := startTogether(ctx, cfg.Group, cfg.Rank); err != nil {
		return res, err
	}
	for it := -cfg.Warmup; it < cfg.Iters; it++ {
		seq := max(it, 0)
		start := time.Now()
		lerr := cfg.Session.Launch(ctx)
		mine := outcome{Nanos: int64(time.Since(start))}
		if dt, ok := cfg.Session.(deviceTimer); ok && lerr == nil {
			mine.Nanos = int64(dt.DeviceTime())
		}
		var dl *executor.DeadlockError
		var first error
		switch {
		case errors.As(lerr, &dl):
			mine.Deadlock, mine.Err, mine.Blocked = true, lerr.Error(), dl.Blocked
		case lerr != nil:
			mine.Err = lerr.Error()
		case it >= 0:
			mine.Wrong, first = CheckVarRank(bufs.Output, cfg.Counts, cfg.Rank, cfg.Elem, seq)
			if first != nil {
				mine.Report = &wireWrong{Wrong: mine.Wrong, Elements: []wireElement{{Want: first.Error()}}}
			}
		}
		if lerr == nil && it+1 < cfg.Iters {
			FillVarRank(bufs, cfg.Rank, max(it+1, 0))
		}
		all, warm, failures, err := settle(ctx, cfg.Group, mine, cfg.Rank, it, cfg.Warmup, lerr)
		if err != nil {
			return res, err
		}
		res.Failures = append(res.Failures, failures...)
		if len(res.Failures) > 0 {
			return res, nil
		}
		if warm {
			continue
		}
		var worst time.Duration
		for _, a := range all {
			worst = max(worst, time.Duration(a.Nanos))
			if a.Report != nil && len(a.Report.Elements) > 0 && res.FirstWrong == "" {
				res.FirstWrong = fmt.Sprintf("launch %d: %s", it, a.Report.Elements[0].Want)
			}
			res.Wrong += a.Wrong
		}
		res.Elapsed += worst
	}
	return res, nil
}
