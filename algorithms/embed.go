// Package algorithms holds the bundled .star algorithms, embedded in the
// binary so that `mscclgo eval NAME` and `mscclgo install` work from any
// directory, and the plan sets made from them. List and Names tell what is
// bundled; DefaultSet gives the jobs of the default plan set, Install
// compiles and checks a set of jobs into a plan directory with its Index,
// Tune records the cost model's prediction for each plan and narrows its
// size range, and Select (or SelectBy) picks the plan for a Request from
// one or more plan sets. docs/algorithms.md describes the algorithms and
// docs/design.md §11 the plan set.
package algorithms

import "embed"

// FS holds every bundled algorithm and library file, rooted at this
// directory.
//
//go:embed *.star lib/*.star
var FS embed.FS
