package starlib

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// builtinFn is the signature of every builtin and method implementation.
type builtinFn = func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)

// methods is a type's method table, sorted by name. A type has a handful
// of methods, and a scan compares lengths before bytes, so looking one up
// is cheaper than hashing the name (it happens on every method call).
type methods []method

// method is one entry of a method table: a builtin named "Type.method",
// made once, bound to its receiver at each attribute access.
type method struct {
	name string
	b    *starlark.Builtin
}

// methodTable builds a type's method table.
func methodTable(typ string, fns map[string]builtinFn) methods {
	out := make(methods, 0, len(fns))
	for name, fn := range fns {
		out = append(out, method{name, starlark.NewBuiltin(typ+"."+name, guard(typ+"."+name, fn))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// methodAttr returns the bound method name of recv from table, or nil.
func methodAttr(table methods, name string, recv starlark.Value) starlark.Value {
	for i := range table {
		if table[i].name == name {
			return table[i].b.BindReceiver(recv)
		}
	}
	return nil
}

// names returns the sorted union of field names and method names.
func names(fields []string, table methods) []string {
	out := append([]string(nil), fields...)
	for _, m := range table {
		out = append(out, m.name)
	}
	sort.Strings(out)
	return out
}

// fnName returns the builtin's name for messages: "Type.method" for
// methods (their builtins carry the qualified name), else the function
// name.
func fnName(b *starlark.Builtin) string { return b.Name() }

// toInt converts v to an int for parameter param of fn.
func toInt(fn, param string, v starlark.Value) (int, error) {
	i, ok := v.(starlark.Int)
	if !ok {
		return 0, fmt.Errorf("%s: for parameter %s: got %s, want int", fn, param, v.Type())
	}
	n, ok := i.Int64()
	if !ok || n != int64(int(n)) || n > 1<<40 || n < -(1<<40) {
		return 0, fmt.Errorf("%s: for parameter %s: %s out of range", fn, param, i)
	}
	return int(n), nil
}

// toNonNeg converts v to a non-negative int.
func toNonNeg(fn, param string, v starlark.Value) (int, error) {
	n, err := toInt(fn, param, v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: for parameter %s: got %d, want a non-negative int", fn, param, n)
	}
	return n, nil
}

// toBig converts v to a big integer.
func toBig(fn, param string, v starlark.Value) (*big.Int, error) {
	i, ok := v.(starlark.Int)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter %s: got %s, want int", fn, param, v.Type())
	}
	return i.BigInt(), nil
}

// toBool converts v to a bool.
func toBool(fn, param string, v starlark.Value) (bool, error) {
	b, ok := v.(starlark.Bool)
	if !ok {
		return false, fmt.Errorf("%s: for parameter %s: got %s, want bool", fn, param, v.Type())
	}
	return bool(b), nil
}

// toIntList converts a list or tuple of ints.
func toIntList(fn, param string, v starlark.Value) ([]int, error) {
	it, ok := v.(starlark.Indexable)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter %s: got %s, want list of int", fn, param, v.Type())
	}
	switch v.(type) {
	case *starlark.List, starlark.Tuple:
	default:
		return nil, fmt.Errorf("%s: for parameter %s: got %s, want list of int", fn, param, v.Type())
	}
	out := make([]int, it.Len())
	for i := range out {
		n, err := toInt(fn, fmt.Sprintf("%s[%d]", param, i), it.Index(i))
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// intList returns xs as a Starlark list.
func intList(xs []int) *starlark.List {
	vs := make([]starlark.Value, len(xs))
	for i, x := range xs {
		vs[i] = starlark.MakeInt(x)
	}
	return starlark.NewList(vs)
}

// noHash is the Hash of unhashable mutable-state values.
func noHash(typ string) (uint32, error) { return 0, fmt.Errorf("unhashable type: %s", typ) }

// fmtInts formats ints as a Starlark list: [0, 1].
func fmtInts(xs []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(x))
	}
	b.WriteByte(']')
	return b.String()
}

// unpack binds positional and keyword arguments to params, storing them in
// out (len(out) == len(params), pre-filled with the defaults). The first
// required params are mandatory. It is starlark.UnpackArgs for Value
// targets, without reflection or allocation, for the builtins a large
// program calls hundreds of thousands of times.
func unpack(fn string, args starlark.Tuple, kwargs []starlark.Tuple, params []string, required int, out []starlark.Value) error {
	if len(args) > len(params) {
		return fmt.Errorf("%s: got %d arguments, want at most %d", fn, len(args), len(params))
	}
	var set uint64
	for i, a := range args {
		out[i] = a
		set |= 1 << i
	}
	for _, kv := range kwargs {
		name, _ := starlark.AsString(kv[0])
		i := 0
		for i < len(params) && params[i] != name {
			i++
		}
		if i == len(params) {
			return fmt.Errorf("%s: unexpected keyword argument %q", fn, name)
		}
		if set&(1<<i) != 0 {
			return fmt.Errorf("%s: got multiple values for parameter %q", fn, name)
		}
		out[i] = kv[1]
		set |= 1 << i
	}
	for i := 0; i < required; i++ {
		if set&(1<<i) == 0 {
			return fmt.Errorf("%s: missing argument for %s", fn, params[i])
		}
	}
	return nil
}
