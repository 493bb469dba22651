package planset

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/plan"
)

// ErrNoPlan is returned by Select when no plan fits the call.
var ErrNoPlan = errors.New("no plan")

// Request describes one collective call.
type Request struct {
	Collective   string // allreduce, allgather, reducescatter, alltoall, sendrecv
	WorldSize    int
	RanksPerNode int
	// Size is the message size in bytes, as nccl-tests counts it: the
	// output size for allgather, the input size otherwise.
	Size    uint64
	InPlace bool
	// ElementSize is the data type's size in bytes (2 for float16).
	ElementSize int
	// NVLS says whether NVLink SHARP (SwitchChannels) is available.
	NVLS bool
	// Host says the call runs on host memory (the CPU backend): the
	// plans' size ranges, set for a GPU, do not apply, and the fits are
	// ranked by HostCostUS (Select without a predictor of its own).
	Host bool
}

// Source is a directory of plans with its index, searched in order.
type Source struct {
	Dir   string
	Index *Index
}

// Candidate is a plan considered for a request, with the reason it was
// rejected (empty for a fit).
type Candidate struct {
	Dir    string
	Entry  Entry
	Reason string
	// PlaceOnly is set on a rejected plan whose only mismatch is its
	// in-place mode: it would fit the call made the other way.
	PlaceOnly bool
}

// Choice is the answer of Select: the chosen plan, and every plan that was
// considered with the reason it was rejected.
type Choice struct {
	Dir      string
	Entry    Entry
	Why      string
	Rejected []Candidate
	// Ranking are the fits ranked by predicted time, fastest first
	// (SelectBy with a predictor only).
	Ranking []Ranked
}

// Select returns the plan to use for req. Sources are searched in order
// (user directories before the defaults). A plan fits when its collective,
// world size and ranks per node equal the request's, it uses NVLS only if
// NVLS is available, its in-place mode equals the call's, and the message
// size is within its range and divisible as its chunking requires. Among
// the fits of the first source that has any, the plan with the narrowest
// size range wins (the most specialised), then the first in index order.
// It never picks a plan built for another world size, an NVLS plan without
// NVLS, or an in-place plan for an out-of-place call (or the reverse).
// A call on host memory (req.Host) is not held to the size ranges, and
// the cheapest fit by HostCostUS wins.
func Select(sources []Source, req Request) (*Choice, error) {
	return SelectBy(sources, req, nil)
}

// Predictor returns the predicted time (µs) of the plan of entry e, in
// directory dir, for a call; an error rejects the plan.
type Predictor func(dir string, e Entry) (float64, error)

// Ranked is a plan that fits a call, with its predicted time.
type Ranked struct {
	Candidate
	TimeUS float64
}

// SelectBy is Select, except that with a predictor the fits of the first
// source that has any are ranked by predicted time, fastest first
// (Choice.Ranking), and the fastest wins.
func SelectBy(sources []Source, req Request, predict Predictor) (*Choice, error) {
	host := req.Host && predict == nil
	if host {
		predict = func(_ string, e Entry) (float64, error) { return HostCostUS(e, req.Size), nil }
	}
	var rejected []Candidate
	for _, src := range sources {
		var fits []Candidate
		for _, e := range src.Index.Plans {
			c := Candidate{Dir: src.Dir, Entry: e, Reason: reject(e, req)}
			if e.InPlace != req.InPlace {
				flipped := req
				flipped.InPlace = e.InPlace
				c.PlaceOnly = reject(e, flipped) == ""
			}
			if c.Reason == "" {
				fits = append(fits, c)
			} else {
				rejected = append(rejected, c)
			}
		}
		var ranking []Ranked
		if predict != nil {
			kept := fits[:0]
			for _, f := range fits {
				t, err := predict(f.Dir, f.Entry)
				if err != nil {
					f.Reason = fmt.Sprintf("fits, but cannot be predicted: %v", err)
					rejected = append(rejected, f)
					continue
				}
				ranking = append(ranking, Ranked{Candidate: f, TimeUS: t})
				kept = append(kept, f)
			}
			fits = kept
			sort.SliceStable(ranking, func(i, j int) bool { return ranking[i].TimeUS < ranking[j].TimeUS })
			for i := range ranking {
				fits[i] = ranking[i].Candidate
			}
		}
		if len(fits) == 0 {
			continue
		}
		if predict == nil {
			sort.SliceStable(fits, func(i, j int) bool {
				return fits[i].Entry.MaxMessageSize-fits[i].Entry.MinMessageSize < fits[j].Entry.MaxMessageSize-fits[j].Entry.MinMessageSize
			})
		}
		best := fits[0]
		for k, f := range fits[1:] {
			reason := fmt.Sprintf("fits, but %s has a narrower message range", best.Entry.Name)
			if predict != nil {
				reason = fmt.Sprintf("fits, but %s is predicted faster (%.2f µs against %.2f µs)", best.Entry.Name, ranking[0].TimeUS, ranking[k+1].TimeUS)
			}
			if host {
				reason = fmt.Sprintf("fits, but %s costs less on the CPU backend (modelled %.0f µs against %.0f µs)", best.Entry.Name, ranking[0].TimeUS, ranking[k+1].TimeUS)
			}
			rejected = append(rejected, Candidate{Dir: f.Dir, Entry: f.Entry, Reason: reason})
		}
		why := fmt.Sprintf("%s for %d ranks (%d per node), %s, %s, message size %d in [%d, %d]",
			best.Entry.Collective, best.Entry.WorldSize, best.Entry.RanksPerNode, best.Entry.Protocol,
			placeName(best.Entry.InPlace), req.Size, best.Entry.MinMessageSize, best.Entry.MaxMessageSize)
		if best.Entry.Collective == plan.AllToAllVCollective {
			why = fmt.Sprintf("alltoallv for %d ranks (%d per node), %s, %s, block sizes per call",
				best.Entry.WorldSize, best.Entry.RanksPerNode, best.Entry.Protocol, placeName(best.Entry.InPlace))
		}
		if best.Entry.NVLS {
			why += ", NVLS"
		}
		switch {
		case host:
			why += fmt.Sprintf(", on host memory the cheapest of %d on the CPU backend (modelled %.0f µs; size ranges not applied)", len(ranking), ranking[0].TimeUS)
		case predict != nil:
			why += fmt.Sprintf(", predicted fastest of %d: %.2f µs", len(ranking), ranking[0].TimeUS)
		}
		return &Choice{Dir: best.Dir, Entry: best.Entry, Why: why, Rejected: rejected, Ranking: ranking}, nil
	}
	return &Choice{Rejected: rejected}, fmt.Errorf("%w for %s of %d bytes on %d ranks (%d per node), %s%s",
		ErrNoPlan, req.Collective, req.Size, req.WorldSize, req.RanksPerNode, placeName(req.InPlace), nvlsNote(req.NVLS))
}

func placeName(inPlace bool) string {
	if inPlace {
		return "in-place"
	}
	return "out-of-place"
}

func nvlsNote(nvls bool) string {
	if nvls {
		return ", NVLS available"
	}
	return ""
}

// reject returns why e cannot serve req, or "".
func reject(e Entry, req Request) string {
	switch {
	case e.Collective != req.Collective:
		return fmt.Sprintf("collective %s, not %s", e.Collective, req.Collective)
	case e.WorldSize != req.WorldSize:
		return fmt.Sprintf("built for %d ranks, not %d", e.WorldSize, req.WorldSize)
	case e.RanksPerNode != req.RanksPerNode:
		return fmt.Sprintf("built for %d ranks per node, not %d", e.RanksPerNode, req.RanksPerNode)
	case e.NVLS && !req.NVLS:
		return "needs NVLS, which is not available"
	case e.InPlace != req.InPlace:
		return fmt.Sprintf("%s plan for an %s call", placeName(e.InPlace), placeName(req.InPlace))
	case e.Collective == plan.AllToAllVCollective:
		// Block sizes come from each call's counts: any size fits.
		return ""
	case !req.Host && (req.Size < e.MinMessageSize || req.Size > e.MaxMessageSize):
		return fmt.Sprintf("message size %d outside [%d, %d]", req.Size, e.MinMessageSize, e.MaxMessageSize)
	}
	return sizeProblem(e, req)
}

// sizeProblem checks that the per-rank buffers of req divide as the plan's
// chunks require (docs/semantics.md §1.7) and hold whole elements.
func sizeProblem(e Entry, req Request) string {
	in, out := req.Size, req.Size
	n := uint64(req.WorldSize)
	switch e.Collective {
	case plan.AllGatherCollective:
		if req.Size%n != 0 {
			return fmt.Sprintf("message size %d not divisible by %d ranks", req.Size, n)
		}
		in = req.Size / n
	case plan.ReduceScatterCollective:
		if req.Size%n != 0 {
			return fmt.Sprintf("message size %d not divisible by %d ranks", req.Size, n)
		}
		out = req.Size / n
	}
	a := e.BufferAlignment
	if a == 0 {
		a = 16
	}
	var problems []string
	for _, b := range []struct {
		name   string
		bytes  uint64
		chunks int
	}{{"input", in, e.InputChunks}, {"output", out, e.OutputChunks}} {
		if b.bytes%a != 0 {
			problems = append(problems, fmt.Sprintf("%s size %d not a multiple of the alignment %d", b.name, b.bytes, a))
		} else if b.chunks > 0 && (b.bytes/a)%uint64(b.chunks) != 0 {
			problems = append(problems, fmt.Sprintf("%s size %d not divisible into %d chunks of %d-byte units", b.name, b.bytes, b.chunks, a))
		}
		if req.ElementSize > 0 && b.bytes%uint64(req.ElementSize) != 0 {
			problems = append(problems, fmt.Sprintf("%s size %d not a whole number of %d-byte elements", b.name, b.bytes, req.ElementSize))
		}
	}
	return strings.Join(problems, "; ")
}
