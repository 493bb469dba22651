package algorithms

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
)

// TestCheckerMatchesLayout checks that harness.Checker, which draws the
// inputs and expected results of validation runs from tables it builds
// once, fills and checks exactly as executor.BufferLayout does: the same
// input bytes, and the same wrong-element counts for correct and for
// corrupted outputs, for every collective, element type and fill mode, at
// sizes below, across and beyond one generator row, with one Checker
// serving them all (so tables grow and are reused).
func TestCheckerMatchesLayout(t *testing.T) {
	t.Parallel()
	c := harness.NewChecker()
	type collective struct {
		name  string
		split int
	}
	colls := []collective{{"allreduce", 0}, {"reducescatter", 0}, {"allgather", 0}, {"alltoall", 0}, {"sendrecv", 0}, {"sendrecv", 1}, {"test", 0}}
	type numeric struct {
		dt   executor.ElemType
		mode harness.FillMode
	}
	// IntegerFill only differs from ReferenceFill for int32.
	types := []numeric{
		{executor.Float16, harness.ReferenceFill}, {executor.BFloat16, harness.ReferenceFill},
		{executor.Float32, harness.ReferenceFill}, {executor.Int32, harness.ReferenceFill},
		{executor.Int32, harness.IntegerFill}, {executor.Float16, harness.IntegerFill},
	}
	for _, ty := range types {
		for _, coll := range colls {
			// Element counts per rank: tiny, just over one generator row
			// (65536 threads), and two rows plus a remainder.
			for i, elems := range []int{8, 65536 + 24, 2*65536 + 40} {
				nranks := []int{4, 2, 3}[i]
				for _, inPlace := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/split%d/mode%d/n%d/e%d/inplace=%v", ty.dt.Name(), coll.name, coll.split, ty.mode, nranks, elems, inPlace)
					size := uint64(elems * nranks * ty.dt.Size())
					checkerCase(t, c, name, coll.name, coll.split, nranks, size, ty.dt, ty.mode, inPlace)
				}
			}
		}
	}
}

func checkerCase(t *testing.T, c *harness.Checker, name, coll string, split, nranks int, size uint64, dt executor.ElemType, mode harness.FillMode, inPlace bool) {
	t.Helper()
	l, err := harness.NewLayout(coll, nranks, size, dt, inPlace)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	l.Fill, l.SplitMask = mode, split
	for seq := 0; seq < 2; seq++ {
		want, got := l.Alloc(), l.Alloc()
		l.FillInputs(want, seq)
		if err := c.FillInputs(l, got, seq); err != nil {
			t.Fatalf("%s: FillInputs: %v", name, err)
		}
		for r := range want {
			if !bytes.Equal(want[r].Input, got[r].Input) {
				t.Fatalf("%s seq %d: rank %d input differs from BufferLayout.FillInputs", name, seq, r)
			}
		}
		if !l.Checked() {
			if _, err := c.Check(l, got, seq); err == nil {
				t.Fatalf("%s: Check of a collective without a result: no error", name)
			}
			return
		}
		// The expected outputs pass, then corrupted ones fail alike.
		for r := range got {
			copy(got[r].Output, l.Expected(r, seq))
		}
		// Round 0: the expected outputs; round 1: elements a few units of
		// the last place off (some within the tolerance of sums, all wrong
		// for data movement); round 2: some elements far off.
		for round := 0; round < 3; round++ {
			w1, err1 := l.Check(got, seq)
			w2, err2 := c.Check(l, got, seq)
			if (err1 == nil) != (err2 == nil) || !slices.Equal(w1, w2) {
				t.Fatalf("%s seq %d round %d: Checker.Check = %v, %v; BufferLayout.Check = %v, %v", name, seq, round, w2, err2, w1, err1)
			}
			if round == 0 && slices.ContainsFunc(w1, func(w uint64) bool { return w != 0 }) {
				t.Fatalf("%s seq %d: the expected output has wrong elements: %v", name, seq, w1)
			}
			es := dt.Size()
			for r := range got {
				out := got[r].Output
				if len(out) < es {
					continue
				}
				if round == 0 {
					// The first 64 elements, j units of the last place
					// off: around the tolerance of sums.
					for j := 0; j < 64 && (j+1)*es <= len(out); j++ {
						out[j*es] += byte(j)
					}
					continue
				}
				// The first, a middle and the last element: the sign and
				// exponent byte.
				for _, i := range []int{0, len(out) / es / 2 * es, len(out) - es} {
					out[i+es-1] ^= byte(0x40 + r)
				}
			}
		}
	}
}
