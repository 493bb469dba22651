package passes

import (
	"errors"
	"strings"
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
				"on the peer rank over a channel of the same type\n" +
				"  signals of rank 0 to rank 1: t.star:1:1\n" +
				"  waits of rank 1 for rank 0: none\n" +
				"  in call order, signal 1 (t.star:1:1) has no wait: a wait of rank 1 for rank 0 is missing, or the signal is extra"},
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
				"on the peer rank over a channel of the same type\n" +
				"  signals of rank 0 to rank 1: none\n" +
				"  waits of rank 1 for rank 0: t.star:3:1\n" +
				"  in call order, wait 1 (t.star:3:1) has no signal: a signal of rank 0 to rank 1 is missing, or the wait is extra"},
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
		"on the peer rank over a channel of the same type\n" +
		"  signals of rank 1 to rank 0: a:6:1\n" +
		"  waits of rank 0 for rank 1: none\n" +
		"  in call order, signal 1 (a:6:1) has no wait: a wait of rank 0 for rank 1 is missing, or the signal is extra"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

// TestValidatePairingDetail checks where the report says the signal and
// wait sequences of a direction stop pairing, for a missing wait and a
// missing signal in the middle of the sequences (two loops, the first one
// short of one call) and at their end.
func TestValidatePairingDetail(t *testing.T) {
	t.Parallel()
	// lines repeats each line n times: {22, 3} is three calls at line 22.
	type calls [][2]int32
	tests := []struct {
		name          string
		signals       calls
		waits         calls
		wantPos, want string
	}{
		{name: "missing wait", signals: calls{{22, 3}, {28, 3}}, waits: calls{{34, 2}, {40, 3}},
			wantPos: "a:22:1", want: "" +
				"  signals of rank 0 to rank 1: a:22:1 x3, a:28:1 x3\n" +
				"  waits of rank 1 for rank 0: a:34:1 x2, a:40:1 x3\n" +
				"  in call order, signal 3 (a:22:1) meets wait 3 (a:40:1), but the earlier signals at a:22:1 met waits at a:34:1: " +
				"a wait at a:34:1 is missing before a:40:1, or this signal is extra"},
		{name: "missing signal", signals: calls{{22, 2}, {28, 3}}, waits: calls{{34, 3}, {40, 3}},
			wantPos: "a:22:1", want: "" +
				"  signals of rank 0 to rank 1: a:22:1 x2, a:28:1 x3\n" +
				"  waits of rank 1 for rank 0: a:34:1 x3, a:40:1 x3\n" +
				"  in call order, wait 3 (a:34:1) meets signal 3 (a:28:1), but the earlier waits at a:34:1 met signals at a:22:1: " +
				"a signal at a:22:1 is missing before a:28:1, or this wait is extra"},
		{name: "missing last waits", signals: calls{{22, 4}}, waits: calls{{34, 2}},
			wantPos: "a:22:1", want: "" +
				"  signals of rank 0 to rank 1: a:22:1 x4\n" +
				"  waits of rank 1 for rank 0: a:34:1 x2\n" +
				"  in call order, signals 3 to 4 (the first at a:22:1) have no wait: waits of rank 1 for rank 0 are missing, or the signals are extra"},
		{name: "missing last signal", signals: calls{{22, 1}}, waits: calls{{34, 1}, {35, 1}},
			wantPos: "a:22:1", want: "" +
				"  signals of rank 0 to rank 1: a:22:1\n" +
				"  waits of rank 1 for rank 0: a:34:1, a:35:1\n" +
				"  in call order, wait 2 (a:35:1) has no signal: a signal of rank 0 to rank 1 is missing, or the wait is extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := ir.NewProgram(2, 1, 1)
			for _, c := range tt.signals {
				for range c[1] {
					ir.Count(p.Signals, ir.PairKey{Src: 0, Dst: 1, Kind: ir.Memory}, syntaxPos("a", c[0]))
				}
			}
			for _, c := range tt.waits {
				for range c[1] {
					ir.Count(p.Waits, ir.PairKey{Src: 1, Dst: 0, Kind: ir.Memory}, syntaxPos("a", c[0]))
				}
			}
			err := ValidatePairing(p)
			if err == nil {
				t.Fatal("no error")
			}
			first, detail, _ := strings.Cut(err.Error(), "\n")
			if !strings.HasPrefix(first, tt.wantPos+": validate: signal/wait mismatch") {
				t.Errorf("first line %q, want it at %s", first, tt.wantPos)
			}
			if detail != tt.want {
				t.Errorf("detail\n%s\nwant\n%s", detail, tt.want)
			}
		})
	}
}
