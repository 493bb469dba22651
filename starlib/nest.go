// Nesting bounds. The interpreter freezes a module's values, hashes
// tuples and prints values by recursion in Go, so that a list or tuple
// nested millions deep would overflow the Go stack, which is fatal and
// cannot be recovered. Tuple literals check their depth as they are built
// (tupleFunc, from the rewrite), and every module's values are checked
// before they are frozen.

package starlib

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// tupleFunc is the predeclared name tuple literals are rewritten to call.
const tupleFunc = "__tuple__"

// tupleWalk bounds the tuples tupleBuiltin visits to find a new tuple's
// depth.
const tupleWalk = 1 << 14

// tupleBuiltin builds a tuple literal, refusing one that would nest
// tuples deeper than MaxNesting (hashing it would recurse that deep).
func tupleBuiltin(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	// The interpreter hands a builtin a fresh copy of its positional
	// arguments, so they can be the tuple itself.
	t := args
	budget := tupleWalk
	if d := tupleDepth(t, 0, &budget); d > MaxNesting {
		return nil, fmt.Errorf("the tuple would nest deeper than %d levels", MaxNesting)
	}
	return t, nil
}

// tupleDepth returns how deeply t nests tuples, visiting at most budget
// tuples (depth-first, first elements first: a chain x = (x,) is found at
// once).
func tupleDepth(t starlark.Tuple, depth int, budget *int) int {
	deepest := depth + 1
	if deepest > MaxNesting {
		return deepest
	}
	for _, e := range t {
		inner, ok := e.(starlark.Tuple)
		if !ok || len(inner) == 0 || *budget <= 0 {
			continue
		}
		*budget--
		deepest = max(deepest, tupleDepth(inner, depth+1, budget))
		if deepest > MaxNesting {
			break
		}
	}
	return deepest
}

// nestKey identifies a container value: its pointer, or for a tuple its
// backing array.
func nestKey(v starlark.Value) (any, bool) {
	switch v := v.(type) {
	case *starlark.List, *starlark.Dict, *starlark.Set, *starlark.Function, *starlarkstruct.Struct:
		return v, true
	case starlark.Tuple:
		if len(v) == 0 {
			return nil, false
		}
		return tupleKey{&v[0], len(v)}, true
	}
	return nil, false
}

// children returns the values a container holds (those Freeze visits).
func children(v starlark.Value) []starlark.Value {
	switch v := v.(type) {
	case *starlark.List:
		out := make([]starlark.Value, v.Len())
		for i := range out {
			out[i] = v.Index(i)
		}
		return out
	case starlark.Tuple:
		return v
	case *starlark.Dict:
		var out []starlark.Value
		for _, kv := range v.Items() {
			out = append(out, kv[0], kv[1])
		}
		return out
	case *starlark.Set:
		var out []starlark.Value
		it := v.Iterate()
		defer it.Done()
		var e starlark.Value
		for it.Next(&e) {
			out = append(out, e)
		}
		return out
	case *starlark.Function:
		var out []starlark.Value
		for i := 0; i < v.NumParams(); i++ {
			if d := v.ParamDefault(i); d != nil {
				out = append(out, d)
			}
		}
		for i := 0; i < v.NumFreeVars(); i++ {
			if _, fv := v.FreeVar(i); fv != nil {
				out = append(out, fv)
			}
		}
		return out
	case *starlarkstruct.Struct:
		var out []starlark.Value
		for _, name := range v.AttrNames() {
			if f, _ := v.Attr(name); f != nil {
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

// checkNesting reports a global of g whose values nest deeper than
// MaxNesting, before g is frozen. It walks each container once, without
// recursion, keeping each one's height; a container reached again adds
// its height to the path that reached it.
func checkNesting(m *meter, g starlark.StringDict) error {
	height := map[any]int{}
	type frame struct {
		key  any
		kids []starlark.Value
		next int
		h    int // the tallest child so far
	}
	for _, name := range g.Keys() {
		root := g[name]
		key, ok := nestKey(root)
		if !ok {
			continue
		}
		if _, seen := height[key]; seen {
			continue
		}
		height[key] = 0 // in progress: a cycle adds nothing
		stack := []frame{{key: key, kids: children(root)}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(top.kids) {
				height[top.key] = top.h + 1
				h := top.h + 1
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					p := &stack[len(stack)-1]
					p.h = max(p.h, h)
				}
				continue
			}
			kid := top.kids[top.next]
			top.next++
			if m != nil {
				if err := m.step(); err != nil {
					return err
				}
			}
			k, ok := nestKey(kid)
			if !ok {
				continue
			}
			if h, seen := height[k]; seen {
				if len(stack)+h > MaxNesting {
					return nestingError(name)
				}
				top.h = max(top.h, h)
				continue
			}
			if len(stack) >= MaxNesting {
				return nestingError(name)
			}
			height[k] = 0
			stack = append(stack, frame{key: k, kids: children(kid)})
		}
	}
	return nil
}

func nestingError(global string) error {
	return fmt.Errorf("global %s holds a value nested deeper than %d levels of lists, tuples, dicts or functions", global, MaxNesting)
}
