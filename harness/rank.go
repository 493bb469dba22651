package harness

// rank.go is Run's loop for one rank of a run of one process per rank
// (Config.Rank): the process runs only its own rank, checks its own
// output, and after each launch exchanges the launch's outcome with
// every rank, so that every rank stops at the same launch with the same
// results. A run bound to counts uses the same loop (varrank.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mscclgo/mscclgo/executor"
)

// Group is the ranks of a job as the run loop of one rank needs them: an
// all-gather of one message per rank, in rank order (package bootstrap's
// Bootstrap is one).
type Group interface {
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

// RankSession is one rank's session of a run of one process per rank
// (cpu.RankSession, gpu.RankSession): its own buffers, launched together
// with the other ranks' sessions.
type RankSession interface {
	Buffers() executor.RankBuffers
	Launch(ctx context.Context) error
	Close() error
}

// RankRun is this process's share of a run of one process per rank
// (Config.Rank). The run is the one every rank makes alike; the rank
// fills and checks its own buffers only, from the Checker's tables, as a
// run of one process fills and checks every rank's.
type RankRun struct {
	// Rank is this process's rank in Group.
	Rank  int
	Group Group
	// Open opens this rank's session for the size Sizes[index] (index 0
	// for a run bound to counts, l from VarRankLayout).
	Open func(ctx context.Context, index int, inst *executor.Instance, l *executor.BufferLayout) (RankSession, error)
}

// RankFailure is a rank whose launch failed, as every rank learns it.
type RankFailure struct {
	Rank     int
	Launch   int
	Warmup   bool
	Deadlock bool
	// Err is the rank's error text (a deadlock's is the job-wide report).
	Err string
	// Blocked is a deadlock's job-wide blocked state, as the rank's
	// session reported it (for executor/diagnose).
	Blocked []executor.BlockedTB
}

// outcome is what each rank tells the others after a launch.
type outcome struct {
	Err      string     `json:"err,omitempty"`
	Deadlock bool       `json:"deadlock,omitempty"`
	Wrong    uint64     `json:"wrong,omitempty"`
	Report   *wireWrong `json:"report,omitempty"` // where the wrong data is
	Nanos    int64      `json:"ns"`
	// Blocked is a deadlock's blocked state, typed.
	Blocked []executor.BlockedTB `json:"blocked,omitempty"`
}

// wireWrong is a RankWrong as it travels: values as text, since JSON has
// no NaN or infinities.
type wireWrong struct {
	Wrong    uint64        `json:"wrong"`
	Elements []wireElement `json:"elements,omitempty"`
	// Mismatch is the first wrong byte of a run bound to counts.
	Mismatch *VarMismatch `json:"mismatch,omitempty"`
}

type wireElement struct {
	Offset    uint64   `json:"offset"`
	Want, Got string   `json:",omitempty"`
	Writers   []string `json:"writers,omitempty"`
}

// rankData is what the loop of one rank fills and checks: the rank's
// share of the reference data of a size, or of the bytes of a run bound
// to counts.
type rankData interface {
	// fill fills the rank's input for launch seq.
	fill(seq int) error
	// check counts the wrong elements of the rank's output after launch
	// seq and, where there are any, locates them for the other ranks.
	check(seq int) (uint64, *wireWrong, error)
}

// sizeData is a rank's share of a size of a fixed-size run.
type sizeData struct {
	cfg  *Config
	l    *Layout
	inst *executor.Instance
	bufs executor.RankBuffers
}

func (d sizeData) fill(seq int) error {
	l, rank := d.l, d.cfg.Rank.Rank
	if l.Checked() {
		return d.cfg.Checker.FillRank(l, d.bufs.Input, rank, seq)
	}
	l.FillRank(d.bufs.Input, rank, seq)
	return nil
}

func (d sizeData) check(seq int) (uint64, *wireWrong, error) {
	l, rank := d.l, d.cfg.Rank.Rank
	n, err := d.cfg.Checker.CheckRank(l, d.bufs.Output, rank, seq)
	if err != nil || n == 0 {
		return n, nil, err
	}
	return n, rankReport(d.inst, l, d.bufs, rank, seq, n, d.cfg.ShowWrong), nil
}

// runRankSize opens this rank's session for size Sizes[index] and runs
// it.
func (cfg *Config) runRankSize(ctx context.Context, index int, res SizeResult) (SizeResult, error) {
	rs, err := cfg.Rank.Open(ctx, index, res.Instance, res.Layout.BufferLayout)
	if err != nil {
		return res, err
	}
	defer rs.Close()
	cfg.opened(res)
	return cfg.runRank(ctx, rs, res, sizeData{cfg: cfg, l: res.Layout, inst: res.Instance, bufs: rs.Buffers()})
}

// runRank runs the warm-up and checked launches of res's size on this
// rank; after each, every rank learns every rank's outcome. Every rank
// returns the same results: the time is the slowest rank's per launch,
// the wrong elements every rank's, FirstWrong the report of the lowest
// rank with wrong data at the first launch that had any. A launch that
// failed on any rank ends the run on every rank (SizeResult.Failures).
func (cfg *Config) runRank(ctx context.Context, rs RankSession, res SizeResult, d rankData) (SizeResult, error) {
	rank := cfg.Rank.Rank
	// Each launch's input is filled before the exchange that ends the
	// launch before it (the first: before an exchange of its own), so
	// that every rank starts the launch as the exchange lets it go: a
	// launch's time is then the collective's, not also a peer's late
	// fill (about 1-2 ms of 10 for 4 processes on 2 cores).
	if err := d.fill(0); err != nil {
		return res, err
	}
	if err := startTogether(ctx, cfg.Rank.Group, rank); err != nil {
		return res, err
	}
	for it := -cfg.Warmup; it < cfg.Iters; it++ {
		seq := max(it, 0)
		start := time.Now()
		lerr := rs.Launch(ctx)
		mine := outcome{Nanos: int64(time.Since(start))}
		if dt, ok := rs.(deviceTimer); ok && lerr == nil {
			mine.Nanos = int64(dt.DeviceTime())
		}
		var dl *executor.DeadlockError
		switch {
		case errors.As(lerr, &dl):
			mine.Deadlock, mine.Err, mine.Blocked = true, lerr.Error(), dl.Blocked
		case lerr != nil:
			mine.Err = lerr.Error()
		case it >= 0 && res.Checked:
			var err error
			if mine.Wrong, mine.Report, err = d.check(seq); err != nil {
				return res, err
			}
		}
		if lerr == nil && it+1 < cfg.Iters {
			if err := d.fill(max(it+1, 0)); err != nil {
				return res, err
			}
		}
		all, warm, failures, err := settle(ctx, cfg.Rank.Group, mine, rank, it, cfg.Warmup, lerr)
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
		for r, a := range all {
			worst = max(worst, time.Duration(a.Nanos))
			if a.Report != nil && res.FirstWrong == nil {
				res.FirstWrong = &WrongReport{Launch: it, Ranks: []RankWrong{a.Report.rankWrong(r)}}
			}
			res.Wrong += a.Wrong
		}
		res.Elapsed += worst
	}
	return res, nil
}

// rankReport locates this rank's wrong data for the others.
func rankReport(inst *executor.Instance, l *Layout, mine executor.RankBuffers, rank, seq int, n uint64, show int) *wireWrong {
	bufs := make([]executor.RankBuffers, l.NRanks)
	bufs[rank] = mine
	w := &wireWrong{Wrong: n}
	for _, e := range withWriters(inst, l, l.Wrong(bufs, seq, rank, show)) {
		w.Elements = append(w.Elements, wireElement{
			Offset:  e.Offset,
			Want:    strconv.FormatFloat(e.Want, 'g', -1, 64),
			Got:     strconv.FormatFloat(e.Got, 'g', -1, 64),
			Writers: e.Writers,
		})
	}
	return w
}

// rankWrong is w, rank's report, as a RankWrong.
func (w *wireWrong) rankWrong(rank int) RankWrong {
	rw := RankWrong{Rank: rank, Wrong: w.Wrong, Mismatch: w.Mismatch}
	for _, e := range w.Elements {
		want, _ := strconv.ParseFloat(e.Want, 64)
		got, _ := strconv.ParseFloat(e.Got, 64)
		rw.Elements = append(rw.Elements, WrongElement{Rank: rank, Offset: e.Offset, Want: want, Got: got, Writers: e.Writers})
	}
	return rw
}

// settle swaps launch it's outcome (mine, and lerr, this rank's own
// failure) with every rank: all the outcomes, whether it was a warm-up
// launch, and every rank's failure. A failed exchange is the error, or
// lerr where there is one (this rank's own failure says more: a lost
// peer, a deadlock seen before the exchange failed).
func settle(ctx context.Context, g Group, mine outcome, rank, it, warmup int, lerr error) (all []outcome, warm bool, failures []RankFailure, err error) {
	all, err = exchange(ctx, g, mine)
	if err != nil {
		if lerr != nil {
			return nil, false, nil, fmt.Errorf("rank %d, launch %d: %w", rank, it, lerr)
		}
		return nil, false, nil, fmt.Errorf("rank %d, launch %d: exchanging outcomes: %w", rank, it, err)
	}
	launch, warm := it, it < 0
	if warm {
		launch = it + warmup
	}
	for r, a := range all {
		if a.Err != "" {
			failures = append(failures, RankFailure{Rank: r, Launch: launch, Warmup: warm, Deadlock: a.Deadlock, Err: a.Err, Blocked: a.Blocked})
		}
	}
	return all, warm, failures, nil
}

// startTogether is the exchange before a size's first launch: every
// rank's input is filled, and they start together.
func startTogether(ctx context.Context, g Group, rank int) error {
	if _, err := g.AllGather(ctx, nil); err != nil {
		return fmt.Errorf("rank %d: waiting for every rank before the first launch: %w", rank, err)
	}
	return nil
}

// exchange all-gathers each rank's launch outcome.
func exchange(ctx context.Context, g Group, mine outcome) ([]outcome, error) {
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	parts, err := g.AllGather(ctx, data)
	if err != nil {
		return nil, err
	}
	all := make([]outcome, len(parts))
	for r, p := range parts {
		if err := json.Unmarshal(p, &all[r]); err != nil {
			return nil, fmt.Errorf("rank %d sent an outcome that is not one: %v", r, err)
		}
	}
	return all, nil
}

// Params are the run parameters every rank of a job must agree on: each
// one's name as the user gives it and its value as text.
type Params [][2]string

// ParamsError is a job whose ranks were started with different run
// parameters.
type ParamsError struct {
	// Name is the parameter; Value is rank Rank's, Ref rank 0's.
	Name, Value, Ref string
	Rank             int
}

func (e *ParamsError) Error() string {
	return fmt.Sprintf("the ranks were started with different run parameters: %s is %s on rank %d but %s on rank 0: start every rank with the same plan and flags",
		e.Name, clipText(e.Value), e.Rank, clipText(e.Ref))
}

// Agree all-gathers every rank's run parameters and refuses, on every
// rank alike, a job whose ranks were started with different ones (which
// would otherwise run different launches and hang or end with different
// results): a *ParamsError.
func Agree(ctx context.Context, g Group, mine Params) error {
	data, err := json.Marshal(mine)
	if err != nil {
		return err
	}
	parts, err := g.AllGather(ctx, data)
	if err != nil {
		return fmt.Errorf("exchanging the run parameters: %w", err)
	}
	var ref Params
	for r, p := range parts {
		var theirs Params
		if err := json.Unmarshal(p, &theirs); err != nil || len(theirs) != len(mine) {
			return fmt.Errorf("rank %d sent run parameters of another format (another mscclgo version?)", r)
		}
		if r == 0 {
			ref = theirs
			continue
		}
		for i, f := range theirs {
			if f != ref[i] {
				return &ParamsError{Name: ref[i][0], Value: f[1], Ref: ref[i][1], Rank: r}
			}
		}
	}
	return nil
}

// clipText shortens a value for an error message.
func clipText(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("... (%d bytes more)", len(s)-max)
}
