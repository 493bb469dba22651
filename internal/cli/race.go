package cli

// race.go prints run --race's report: the most likely cause first
// (executor/diagnose's Races: a read or write before the wait that would
// have ordered it, a buffer reused in the next launch with no handshake,
// or two ops with nothing between them), naming the .star lines of both
// ops, then the pairs, at most maxReportLines lines unless --explain.

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/diagnose"
)

// raceLaunches is the number of checked launches per size of run: iters,
// but with race detection at least two launches in all (warm-up ones
// included), the fewest that show a race across the launch boundary
// (docs/executor.md §5.3).
func raceLaunches(race bool, warmup, iters int) int {
	if race && warmup+iters < 2 {
		return 2 - warmup
	}
	return iters
}

// reportRace prints err (a launch's race report) after prefix, with the
// most likely cause first.
func reportRace(w io.Writer, prefix string, inst *executor.Instance, err error, all bool) {
	limit := maxReportLines
	if all {
		limit = 0
	}
	var re *executor.RaceError
	if !errors.As(err, &re) || len(re.Races) == 0 {
		limitLines(w, prefix+err.Error()+"\n", limit)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%srace: %d conflicting access pair(s)", prefix, len(re.Races))
	if n := re.AcrossLaunches(); n > 0 {
		fmt.Fprintf(&b, ", %d across the launch boundary", n)
	}
	b.WriteString("\n")
	printCauses(&b, causeLines(diagnose.Races(inst, re.Races)), uint64(len(re.Races)), "pairs")
	for _, r := range re.Races {
		across := r.A.Launch != r.B.Launch
		fmt.Fprintf(&b, "  %s\n    vs %s\n", accessText(r.A, across), accessText(r.B, across))
	}
	limitLines(w, b.String(), limit)
}

// accessText is one access of a race pair, as the CPU backend describes
// it, with the buffer's full name.
func accessText(a executor.Access, launch bool) string {
	kind := "read"
	if a.Write {
		kind = "write"
	}
	s := fmt.Sprintf("rank %d tb %d %s %s of %s", a.Rank, a.TB, a.Op, kind, diagnose.PlaceText(a.Region))
	if launch {
		s += fmt.Sprintf(" in launch %d", a.Launch)
	}
	return s
}
