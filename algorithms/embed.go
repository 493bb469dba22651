// Package algorithms holds the bundled .star algorithms, embedded in the
// binary so that `mscclgo eval NAME` and `mscclgo install` work from any
// directory.
package algorithms

import "embed"

// FS holds every bundled algorithm and library file, rooted at this
// directory.
//
//go:embed *.star lib/*.star
var FS embed.FS
