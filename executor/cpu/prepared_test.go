package cpu

import (
	"bytes"
	"context"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// TestOpenPrepared: sessions opened from one Prepared (twice, and with
// Open, which prepares its own) give the same bytes, and OpenPrepared
// refuses nothing Open accepts.
func TestOpenPrepared(t *testing.T) {
	t.Parallel()
	p, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
	if err != nil && !plan.IsWarning(err) {
		t.Skip(err)
	}
	lay, err := harness.PlanLayout(p, 1<<12, executor.Float32, false)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	opts := executor.Options{DType: executor.Float32}
	prep, err := executor.Prepare(inst, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := New()
	po, ok := b.(executor.PreparedOpener)
	if !ok {
		t.Fatal("the cpu backend is not an executor.PreparedOpener")
	}
	run := func(name string, open func() (executor.Session, error)) [][]byte {
		s, err := open()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer s.Close()
		bufs := lay.Alloc()
		if err := harness.NewChecker().FillInputs(lay, bufs, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Launch(context.Background(), bufs); err != nil {
			t.Fatalf("%s: launch: %v", name, err)
		}
		var out [][]byte
		for _, rb := range bufs {
			out = append(out, bytes.Clone(rb.Output))
		}
		return out
	}
	want := run("Open", func() (executor.Session, error) { return b.Open(inst, opts) })
	for _, name := range []string{"OpenPrepared", "OpenPrepared again"} {
		got := run(name, func() (executor.Session, error) { return po.OpenPrepared(prep) })
		for r := range want {
			if !bytes.Equal(got[r], want[r]) {
				t.Errorf("%s: rank %d's output differs from Open's", name, r)
			}
		}
	}
}
