package tests

import (
	"os"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The interpreter floor: BenchmarkFloorAllreduceN runs the same allreduce
// port under go.starlark.net with every DSL builtin replaced by a stand-in
// that does nothing and allocates nothing (one pre-bound method value, one
// object for every call's result). It measures what executing the script's
// loops, calls, tuples and dict lookups costs by itself, the baseline
// against which BenchmarkAllreduceN (the whole compile: builtins, passes,
// JSON) is reported in the same run (`make bench`).

// standIn is the one value every stand-in builtin returns. Every attribute
// is the same bound no-op method; it can be indexed and sliced.
type standIn struct{ method *starlark.Builtin }

func (s *standIn) String() string                      { return "stand-in" }
func (s *standIn) Type() string                        { return "stand-in" }
func (s *standIn) Freeze()                             {}
func (s *standIn) Truth() starlark.Bool                { return starlark.True }
func (s *standIn) Hash() (uint32, error)               { return 0, nil }
func (s *standIn) Attr(string) (starlark.Value, error) { return s.method, nil }
func (s *standIn) AttrNames() []string                 { return nil }
func (s *standIn) Index(int) starlark.Value            { return s }
func (s *standIn) Len() int                            { return 1 }
func (s *standIn) Slice(_, _, _ int) starlark.Value    { return s }

func benchmarkFloor(b *testing.B, ranks int) {
	src, err := os.ReadFile("ports/single_node/allreduce.star")
	if err != nil {
		b.Fatal(err)
	}
	obj := &standIn{}
	ret := func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return obj, nil
	}
	obj.method = starlark.NewBuiltin("method", ret)
	param := func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		if args[0] == starlark.String("num_gpus") {
			return starlark.MakeInt(ranks), nil
		}
		return args[1], nil
	}
	predeclared := starlark.StringDict{"param": starlark.NewBuiltin("param", param), "SyncType": obj}
	for _, name := range []string{"CollectiveProgram", "AllReduce", "MemoryChannel", "Rank"} {
		predeclared[name] = starlark.NewBuiltin(name, ret)
	}
	n := 0
	for b.Loop() {
		thread := &starlark.Thread{Name: "floor"}
		if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "allreduce.star", src, predeclared); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n == 0 {
		b.Fatal("no iteration ran")
	}
}

func BenchmarkFloorAllreduce64(b *testing.B)  { benchmarkFloor(b, 64) }
func BenchmarkFloorAllreduce128(b *testing.B) { benchmarkFloor(b, 128) }
