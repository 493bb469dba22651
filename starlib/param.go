package starlib

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
)

// Param is a parameter declared by a script with param().
type Param struct {
	Name    string
	Default starlark.Value
	Help    string
}

// paramSet holds the -D values of an evaluation and the declared params.
type paramSet struct {
	defines  map[string]string
	declared []Param
}

func (ps *paramSet) lookup(name string) (Param, bool) {
	for _, p := range ps.declared {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// undeclared returns an error naming -D values that no param() declared.
func (ps *paramSet) undeclared() error {
	var bad []string
	for name := range ps.defines {
		if _, ok := ps.lookup(name); !ok {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	var decl []string
	for _, p := range ps.declared {
		decl = append(decl, p.Name)
	}
	sort.Strings(decl)
	list := "none"
	if len(decl) > 0 {
		list = strings.Join(decl, ", ")
	}
	return fmt.Errorf("-D %s: the script declares no such parameter (declared: %s)", strings.Join(bad, ", -D "), list)
}

// paramBuiltin implements param(name, default, help="").
func paramBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name, help string
	var def starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "default", &def, "help?", &help); err != nil {
		return nil, err
	}
	switch def.(type) {
	case starlark.Int, starlark.Bool, starlark.String, starlark.Float:
	default:
		return nil, fmt.Errorf("%s: parameter %q: default must be an int, bool, string or float, got %s", b.Name(), name, def.Type())
	}
	s := stateOf(thread)
	if s == nil {
		return nil, fmt.Errorf("%s: not running under mscclgo", b.Name())
	}
	if prev, ok := s.params.lookup(name); ok {
		if prev.Default.Type() != def.Type() {
			return nil, fmt.Errorf("%s: parameter %q declared again with a %s default (first declared with %s)", b.Name(), name, def.Type(), prev.Default.Type())
		}
	} else {
		s.params.declared = append(s.params.declared, Param{Name: name, Default: def, Help: help})
	}
	text, ok := s.params.defines[name]
	if !ok {
		return def, nil
	}
	v, err := convertParam(text, def)
	if err != nil {
		return nil, fmt.Errorf("%s: parameter %q: -D %s=%s: %v", b.Name(), name, name, text, err)
	}
	return v, nil
}

// convertParam converts a -D value to the type of def.
func convertParam(text string, def starlark.Value) (starlark.Value, error) {
	t := strings.TrimSpace(text)
	switch def.(type) {
	case starlark.Int:
		neg := strings.HasPrefix(t, "-")
		digits := strings.TrimPrefix(strings.TrimPrefix(t, "-"), "+")
		base := 10
		if l := strings.ToLower(digits); strings.HasPrefix(l, "0x") {
			base, digits = 16, digits[2:]
		}
		n, ok := new(big.Int).SetString(strings.ReplaceAll(digits, "_", ""), base)
		if !ok || digits == "" {
			return nil, fmt.Errorf("want an int (decimal or 0x hex)")
		}
		if neg {
			n.Neg(n)
		}
		return starlark.MakeBigInt(n), nil
	case starlark.Bool:
		switch strings.ToLower(t) {
		case "true", "1":
			return starlark.True, nil
		case "false", "0":
			return starlark.False, nil
		}
		return nil, fmt.Errorf("want a bool (true, false, 1 or 0)")
	case starlark.Float:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil, fmt.Errorf("want a float")
		}
		return starlark.Float(f), nil
	}
	return starlark.String(text), nil
}
