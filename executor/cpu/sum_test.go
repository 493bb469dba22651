package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

// TestSumElemsMatchesAdd checks the block reduction against the chain of
// executor.ElemType.Add the backends share, byte for byte, on random
// bits (every class: zeros, subnormals, normals, Inf, NaN with payloads)
// and on values near the rounding and overflow edges, for 2 to 9
// sources (bf16: that it is left to Add), with the result in a separate buffer and in place of the
// first and second source.
func TestSumElemsMatchesAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32} {
		for _, nsrc := range []int{2, 3, 8, 9} {
			for _, where := range []string{"apart", "src0", "src1"} {
				t.Run(fmt.Sprintf("%s/%d/%s", dt, nsrc, where), func(t *testing.T) {
					const n = 3*sumRun + 17 // elements: runs and a tail
					srcs := make([]span, nsrc)
					for k := range srcs {
						b := make([]byte, n*dt.Size())
						fillEdges(rng, dt, b)
						srcs[k] = span{b: b}
					}
					want := make([]byte, len(srcs[0].b))
					dt.Add(want, srcs[0].b, srcs[1].b)
					for _, s := range srcs[2:] {
						dt.Add(want, want, s.b)
					}
					res := make([]byte, len(want))
					switch where {
					case "src0":
						res = srcs[0].b
					case "src1":
						res = srcs[1].b
					}
					// Two blocks, as reduce calls it.
					half := (n / 2) * dt.Size()
					acc := func() []float32 { return make([]float32, sumRun) }
					if dt == executor.BFloat16 {
						// bf16 keeps the Add chain.
						if sumRuns(dt, res, srcs, 0, len(want), acc) {
							t.Fatal("sumElems took bf16")
						}
						return
					}
					if !sumRuns(dt, res[:half], srcs, 0, half, acc) || !sumRuns(dt, res[half:], srcs, half, len(want), acc) {
						t.Fatal("sumElems refused aligned operands")
					}
					if !bytes.Equal(res, want) {
						for i := 0; i < len(want); i += dt.Size() {
							if !bytes.Equal(res[i:i+dt.Size()], want[i:i+dt.Size()]) {
								t.Fatalf("element %d: got % x, want % x", i/dt.Size(), res[i:i+dt.Size()], want[i:i+dt.Size()])
							}
						}
					}
				})
			}
		}
	}
}

// fillEdges fills b with elements of dt: a third random bits, the rest
// small or large values of few mantissa bits, so that sums land on
// rounding ties, subnormals and overflow.
func fillEdges(rng *rand.Rand, dt executor.ElemType, b []byte) {
	for i := 0; i < len(b); i += dt.Size() {
		r := rng.Uint32()
		switch dt.Size() {
		case 2:
			if rng.IntN(3) > 0 {
				// sign, an exponent near the ends, two mantissa bits
				e := []uint32{0, 1, 2, 15, 29, 30, 31}[rng.IntN(7)]
				if dt == executor.BFloat16 {
					e = []uint32{0, 1, 2, 127, 253, 254, 255}[rng.IntN(7)]
					r = r&0x8000 | e<<7 | r>>20&0x7f&0x61
				} else {
					r = r&0x8000 | e<<10 | r>>20&0x3ff&0x301
				}
			}
			binary.LittleEndian.PutUint16(b[i:], uint16(r))
		case 4:
			if rng.IntN(3) > 0 && dt == executor.Float32 {
				e := []uint32{0, 1, 2, 127, 253, 254, 255}[rng.IntN(7)]
				r = r&0x80000000 | e<<23 | r>>5&0x7fffff&0x600001
			}
			binary.LittleEndian.PutUint32(b[i:], r)
		}
	}
}
