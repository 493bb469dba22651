package cli

// deadlock.go prints run's deadlock report as executor/diagnose builds
// it: the most likely cause first (a wrong LL slot and the put's line, a
// channel its peer signals too rarely, ...), then the blocked thread
// blocks in the same words on every backend, at most maxReportLines lines
// unless --explain.

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/diagnose"
)

// reportDeadlock prints err (a launch's deadlock) after prefix, with the
// most likely cause first.
func reportDeadlock(w io.Writer, prefix string, inst *executor.Instance, err error, all bool) {
	limit := maxReportLines
	if all {
		limit = 0
	}
	var dl *executor.DeadlockError
	if !errors.As(err, &dl) || inst == nil {
		limitLines(w, prefix+err.Error()+"\n", limit)
		return
	}
	limitLines(w, deadlockText(prefix, diagnose.Deadlock(inst, dl.Blocked)), limit)
}

// deadlockText is the whole report of a diagnosed deadlock.
func deadlockText(prefix string, r *diagnose.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sdeadlock: %d thread block(s) blocked\n", prefix, len(r.Blocked))
	printCauses(&b, causeLines(r.Causes), uint64(len(r.Blocked)), "blocked thread blocks")
	for _, t := range r.Blocked {
		fmt.Fprintf(&b, "  %s\n", t.Line)
	}
	return b.String()
}

// eachOp calls f on every op of ops, pipeline bodies included (race.go's
// walk of a thread block).
func eachOp(ops []executor.OpInstance, f func(op *executor.OpInstance)) {
	for i := range ops {
		f(&ops[i])
		eachOp(ops[i].Body, f)
	}
}
