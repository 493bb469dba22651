// Package algorithms holds the bundled .star algorithms, embedded in the
// binary so that `mscclgo eval NAME` and `mscclgo install` work from any
// directory. Start with FS, the scripts and their lib/ files, which
// starlib.FSSource evaluates; Names and List tell what is bundled, and
// DefaultSet reads the shapes of the default plan set from the scripts'
// "# default-set:" lines. Installing, indexing and selecting plans is
// package planset's. docs/algorithms.md describes the algorithms.
package algorithms

import "embed"

// FS holds every bundled algorithm and library file, rooted at this
// directory.
//
//go:embed *.star lib/*.star
var FS embed.FS
