package passes

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mscclgo/mscclgo/ir"
)

// ValidatePairing is pass 1 (docs/passes.md §3). It reads the signal and wait counters the
// builtins recorded (p.Signals, p.Waits) and rewrites nothing. For every
// direction (s, d, t) that occurs as a signal key or as the mirror of a wait
// key, the signals rank s sends to d over channel type t must equal the
// waits rank d performs for s over t.
//
// Mismatching directions are examined in (src, dst, type) order and the
// first one is reported (the reference picks one in hash order, Q20), as
// an *Error wrapping ErrPairing, positioned at the first signal of that
// direction, or at the first wait of its mirror when there is no signal.
func ValidatePairing(p *ir.Program) error {
	keys := make([]ir.PairKey, 0, len(p.Signals)+len(p.Waits))
	for k := range p.Signals {
		keys = append(keys, k)
	}
	for k := range p.Waits {
		m := mirror(k)
		if _, ok := p.Signals[m]; !ok {
			keys = append(keys, m)
		}
	}
	slices.SortFunc(keys, func(a, b ir.PairKey) int {
		return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Kind, b.Kind))
	})
	for _, k := range keys {
		sig, wait := p.Signals[k], p.Waits[mirror(k)]
		ns, nw := count(sig), count(wait)
		if ns == nw {
			continue
		}
		e := &Error{Pass: "validate", Program: p.Name, Err: ErrPairing,
			Msg: fmt.Sprintf("signal/wait mismatch on %s: rank %d issues %d signal(s) to rank %d, "+
				"but rank %d performs %d wait(s) for rank %d; every signal must be matched by a "+
				"corresponding wait on the peer rank over a channel of the same type",
				k.Kind, k.Src, ns, k.Dst, k.Dst, nw, k.Src)}
		if sig != nil {
			e.Pos = sig.First
		} else if wait != nil {
			e.Pos = wait.First
		}
		return e
	}
	return nil
}

// mirror turns "s waits for d" into the signal direction "d to s".
func mirror(k ir.PairKey) ir.PairKey { return ir.PairKey{Src: k.Dst, Dst: k.Src, Kind: k.Kind} }

func count(c *ir.PairCount) int {
	if c == nil {
		return 0
	}
	return c.N
}
