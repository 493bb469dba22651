package tests

import (
	"io"
	"strconv"
	"testing"

	"github.com/mscclgo/mscclgo/starlib"
)

// benchmarkEval compiles the port of MSCCL++'s single_node/allreduce.py at
// the given rank count: evaluation, passes and plan writing, as `mscclgo
// eval` does.
func benchmarkEval(b *testing.B, ranks int) {
	src := starlib.DirSource("ports/single_node")
	defines := map[string]string{"num_gpus": strconv.Itoa(ranks)}
	for i := 0; i < b.N; i++ {
		res, err := starlib.Eval(src, "allreduce.star", starlib.Options{Defines: defines})
		if err != nil {
			b.Fatal(err)
		}
		cw := &countingWriter{}
		if err := res.Programs[0].WritePlan(cw); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(cw.n)
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

func BenchmarkAllreduce8(b *testing.B)   { benchmarkEval(b, 8) }
func BenchmarkAllreduce64(b *testing.B)  { benchmarkEval(b, 64) }
func BenchmarkAllreduce128(b *testing.B) { benchmarkEval(b, 128) }
