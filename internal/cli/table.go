package cli

// table.go holds the nccl-tests style table of `run` (in one process and
// one process per rank): the column heading, a row per message size, and
// the closing lines with the wrong-element total and the mean bus
// bandwidth.

import (
	"fmt"
	"io"

	"github.com/mscclgo/mscclgo/executor"
)

// runTable prints one run's table to w.
type runTable struct {
	w      io.Writer
	dtype  executor.ElemType
	busSum float64
	rows   int
	wrong  uint64
}

// newRunTable prints the column heading.
func newRunTable(w io.Writer, dtype executor.ElemType) *runTable {
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)")
	return &runTable{w: w, dtype: dtype}
}

// row prints the result of one size: res.timeUS per launch, res.wrong
// elements when res.checked.
func (t *runTable) row(layout *executor.BufferLayout, res runResult) {
	size := layout.Size
	redop := "none"
	if layout.Reduces() {
		redop = "sum"
	}
	algbw := float64(size) / 1e3 / res.timeUS
	busbw := algbw * layout.BusFactor()
	t.busSum += busbw
	t.rows++
	wrong := "-"
	if res.checked {
		wrong = fmt.Sprint(res.wrong)
		t.wrong += res.wrong
	}
	fmt.Fprintf(t.w, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f %6s\n", size, size/uint64(t.dtype.Size()), t.dtype.Name(), redop, -1, formatTime(res.timeUS), algbw, busbw, wrong)
}

// end prints the closing lines.
func (t *runTable) end() {
	status := "OK"
	if t.wrong > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(t.w, "# Out of bounds values : %d %s\n", t.wrong, status)
	avg := 0.0
	if t.rows > 0 {
		avg = t.busSum / float64(t.rows)
	}
	fmt.Fprintf(t.w, "# Avg bus bandwidth    : %.6g\n#\n", avg)
}
