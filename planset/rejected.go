package planset

import (
	"fmt"
	"io"
	"path/filepath"
)

// WriteRejected lists the rejected plans (as mscclgo select prints them): those of the asked collective,
// or all of them when all is set. The plans whose only mismatch is their
// in-place mode come first, one line each saying so.
func WriteRejected(w io.Writer, rejected []Candidate, req Request, all bool) {
	for _, r := range rejected {
		if r.PlaceOnly {
			fmt.Fprintf(w, "  %s: %s plan, the call is %s (it fits otherwise: %s)\n",
				r.Entry.Name, placeName(r.Entry.InPlace), placeName(req.InPlace), filepath.Join(r.Dir, r.Entry.File))
		}
	}
	hidden := 0
	for _, r := range rejected {
		switch {
		case r.PlaceOnly:
		case !all && r.Entry.Collective != req.Collective:
			hidden++
		default:
			fmt.Fprintf(w, "  rejected %s (%s): %s\n", r.Entry.Name, filepath.Join(r.Dir, r.Entry.File), r.Reason)
		}
	}
	switch {
	case hidden == 1:
		fmt.Fprintln(w, "  (1 plan of another collective not shown; -v lists it)")
	case hidden > 1:
		fmt.Fprintf(w, "  (%d plans of other collectives not shown; -v lists them)\n", hidden)
	}
}
