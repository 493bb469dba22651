package model

import (
	"fmt"
	"io"
)

// WriteReport writes the table of a fit (mscclgo model --fit): per
// point, the measured time, the predictions before and after the fit with
// their errors; then the median and worst errors, and each fitted
// parameter's value in hw and after the fit.
func (res *FitResult) WriteReport(w io.Writer, hw *Profile) {
	fmt.Fprintf(w, "#%11s  %9s  %9s  %7s  %9s  %7s\n", "size", "measured", "before", "error", "after", "error")
	var meas, before, after []float64
	for _, p := range res.Points {
		fmt.Fprintf(w, "%12d  %9.2f  %9.2f  %+6.1f%%  %9.2f  %+6.1f%%\n", p.Size, p.Time, p.Before, 100*RelErr(p.Before, p.Time), p.After, 100*RelErr(p.After, p.Time))
		meas, before, after = append(meas, p.Time), append(before, p.Before), append(after, p.After)
	}
	mb, wb := ErrorSummary(before, meas)
	ma, wa := ErrorSummary(after, meas)
	fmt.Fprintf(w, "# error before: median %.1f%%, worst %.1f%%; after: median %.1f%%, worst %.1f%%\n", 100*mb, 100*wb, 100*ma, 100*wa)
	for _, n := range res.Params {
		old, _ := hw.Params.Get(n)
		nv, _ := res.Profile.Params.Get(n)
		fmt.Fprintf(w, "# %-20s %10.4g -> %.4g\n", n, old.Value, nv.Value)
	}
}
