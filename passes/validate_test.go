package passes

import (
	"errors"
	"testing"

	"github.com/mscclgo/mscclgo/ir"
)

// TestValidateExamples ports the examples of docs/passes.md §3.
func TestValidateExamples(t *testing.T) {
	t.Parallel()
	runExamples(t, []example{
		{name: "val_missing_wait", build: func(t *tprog) {
			t.mem(1, 0).signal(0, both)
		}, err: ErrPairing,
			errText: "t.star:1:1: validate: signal/wait mismatch on memory: rank 0 issues 1 signal(s) to rank 1, " +
				"but rank 1 performs 0 wait(s) for rank 0; every signal must be matched by a corresponding wait " +
				"on the peer rank over a channel of the same type"},
		{name: "val_relaxed_ok", build: func(t *tprog) {
			t.mem(1, 0).rlxSignal(0, none)
			t.mem(0, 1).wait(0, none)
		}, want: map[string]string{
			"0/0": `rlxsignal memory ch={0} sync=none`,
			"1/0": `wait memory ch={0} sync=none`,
		}},
		{name: "val_pws", build: func(t *tprog) {
			t.port(1, 0).pws(O(1, 0, 1), I(0, 0, 1), 0)
			t.port(0, 1).wait(0, none)
		}, want: map[string]string{"0/0": `pws port ch=[0] i[0:1] -> rb0[0:1]`}},
		{name: "val_wait_only", build: func(t *tprog) {
			t.mem(1, 0).signal(0, none)
			t.mem(0, 1).wait(0, none)
			t.port(0, 1).wait(0, none) // rank 1 waits for rank 0 over port: no signal
		}, err: ErrPairing,
			errText: "t.star:3:1: validate: signal/wait mismatch on port: rank 0 issues 0 signal(s) to rank 1, " +
				"but rank 1 performs 1 wait(s) for rank 0; every signal must be matched by a corresponding wait " +
				"on the peer rank over a channel of the same type"},
		{name: "val_flush_not_counted", build: func(t *tprog) {
			t.port(1, 0).flush(0, none)
		}, want: map[string]string{"0/0": `flush port ch={0} sync=none`}},
	})
}

// TestValidateOrder checks that with several mismatching directions the
// first in (src, dst, type) order is reported.
func TestValidateOrder(t *testing.T) {
	t.Parallel()
	p := ir.NewProgram(3, 1, 1)
	ir.Count(p.Signals, ir.PairKey{Src: 2, Dst: 0, Kind: ir.Memory}, syntaxPos("a", 1))
	ir.Count(p.Signals, ir.PairKey{Src: 1, Dst: 2, Kind: ir.Port}, syntaxPos("a", 2))
	ir.Count(p.Waits, ir.PairKey{Src: 2, Dst: 1, Kind: ir.Port}, syntaxPos("a", 3))
	ir.Count(p.Waits, ir.PairKey{Src: 2, Dst: 1, Kind: ir.Port}, syntaxPos("a", 4))
	ir.Count(p.Signals, ir.PairKey{Src: 1, Dst: 0, Kind: ir.Port}, syntaxPos("a", 5))
	ir.Count(p.Signals, ir.PairKey{Src: 1, Dst: 0, Kind: ir.Memory}, syntaxPos("a", 6))
	err := ValidatePairing(p)
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrPairing) {
		t.Fatalf("got %v, want an *Error wrapping ErrPairing", err)
	}
	want := "a:6:1: validate: signal/wait mismatch on memory: rank 1 issues 1 signal(s) to rank 0, " +
		"but rank 0 performs 0 wait(s) for rank 1; every signal must be matched by a corresponding wait " +
		"on the peer rank over a channel of the same type"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}
