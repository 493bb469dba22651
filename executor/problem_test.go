package executor

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/plan"
)

// planProblem is what a test compares of a *plan.PlanError.
type planProblem struct {
	Path, Class, Msg string
}

func problemOf(err error) planProblem {
	var pe *plan.PlanError
	if !errors.As(err, &pe) {
		return planProblem{Msg: fmt.Sprint(err)}
	}
	return planProblem{Path: pe.Path, Class: pe.Err.Error(), Msg: pe.Msg}
}
