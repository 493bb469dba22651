package harness

// table.go is the nccl-tests style table of mscclgo run and model: the
// column heading, a row per message size, and the closing lines with the
// wrong-element total and the mean bus bandwidth.

import (
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/executor"
)

// Table prints the nccl-tests style table of a run (or of a model's
// predictions) to w: the column heading, a row per message size, and the
// closing lines.
type Table struct {
	w      io.Writer
	dtype  executor.ElemType
	busSum float64
	rows   int
	// Wrong counts the wrong elements of the checked rows.
	Wrong uint64
}

// Row is a row of the table: the mean time per launch, and the wrong
// elements when checked.
type Row struct {
	TimeUS  float64
	Wrong   uint64
	Checked bool
}

// Row is the table row of res, a size of iters launches.
func (res SizeResult) Row(iters int) Row {
	us := max(float64(res.Elapsed.Nanoseconds())/1e3/float64(iters), 1e-3)
	return Row{TimeUS: us, Wrong: res.Wrong, Checked: res.Checked}
}

// NewTable prints the column heading.
func NewTable(w io.Writer, dtype executor.ElemType) *Table {
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)")
	return &Table{w: w, dtype: dtype}
}

// Row prints the result of one size: res.TimeUS per launch, res.Wrong
// elements when res.Checked.
func (t *Table) Row(layout *executor.BufferLayout, res Row) {
	size := layout.Size
	redop := "none"
	if layout.Reduces() {
		redop = "sum"
	}
	algbw := float64(size) / 1e3 / res.TimeUS
	busbw := algbw * layout.BusFactor()
	t.busSum += busbw
	t.rows++
	wrong := "-"
	if res.Checked {
		wrong = fmt.Sprint(res.Wrong)
		t.Wrong += res.Wrong
	}
	fmt.Fprintf(t.w, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f %6s\n", size, size/uint64(t.dtype.Size()), t.dtype.Name(), redop, -1, FormatTime(res.TimeUS), algbw, busbw, wrong)
}

// End prints the closing lines: the wrong elements and the mean bus
// bandwidth.
func (t *Table) End() {
	status := "OK"
	if t.Wrong > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(t.w, "# Out of bounds values : %d %s\n", t.Wrong, status)
	t.EndBandwidth()
}

// EndBandwidth prints the closing line of the mean bus bandwidth alone
// (for rows that are not checked).
func (t *Table) EndBandwidth() {
	avg := 0.0
	if t.rows > 0 {
		avg = t.busSum / float64(t.rows)
	}
	fmt.Fprintf(t.w, "# Avg bus bandwidth    : %.6g\n#\n", avg)
}

// FormatTime prints a time in µs as nccl-tests does: fewer decimals for
// longer times.
func FormatTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}
