package passes

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/mscclgo/mscclgo/ir"
	"go.starlark.net/syntax"
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
// The message goes on with the call sites of the signals and of the waits
// of that direction, with counts, and the first position where the two
// sequences, taken in call order, stop pairing (pairingDetail).
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
				k.Kind, k.Src, ns, k.Dst, k.Dst, nw, k.Src) + pairingDetail(k, calls(sig), calls(wait))}
		if ns > 0 {
			e.Pos = sig.Calls[0]
		} else if nw > 0 {
			e.Pos = wait.Calls[0]
		}
		return e
	}
	return nil
}

// mirror turns "s waits for d" into the signal direction "d to s".
func mirror(k ir.PairKey) ir.PairKey { return ir.PairKey{Src: k.Dst, Dst: k.Src, Kind: k.Kind} }

func calls(c *ir.PairCount) []syntax.Position {
	if c == nil {
		return nil
	}
	return c.Calls
}

// maxSites bounds the call sites listed per side of a mismatch.
const maxSites = 8

// pairingDetail explains a mismatching direction k: the call sites of its
// signals and of its waits with their counts, then where the sequences
// stop pairing. The k-th signal is paired with the k-th wait (call order);
// the sequences stop pairing at the first k where a signal call site meets
// a wait call site other than the one its earlier calls met (or the
// reverse), or else where one sequence runs out.
func pairingDetail(k ir.PairKey, sig, wait []syntax.Position) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  signals of rank %d to rank %d: %s", k.Src, k.Dst, sites(sig))
	fmt.Fprintf(&b, "\n  waits of rank %d for rank %d: %s", k.Dst, k.Src, sites(wait))
	metWait := map[string]string{}
	metSignal := map[string]string{}
	n := min(len(sig), len(wait))
	for i := range n {
		s, w := sig[i].String(), wait[i].String()
		if prev, ok := metWait[s]; ok && prev != w {
			fmt.Fprintf(&b, "\n  in call order, signal %d (%s) meets wait %d (%s), but the earlier signals at %s met waits at %s", i+1, s, i+1, w, s, prev)
			if len(sig) > len(wait) {
				fmt.Fprintf(&b, ": a wait at %s is missing before %s, or this signal is extra", prev, w)
			} else {
				fmt.Fprintf(&b, ": a signal for the wait at %s is missing before %s, or that wait is extra", w, s)
			}
			return b.String()
		}
		if prev, ok := metSignal[w]; ok && prev != s {
			fmt.Fprintf(&b, "\n  in call order, wait %d (%s) meets signal %d (%s), but the earlier waits at %s met signals at %s", i+1, w, i+1, s, w, prev)
			if len(sig) > len(wait) {
				fmt.Fprintf(&b, ": a wait for the signal at %s is missing before %s, or that signal is extra", s, w)
			} else {
				fmt.Fprintf(&b, ": a signal at %s is missing before %s, or this wait is extra", prev, s)
			}
			return b.String()
		}
		metWait[s], metSignal[w] = w, s
	}
	switch {
	case len(sig) == n+1:
		fmt.Fprintf(&b, "\n  in call order, signal %d (%s) has no wait: a wait of rank %d for rank %d is missing, or the signal is extra", n+1, sig[n], k.Dst, k.Src)
	case len(sig) > n:
		fmt.Fprintf(&b, "\n  in call order, signals %d to %d (the first at %s) have no wait: waits of rank %d for rank %d are missing, or the signals are extra", n+1, len(sig), sig[n], k.Dst, k.Src)
	case len(wait) == n+1:
		fmt.Fprintf(&b, "\n  in call order, wait %d (%s) has no signal: a signal of rank %d to rank %d is missing, or the wait is extra", n+1, wait[n], k.Src, k.Dst)
	default:
		fmt.Fprintf(&b, "\n  in call order, waits %d to %d (the first at %s) have no signal: signals of rank %d to rank %d are missing, or the waits are extra", n+1, len(wait), wait[n], k.Src, k.Dst)
	}
	return b.String()
}

// sites lists the distinct call sites (file:line:col) of ps in first-call order, each with
// its count: "a.star:3:5 x2, a.star:9:5".
func sites(ps []syntax.Position) string {
	if len(ps) == 0 {
		return "none"
	}
	var order []string
	n := map[string]int{}
	for _, pos := range ps {
		p := pos.String()
		if n[p] == 0 {
			order = append(order, p)
		}
		n[p]++
	}
	var parts []string
	for i, p := range order {
		if i == maxSites {
			parts = append(parts, fmt.Sprintf("and %d more call sites", len(order)-maxSites))
			break
		}
		part := p
		if n[p] > 1 {
			part += fmt.Sprintf(" x%d", n[p])
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func count(c *ir.PairCount) int {
	if c == nil {
		return 0
	}
	return len(c.Calls)
}
