// Metered operators and builtins. The interpreter allocates and loops
// inside its operators and builtins without counting steps, so that a
// one-line script ([0] * 1000000000, all(range(1 << 62)), str() of a
// list nested a million deep) could exhaust the machine. The rewrite of
// each file (rewrite.go) routes +, * and % and the methods that take
// unbounded input through the builtins here, which check the size of
// what they are about to build against the memory budget; the universe
// builtins that iterate count each element of a range against the step,
// time and memory limits.

package starlib

import (
	"fmt"
	"math/bits"
	"unsafe"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Predeclared names of the rewritten operators and method calls.
const (
	addFunc      = "__add__"
	mulFunc      = "__mul__"
	modFunc      = "__mod__"
	addCheckFunc = "__add_check__"
	mulCheckFunc = "__mul_check__"
	modCheckFunc = "__mod_check__"
	methodFunc   = "__method__"
)

// meteredMethods are the methods whose calls are rewritten through
// methodFunc: they build values whose size their arguments decide, or
// iterate their arguments.
var meteredMethods = map[string]bool{
	"join": true, "replace": true, "format": true, "extend": true, "update": true,
	"split": true, "rsplit": true, "splitlines": true,
	"union": true, "intersection": true, "difference": true, "symmetric_difference": true,
	"issubset": true, "issuperset": true,
}

// operatorBuiltins are the predeclared functions the rewrite calls.
func operatorBuiltins() map[string]builtinFn {
	return map[string]builtinFn{
		addFunc:      binaryOp(syntax.PLUS),
		mulFunc:      binaryOp(syntax.STAR),
		modFunc:      binaryOp(syntax.PERCENT),
		addCheckFunc: augmentedCheck(syntax.PLUS),
		mulCheckFunc: augmentedCheck(syntax.STAR),
		modCheckFunc: augmentedCheck(syntax.PERCENT),
		methodFunc:   methodCall,
		tupleFunc:    tupleBuiltin,
	}
}

// binaryOp returns the builtin computing x op y after checking its size.
func binaryOp(op syntax.Token) builtinFn {
	return func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		x, y := args[0], args[1]
		if smallInts(x, y) {
			// The common case, an index or a count: nothing to check.
			return starlark.Binary(op, x, y)
		}
		if err := checkBinary(meterOf(th), op, x, y); err != nil {
			return nil, err
		}
		return starlark.Binary(op, x, y)
	}
}

// augmentedCheck returns the builtin behind x op= y: it checks the size
// of x op y and returns y, which the assignment then applies.
func augmentedCheck(op syntax.Token) builtinFn {
	return func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		if err := checkBinary(meterOf(th), op, args[0], args[1]); err != nil {
			return nil, err
		}
		return args[1], nil
	}
}

// smallInts reports whether x and y are both integers below 2^31 in
// magnitude, whose sum, product and remainder fit in 63 bits.
func smallInts(x, y starlark.Value) bool {
	xi, ok1 := x.(starlark.Int)
	yi, ok2 := y.(starlark.Int)
	if !ok1 || !ok2 {
		return false
	}
	a, ok1 := xi.Int64()
	b, ok2 := yi.Int64()
	const lim = 1 << 31
	return ok1 && ok2 && a > -lim && a < lim && b > -lim && b < lim
}

// valueBytes is what one element of a list or tuple costs.
const valueBytes = uint64(unsafe.Sizeof(starlark.Value(nil)))

// checkBinary checks that x op y stays within the limits.
func checkBinary(m *meter, op syntax.Token, x, y starlark.Value) error {
	if m == nil {
		return nil
	}
	switch op {
	case syntax.PLUS:
		if xi, ok := x.(starlark.Int); ok {
			if yi, ok := y.(starlark.Int); ok {
				return checkIntBits(op, max(intBits(xi), intBits(yi))+1)
			}
			return nil
		}
		xn, xb, ok1 := seqSize(x)
		yn, _, ok2 := seqSize(y)
		if ok1 && ok2 && x.Type() == y.Type() {
			return m.reserve(satAdd(xn, yn)*xb, fmt.Sprintf("%s + %s of %d and %d elements", x.Type(), y.Type(), xn, yn))
		}
	case syntax.STAR:
		if xi, ok := x.(starlark.Int); ok {
			if yi, ok := y.(starlark.Int); ok {
				return checkIntBits(op, intBits(xi)+intBits(yi))
			}
			x, y = y, x
		}
		n, per, ok := seqSize(x)
		k, isInt := y.(starlark.Int)
		if !ok || !isInt || n == 0 {
			return nil
		}
		times, exact := k.Uint64()
		if !exact {
			if k.Sign() <= 0 {
				return nil
			}
			times = ^uint64(0)
		}
		return m.reserve(satMul(satMul(n, times), per), fmt.Sprintf("%s * %s (%d elements repeated %s times)", x.Type(), k.Type(), n, k))
	case syntax.PERCENT:
		if f, ok := x.(starlark.String); ok {
			n, err := strSize(m, y)
			if err != nil {
				return err
			}
			return m.reserve(satAdd(uint64(len(f)), n), "string % formatting")
		}
	}
	return nil
}

// seqSize returns the length of a string, list or tuple and the bytes
// one element costs.
func seqSize(v starlark.Value) (n, per uint64, ok bool) {
	switch v := v.(type) {
	case starlark.String:
		return uint64(len(v)), 1, true
	case starlark.Bytes:
		return uint64(len(v)), 1, true
	case *starlark.List:
		return uint64(v.Len()), valueBytes, true
	case starlark.Tuple:
		return uint64(len(v)), valueBytes, true
	}
	return 0, 0, false
}

// intBits returns the bit length of |i|.
func intBits(i starlark.Int) int {
	if v, ok := i.Int64(); ok {
		if v < 0 {
			return bits.Len64(uint64(-v))
		}
		return bits.Len64(uint64(v))
	}
	return i.BigInt().BitLen()
}

func checkIntBits(op syntax.Token, bits int) error {
	if bits > MaxIntBits {
		return fmt.Errorf("int %s int would have about %d bits, over the limit of %d bits for an integer", op, bits, MaxIntBits)
	}
	return nil
}

// satAdd and satMul are + and * that stop at the largest uint64.
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

func satMul(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > ^uint64(0)/b {
		return ^uint64(0)
	}
	return a * b
}

// methodCall implements recv.name(args...): it checks what the metered
// methods would build and counts the ranges they iterate.
func methodCall(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	recv, name := args[0], string(args[1].(starlark.String))
	args = args[2:]
	fn, err := attr(recv, name)
	if err != nil {
		return nil, err
	}
	m := meterOf(th)
	if m == nil {
		return starlark.Call(th, fn, args, kwargs)
	}
	if s, ok := recv.(starlark.String); ok {
		if err := checkStringMethod(m, s, name, args, kwargs); err != nil {
			return nil, err
		}
	}
	if err := checkMaterialize(m, name, args); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	args, ranges := countRanges(m, args)
	v, err := starlark.Call(th, fn, args, kwargs)
	if rerr := ranges.err(); rerr != nil {
		return nil, rerr
	}
	return v, err
}

// attr returns recv.name as the interpreter's dot operator does.
func attr(recv starlark.Value, name string) (starlark.Value, error) {
	if h, ok := recv.(starlark.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil {
			return nil, err
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s has no .%s field or method", recv.Type(), name)
}

// checkStringMethod checks the size of what s.name(args) builds.
func checkStringMethod(m *meter, s starlark.String, name string, args starlark.Tuple, kwargs []starlark.Tuple) error {
	switch name {
	case "join":
		if len(args) != 1 {
			return nil
		}
		var n, parts uint64
		switch it := args[0].(type) {
		case *starlark.List, starlark.Tuple:
			seq := it.(starlark.Indexable)
			for i := 0; i < seq.Len(); i++ {
				if e, ok := seq.Index(i).(starlark.String); ok {
					n = satAdd(n, uint64(len(e)))
				}
				parts++
			}
		default:
			return nil
		}
		if parts > 0 {
			n = satAdd(n, satMul(parts-1, uint64(len(s))))
		}
		return m.reserve(n, fmt.Sprintf("join of %d strings", parts))
	case "replace":
		if len(args) < 2 {
			return nil
		}
		old, ok1 := args[0].(starlark.String)
		repl, ok2 := args[1].(starlark.String)
		if !ok1 || !ok2 || len(repl) <= len(old) {
			return nil
		}
		// At most one replacement per byte (and one more for old == "").
		k := uint64(len(s)) + 1
		if len(old) > 0 {
			k = uint64(len(s)) / uint64(len(old))
		}
		return m.reserve(satAdd(uint64(len(s)), satMul(k, uint64(len(repl)-len(old)))), "replace")
	case "format":
		n := uint64(len(s))
		for _, a := range args {
			k, err := strSize(m, a)
			if err != nil {
				return err
			}
			n = satAdd(n, k)
		}
		for _, kv := range kwargs {
			k, err := strSize(m, kv[1])
			if err != nil {
				return err
			}
			n = satAdd(n, k)
		}
		return m.reserve(n, "format")
	case "split", "rsplit", "splitlines":
		// At most one part per separator found, each a string value
		// in the list.
		parts := uint64(len(s))/2 + 1
		if len(args) > 0 {
			if sep, ok := args[0].(starlark.String); ok && len(sep) > 0 {
				parts = uint64(len(s))/uint64(len(sep)) + 1
			}
		}
		return m.reserve(satMul(parts, 2*valueBytes), fmt.Sprintf("%s of a string of %d bytes (up to %d parts)", name, len(s), parts))
	}
	return nil
}

// bigRange is how long a range must be before builtins count its
// elements: shorter ones cost less than the interpreter's loop over them.
const bigRange = 1 << 12

// countRanges replaces each long range in args by a range whose iterator
// counts its elements; the returned set reports the limit one hit.
func countRanges(m *meter, args starlark.Tuple) (starlark.Tuple, countedSet) {
	if m == nil {
		return args, nil
	}
	var set countedSet
	for i, a := range args {
		if s, ok := a.(starlark.Sequence); ok && a.Type() == "range" && s.Len() > bigRange {
			if set == nil {
				args = append(starlark.Tuple(nil), args...)
			}
			c := &countedRange{Iterable: s, m: m}
			set = append(set, c)
			args[i] = c
		}
	}
	return args, set
}

// countedSet is the counted ranges of one call.
type countedSet []*countedRange

func (s countedSet) err() error {
	for _, c := range s {
		if c.stop != nil {
			return c.stop
		}
	}
	return nil
}

// countedRange is a range whose iteration counts each element against
// the limits. It is only an Iterable, so that builtins do not size their
// results by its length up front.
type countedRange struct {
	starlark.Iterable
	m    *meter
	stop error
}

func (c *countedRange) Iterate() starlark.Iterator {
	return &countingIter{it: c.Iterable.Iterate(), c: c}
}

type countingIter struct {
	it starlark.Iterator
	c  *countedRange
}

func (i *countingIter) Next(p *starlark.Value) bool {
	if err := i.c.m.step(); err != nil {
		i.c.stop = err
		return false
	}
	return i.it.Next(p)
}

func (i *countingIter) Done() { i.it.Done() }

// materializers are the universe builtins that build a value with one
// entry per element they iterate, and about what an entry costs in bytes.
var materializers = map[string]uint64{
	"list": 2 * valueBytes, "tuple": 2 * valueBytes, "sorted": 2 * valueBytes, "reversed": 2 * valueBytes,
	"set": 4 * valueBytes, "enumerate": 6 * valueBytes, "zip": 6 * valueBytes,
	"extend": 2 * valueBytes, "union": 4 * valueBytes, "symmetric_difference": 4 * valueBytes,
}

// checkMaterialize checks that the value builtin name would build from
// args fits in the memory budget, when a long range among args decides
// its length. zip stops at its shortest argument.
func checkMaterialize(m *meter, name string, args starlark.Tuple) error {
	per, ok := materializers[name]
	if !ok {
		return nil
	}
	n, long := -1, false
	for _, a := range args {
		s, ok := a.(starlark.Sequence)
		if !ok {
			if name == "zip" {
				return nil
			}
			continue
		}
		if s.Len() > bigRange {
			long = true
		}
		if n < 0 || (name == "zip" && s.Len() < n) {
			n = s.Len()
		} else if name != "zip" {
			n = max(n, s.Len())
		}
	}
	if !long || n <= 0 {
		return nil
	}
	return m.reserve(satMul(uint64(n), per), fmt.Sprintf("%s of %d elements", name, n))
}

// universeBuiltin wraps the interpreter's builtin b: long ranges among
// its arguments are counted, builtins that would build a value from one
// check its size first, and str, repr, print and fail check the size of
// the text they would build.
func universeBuiltin(b *starlark.Builtin) builtinFn {
	name := b.Name()
	stringifies := name == "str" || name == "repr" || name == "print" || name == "fail"
	return func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		m := meterOf(th)
		if m == nil {
			return b.CallInternal(th, args, kwargs)
		}
		if name == "int" && len(args) > 0 {
			if err := checkIntText(args[0]); err != nil {
				return nil, err
			}
		}
		if stringifies {
			var n uint64
			for _, a := range args {
				k, err := strSize(m, a)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				n = satAdd(n, k)
			}
			if err := m.reserve(n, name+"()"); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := checkMaterialize(m, name, args); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		args, ranges := countRanges(m, args)
		v, err := b.CallInternal(th, args, kwargs)
		if rerr := ranges.err(); rerr != nil {
			return nil, rerr
		}
		return v, err
	}
}

// maxIntDigits bounds the text int() converts: an integer of MaxIntBits
// bits has 315,653 decimal digits, and the conversion takes time
// quadratic in the length.
const maxIntDigits = MaxIntBits*30103/100000 + 2

// checkIntText refuses int() of a string longer than any integer the
// limits allow.
func checkIntText(v starlark.Value) error {
	s, ok := v.(starlark.String)
	if !ok || len(s) <= maxIntDigits {
		return nil
	}
	return fmt.Errorf("int: a string of %d characters: an integer has at most %d digits (%d bits)", len(s), maxIntDigits, MaxIntBits)
}

// strSize estimates the length of str(v), failing when v nests deeper
// than MaxNesting or the text would not fit in the memory budget. Shared
// lists, tuples and dicts that hold other containers are sized once, so
// that a value doubled by sharing (x = [x, x], forty times) costs its
// distinct parts to size. A container of scalars only is sized again at
// each of its places: it costs no more to size than its text is long,
// and so the estimate allocates nothing for a list of a hundred million
// small lists. What the memo of the others holds is charged to the
// budget as it grows.
func strSize(m *meter, v starlark.Value) (uint64, error) {
	s := sizer{m: m, memo: map[any]uint64{}}
	return s.size(v, 0)
}

type sizer struct {
	m    *meter
	memo map[any]uint64
	// kept counts the memo's entries of sized containers.
	kept uint64
}

// memoEntryBytes is about what one memo entry costs: its key (an
// interface holding a pointer or a tupleKey), its value and the map's
// share of overhead.
const memoEntryBytes = 64

// tupleKey identifies a tuple's backing array.
type tupleKey struct {
	p *starlark.Value
	n int
}

func (s *sizer) size(v starlark.Value, depth int) (uint64, error) {
	if depth > MaxNesting {
		return 0, fmt.Errorf("the value nests deeper than %d levels of lists, tuples or dicts", MaxNesting)
	}
	var key any
	var elems func(yield func(starlark.Value) bool)
	var n uint64 = 2
	switch v := v.(type) {
	case starlark.String:
		// repr writes a byte as up to 4 characters (\x00).
		n := uint64(len(v)) + 2
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				n += 3
			}
		}
		return n, nil
	case starlark.Int:
		if _, ok := v.Int64(); ok {
			return 20, nil
		}
		return uint64(v.BigInt().BitLen())/3 + 2, nil
	case *starlark.List:
		key = v
		elems = func(yield func(starlark.Value) bool) {
			for i := 0; i < v.Len(); i++ {
				if !yield(v.Index(i)) {
					return
				}
			}
		}
	case starlark.Tuple:
		if len(v) == 0 {
			return 2, nil
		}
		key = tupleKey{&v[0], len(v)}
		elems = func(yield func(starlark.Value) bool) {
			for _, e := range v {
				if !yield(e) {
					return
				}
			}
		}
	case *starlark.Dict:
		key = v
		elems = func(yield func(starlark.Value) bool) {
			// Keys and values one at a time: Items would copy the
			// dict's every pair first.
			it := v.Iterate()
			defer it.Done()
			var k starlark.Value
			for it.Next(&k) {
				e, _, _ := v.Get(k)
				if !yield(k) || !yield(e) {
					return
				}
			}
		}
	case *starlark.Set:
		key = v
		elems = func(yield func(starlark.Value) bool) {
			it := v.Iterate()
			defer it.Done()
			var e starlark.Value
			for it.Next(&e) {
				if !yield(e) {
					return
				}
			}
		}
	case *starlarkstruct.Struct:
		key = v
		elems = func(yield func(starlark.Value) bool) {
			for _, name := range v.AttrNames() {
				f, _ := v.Attr(name)
				if f != nil && !yield(f) {
					return
				}
			}
		}
	default:
		// Scalars and the DSL's values print in a few dozen bytes.
		return 64, nil
	}
	if k, ok := s.memo[key]; ok {
		return k, nil
	}
	// Mark the container as in progress: a cycle prints as [...].
	s.memo[key] = 5
	var err error
	nested := false
	elems(func(e starlark.Value) bool {
		var k uint64
		if k, err = s.size(e, depth+1); err != nil {
			return false
		}
		if !nested {
			nested = isContainer(e)
		}
		n = satAdd(n, k+2)
		if n > s.m.lim.MaxMemory {
			err = s.m.reserve(n, "the text of the value")
			return err == nil
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if !nested {
		// Scalars only: no cycle runs through it, and sizing it again
		// costs no more than its text (the map reuses the slot).
		delete(s.memo, key)
		return n, nil
	}
	s.memo[key] = n
	if s.kept++; s.kept%4096 == 0 {
		if err := s.m.reserve(s.kept*memoEntryBytes, "sizing the text of the value (its shared parts)"); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// isContainer reports whether v is one of the values strSize walks into.
func isContainer(v starlark.Value) bool {
	switch v := v.(type) {
	case *starlark.List, *starlark.Dict, *starlark.Set, *starlarkstruct.Struct:
		return true
	case starlark.Tuple:
		return len(v) > 0
	}
	return false
}
