package harness

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

// TestExpectedReduceOps checks the reference of every reduction against
// closed forms computed here from the fills (int32 with the integer
// fill: exact; float32: the float64 product and the exact max and min),
// for an allreduce and a reducescatter, and that Check is exact for max
// and min and tolerant for prod.
func TestExpectedReduceOps(t *testing.T) {
	const nranks = 4
	for _, coll := range []string{"allreduce", "reducescatter"} {
		for _, dt := range []executor.ElemType{executor.Int32, executor.Float32} {
			for op := executor.ReduceSum; op < executor.NumReduceOps; op++ {
				l, err := NewLayout(coll, nranks, 4096, dt, false)
				if err != nil {
					t.Fatal(err)
				}
				l.Fill, l.Reduce = IntegerFill, op
				n := int(l.Sizes.Input) / 4
				fills := make([][]byte, nranks)
				for r := range fills {
					fills[r] = make([]byte, l.Sizes.Input)
					FillWith(fills[r], dt, r, 1, IntegerFill)
				}
				closed := func(i int) float64 {
					var acc float64
					for r := range nranks {
						v := dt.Float64(fills[r], i)
						switch {
						case r == 0:
							acc = v
						case op == executor.ReduceSum:
							acc += v
						case op == executor.ReduceProd:
							acc *= v
						case op == executor.ReduceMax:
							acc = math.Max(acc, v)
						default:
							acc = math.Min(acc, v)
						}
					}
					return acc
				}
				bufs := l.Alloc()
				for me := range nranks {
					want := l.Expected(me, 1)
					outE := len(want) / 4
					base := 0
					if coll == "reducescatter" {
						base = me * outE
					}
					for i := range outE {
						got, c := dt.Float64(want, i), closed(base+i)
						if dt == executor.Int32 {
							// The closed form wraps modulo 2^32 (prod: the
							// float64 product of four values below 1024 is exact).
							c = float64(int32(uint32(int64(math.Mod(c, 1<<32)))))
						}
						if tol := 4 * dt.Epsilon() * math.Abs(c); math.Abs(got-c) > tol {
							t.Fatalf("%s %s %v rank %d element %d: reference %v, closed form %v", coll, dt, op, me, i, got, c)
						}
					}
					copy(bufs[me].Output, want)
				}
				wrong, err := l.Check(bufs, 1)
				if err != nil {
					t.Fatal(err)
				}
				for r, w := range wrong {
					if w != 0 {
						t.Fatalf("%s %s %v: the reference itself has %d wrong elements on rank %d", coll, dt, op, w, r)
					}
				}
				if dt != executor.Float32 || n == 0 {
					continue
				}
				// One ulp off: wrong for max and min, within tolerance for
				// sum and prod.
				v := binary.LittleEndian.Uint32(bufs[0].Output)
				binary.LittleEndian.PutUint32(bufs[0].Output, v+1)
				wrong, _ = l.Check(bufs, 1)
				exact := op == executor.ReduceMax || op == executor.ReduceMin
				if (wrong[0] == 1) != exact {
					t.Errorf("%s %v: one ulp off counted %d wrong (exact check: %v)", coll, op, wrong[0], exact)
				}
				ch := NewChecker()
				if cw, err := ch.Check(l, bufs, 1); err != nil || cw[0] != wrong[0] {
					t.Errorf("%s %v: Checker counts %v (%v), Layout.Check %d", coll, op, cw, err, wrong[0])
				}
			}
		}
	}
}
