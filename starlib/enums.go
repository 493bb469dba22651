package starlib

import (
	"fmt"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// EnumValue is one member of a DSL enum (SyncType.after, BufferType.input,
// ...). Each member is a single immutable value: members compare equal only
// to themselves, hash, and print as "Enum.member".
type EnumValue struct {
	enum string
	name string
	code uint8
}

var (
	_ starlark.Value      = (*EnumValue)(nil)
	_ starlark.Comparable = (*EnumValue)(nil)
	_ starlark.HasBinary  = (*EnumValue)(nil)
	_ starlark.HasAttrs   = (*EnumValue)(nil)
)

// String returns "Enum.member".
func (e *EnumValue) String() string { return e.enum + "." + e.name }

// Type returns the enum's name.
func (e *EnumValue) Type() string { return e.enum }

// Freeze does nothing: members are immutable.
func (e *EnumValue) Freeze() {}

// Truth is always true.
func (e *EnumValue) Truth() starlark.Bool { return starlark.True }

// Hash hashes the member.
func (e *EnumValue) Hash() (uint32, error) {
	h, _ := starlark.String(e.enum).Hash()
	return h*31 + uint32(e.code), nil
}

// CompareSameType supports == and != only.
func (e *EnumValue) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	o := y.(*EnumValue)
	switch op {
	case syntax.EQL:
		return e == o, nil
	case syntax.NEQ:
		return e != o, nil
	}
	return false, fmt.Errorf("%s values are not ordered", e.enum)
}

// Binary implements |, & and ^ for SyncType members, on the bit encoding
// none=0, before=1, after=2, both=3.
func (e *EnumValue) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	o, ok := y.(*EnumValue)
	if e.enum != "SyncType" || !ok || o.enum != "SyncType" {
		return nil, nil
	}
	var c uint8
	switch op {
	case syntax.PIPE:
		c = e.code | o.code
	case syntax.AMP:
		c = e.code & o.code
	case syntax.CIRCUMFLEX:
		c = e.code ^ o.code
	default:
		return nil, nil
	}
	return syncMembers[c], nil
}

// Attr exposes "name" and "value" like a Python enum member.
func (e *EnumValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(e.name), nil
	case "value":
		return starlark.String(e.value()), nil
	}
	return nil, nil
}

// AttrNames lists the member attributes.
func (e *EnumValue) AttrNames() []string { return []string{"name", "value"} }

// value is the Python enum value string.
func (e *EnumValue) value() string {
	if e.enum == "BufferType" {
		return e.name[:1]
	}
	return e.name
}

// Enum is an enum namespace value such as SyncType.
type Enum struct {
	name    string
	members []*EnumValue
}

var _ starlark.HasAttrs = (*Enum)(nil)

// String returns the enum name.
func (e *Enum) String() string { return "<enum " + e.name + ">" }

// Type returns "enum".
func (e *Enum) Type() string { return "enum" }

// Freeze does nothing.
func (e *Enum) Freeze() {}

// Truth is true.
func (e *Enum) Truth() starlark.Bool { return starlark.True }

// Hash fails: enums are not hashable.
func (e *Enum) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: enum") }

// Attr returns the member named name.
func (e *Enum) Attr(name string) (starlark.Value, error) {
	for _, m := range e.members {
		if m.name == name {
			return m, nil
		}
	}
	return nil, nil
}

// AttrNames lists the members.
func (e *Enum) AttrNames() []string {
	var out []string
	for _, m := range e.members {
		out = append(out, m.name)
	}
	sort.Strings(out)
	return out
}

func makeEnum(name string, members ...string) *Enum {
	e := &Enum{name: name}
	for i, m := range members {
		e.members = append(e.members, &EnumValue{enum: name, name: m, code: uint8(i)})
	}
	return e
}

// The enums. Member codes follow the member order: for SyncType they are
// the bit encoding, for the others the ir constant of the same order.
var (
	syncTypeEnum          = makeEnum("SyncType", "none", "before", "after", "both")
	bufferTypeEnum        = makeEnum("BufferType", "input", "output", "scratch")
	reduceOpEnum          = makeEnum("ReduceOperationType", "sum", "min", "max")
	replicationPolicyEnum = makeEnum("ReplicationPolicy", "interleaved", "none")
	channelTypeEnum       = makeEnum("ChannelType", "none", "memory", "port", "switch")
	syncMembers           = syncTypeEnum.members
)

// asEnum converts v to a member of enum e, for parameter param of fn.
func asEnum(fn, param string, v starlark.Value, e *Enum) (uint8, error) {
	m, ok := v.(*EnumValue)
	if !ok || m.enum != e.name {
		return 0, fmt.Errorf("%s: for parameter %s: got %s, want %s", fn, param, v.Type(), e.name)
	}
	return m.code, nil
}
